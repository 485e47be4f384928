"""Sweep the server-side clearing knobs over every shared session with a real auto-compaction.

For each knob set, every session is replayed as ``server_clearing`` (engine.replay.counterfactual) and compared
with its ``unpatched`` replay. Printed per knob set, summed over the sessions: compactions left
(against the real ones), tokens sent and cost (prompt-cache prices, engine.api.prompt_cache) relative
to unpatched, cache breaks, the largest edited and unedited prompt, and how many sessions got
more expensive.

    python bench/clearing_sweep.py [--trigger 40000,60000,...] [--keep 1,2,3,5] \
        [--step 1,10,20] [--at-least 0,20000] [--inputs 0,1]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from real_sessions import sessions


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trigger", type=ints, default=ints("40000,60000,80000,100000,130000"))
    ap.add_argument("--keep", type=ints, default=ints("1,2,3,5"))
    ap.add_argument("--at-least", type=ints, default=ints("0"))
    ap.add_argument("--step", type=ints, default=ints("1,10,20"))
    ap.add_argument("--inputs", default="0", help="comma list of CLAUDE_CTX_CLEAR_TOOL_INPUTS")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    runs = list(sessions(log=lambda m: print(m, file=sys.stderr)))
    base = [s.replay("unpatched").summary for s in runs]
    real = sum(s.real_auto for s in runs)
    b_auto = sum(b["auto_compactions"] for b in base)
    b_tok = sum(b["tokens_sent"] for b in base)
    b_cost = sum(b["cost"] for b in base)
    print(
        f"{len(runs)} sessions, {real} real auto-compactions; unpatched replay: {b_auto} "
        f"compactions, {b_tok:,} tokens sent, cost {b_cost:,} (base input-token units)"
    )
    head = (
        f"{'trigger':>8} {'keep':>4} {'step':>4} {'at_least':>8} {'inputs':>6}  {'compactions':>11} "
        f"{'tokens':>7} {'cost':>7} {'breaks':>6} {'max sent':>9} {'max unedited':>12} "
        f"{'dearer':>6}"
    )
    print(head)
    combos = itertools.product(
        args.trigger, args.keep, args.step, args.at_least, [x for x in args.inputs.split(",") if x]
    )
    for trigger, keep, step, at_least, inputs in combos:
        env = {
            "CLAUDE_CTX_CLEAR_TRIGGER": str(trigger),
            "CLAUDE_CTX_CLEAR_KEEP": str(keep),
            "CLAUDE_CTX_CLEAR_AT_LEAST": str(at_least),
            "CLAUDE_CTX_CLEAR_TOOL_INPUTS": inputs,
            "CLAUDE_CTX_CLEAR_STEP": str(step),
        }
        sums = [s.replay("server_clearing", env).summary for s in runs]
        auto = sum(x["auto_compactions"] for x in sums)
        tok = sum(x["tokens_sent"] for x in sums)
        cost = sum(x["cost"] for x in sums)
        dearer = sum(1 for x, b in zip(sums, base, strict=True) if x["cost"] > b["cost"])
        print(
            f"{trigger:>8} {keep:>4} {step:>4} {at_least:>8} {inputs:>6}  {auto:>4} ({auto / real:4.0%}) "
            f"{(tok - b_tok) / b_tok:+7.1%} {(cost - b_cost) / b_cost:+7.1%} "
            f"{sum(x['cache_breaks'] for x in sums):>6} "
            f"{max(x['max_prompt_tokens'] for x in sums):>9,} "
            f"{max(x['max_unedited_prompt_tokens'] for x in sums):>12,} {dearer:>6}",
            flush=True,
        )
    print(f"({time.perf_counter() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
