"""The one way a command reports a failure that is not about a single file, then exits."""

from __future__ import annotations

import json
from typing import NoReturn

import typer

from patcher import __version__
from patcher.errors import CtxpatchError


def fail(err: CtxpatchError, as_json: bool) -> NoReturn:
    """Print ``err`` (JSON on stdout, or what/why/hint on stderr) and exit with its code."""
    if as_json:
        doc = {
            "ctxpatch": __version__,
            "exit_code": int(err.exit_code),
            "error": err.to_json(),
            "results": [],
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(err.render(), err=True)
    raise typer.Exit(int(err.exit_code))
