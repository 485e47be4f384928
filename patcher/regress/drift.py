"""The drift part of ``ctxpatch regress``: ``inspect`` of a version against the engine's
profile, recorded in its :class:`~patcher.regress.outcome.Outcome`; and the re-reading of
the drift of a version passed in an earlier run (``--resume``)."""

from __future__ import annotations

import time

from patcher import npmcache
from patcher.inspect.report import Report
from patcher.inspection import Inspection, inspect_cli_js
from patcher.markers import sha256
from patcher.regress.outcome import Outcome


def record(out: Outcome, rep: Inspection) -> None:
    """What ``regress`` keeps of an inspection, a cli.js's or a native build's: the profile
    compared with, the drift, what could not be read and the warnings."""
    out.profile = rep.profile
    out.drift = [str(d) for d in rep.drift]
    out.unresolved = [*rep.findings.unresolved, *rep.warnings]


def read_drift(data: bytes, out: Outcome) -> None:
    try:
        rep = inspect_cli_js(data, out.claude_code_version)
    except Exception as e:  # inspect is a report: its own bug must not hide the patch result
        out.unresolved.append(f"inspect failed: {type(e).__name__}: {e}")
        return
    record(out, rep)
    assert isinstance(rep.findings, Report)
    out.microcompact = rep.findings.micro.kind
    if out.shape is None:
        out.shape = rep.findings.shape


def refresh_inspect(o: Outcome) -> Outcome:
    """Re-read the drift of an earlier outcome with the current ``inspect`` (cache only, ~1 s)."""
    path = (
        npmcache.cache_root()
        / "npm"
        / npmcache._slug(npmcache.SHORT[o.package], o.version)
        / "package"
        / "cli.js"
    )
    if o.result == "pass" and path.is_file():
        data = path.read_bytes()
        if o.sha256 in (None, sha256(data)):
            started = time.monotonic()
            read_drift(data, o)
            o.steps["inspect"] = "ok" if not o.drift else f"{len(o.drift)} drift"
            o.seconds = round(o.seconds + time.monotonic() - started, 2)
    return o
