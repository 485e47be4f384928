"""Patcher benchmark on the 13.7 MB cli.js of Claude Code 2.1.112.

Prints the median wall time of apply, check (patched and unpatched) and revert, each in a fresh
child process (timed inside the child, so Python start-up is excluded; its peak RSS is
included), next to the I/O floor (read + sha256 + atomic write) and
`node --input-type=module --check` on the same file.

Then the command users run at every start, whole: the wall time (and CPU time) of
`python3 -m patcher check --path cli.js` as a subprocess, Python start-up and imports included,
next to `python3 -c pass` (the interpreter's own start-up on this machine).

Targets (issue #2): check <= 3x the I/O floor; apply (with its node validation) <= 2x the node
check alone; peak memory <= 300 MB. Issue #10: the `check` command <= 100 ms. Issue #7: the
same bound for apply with both injections (the text prune and the server-side clearing; the bench
checks both are in the patched file).

    python bench/bench_patcher.py [--runs 5] [--version 2.1.112]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def child(op: str, path: str) -> None:
    """Run one operation and print {"seconds", "rss_mb"} as JSON."""
    import hashlib

    p = Path(path)
    if op == "floor":
        t = time.perf_counter()
        data = p.read_bytes()
        hashlib.sha256(data).hexdigest()
        from patcher.fsio import atomic_replace

        atomic_replace(p, data, expected_sha=hashlib.sha256(data).hexdigest(), mode=0o755)
        dt = time.perf_counter() - t
    else:
        from patcher import ops

        fn = {"apply": ops.apply_file, "check": ops.check_file, "revert": ops.revert_file}[op]

        t = time.perf_counter()
        fn(p)
        dt = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": dt, "rss_mb": rss}))


def run_child(op: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", op, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def command(args: list[str], pycache: Path) -> tuple[float, float]:
    """Wall and CPU (user + sys) seconds of one subprocess run of ``python3 args``.

    With compiled bytecode, as a pip install has it (kept in ``pycache``, outside the repo, even
    where PYTHONDONTWRITEBYTECODE is set: compiling our modules on every run costs ~70 ms)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def node_check(path: Path) -> float:
    t = time.perf_counter()
    with path.open("rb") as f:
        subprocess.run(
            ["node", "--input-type=module", "--check"], stdin=f, check=True, capture_output=True
        )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--version", default="2.1.112")
    ap.add_argument("--child", nargs=2, metavar=("OP", "PATH"))
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from patcher import markers, npmcache

    src = npmcache.cli_js("cc", args.version)
    work = Path(tempfile.mkdtemp(prefix="ctxpatch-bench-"))
    cli = work / "cli.js"
    rows: dict[str, list[dict[str, float]]] = {
        k: [] for k in ("floor", "check-unpatched", "apply", "check-patched", "revert")
    }
    nodes = []
    cmds: dict[str, list[tuple[float, float]]] = {k: [] for k in ("python", "unpatched", "patched")}
    check_cmd = ["-m", "patcher", "check", "--path", str(cli)]
    pycache = work / "pycache"
    try:
        shutil.copy2(src, cli)
        command(check_cmd, pycache)  # writes the bytecode
        for _ in range(args.runs):
            shutil.copy2(src, cli)
            rows["floor"].append(run_child("floor", cli))
            rows["check-unpatched"].append(run_child("check", cli))
            cmds["python"].append(command(["-c", "pass"], pycache))
            cmds["unpatched"].append(command(check_cmd, pycache))
            nodes.append(node_check(cli))
            rows["apply"].append(run_child("apply", cli))
            patched = cli.read_bytes()
            assert markers.BEGIN in patched and markers.CLEAR_BEGIN in patched, "both injections"
            rows["check-patched"].append(run_child("check", cli))
            cmds["patched"].append(command(check_cmd, pycache))
            rows["revert"].append(run_child("revert", cli))
            assert cli.read_bytes() == src.read_bytes()
            os.remove(work / "cli.js.backup")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r["seconds"] for r in v) for k, v in rows.items()}
    peak = {k: max(r["rss_mb"] for r in v) for k, v in rows.items()}
    node = statistics.median(nodes)
    size = src.stat().st_size
    print(f"cli.js {args.version}: {size:,} bytes, {args.runs} runs, medians")
    print(f"{'operation':<18}{'seconds':>9}{'peak RSS MB':>13}  vs target")
    floor = med["floor"]
    print(f"{'I/O floor':<18}{floor:>9.3f}{peak['floor']:>13.0f}")
    print(f"{'node ESM check':<18}{node:>9.3f}{'':>13}")
    for k in ("check-patched", "check-unpatched"):
        ratio = med[k] / floor
        print(f"{k:<18}{med[k]:>9.3f}{peak[k]:>13.0f}  {ratio:.2f}x floor (target <= 3x)")
    ratio = med["apply"] / node
    print(
        f"{'apply (both)':<18}{med['apply']:>9.3f}{peak['apply']:>13.0f}  {ratio:.2f}x node check "
        "(target <= 2x)"
    )
    print(
        f"{'revert':<18}{med['revert']:>9.3f}{peak['revert']:>13.0f}  "
        f"{med['revert'] / floor:.2f}x floor"
    )
    print(f"peak memory of any operation: {max(peak.values()):.0f} MB (target <= 300 MB)")
    load = os.getloadavg()[0]
    print(
        f"\nthe whole command, a subprocess (start-up and imports included), medians; "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'command':<42}{'wall s':>8}{'cpu s':>8}")
    labels = {
        "python": "python3 -c pass",
        "patched": "python3 -m patcher check (PATCHED)",
        "unpatched": "python3 -m patcher check (UNPATCHED)",
    }
    for k, label in labels.items():
        wall = statistics.median(w for w, _ in cmds[k])
        cpu = statistics.median(c for _, c in cmds[k])
        target = "  (target <= 0.100)" if k != "python" else ""
        print(f"{label:<42}{wall:>8.3f}{cpu:>8.3f}{target}")


if __name__ == "__main__":
    main()
