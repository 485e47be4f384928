"""What ``ctxpatch regress`` records: a :class:`Job` (package, version), its :class:`Outcome`,
and a :class:`Run` of many, which is the ``--json FILE`` document (read back by
:func:`load_previous` for ``--resume``)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ctxpatch import __version__
from patcher import snippet
from patcher.versions import parse_version

OK_RESULTS = frozenset({"pass", "unsupported", "native"})  # not a failure
RESULTS = ("pass", "fail", "unsupported", "native", "fetch-failed")


@dataclass(frozen=True, order=True)
class Job:
    package: str  # "cc" | "sdk"
    version: str

    @property
    def key(self) -> str:
        return f"{self.package}@{self.version}"


@dataclass
class Outcome:
    package: str
    version: str
    result: str = "fail"  # pass | fail | unsupported | native | fetch-failed
    claude_code_version: str | None = None
    shape: str | None = None
    microcompact: str | None = None  # legacy | stub | time-based | None
    clearing: str | None = None  # request-builder shape of the clearing injection, or "none"
    clearing_reason: str = ""  # why not, where it is "none"
    sha256: str | None = None
    size: int | None = None
    failed_step: str | None = None
    reason: str = ""
    steps: dict[str, str] = field(default_factory=dict)  # step -> "ok" | "skipped: ..."
    profile: str | None = None
    drift: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def ok(self) -> bool:
        return self.result in OK_RESULTS and not self.drift

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Run:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    started: float = field(default_factory=time.time)

    def summary(self) -> dict[str, Any]:
        counts = {r: 0 for r in RESULTS}
        for o in self.outcomes.values():
            counts[o.result] = counts.get(o.result, 0) + 1
        return {
            "versions": len(self.outcomes),
            "results": counts,
            "with_drift": sum(1 for o in self.outcomes.values() if o.drift),
            "failed": sorted(k for k, o in self.outcomes.items() if o.result not in OK_RESULTS),
            "ok": all(o.ok for o in self.outcomes.values()),
        }

    def to_json(self) -> dict[str, Any]:
        ordered = sorted(
            self.outcomes.values(), key=lambda o: (o.package, parse_version(o.version))
        )
        summary = self.summary()
        return {  # the envelope of every --json (ctxpatch.cli.output), with the run's context
            "ctxpatch": __version__,
            "exit_code": 0 if summary["ok"] else 1,
            "snippet_sha256": snippet.sha(),
            "clear_snippet_sha256": snippet.clear_sha(),
            "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "summary": summary,
            "results": [o.to_json() for o in ordered],
        }

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        tmp.replace(path)


def load_previous(path: Path) -> dict[str, Outcome]:
    """Outcomes of an earlier run written to ``path`` (for ``--resume``); {} when unreadable."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("snippet_sha256") != snippet.sha():
        return {}  # another snippet: every version must be tried again
    if doc.get("clear_snippet_sha256") != snippet.clear_sha():
        return {}
    known = set(Outcome.__dataclass_fields__)
    out = {}
    for item in doc.get("results", []):
        if isinstance(item, dict) and {"package", "version"} <= set(item):
            o = Outcome(**{k: v for k, v in item.items() if k in known})
            out[o.key] = o
    return out
