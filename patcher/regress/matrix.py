"""The text ``ctxpatch regress`` prints: the matrix (one line per version) and the details
(failures, versions without the clearing injection, drift)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from patcher.regress.outcome import OK_RESULTS, Outcome
from patcher.versions import parse_version

_COLUMNS: tuple[tuple[str, Callable[[Outcome], str]], ...] = (
    ("package", lambda o: o.package),
    ("version", lambda o: o.version),
    ("claude-code", lambda o: o.claude_code_version or "-"),
    ("shape", lambda o: o.shape or "-"),
    ("mc", lambda o: o.microcompact or "-"),
    ("clearing", lambda o: o.clearing or "-"),
    (
        "result",
        lambda o: (
            o.result + (f" ({o.failed_step})" if o.result == "fail" and o.failed_step else "")
        ),
    ),
    ("drift", lambda o: str(len(o.drift)) if o.drift else "-"),
    ("seconds", lambda o: f"{o.seconds:.1f}"),
)


def matrix(outcomes: Iterable[Outcome]) -> str:
    """One line per version: package, version, Claude Code version, shape, MC, the clearing
    injection's request-builder shape, result, drift, seconds."""
    rows = [tuple(name for name, _ in _COLUMNS)]
    for o in sorted(outcomes, key=lambda o: (o.package, parse_version(o.version))):
        rows.append(tuple(cell(o) for _, cell in _COLUMNS))
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
