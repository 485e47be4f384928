"""``ctxpatch report`` at scale: a projects folder of 500 sessions (~1 GB) built from the shared
real sessions (each copy its own session id, so no two files are alike), in a temp folder
deleted after; times the report cold (every session replayed, in worker processes) and warm
(replays from the cache), with a fresh cache folder. Target: <= 60 s wall on 2 cores.

    python3 bench/bench_report.py [--sessions 500] [--jobs N] [--no-phases]

Prints the load average (the machine's other work shares the 2 cores), the folder's size, each
run's wall time and sessions per second, then where the cold run's time goes: the CPU of each
step of one session's replay, summed over one copy of each shared session in this process and
scaled to the folder (reading and parsing, the calibration fit, the recorded replay, the
unpatched replay, the patched one split into its text prune and its clearing, each measured as
its own scenario's replay less the unpatched one), against the workers' CPU the cold run took.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXPATCH_SHARED", ROOT.parent / "shared"))
TRANSCRIPTS = SHARED / "transcripts"


def sources() -> list[tuple[str, bytes]]:
    out = []
    for p in sorted((TRANSCRIPTS / "spotter").glob("*.jsonl")):
        out.append((p.stem, p.read_bytes()))
    for p in sorted((TRANSCRIPTS / "public").glob("*.jsonl.xz")):
        out.append((p.name.removesuffix(".jsonl.xz"), lzma.decompress(p.read_bytes())))
    return out


def session_id(data: bytes) -> bytes | None:
    for line in data.splitlines()[:50]:
        try:
            sid = json.loads(line).get("sessionId")
        except (ValueError, AttributeError):
            continue
        if isinstance(sid, str) and sid:
            return sid.encode()
    return None


def build(folder: Path, n: int) -> int:
    srcs = sources()
    total = 0
    for k in range(n):
        _, data = srcs[k % len(srcs)]
        sid = session_id(data)
        new = f"{k:04d}bench-0000-0000-0000-{k:012d}".encode()
        body = data.replace(sid, new) if sid else data
        d = folder / f"-bench-project-{k % 20:02d}"
        d.mkdir(exist_ok=True)
        (d / f"{new.decode()}.jsonl").write_bytes(body)
        total += len(body)
    return total


def run(folder: Path, env: dict[str, str], jobs: int | None) -> tuple[float, float, dict]:
    """(wall s, CPU s of the report and its workers, the --json document)."""
    cmd = [sys.executable, "-m", "patcher", "report", "--projects", str(folder), "--json"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    before = os.times()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    if r.returncode != 0:
        raise SystemExit(f"report failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
    return wall, cpu, json.loads(r.stdout)


def phases(folder: Path, n: int) -> dict[str, float]:
    """CPU seconds of each step of the report's per-session replay over one copy of each shared
    session (the first ``len(sources())`` files of ``folder``), scaled to ``n`` sessions."""
    sys.path.insert(0, str(ROOT))
    from engine.profiles import profile_for
    from engine.replay import session
    from engine.replay.calibration import calibrate
    from engine.replay.knobs import parse_knobs
    from engine.transcript import load_transcript

    knobs = parse_knobs(process_env=os.environ)
    files = sorted(folder.rglob("*.jsonl"))[: len(sources())]
    cpu = time.process_time
    out = dict.fromkeys(
        ("read+parse", "calibration", "recorded", "unpatched", "text_prune", "server_clearing"),
        0.0,
    )
    for f in files:
        t = cpu()
        tr = load_transcript(f)
        out["read+parse"] += cpu() - t
        if not tr.replies:
            continue
        prof = profile_for(tr.version or "2.1.39")
        t = cpu()
        cal = calibrate(tr, prof)
        out["calibration"] += cpu() - t
        kw = {"model": None, "env": {}}
        t = cpu()
        rec = session.simulate(tr, prof, "recorded", calibration=cal, **kw)
        out["recorded"] += cpu() - t
        mc = not any(e.kind == "micro_compact" and e.recorded is False for e in rec.events)
        replay = dict(
            kw,
            prune_env=dict(knobs.prune_env),
            clear_env=dict(knobs.clear_env),
            microcompact_on=mc,
            calibration=cal,
        )
        for name in ("unpatched", "text_prune", "server_clearing"):
            t = cpu()
            session.simulate(tr, prof, name, **replay)
            out[name] += cpu() - t
    # the report's patched replay: the unpatched one's work, plus the text prune's, plus the
    # clearing's (each scenario's replay less the unpatched one)
    base = out["unpatched"]
    steps = {
        "read+parse": out["read+parse"],
        "calibration": out["calibration"],
        "recorded": out["recorded"],
        "unpatched": base,
        "patched: base": base,
        "patched: prune": out["text_prune"] - base,
        "patched: clear": out["server_clearing"] - base,
    }
    scale = n / max(len(files), 1)
    return {k: v * scale for k, v in steps.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--no-phases", action="store_true", help="skip the per-step breakdown")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="ctxpatch-bench-report-"))
    try:
        folder = tmp / "projects"
        folder.mkdir()
        size = build(folder, args.sessions)
        print(f"{args.sessions} sessions, {size / 1e9:.2f} GB in {folder}; {os.cpu_count()} CPUs")
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(tmp / "cache"),
            "XDG_STATE_HOME": str(tmp / "state"),
            "PYTHONPATH": str(ROOT),
        }
        cold, cold_cpu, doc = run(folder, env, args.jobs)
        n = doc["totals"]["sessions"]
        print(
            f"cold: {cold:7.1f} s wall, {cold_cpu:7.1f} s CPU, {n / cold:5.1f} sessions/s, "
            f"replayed {doc['replays']['replayed']}, skipped {len(doc['skipped'])}; "
            f"target <= 60 s: {'ok' if cold <= 60 else 'OVER'}"
        )
        warm, _, doc2 = run(folder, env, args.jobs)
        print(
            f"warm: {warm:7.1f} s wall, {n / warm:5.1f} sessions/s, from the cache "
            f"{doc2['replays']['cached']}; target <= 60 s: {'ok' if warm <= 60 else 'OVER'}"
        )
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        assert doc2["results"] == doc["results"], "the cached report differs"
        reqs = [r["requests"] for r in doc["results"]]
        print(
            f"requests per session: median {statistics.median(reqs):.0f}, max {max(reqs)}; "
            f"cold time per session on {args.jobs or os.cpu_count()} workers: "
            f"{cold / max(n, 1) * (args.jobs or os.cpu_count() or 1):.2f} s CPU-equivalent"
        )
        if not args.no_phases:
            steps = phases(folder, n)
            total = sum(steps.values())
            print(
                f"where the cold run's time goes (CPU s, one copy of each session in this "
                f"process, x{n / min(n, len(sources())):.1f}; the cold run's workers took {cold_cpu:.1f}):"
            )
            for name, secs in steps.items():
                print(f"  {name:16} {secs:7.1f} s  {secs / total:6.1%}")
            print(f"  {'sum':16} {total:7.1f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
