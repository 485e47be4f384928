"""The text ``ctxpatch regress`` prints: the matrix (one line per version) and the details
(failures, versions without the clearing injection, drift)."""

from __future__ import annotations

from collections.abc import Iterable

from patcher.regress.outcome import OK_RESULTS, Outcome
from patcher.versions import parse_version


def matrix(outcomes: Iterable[Outcome]) -> str:
    """One line per version: package, version, Claude Code version, shape, MC, the clearing
    injection's request-builder shape, result, drift."""
    rows = [
        (
            "package",
            "version",
            "claude-code",
            "shape",
            "mc",
            "clearing",
            "result",
            "drift",
            "seconds",
        )
    ]
    for o in sorted(outcomes, key=lambda o: (o.package, parse_version(o.version))):
        rows.append(
            (
                o.package,
                o.version,
                o.claude_code_version or "-",
                o.shape or "-",
                o.microcompact or "-",
                o.clearing or "-",
                o.result + (f" ({o.failed_step})" if o.result == "fail" and o.failed_step else ""),
                str(len(o.drift)) if o.drift else "-",
                f"{o.seconds:.1f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def details(outcomes: Iterable[Outcome]) -> str:
    """The reasons of failures and the drift, one block per version that has any."""
    blocks = []
    for o in sorted(outcomes, key=lambda o: (o.package, parse_version(o.version))):
        if o.result not in OK_RESULTS:
            blocks.append(f"{o.key}: {o.result} at {o.failed_step}: {o.reason}")
        if o.clearing == "none":
            blocks.append(f"{o.key}: no server-side clearing: {o.clearing_reason}")
        for d in o.drift:
            blocks.append(f"{o.key}: drift {d}")
    return "\n".join(blocks)
