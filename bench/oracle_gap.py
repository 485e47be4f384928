"""How close the defaults come to the hindsight optimum (scenario ``oracle``, engine/replay/oracle.py).

Every shared session with a real auto-compaction (scripts/real_sessions.py) is replayed
``unpatched``, ``patched`` at the defaults (what ``ctxpatch apply`` installs: the text prune and
server-side clearing at the ``CLAUDE_CTX_CLEAR_*`` defaults, or under ``--env NAME=VALUE``) and
``oracle``. Printed per session: real / replayed auto-compactions, the cost of each scenario
relative to unpatched (prompt-cache prices, engine.api.prompt_cache), and the share of the oracle's
saving the defaults reach; then the issue's bars: sessions dearer than unpatched, compactions
left, and the total saving against the oracle's. A compaction left is either proven unavoidable
in the replay (the oracle's too, forced by history a file that starts mid-conversation does not
hold: ``Event.cause`` ``unseen_history``) or one the oracle avoids, at the cost it prints. For
the first kind: how many of the hidden tokens would have to be clearable (:func:`hidden_needed`).

    python bench/oracle_gap.py [--only NAME ...] [--env CLAUDE_CTX_CLEAR_POLICY=fixed ...]
                               [--folder DIR]   # sessions the repository has never seen
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from real_sessions import Session, sessions


def hidden_needed(s: Session, penv: dict[str, str]) -> str:
    """How much of the history the file does not hold must be clearable for no compaction at
    all: the session replayed with everything the file shows cleared at every request (the
    oracle's edit, the text prune) and auto-compaction off; its highest count less the
    threshold. Beside it, the share of the shown messages that clearing takes at the first
    request at the threshold."""
    from engine.replay.counterfactual import simulate_counterfactual
    from engine.replay.edit_limit import limit_env
    from engine.replay.oracle import Probe
    from engine.replay.recall_tools import RECALL_TOOLS_ESTIMATE, recall_tools_tokens

    sim = simulate_counterfactual(
        s.tr,
        s.profile,
        "patched",
        env={"DISABLE_AUTO_COMPACT": "1"},
        prune_env=penv,
        clear_env=limit_env({}),
        clear_policy=Probe(),
        microcompact_on=s.microcompact_on,
        calibration=s.calibration,
    )
    th = s.replay("unpatched").thresholds.auto_compact
    top = max(sim.requests, key=lambda q: q.tokens)
    need = top.tokens - th + 1
    hidden = s.calibration.carried
    if need <= 0:
        return (
            f"{s.name}: no compaction with everything it shows cleared (max count {top.tokens:,})"
        )
    first = next(q for q in sim.requests if q.tokens >= th)
    fixed = s.calibration.overhead + hidden
    fixed += recall_tools_tokens(RECALL_TOOLS_ESTIMATE, s.calibration.ratio)
    shown = first.prompt_tokens + first.server_cleared - fixed
    return (
        f"{s.name}: with everything it shows cleared the count reaches {top.tokens:,} (line "
        f"{top.line}); no compaction needs {need:,} of its {hidden:,} hidden tokens "
        f"({need / hidden:.0%}) clearable; at line {first.line} clearing takes "
        f"{first.server_cleared / shown:.0%} of the shown messages' tokens"
    )


def pct(new: float, old: float) -> str:
    return f"{(new - old) / old:+.1%}" if old else "—"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="sessions whose name holds one of these")
    ap.add_argument("--env", nargs="*", default=[], help="clearing knobs NAME=VALUE")
    ap.add_argument("--prune-env", nargs="*", default=[], help="text prune knobs NAME=VALUE")
    ap.add_argument(
        "--folder",
        type=Path,
        help="every *.jsonl / *.jsonl.xz under this folder instead of the shared sessions",
    )
    args = ap.parse_args(argv)
    if any("=" not in kv for kv in [*args.env, *args.prune_env]):
        ap.error("--env and --prune-env take NAME=VALUE pairs")
    if args.folder is not None and not args.folder.is_dir():
        ap.error(f"--folder {args.folder}: not a folder")
    env = dict(kv.split("=", 1) for kv in args.env)
    penv = dict(kv.split("=", 1) for kv in args.prune_env)
    t0 = time.perf_counter()
    print(
        f"{'session':<40} {'real':>4} {'unp':>4} {'def':>4} {'orc':>4}  "
        f"{'defaults':>8} {'oracle':>8} {'of oracle':>9}",
        flush=True,
    )
    tot = {"un": 0, "d": 0, "o": 0}
    dearer: list[str] = []
    left = 0
    forced: list[str] = []  # sessions with a compaction the unseen history forces (the oracle's)
    needed: list[str] = []  # what of that history would have to be clearable
    avoidable: list[str] = []  # compactions the defaults leave and the oracle avoids
    real = 0
    n = 0
    for s in sessions(log=lambda m: print(m, file=sys.stderr), folder=args.folder):
        if args.only and not any(w in s.name for w in args.only):
            continue
        un = s.replay("unpatched").summary
        d = s.replay("patched", env, penv).summary
        o = s.replay("oracle", env, penv).summary
        tot["un"] += un["cost"]
        tot["d"] += d["cost"]
        tot["o"] += o["cost"]
        real += s.real_auto
        left += d["auto_compactions"]
        n += 1
        if d["cost"] > un["cost"]:
            dearer.append(s.name)
        if o.get("compactions_unseen_history"):
            forced.append(f"{s.name} ({o['compactions_unseen_history']})")
            needed.append(hidden_needed(s, penv))
        if d["auto_compactions"] > o["auto_compactions"]:
            avoidable.append(f"{s.name} (the oracle {pct(o['cost'], un['cost'])})")
        gain_o = un["cost"] - o["cost"]
        share = f"{(un['cost'] - d['cost']) / gain_o:.0%}" if gain_o > 0 else "—"
        print(
            f"{s.name:<40} {s.real_auto:>4} {un['auto_compactions']:>4} "
            f"{d['auto_compactions']:>4} {o['auto_compactions']:>4}  "
            f"{pct(d['cost'], un['cost']):>8} {pct(o['cost'], un['cost']):>8} {share:>9}",
            flush=True,
        )
    if not n:
        print("no session with a real auto-compaction", file=sys.stderr)
        return 2
    gain_o = tot["un"] - tot["o"]
    gain_d = tot["un"] - tot["d"]
    print(
        f"\n{n} sessions, {real} real auto-compactions; at the defaults: {left} compactions left, "
        f"{len(dearer)} sessions dearer than unpatched{': ' + ', '.join(dearer) if dearer else ''}"
    )
    if left:
        print(
            f"compactions left: proven unavoidable in the replay, forced by history the file does "
            f"not hold: {', '.join(forced) or 'none'}; avoided by the oracle: "
            f"{', '.join(avoidable) or 'none'}"
        )
        for line in needed:
            print(f"  {line}")
    print(
        f"total cost: defaults {pct(tot['d'], tot['un'])}, oracle {pct(tot['o'], tot['un'])}; "
        f"the defaults reach {gain_d / gain_o:.1%} of the oracle's saving"
        if gain_o
        else "the oracle saves nothing"
    )
    print(f"({time.perf_counter() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
