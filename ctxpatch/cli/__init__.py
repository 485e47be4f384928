"""The ``ctxpatch`` command line (console script ``ctxpatch = ctxpatch.cli:main``).

``main`` answers ``ctxpatch check [--path P] [--json]``, ``ctxpatch run --fallback -- CMD``
(``shell-init``'s function, before every ``claude``), ``ctxpatch shell-init SHELL`` (at every
shell start) and ``ctxpatch recall hook`` (Claude Code's hooks) without importing typer: they run
at every start of Claude Code or of a shell and must stay fast (bench/bench_patcher.py,
bench/bench_recall_hook.py); ``check``'s path is ``ctxpatch.cli.quickcheck``. Every other
command line, and any ``check`` with other arguments (``--help``, a typo), goes to the typer
app in ``ctxpatch.cli.app``; both paths print and exit through ``ctxpatch.cli.output``.
"""

from __future__ import annotations

import sys


def quick_run_args(argv: list[str]) -> list[str] | None:
    """The command of ``run --fallback -- COMMAND ...`` (what ``ctxpatch shell-init``'s
    function runs before every ``claude``: no typer, ~0.3 s less), else None."""
    if argv[:3] == ["run", "--fallback", "--"] and len(argv) > 3:
        return argv[3:]
    return None


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (typer handles usage errors with exit 2)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["recall", "hook"]:  # Claude Code runs it at every session start: no typer
        from recall.hook import run

        sys.exit(run())
    if len(args) == 2 and args[0] == "shell-init" and args[1] in ("bash", "zsh", "fish"):
        from gateway.shell_init import ctxpatch_command, script  # at every shell start: no typer

        sys.stdout.write(script(args[1], ctxpatch_command()))
        return
    command = quick_run_args(args)
    if command is not None:
        import os

        from ctxpatch.cli.output import handle
        from gateway.launch import launch

        sys.exit(handle(lambda: launch(command, os.environ, fallback=True), as_json=False))
    if args[:1] == ["check"]:  # at every start of Claude Code: no typer
        from ctxpatch.cli import quickcheck
        from ctxpatch.cli.output import handle

        quick = quickcheck.quick_check_args(args)
        if quick is not None:
            path, as_json = quick
            sys.exit(handle(lambda: quickcheck.run(path, as_json), as_json))
    if args == ["mcp"]:  # Claude Code starts it at every session: no typer on its path
        from ctxpatch.cli.output import handle
        from recall.mcp_server import serve

        sys.exit(handle(serve, as_json=False))
    from ctxpatch.cli.app import app

    app(args=args, prog_name="ctxpatch")
