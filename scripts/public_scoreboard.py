#!/usr/bin/env python3
"""The engine's scoreboard on the real public sessions (``shared/transcripts/public``).

    python scripts/public_scoreboard.py                       # print the table
    python scripts/public_scoreboard.py --doc docs/simulate.md    # also replace its block there

Per session: the real auto-compactions usable for checking (``MANIFEST.json``) predicted at the
same line with the count within 1% of ``preTokens`` (hit), recorded but not (missed), predicted
where none happened (extra), and whether the file was refused. ``--doc FILE`` (alias ``--readme``) replaces the
text between ``<!-- public-scoreboard:begin -->`` and ``<!-- public-scoreboard:end -->``. The
transcripts are read in place (``CTXPATCH_SHARED`` or ``../shared``), never copied.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from readme_block import markers, update_file  # noqa: E402 (after the sys.path insert)

from engine.profiles import profile_for  # noqa: E402 (after the sys.path insert)
from engine.replay.recorded import simulate_recorded  # noqa: E402 (after the sys.path insert)
from engine.transcript import TranscriptError, load_transcript  # noqa: E402 (after the sys.path insert)

SHARED = Path(os.environ.get("CTXPATCH_SHARED", ROOT.parent / "shared"))
PUBLIC = SHARED / "transcripts" / "public"
BLOCK = "public-scoreboard"
BEGIN, END = markers(BLOCK)


def score(entry: dict) -> dict:
    """One session's row."""
    usable = {
        b["line"]: b["preTokens"]
        for b in entry["boundaries"]
        if b["trigger"] == "auto" and b["usable_for_check"]
    }
    row = {"file": entry["file"], "version": ",".join(entry["versions"]), "usable": len(usable)}
    try:
        tr = load_transcript(PUBLIC / entry["file"])
    except TranscriptError as e:
        return {**row, "refused": str(e), "hit": 0, "missed": len(usable), "extra": 0, "worst": ""}
    sim = simulate_recorded(tr, profile_for(tr.version))
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
    args = ap.parse_args(argv)
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
