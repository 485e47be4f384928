"""Replay time of ``ctxpatch simulate`` on the largest shared session and on a 10× longer one,
and on the largest public session (``transcripts/public``, read from .xz; target < 2 s end to end).

The long session repeats the turns of the real one (its compaction records dropped so the copy
is one long conversation; message and tool ids made unique), so the counterfactual replays
cross the auto-compact threshold again and again. Prints both times and the growth
factor (ideal: about 10, i.e. linear), in wall time and in the process's CPU time (which the
other processes of a loaded machine do not inflate), with the load average.

    python bench/bench_simulate.py [SESSION.jsonl] [--times 10]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.profiles import profile_for  # noqa: E402 (after the sys.path insert)
from engine.replay.session import simulate  # noqa: E402 (after the sys.path insert)
from engine.transcript import build_transcript, load_transcript  # noqa: E402 (after the sys.path insert)

SHARED = Path(os.environ.get("CTXPATCH_SHARED", ROOT.parent / "shared"))
SPOTTER = SHARED / "transcripts" / "spotter"
PUBLIC = SHARED / "transcripts" / "public"


def largest_session() -> Path:
    return max(SPOTTER.glob("*.jsonl"), key=lambda p: p.stat().st_size)


def largest_public() -> Path | None:
    """The public session with the most bytes once decompressed."""
    files = sorted(PUBLIC.glob("*.jsonl.xz"))
    return max(files, key=lambda p: len(lzma.decompress(p.read_bytes()))) if files else None


def bench_public(path: Path) -> None:
    """``ctxpatch simulate`` as a user runs it: load + profile + replay, best of 3 each."""
    for scenario in ("recorded", "unpatched", "patched"):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            tr = load_transcript(path)
            simulate(tr, profile_for(tr.version or "2.1.39"), scenario)
            best = min(best, time.perf_counter() - t0)
        print(
            f"public {scenario:10s} {best:6.2f}s  (load + replay; target < 2 s: "
            f"{'ok' if best < 2 else 'OVER'})"
        )


def repeated(records: list[dict], times: int) -> list[dict]:
    """``times`` copies of the conversation without its compaction records, ids made unique."""
    base = [
        r
        for r in records
        if r and r.get("subtype") != "compact_boundary" and not r.get("isCompactSummary")
    ]
    out: list[dict] = []
    for k in range(times):
        for r in base:
            c = json.loads(json.dumps(r))
            msg = c.get("message")
            if isinstance(msg, dict):
                if msg.get("id"):
                    msg["id"] = f"{msg['id']}-{k}"
                for b in msg.get("content") if isinstance(msg.get("content"), list) else []:
                    if isinstance(b, dict) and b.get("id"):
                        b["id"] = f"{b['id']}-{k}"
                    if isinstance(b, dict) and b.get("tool_use_id"):
                        b["tool_use_id"] = f"{b['tool_use_id']}-{k}"
            out.append(c)
    return out


def time_replay(tr, scenario: str, repeat: int = 3) -> tuple[float, float]:
    """The best wall time and the best CPU time of the process over ``repeat`` replays (the CPU
    time holds still on a loaded machine, where the wall time counts the other processes too)."""
    profile = profile_for(tr.version or "2.1.39")
    best = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        simulate(tr, profile, scenario)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return best, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("session", nargs="?", type=Path)
    ap.add_argument("--times", type=int, default=10)
    args = ap.parse_args(argv)
    pub = largest_public()
    if pub is not None and args.session is None:
        tr = load_transcript(pub)
        size = len(lzma.decompress(pub.read_bytes())) / 1e6
        print(f"largest public session {pub.name}: {size:.1f} MB, {len(tr.replies)} requests")
        bench_public(pub)
    path = args.session or largest_session()
    t0 = time.perf_counter()
    tr = load_transcript(path)
    load = time.perf_counter() - t0
    records = [r for r in tr.records]
    long_tr = build_transcript(repeated(records, args.times), f"{path.name}×{args.times}")
    print(
        f"session {path.name}: {len(tr.records)} lines, {len(tr.replies)} requests "
        f"(load {load:.2f}s)"
    )
    print(
        f"long session ×{args.times}: {len(long_tr.records)} lines, {len(long_tr.replies)} requests"
    )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for scenario in ("recorded", "unpatched", "text_prune", "server_clearing", "patched"):
        a, ca = time_replay(tr, scenario)
        # best of 3 for both: a single run of the long session counted its warm-up (the
        # process's first replay of those objects) against the short one's best
        b, cb = time_replay(long_tr, scenario)
        print(
            f"{scenario:16s} real {a:6.2f}s   ×{args.times} {b:7.2f}s   growth ×{b / a:5.1f}"
            f"  (per request {a / len(tr.replies) * 1e3:.2f} ms → "
            f"{b / len(long_tr.replies) * 1e3:.2f} ms)   CPU {ca:5.2f}s → {cb:5.2f}s ×{cb / ca:5.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
