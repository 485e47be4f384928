"""Claude Code versions: read from a cli.js's own bytes, compared, and which can take the patch.

Pure functions over bytes and strings (no I/O): ``patcher.plan`` and ``patcher.backup`` use
them without importing ``patcher.bundle``, the module that reads files.
"""

from __future__ import annotations

import re

FIRST_WITH_MICROCOMPACT = "1.0.60"

_VERSION_HEADER = re.compile(rb"^// Version: ([0-9][\w.+-]*)\s*$", re.M)
_README_VERSION = re.compile(rb'README_URL:"[^"]*",VERSION:"([0-9][\w.+-]*)"')


def version_of(data: bytes) -> str | None:
    """Claude Code version from ``// Version: X`` (1.0.40 on) or ``README_URL:…,VERSION:"X"``."""
    m = _VERSION_HEADER.search(data, 0, 4096)
    if m is None:
        m = _README_VERSION.search(data)
    return m.group(1).decode() if m else None


def version_tuple(v: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", v.split("-")[0])
    return tuple(int(p) for p in parts[:3])


def is_supported_version(version: str | None) -> bool | None:
    """False for builds older than the first one with micro-compaction; None when unknown."""
    if version is None:
        return None
    return version_tuple(version) >= version_tuple(FIRST_WITH_MICROCOMPACT)
