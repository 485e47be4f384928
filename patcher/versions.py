"""Claude Code versions: read from a cli.js's own bytes, compared, and which can take the patch.

Pure functions over bytes and strings (no I/O): ``patcher.plan`` and ``patcher.backup`` use
them without importing ``patcher.bundle``, the module that reads files.
"""

from __future__ import annotations

import re

from engine.versions import parse_version

__all__ = [
    "FIRST_WITH_MICROCOMPACT",
    "HEADER_SPAN",
    "header_version",
    "is_supported_version",
    "parse_version",
    "version_of",
]

FIRST_WITH_MICROCOMPACT = "1.0.60"

_VERSION_HEADER = re.compile(rb"^// Version: ([0-9][\w.+-]*)\s*$", re.M)
_README_VERSION = re.compile(rb'README_URL:"[^"]*",VERSION:"([0-9][\w.+-]*)"')


HEADER_SPAN = 4096  # the ``// Version: X`` line is looked for in the first bytes only


def version_of(data: bytes) -> str | None:
    """Claude Code version from ``// Version: X`` (1.0.40 on) or ``README_URL:…,VERSION:"X"``."""
    m = _VERSION_HEADER.search(data, 0, HEADER_SPAN)
    if m is None:
        m = _README_VERSION.search(data)
    return m.group(1).decode() if m else None


def header_version(head: bytes) -> str | None:
    """The ``// Version: X`` part of ``version_of``: ``head`` is (at least) a file's first
    ``HEADER_SPAN`` bytes; None when the line is not there (``version_of`` then reads on)."""
    m = _VERSION_HEADER.search(head, 0, HEADER_SPAN)
    return m.group(1).decode() if m else None


def is_supported_version(version: str | None) -> bool | None:
    """False for builds older than the first one with micro-compaction; None when unknown."""
    if version is None:
        return None
    try:
        return parse_version(version) >= parse_version(FIRST_WITH_MICROCOMPACT)
    except ValueError:  # not X.Y.Z
        return None
