#!/usr/bin/env python3
"""The engine's scoreboard on the real public sessions (``shared/transcripts/public``).

    python scripts/public_scoreboard.py                       # print the table
    python scripts/public_scoreboard.py --doc docs/simulate.md    # also replace its block there
    python scripts/public_scoreboard.py --folder DIR      # any folder of sessions, e.g. your own

Per session: the real auto-compactions usable for checking (``MANIFEST.json``) predicted at the
same line with the count within 1% of ``preTokens`` (hit), recorded but not (missed), predicted
where none happened (extra), and whether the file was refused. ``--doc FILE`` (alias ``--readme``) replaces the
text between ``<!-- public-scoreboard:begin -->`` and ``<!-- public-scoreboard:end -->``. The
transcripts are read in place (``CTXPATCH_SHARED`` or ``../shared``), never copied.

``--folder DIR`` checks sessions the repository has never seen, without a manifest: every
``*.jsonl`` / ``*.jsonl.xz`` under DIR, each auto-compaction's line and ``preTokens`` read from its
``compact_boundary`` record (:func:`usable_boundaries`), those of an incomplete first epoch left out
as the manifest leaves them out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from readme_block import markers, update_file  # noqa: E402 (after the sys.path insert)

from engine.profiles import profile_for  # noqa: E402 (after the sys.path insert)
from engine.replay.recorded import simulate_recorded  # noqa: E402 (after the sys.path insert)
from engine.transcript import TranscriptError, is_compact_boundary, load_transcript  # noqa: E402 (after the sys.path insert)

SHARED = Path(os.environ.get("CTXPATCH_SHARED", ROOT.parent / "shared"))
PUBLIC = SHARED / "transcripts" / "public"
BLOCK = "public-scoreboard"
BEGIN, END = markers(BLOCK)


def usable_boundaries(records: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """The auto-compactions of a session usable for the check, from its records (a
    :class:`engine.transcript.Transcript`'s: ``records[i]`` is line ``i + 1``, a malformed line an
    empty record): line -> ``preTokens`` of each ``compact_boundary`` record with ``trigger`` auto
    whose epoch (the records since the file's start or the previous boundary) the file holds: not
    the first epoch of a file that starts mid-session (a record's ``parentUuid`` names no earlier
    line), nor an epoch without a user or assistant record (a file that starts at a boundary: the
    history the count held is in another file)."""
    seen: set[str] = set()
    truncated = boundary_seen = conversation = False
    usable: dict[int, int] = {}
    for line, rec in enumerate(records, 1):
        parent = rec.get("parentUuid")
        kind = rec.get("type")
        if kind in ("user", "assistant", "system", "attachment"):
            if parent and parent not in seen and not boundary_seen:
                truncated = True
            conversation = conversation or kind in ("user", "assistant")
        if rec.get("uuid"):
            seen.add(rec["uuid"])
        if not is_compact_boundary(rec):
            continue
        meta = rec.get("compactMetadata") or {}
        pre = meta.get("preTokens")
        whole = conversation and not (truncated and not boundary_seen)
        if meta.get("trigger") == "auto" and isinstance(pre, int) and whole:
            usable[line] = pre
        boundary_seen, conversation = True, False
    return usable


def score(entry: dict) -> dict:
    """One session's row."""
    usable = {
        b["line"]: b["preTokens"]
        for b in entry["boundaries"]
        if b["trigger"] == "auto" and b["usable_for_check"]
    }
    return score_file(PUBLIC / entry["file"], usable, ",".join(entry["versions"]))


def score_file(path: Path, usable: dict[int, int] | None = None, version: str = "") -> dict:
    """One session's row: ``usable`` maps each auto-compaction's line to its ``preTokens``
    (None: read from the file, :func:`usable_boundaries`)."""
    row = {"file": path.name, "version": version, "usable": len(usable or {})}

    def refused(why: str) -> dict:
        return {**row, "hit": 0, "missed": row["usable"], "extra": 0, "worst": "", "refused": why}

    try:
        tr = load_transcript(path)
    except TranscriptError as e:
        return refused(str(e))
    if usable is None:
        usable = usable_boundaries(tr.records)
        row["usable"] = len(usable)
    row["version"] = row["version"] or (tr.version or "?")
    if not tr.version:
        return refused("no Claude Code version in the file")
    try:
        profile = profile_for(tr.version)
    except ValueError as e:  # a version the engine does not model
        return refused(str(e))
    sim = simulate_recorded(tr, profile)
    hit, missed, extra, worst = 0, [], 0, 0.0
    for e in sim.events:
        if e.kind != "auto_compact":
            continue
        if e.line in usable:
            pre = usable[e.line]
            d = (e.tokens - pre) / pre * 100
            if e.predicted and abs(d) <= 1:
                hit += 1
                worst = max(worst, abs(d), key=abs)
            else:
                missed.append(f"line {e.line}: {e.tokens:,} vs {pre:,} ({d:+.2f}%)")
        elif e.predicted and not e.recorded:
            extra += 1
    return {
        **row,
        "refused": "",
        "hit": hit,
        "missed": len(usable) - hit,
        "missed_detail": "; ".join(missed),
        "extra": extra,
        "skipped_lines": len(tr.warnings),
        "worst": f"{worst:.2f}%" if hit else "",
    }


def table(rows: list[dict]) -> str:
    tot = {k: sum(r[k] for r in rows) for k in ("usable", "hit", "missed", "extra")}
    refused = sum(1 for r in rows if r["refused"])
    lines = [
        f"{tot['hit']} of {tot['usable']} usable real auto-compactions predicted at the same line "
        f"within 1% of `preTokens`, {tot['missed']} missed, {tot['extra']} predicted where none "
        f"happened, {refused} files refused ({len(rows)} sessions).",
        "",
        "| session | version | usable | hit | largest error of a hit | missed | extra | malformed lines skipped |",
        "|---|---|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        name = r["file"].removesuffix(".jsonl.xz")
        if len(name) > 40:
            name = name[:40] + "…"
        missed = r.get("missed_detail") or (r["refused"] and f"refused: {r['refused']}") or "0"
        lines.append(
            f"| {name} | {r['version']} | {r['usable']} | {r['hit']} | {r['worst']} | {missed} "
            f"| {r['extra']} | {r.get('skipped_lines', 0)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", "--readme", dest="doc", type=Path)
    ap.add_argument("--folder", type=Path, help="score every session file under this folder")
    args = ap.parse_args(argv)
    if args.folder:
        files = sorted(
            p for p in args.folder.rglob("*") if p.name.endswith((".jsonl", ".jsonl.xz"))
        )
        if not files:
            print(f"error: no .jsonl or .jsonl.xz file under {args.folder}", file=sys.stderr)
            return 2
        print(table([score_file(p) for p in files]))
        return 0
    manifest = PUBLIC / "MANIFEST.json"
    if not manifest.is_file():
        print(f"error: {manifest} not found; set CTXPATCH_SHARED", file=sys.stderr)
        return 2
    rows = [score(e) for e in json.loads(manifest.read_text())]
    text = table(rows)
    print(text)
    if args.doc and not update_file(args.doc, BLOCK, text):
        print(f"error: no {BEGIN} … {END} block in {args.doc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
