"""The options several commands share, declared once (``--json``, ``--strict``, ``--env``)."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON document on stdout.")]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict", help="A version newer than every engine profile is an error (exit 1)."
    ),
]
EnvOpt = Annotated[
    list[str] | None,
    typer.Option("--env", help="Extra environment NAME=VALUE (repeatable)."),
]
