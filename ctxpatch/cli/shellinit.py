"""``ctxpatch shell-init bash|zsh|fish``: print the shell code that routes ``claude`` through
the gateway (the work is in :mod:`gateway.shell_init`)."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxpatch.cli.output import handle


def register(app: typer.Typer) -> None:
    """Add ``shell-init`` to ``app``."""
    app.command("shell-init", help=shell_init.__doc__)(shell_init)


def shell_init(
    shell: Annotated[str, typer.Argument(help="bash, zsh or fish.", show_default=False)],
) -> None:
    """Print shell code that makes `claude` go through a fresh loopback gateway (server-side tool-result clearing) in every interactive shell.

    Add one line to your rc file, then open a new shell:

      bash (~/.bashrc): eval "$(ctxpatch shell-init bash)"

      zsh (~/.zshrc): eval "$(ctxpatch shell-init zsh)"

      fish (~/.config/fish/config.fish): ctxpatch shell-init fish | source

    It defines a function `claude` that runs `ctxpatch run --fallback -- claude ARGS`. If the gateway cannot start, one warning line goes to stderr and the plain `claude` runs; if ctxpatch is gone, the same. ctxpatch never writes your rc file: removing the line undoes it (`ctxpatch revert` says which line). Exit code: 0, 2 for a shell it does not know.
    """

    def body() -> int:
        from ctxpatch.errors import UsageError
        from gateway.shell_init import SHELLS, ctxpatch_command, script

        if shell not in SHELLS:
            raise UsageError(
                f"unknown shell: {shell!r}",
                why=f"shell-init writes code for {', '.join(SHELLS)}",
                hint='e.g. eval "$(ctxpatch shell-init bash)" in ~/.bashrc',
            )
        typer.echo(script(shell, ctxpatch_command()), nl=False)
        return 0

    raise typer.Exit(handle(body, as_json=False))
