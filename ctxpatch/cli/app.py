"""The ``ctxpatch`` typer app: the root options and every command group.

Command groups, one module each: ``patching`` (apply, check, revert, status), ``verifying``
(verify), ``modelling`` (thresholds; simulate in ``simulating``), ``inspecting`` (inspect,
regress), ``routing`` (gateway, run), ``shellinit`` (shell-init). They all report through
``ctxpatch.cli.output``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ctxpatch import __version__
from ctxpatch.cli import (
    inspecting,
    modelling,
    patching,
    recalling,
    reporting,
    routing,
    shellinit,
    verifying,
)

app = typer.Typer(
    name="ctxpatch",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    help="Keep Claude Code's context clear: server-side tool-result clearing (injected into "
    "cli.js, or added by a loopback gateway for native builds), a thinking-safe text prune, and "
    "an offline model of its compaction.",
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"ctxpatch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """ctxpatch: keep Claude Code sessions out of lossy full compaction."""


patching.register(app)
verifying.register(app)
modelling.register(app)
inspecting.register(app)
routing.register(app)
recalling.register(app)
reporting.register(app)
shellinit.register(app)
