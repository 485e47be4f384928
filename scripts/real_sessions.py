"""The shared real sessions that had a real auto-compaction, ready to replay (I/O lives here).

Read in place: ``../shared/transcripts/spotter/*.jsonl`` (plain) and
``../shared/transcripts/public/*.jsonl.xz`` (lzma), or every ``*.jsonl`` / ``*.jsonl.xz`` under
another folder (sessions the repository has never seen); nothing is copied. Used by
``scripts/clearing_table.py``, ``bench/clearing_sweep.py``, ``bench/oracle_gap.py`` and
``bench/prune_pays.py``.
"""

from __future__ import annotations

import lzma
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.profiles import Profile, profile_for  # noqa: E402
from engine.replay.calibration import Calibration, calibrate  # noqa: E402 (after the sys.path insert)
from engine.replay.model import Simulation  # noqa: E402
from engine.replay.session import simulate  # noqa: E402
from engine.transcript import Transcript, TranscriptError, build_transcript, parse_records  # noqa: E402

SHARED = Path(os.environ.get("CTXPATCH_SHARED", ROOT.parent / "shared"))
TRANSCRIPTS = SHARED / "transcripts"


@dataclass(frozen=True)
class Session:
    name: str
    tr: Transcript
    profile: Profile
    calibration: Calibration
    microcompact_on: bool
    real_auto: int  # auto-compactions recorded in the file

    def replay(
        self,
        scenario: str,
        clear_env: Mapping[str, str] | None = None,
        prune_env: Mapping[str, str] | None = None,
    ) -> Simulation:
        return simulate(
            self.tr,
            self.profile,
            scenario,
            clear_env=dict(clear_env or {}),
            prune_env=dict(prune_env or {}),
            microcompact_on=self.microcompact_on,
            calibration=self.calibration,
        )


def _read(path: Path) -> Transcript:
    if path.suffix == ".xz":
        with lzma.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
    return build_transcript(parse_records(_drop_bad(lines), path.name), path.name)


def _drop_bad(lines: list[str]) -> list[str]:
    """Unparsable lines (the public files have a few, from upstream redaction) become blank
    lines, which the transcript reader skips, so line numbers stay those of the file."""
    import json

    out = []
    for raw in lines:
        try:
            ok = isinstance(json.loads(raw), dict) if raw.strip() else True
        except json.JSONDecodeError:
            ok = False
        out.append(raw if ok else "")
    return out


def paths(folder: Path | None = None) -> list[Path]:
    """The shared sessions' files; with ``folder``, every ``*.jsonl`` / ``*.jsonl.xz`` under
    it."""
    if folder is not None:
        return sorted(p for p in folder.rglob("*") if p.name.endswith((".jsonl", ".jsonl.xz")))
    return sorted((TRANSCRIPTS / "spotter").glob("*.jsonl")) + sorted(
        (TRANSCRIPTS / "public").glob("*.jsonl.xz")
    )


def short_name(path: Path) -> str:
    name = path.name.removesuffix(".xz").removesuffix(".jsonl")
    if path.parent.name == "spotter":
        return f"spotter/{name[:8]}"
    parts = name.split("__")
    if len(parts) < 3:
        return name
    last = parts[-1][:8] if len(parts[-1]) == 36 else parts[-1]  # a session uuid, shortened
    return f"{parts[0]}/{parts[1]}/{last}"


def sessions(log=print, folder: Path | None = None) -> Iterator[Session]:
    """Every shared session (or every one under ``folder``) with at least one recorded
    auto-compaction; the others, and those the engine cannot model, are reported through
    ``log`` and skipped."""
    for path in paths(folder):
        name = short_name(path)
        try:
            tr = _read(path)
        except (TranscriptError, OSError, UnicodeDecodeError, lzma.LZMAError) as e:
            log(f"skip {name}: {e}")
            continue
        real = sum(1 for b in tr.boundaries if b.trigger == "auto")
        if not real:
            continue
        try:
            prof = profile_for(tr.version or "2.1.39")
        except ValueError as e:
            log(f"skip {name}: {e}")
            continue
        rec = simulate(tr, prof, "recorded")
        mc = not any(e.kind == "micro_compact" and e.recorded is False for e in rec.events)
        yield Session(name, tr, prof, calibrate(tr), mc, real)
