"""Wall time of ``ctxpatch recall hook``, the command Claude Code runs at every session start
and around every compaction (it waits for it: the hook must never block it long).

Runs the real command line (``python -m <package> recall hook``, what ``apply`` registers,
Python start-up and imports included) as a subprocess, each payload ``--runs`` times, on the
largest shared session (``CTXPATCH_SHARED``/transcripts, or ``--transcript``):

* ``SessionStart`` ``startup``: records the session, prints nothing;
* ``PreCompact``: reads the transcript, prints the ``#keep`` prompts;
* ``SessionStart`` ``compact``: reads the transcript, prints the digest (2000 tokens);

and prints the median, p90 and max wall time of each, next to ``python -c pass`` (the floor),
plus the time the hook logs for itself (``hook.log``: after start-up). Target: the compact
digest under 1 s on the largest session; the startup call near the floor.

    python bench/bench_recall_hook.py [--runs 15] [--transcript FILE]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CTXPATCH_SHARED", ROOT.parent / "shared"))


def largest_session() -> Path:
    """The shared session with the most bytes once decompressed."""
    found = [
        p
        for p in (SHARED / "transcripts").rglob("*.jsonl*")
        if p.name.endswith((".jsonl", ".jsonl.xz"))
    ]
    if not found:
        sys.exit(f"no shared transcripts under {SHARED}/transcripts (set CTXPATCH_SHARED)")

    def size(p: Path) -> int:
        return len(lzma.decompress(p.read_bytes())) if p.name.endswith(".xz") else p.stat().st_size

    return max(found, key=size)


def plain(path: Path, folder: Path) -> Path:
    """A .jsonl copy of an .xz session (Claude Code's transcripts are plain)."""
    if not path.name.endswith(".xz"):
        return path
    out = folder / path.name.removesuffix(".xz")
    out.write_bytes(lzma.decompress(path.read_bytes()))
    return out


def timed(cmd: list[str], stdin: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0 or done.stderr:
        sys.exit(f"{cmd} failed: {done.returncode} {done.stderr[-500:]!r}")
    return wall


def stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"median {statistics.median(xs) * 1000:6.0f} ms  p90 {p90 * 1000:6.0f}  max {xs[-1] * 1000:6.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--transcript", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = args.transcript or largest_session()
        transcript = plain(source, folder)
        env = {**os.environ, "CTXPATCH_STATE_DIR": str(folder / "state"), "PYTHONPATH": str(ROOT)}
        sys.path.insert(0, str(ROOT))
        from recall.registered import command

        hook = command("recall", "hook")
        base = {"session_id": "bench", "transcript_path": str(transcript), "cwd": tmp}
        payloads = {
            "SessionStart startup": {
                **base,
                "hook_event_name": "SessionStart",
                "source": "startup",
            },
            "PreCompact": {**base, "hook_event_name": "PreCompact", "trigger": "auto"},
            "SessionStart compact": {
                **base,
                "hook_event_name": "SessionStart",
                "source": "compact",
            },
        }
        size = transcript.stat().st_size
        print(f"transcript: {source.name} ({size / 1e6:.1f} MB), {args.runs} runs each")
        floor = [timed([sys.executable, "-c", "pass"], b"", env) for _ in range(args.runs)]
        print(f"  {'python -c pass':<22} {stats(floor)}")
        for name, payload in payloads.items():
            raw = json.dumps(payload).encode()
            walls = [timed(hook, raw, env) for _ in range(args.runs)]
            print(f"  {name:<22} {stats(walls)}")
        logged = [
            float(line.split("ms ")[0].rsplit(" ", 1)[1])
            for line in (folder / "state" / "hook.log").read_text().splitlines()
        ]
        print(f"  inside the hook (hook.log, after start-up): max {max(logged):.0f} ms")


if __name__ == "__main__":
    main()
