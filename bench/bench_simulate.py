"""Replay time of ``ctxpatch simulate`` on the largest shared session and on a 10× longer one,
and on the largest public session (``transcripts/public``, read from .xz; target < 2 s end to end).

The long session repeats the turns of the real one (its compaction records dropped so the copy
is one long conversation; message and tool ids made unique), so the counterfactual replays
cross the auto-compact threshold again and again. Prints both times and the growth
factor (ideal: about 10, i.e. linear; issue #14's bar: at most 12), in wall time and in the
process's CPU time (which the other processes of a loaded machine do not inflate), with the
load average.

The ×1 replay takes under 0.1 s, so on a shared machine its time moves by a third from one run
to the next, and the ratio with it. So the replays run in ``--rounds`` rounds, each replaying
the ×1 and the long session back to back (in alternating order), and the growth is the median
of the rounds' CPU-time ratios, with their range; the ratio of the best times is printed beside
it. ``--check-linear`` also replays a ×2N session, whose time over the ×N one's is the growth
where the ×1's constant costs (calibration, the first replay of a file's objects) no longer
count: about 2 when the replay is linear.

    python bench/bench_simulate.py [SESSION.jsonl] [--times 10] [--rounds 5] [--check-linear]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import statistics
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


def replay_times(tr, scenario: str) -> tuple[float, float]:
    """One replay's wall time and the process's CPU time for it."""
    profile = profile_for(tr.version or "2.1.39")
    t0, c0 = time.perf_counter(), time.process_time()
    simulate(tr, profile, scenario)
    return time.perf_counter() - t0, time.process_time() - c0


def rounds(short, long, scenario: str, n: int) -> tuple[list[tuple[float, float]], ...]:
    """``n`` rounds of (short, long) replays, alternating which goes first; the first replay of
    each is a warm-up (the process's first replay of those objects), not counted."""
    replay_times(short, scenario)
    replay_times(long, scenario)
    a: list[tuple[float, float]] = []
    b: list[tuple[float, float]] = []
    for r in range(n):
        if r % 2:
            b.append(replay_times(long, scenario))
            a.append(replay_times(short, scenario))
        else:
            a.append(replay_times(short, scenario))
            b.append(replay_times(long, scenario))
    return a, b


def growth_line(label: str, a: list, b: list, times: int, na: int, nb: int) -> str:
    """The median of the rounds' CPU-time ratios, their range, and the best times."""
    ratios = sorted(cb / ca for (_, ca), (_, cb) in zip(a, b, strict=True))
    wa, ca = min(x for x, _ in a), min(c for _, c in a)
    wb, cb = min(x for x, _ in b), min(c for _, c in b)
    return (
        f"{label:16s} real {wa:6.2f}s   ×{times} {wb:7.2f}s   "
        f"(per request {wa / na * 1e3:.2f} ms → {wb / nb * 1e3:.2f} ms)   "
        f"CPU growth median ×{statistics.median(ratios):5.1f} "
        f"(rounds ×{ratios[0]:.1f}-×{ratios[-1]:.1f}, best ×{cb / ca:.1f})"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("session", nargs="?", type=Path)
    ap.add_argument("--times", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--check-linear", action="store_true", help="also a ×2N session against the ×N one"
    )
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.times < 2:
        ap.error("--rounds must be at least 1 and --times at least 2")
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
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {args.rounds} rounds")
    na, nb = len(tr.replies), len(long_tr.replies)
    for scenario in ("recorded", "unpatched", "text_prune", "server_clearing", "patched"):
        a, b = rounds(tr, long_tr, scenario, args.rounds)
        print(growth_line(scenario, a, b, args.times, na, nb))
    if args.check_linear:
        double = build_transcript(
            repeated(records, 2 * args.times), f"{path.name}×{2 * args.times}"
        )
        nd = len(double.replies)
        print(f"linearity: ×{2 * args.times} ({nd} requests) against ×{args.times}, ideal ×2.0")
        for scenario in ("unpatched", "server_clearing", "patched"):
            a, b = rounds(long_tr, double, scenario, max(1, args.rounds // 2))
            print(growth_line(scenario, a, b, 2 * args.times, nb, nd))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
