"""ctxpatch: patch Claude Code's cli.js to prune old conversation text after micro-compaction."""

__version__ = "0.2.0"  # the one place the version is set (pyproject.toml reads it; CHANGELOG.md)
