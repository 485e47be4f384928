"""Time and peak memory of reading Claude Code's JavaScript out of a native build.

Target (issue #8): the 381 MB 2.1.330 binary in < 3 s and < 500 MB peak. The ``lever`` rows
are what ``ctxpatch status`` / ``check`` pay per native install (issue #9): the JavaScript read
plus :func:`patcher.native.levers.extract`, wall and CPU time. Each measurement runs
in a fresh Python process so its peak RSS is its own (the baseline of an idle interpreter with
the reader imported is printed too). The binaries come from the npm-pack cache
(``npmcache.native_binary``; fetched if missing).

    python bench/bench_native.py [VERSION ...]     # default: 2.1.113 2.1.330
    python bench/bench_native.py --path /path/to/claude
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from patcher.native.reader import NativeBinary
from patcher.native.app import read_app
imported = time.perf_counter()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = {"import_s": imported - t0, "baseline_mb": base / 1024}
if sys.argv[1] != "-":
    t = time.perf_counter()
    cpu = time.process_time()
    with NativeBinary(Path(sys.argv[1])) as nb:
        app = read_app(nb)
        if sys.argv[2] == "all":  # every entry, zstd ones inflated
            total = sum(len(nb.read(e)) for e in nb.entries)
        else:
            total = app.size
        out.update(entries=len(nb.entries), layout=app.layout, version=app.version,
                   modules=len(app.sources), bytes=total, file=nb.size)
    if sys.argv[2] == "lever":
        from patcher.native.levers import decide, extract
        out["lever"] = decide(extract(app.sources), app.version).name
    out["read_s"] = time.perf_counter() - t
    out["cpu_s"] = time.process_time() - cpu
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def measure(path: str, what: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, path, what],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="*", default=["2.1.113", "2.1.330"])
    ap.add_argument("--path", action="append", default=[], help="a native binary to read")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from patcher import npmcache

    paths = [(p, p) for p in args.path] or [
        (v, str(npmcache.native_binary("cc", v, log=lambda m: print(m, file=sys.stderr))))
        for v in args.versions
    ]
    idle = measure("-", "js")
    print(
        f"interpreter + reader imported: {idle['baseline_mb']:.0f} MB, import {idle['import_s']:.2f} s"
    )
    print(
        f"{'build':<10} {'file MB':>8} {'what':<5} {'modules':>8} {'JS MB':>7} {'time s':>7} "
        f"{'cpu s':>6} {'peak MB':>8}"
    )
    for label, path in paths:
        for what in ("js", "all", "lever"):
            r = measure(path, what)
            print(
                f"{label:<10} {r['file'] / 1e6:>8.0f} {what:<5} {r['modules']:>8} "
                f"{r['bytes'] / 1e6:>7.1f} {r['read_s']:>7.2f} {r['cpu_s']:>6.2f} "
                f"{r['peak_mb']:>8.0f}" + (f"  lever {r['lever']}" if "lever" in r else "")
            )
    print("target: 2.1.330 'js' < 3 s and < 500 MB peak")


if __name__ == "__main__":
    main()
