#!/usr/bin/env python3
"""How faithful the counterfactual replay is: the ``unpatched`` replay (``engine.replay.counterfactual``, prompt
sizes re-estimated from the messages, not read from the recorded usage) against each real
session's own compactions, over every shared real session (spotter + public).

    python scripts/counterfactual_scoreboard.py            # one row per session, then totals
    python scripts/counterfactual_scoreboard.py --json     # the rows as JSON

Per session: the real auto-compactions (line, ``preTokens``); the unpatched replay's (line,
count); a *hit* is a real one replayed at the same line with the count within 1% of
``preTokens``; *extra* are replayed compactions where the session had none. Manual compactions
(``/compact``) are the user's input and are replayed where they were typed. Read in place
(``CTXPATCH_SHARED`` or ``../shared``), never copied.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_sessions import _read, paths, short_name

from engine.profiles import profile_for
from engine.replay.calibration import calibrate
from engine.replay.session import simulate


def score(path: Path) -> dict:
    tr = _read(path)
    prof = profile_for(tr.version or "2.1.39")
    sim = simulate(tr, prof, "unpatched", calibration=calibrate(tr, prof))
    real = {b.line: b.pre_tokens or 0 for b in tr.boundaries if b.trigger == "auto"}
    replayed = [(e.line, e.tokens) for e in sim.events if e.kind == "auto_compact"]
    hits = [
        (line, tokens)
        for line, tokens in replayed
        if line in real and real[line] and abs(tokens - real[line]) <= real[line] / 100
    ]
    return {
        "session": short_name(path),
        "version": tr.version,
        "model": tr.model,
        "real": sorted(real.items()),
        "replayed": replayed,
        "hit": len(hits),
        "missed": len(real) - len(hits),
        "extra": sum(1 for line, _ in replayed if line not in real),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    found = paths()
    if not found:
        print("error: no shared sessions found; set CTXPATCH_SHARED", file=sys.stderr)
        return 2
    rows = [score(p) for p in found]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        real = ", ".join(f"{line}: {pre:,}" for line, pre in r["real"]) or "-"
        rep = ", ".join(f"{line}: {tok:,}" for line, tok in r["replayed"]) or "-"
        print(f"{r['session']:42s} {r['version']:8s} real [{real}]  replayed [{rep}]")
    tot = {k: sum(r[k] for r in rows) for k in ("hit", "missed", "extra")}
    n_real = sum(len(r["real"]) for r in rows)
    print(
        f"\n{len(rows)} sessions, {n_real} real auto-compactions: {tot['hit']} replayed at the "
        f"same line within 1%, {tot['missed']} missed, {tot['extra']} replayed where none happened"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
