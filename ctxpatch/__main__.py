"""``python -m ctxpatch``: the ``ctxpatch`` command line."""

from ctxpatch.cli import main

main()
