"""The JavaScript that ctxpatch injects, one function declaration per file in ``snippets/``:
``text_prune.js`` (the text prune) and ``context_clear.js`` (server-side tool-result clearing).

Each file is injected byte for byte (minus surrounding whitespace), so its sha256 identifies the
snippet version a patched ``cli.js`` carries.
"""

from __future__ import annotations

import os
from functools import cache

from patcher.markers import sha256


@cache
def _load(name: str) -> bytes:
    try:  # a plain read: importlib.resources costs `check` (every start) ~3 ms of imports
        with open(os.path.join(os.path.dirname(__file__), "snippets", name), "rb") as f:
            raw = f.read()
    except OSError:  # the package inside a zip archive
        from importlib import resources

        raw = resources.files("patcher").joinpath(f"snippets/{name}").read_bytes()
    return raw.strip() + b"\n"


def source() -> bytes:
    return _load("text_prune.js")


def sha() -> str:
    return sha256(source())


def clear_source() -> bytes:
    return _load("context_clear.js")


def clear_sha() -> str:
    return sha256(clear_source())
