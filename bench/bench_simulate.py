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

On this shared machine the ×1 replay's CPU time alone moves from 66 to 124 ms within one
process, so the CPU ratio of one run can land anywhere from ×8 to ×15. ``--instructions`` counts
instead what the processor executes, which the other processes do not change: each replay runs
in a child process under valgrind's callgrind (Debian's ``valgrind``), once with one replay and
once with two, and the difference is one warm replay's instructions (the first replay fills the
memos, as the rounds' warm-up does; the start-up and the loading cancel out). Their ratio is
the growth in work; the CPU time's growth is that times whatever the ×10's larger heap costs in
cache misses. Four children of ~1-3 minutes each (valgrind runs ~50× slower), two at a time.

    python bench/bench_simulate.py [SESSION.jsonl] [--times 10] [--rounds 5] [--check-linear]
                                   [--instructions [--scenarios patched,unpatched]]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.profiles import profile_for  # noqa: E402 (after the sys.path insert)
from engine.replay.counterfactual import SCENARIOS  # noqa: E402 (after the sys.path insert)
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


_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def child_replays(path: Path, times: int, scenario: str, replays: int) -> None:
    """The child of ``--instructions``: ``replays`` replays of the session ×``times``."""
    tr = load_transcript(path)
    if times > 1:
        tr = build_transcript(repeated(list(tr.records), times), f"{path.name}×{times}")
    for _ in range(replays):
        replay_times(tr, scenario)


def instructions(path: Path, times: int, scenario: str, replays: int) -> int:
    """The instructions a child doing ``replays`` replays executes, counted by callgrind."""
    cmd = [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
        sys.executable, str(Path(__file__).resolve()), str(path),
        "--child", str(times), scenario, str(replays),
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = _COLLECTED.findall(r.stderr)
    if r.returncode or not found:
        raise SystemExit(
            f"valgrind failed on ×{times} {scenario} (rc {r.returncode}): {r.stderr.strip()[-600:]}"
        )
    return int(found[-1])


def instruction_growth(path: Path, times: int, scenarios: list[str]) -> None:
    """One warm replay's instructions at ×1 and ×``times``, and their ratio, per scenario."""
    jobs = [(t, s, n) for s in scenarios for t in (1, times) for n in (1, 2)]
    with ThreadPoolExecutor(max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        counts = dict(zip(jobs, pool.map(lambda j: instructions(path, *j), jobs), strict=True))
    print("instructions of one warm replay (callgrind; the children of two replays less one):")
    for s in scenarios:
        one = counts[(1, s, 2)] - counts[(1, s, 1)]
        many = counts[(times, s, 2)] - counts[(times, s, 1)]
        print(
            f"{s:16s} ×1 {one / 1e6:9,.1f} M   ×{times} {many / 1e6:9,.1f} M   "
            f"growth ×{many / one:5.2f} (issue #14's bar: ×12)"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("session", nargs="?", type=Path)
    ap.add_argument("--times", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--check-linear", action="store_true", help="also a ×2N session against the ×N one"
    )
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="count one warm replay's instructions under valgrind (steady on a shared machine)",
    )
    ap.add_argument(
        "--scenarios",
        default="patched",
        help="with --instructions: the scenarios, comma-separated (default: patched)",
    )
    ap.add_argument(
        "--child", nargs=3, metavar=("TIMES", "SCENARIO", "REPLAYS"), help=argparse.SUPPRESS
    )
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.times < 2:
        ap.error("--rounds must be at least 1 and --times at least 2")
    if args.child:
        times, scenario, replays = args.child
        child_replays(args.session or largest_session(), int(times), scenario, int(replays))
        return 0
    if args.instructions:
        if shutil.which("valgrind") is None:
            ap.error("--instructions needs valgrind on PATH (Debian: apt-get install valgrind)")
        scenarios = [x for x in args.scenarios.split(",") if x]
        unknown = sorted(set(scenarios) - {"recorded", *SCENARIOS})
        if unknown or not scenarios:
            ap.error(
                f"--scenarios: unknown {', '.join(unknown) or '(none)'}; one of recorded, {', '.join(SCENARIOS)}"
            )
        path = args.session or largest_session()
        print(
            f"session {path.name} ×1 and ×{args.times}, load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        instruction_growth(path, args.times, scenarios)
        return 0
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
