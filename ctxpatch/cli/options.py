"""The options several commands share, declared once (``--json``, ``--strict``, ``--env``), and
the help text with a command's exit codes (:func:`with_codes`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated

import typer

from ctxpatch.cli.output import help_codes

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


def with_codes(command: Callable[..., object], name: str) -> str:
    """``command``'s docstring with its exit codes as the paragraph before "Example:"."""
    doc = inspect.cleandoc(command.__doc__ or "")
    head, sep, example = doc.rpartition("\n\nExample:")
    if not sep:
        return f"{doc}\n\n{help_codes(name)}"
    return f"{head}\n\n{help_codes(name)}{sep}{example}"
