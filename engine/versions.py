"""The one version parser of ctxpatch: ``"2.1.39"`` → ``(2, 1, 39)``, and the one boundary
between the ``cli.js`` builds and the native ones (:data:`FIRST_NATIVE`).

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


FIRST_TOOL_SEARCH = "2.1.69"
"""The first Claude Code version whose tool search defers MCP tools by default, talking to
Anthropic's API: it sends their names, not their definitions (``Profile.tool_search_defers_mcp``,
measured; ``recall.mcp_early`` sends recall's instructions to it and later ones only)."""

FIRST_NATIVE = "2.1.113"
"""The first Claude Code version published only as a native build (a Bun binary, no ``cli.js``):
``ctxpatch apply`` patches the ``cli.js`` builds (up to 2.1.112: the text prune and server-side
clearing), a native build gets server-side clearing only, through the gateway (``ctxpatch run``)."""

FIRST_NATIVE_SDK = "0.2.113"
"""The first ``@anthropic-ai/claude-agent-sdk`` version that bundles a native build, not ``cli.js``."""


def is_native(version: str) -> bool:
    """Whether Claude Code ``version`` is a native build (:data:`FIRST_NATIVE` or newer)."""
    return parse_version(version) >= parse_version(FIRST_NATIVE)
