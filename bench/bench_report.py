"""``ctxpatch report`` at scale: a projects folder of 500 sessions (~1 GB) built from the shared
real sessions (each copy its own session id, so no two files are alike), in a temp folder
deleted after; times the report cold (every session replayed, in worker processes) and warm
(replays from the cache), with a fresh cache folder. Target: <= 60 s wall on 2 cores.

    python3 bench/bench_report.py [--sessions 500] [--jobs N] [--warm-only]

Prints the folder's size, each run's wall time, sessions per second, and where the cold run's
time goes (replay CPU per session: median, p90, max).
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


def run(folder: Path, env: dict[str, str], jobs: int | None) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "patcher", "report", "--projects", str(folder), "--json"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"report failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
    return wall, json.loads(r.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args(argv)
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
        cold, doc = run(folder, env, args.jobs)
        n = doc["totals"]["sessions"]
        print(
            f"cold: {cold:7.1f} s wall, {n / cold:5.1f} sessions/s, replayed "
            f"{doc['replays']['replayed']}, skipped {len(doc['skipped'])}; target <= 60 s: "
            f"{'ok' if cold <= 60 else 'OVER'}"
        )
        warm, doc2 = run(folder, env, args.jobs)
        print(
            f"warm: {warm:7.1f} s wall, {n / warm:5.1f} sessions/s, from the cache "
            f"{doc2['replays']['cached']}; target <= 60 s: {'ok' if warm <= 60 else 'OVER'}"
        )
        assert doc2["results"] == doc["results"], "the cached report differs"
        reqs = [r["requests"] for r in doc["results"]]
        print(
            f"requests per session: median {statistics.median(reqs):.0f}, max {max(reqs)}; "
            f"cold time per session on {args.jobs or os.cpu_count()} workers: "
            f"{cold / max(n, 1) * (args.jobs or os.cpu_count() or 1):.2f} s CPU-equivalent"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
