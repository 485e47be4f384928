"""Where the text prune pays: each session replayed with server-side clearing alone and with the
text prune added (what ``ctxpatch apply`` installs), against unpatched.

The prune exists only in the ``cli.js`` builds (up to 2.1.112); a native build's session is
skipped. Its every cutoff move rewrites the prompt cache from the system prompt's breakpoint
(the entries written since its last move all end after the first message it shortens), and it
moves by turns, not by what the move saves, so it has no paid gate of its own
(``docs/text-prune.md``). This prints, per session, the cost (prompt-cache prices, base input
tokens, ``engine.api.prompt_cache``) of ``server_clearing`` and ``patched`` relative to
``unpatched``, and what the prune adds (``patched`` against ``server_clearing``); then the
sessions the prune makes dearer than clearing alone, those dearer than unpatched, and the
totals.

    python bench/prune_pays.py                 # every shared session (../shared/transcripts)
    python bench/prune_pays.py --folder DIR    # every *.jsonl / *.jsonl.xz under DIR
                               [--jobs 2] [--only NAME ...] [--prune-env NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import real_sessions  # noqa: E402 (after the sys.path insert)

from engine.profiles import profile_for  # noqa: E402
from engine.replay.session import simulate  # noqa: E402
from engine.transcript import TranscriptError, load_transcript  # noqa: E402
from engine.versions import is_native  # noqa: E402

SCENARIOS = ("unpatched", "server_clearing", "patched")
Row = tuple[str, str, int, dict[str, float]]


def replay(path: Path, name: str, prune_env: dict[str, str]) -> Row | str:
    """The session's costs in each of :data:`SCENARIOS` (the text prune at ``prune_env``'s
    knobs), or why it is skipped."""
    try:
        tr = load_transcript(path)
        if not tr.version:
            return f"skip {name}: no Claude Code version in the file"
        if is_native(tr.version):
            return f"skip {name}: {tr.version} is a native build (no text prune)"
        prof = profile_for(tr.version)
        sims = {sc: simulate(tr, prof, sc, prune_env=prune_env) for sc in SCENARIOS}
    except (TranscriptError, ValueError, OSError) as e:
        return f"skip {name}: {e}"
    costs = {sc: sim.summary["cost"] for sc, sim in sims.items()}
    return name, tr.version, len(sims["unpatched"].requests), costs


def _pct(a: float, b: float) -> str:
    return f"{100 * (a / b - 1):+.1f}%" if b else "n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--folder", type=Path, help="every *.jsonl / *.jsonl.xz under this folder")
    ap.add_argument("--jobs", type=int, default=2, help="replays in parallel processes")
    ap.add_argument("--only", nargs="*", default=[], help="sessions whose name holds one of these")
    ap.add_argument("--prune-env", nargs="*", default=[], help="text prune knobs NAME=VALUE")
    args = ap.parse_args(argv)
    if any("=" not in kv for kv in args.prune_env):
        ap.error("--prune-env takes NAME=VALUE pairs")
    penv = dict(kv.split("=", 1) for kv in args.prune_env)
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    if args.folder:
        files = real_sessions.paths(args.folder)
        named = [(p, p.name.removesuffix(".xz").removesuffix(".jsonl")[:36]) for p in files]
    else:
        named = [(p, real_sessions.short_name(p)) for p in real_sessions.paths()]
    if args.only:
        named = [(p, n) for p, n in named if any(o in n for o in args.only)]
    if not named:
        where = args.folder or real_sessions.TRANSCRIPTS
        print(
            f"error: no .jsonl or .jsonl.xz session under {where} (or none --only picks)",
            file=sys.stderr,
        )
        return 2
    t0 = time.monotonic()
    with ProcessPoolExecutor(args.jobs) as ex:
        out = list(
            ex.map(replay, [p for p, _ in named], [n for _, n in named], [penv] * len(named))
        )
    rows = [r for r in out if not isinstance(r, str)]
    for r in out:
        if isinstance(r, str):
            print(r)
    print(
        f"\n{'session':44} {'version':>8} {'req':>5} {'clearing':>9} {'+prune':>8} {'prune adds':>10}"
    )
    for name, version, n, c in rows:
        u, s, p = (c[k] for k in SCENARIOS)
        print(
            f"{name[:44]:44} {version:>8} {n:>5} {_pct(s, u):>9} {_pct(p, u):>8} {_pct(p, s):>10}"
        )
    adds = [r for r in rows if r[3]["patched"] > r[3]["server_clearing"]]
    dearer = [r for r in rows if r[3]["patched"] > r[3]["unpatched"]]
    total = {k: sum(r[3][k] for r in rows) for k in SCENARIOS}
    print(
        f"\n{len(rows)} sessions; the prune makes {len(adds)} dearer than clearing alone"
        + (
            ": "
            + ", ".join(f"{r[0]} {_pct(r[3]['patched'], r[3]['server_clearing'])}" for r in adds)
            if adds
            else ""
        )
    )
    print(
        f"dearer than unpatched with the prune: {len(dearer)}"
        + (
            ": " + ", ".join(f"{r[0]} {_pct(r[3]['patched'], r[3]['unpatched'])}" for r in dearer)
            if dearer
            else ""
        )
    )
    u = total["unpatched"]
    print(
        f"total cost against unpatched: clearing alone {_pct(total['server_clearing'], u)}, "
        f"with the prune {_pct(total['patched'], u)} ({time.monotonic() - t0:.0f}s, "
        f"load {os.getloadavg()[0]:.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
