"""The JavaScript that ctxpatch injects: ``snippets/text_prune.js``, one function declaration.

The file is injected byte for byte (minus surrounding whitespace), so its sha256 identifies the
snippet version a patched ``cli.js`` carries.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from patcher.markers import sha256


@cache
def source() -> bytes:
    raw = resources.files("patcher").joinpath("snippets/text_prune.js").read_bytes()
    return raw.strip() + b"\n"


def sha() -> str:
    return sha256(source())
