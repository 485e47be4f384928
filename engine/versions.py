"""The one version parser of ctxpatch: ``"2.1.39"`` → ``(2, 1, 39)``.

Its own module (only ``re``) so that ``patcher`` can compare versions without loading the
profiles; :mod:`engine.profiles` holds every rule that depends on a version.
"""

from __future__ import annotations

import re

_VERSION_RE = re.compile(r"^\s*v?(\d+)\.(\d+)\.(\d+)")


def parse_version(version: str) -> tuple[int, int, int]:
    """``"2.1.39"`` → ``(2, 1, 39)`` (also ``v2.1.39``; a pre-release or build tag such as
    ``2.1.39-beta.1`` is ignored); raises ``ValueError`` on anything else."""
    m = _VERSION_RE.match(version)
    if not m:
        raise ValueError(f"not a Claude Code version: {version!r} (expected X.Y.Z, e.g. 2.1.39)")
    return int(m[1]), int(m[2]), int(m[3])
