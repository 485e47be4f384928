"""ctxpatch, the product shell: the version, the command line (``ctxpatch.cli``) and the one error
vocabulary every half uses (``ctxpatch.errors``). The halves live beside it: ``patcher`` (writes
``cli.js``), ``gateway`` (the loopback gateway for native builds), ``engine`` (the model of Claude
Code's compaction) and ``lab`` (the mock API, sandboxes and end-to-end proofs)."""

__version__ = "0.2.0"  # the one place the version is set (pyproject.toml reads it; CHANGELOG.md)
