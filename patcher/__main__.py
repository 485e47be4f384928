"""``python -m patcher``: kept for scripts written before the move; the same as ``python -m ctxpatch``."""

from ctxpatch.cli import main

main()
