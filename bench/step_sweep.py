"""How CLAUDE_TEXT_PRUNE_STEP trades tokens saved against prompt-cache breaks.

The shared real sessions have only 3-5 typed prompts each, too few for the cutoff to move, so
this replays a synthetic long session (``bench/synthetic.py``: N typed turns, each with prose,
tool round trips and a long answer) through the Python twin of the injected function (engine.twins.textprune, identical to
the JS by the differential test), request by request, and prices every request the way
Anthropic's prompt cache does: the longest prefix of messages identical to the previous
request is read from the cache (0.1x input price), the rest is written (1.25x)
(``engine.api.thinking_check.price``, the pricing of ``bench/thinking_prune.py`` too).

    python bench/step_sweep.py [--turns 60] [--keep 4] [--steps 1,2,4,8]

Printed per STEP: tokens sent, cache breaks (requests whose prefix changed before its end),
and the cost in input-token equivalents, next to the unpatched session.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthetic import synthetic  # bench/synthetic.py

from engine.api.thinking_check import price, reply_starts
from engine.twins.textprune import prune
from engine.twins.textprune_estimate import estimate_tokens


def requests(turns: int) -> list[list[dict]]:
    """The message array of every request of the synthetic session: the history up to each
    reply (the twin prunes each one from the full history)."""
    history = synthetic(turns, thinking_from=None)
    return [history[:start] for start in reply_starts(history)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--keep", type=int, default=4)
    ap.add_argument("--threshold", type=int, default=20000)
    ap.add_argument("--steps", default="1,2,4,8")
    args = ap.parse_args()
    reqs = requests(args.turns)
    base = price(reqs)
    print(
        f"synthetic session: {args.turns} typed turns, {len(reqs)} requests, largest request "
        f"{estimate_tokens(reqs[-1]):,} tokens; KEEP={args.keep}, THRESHOLD={args.threshold}"
    )
    print(
        f"{'scenario':<12}{'tokens sent':>13}{'saved':>8}{'cache breaks':>14}{'cost':>14}{'vs unpatched':>14}"
    )
    print(f"{'unpatched':<12}{base.sent:>13,}{'':>8}{base.breaks:>14}{base.cost:>14,.0f}{'':>14}")
    for step in (int(s) for s in args.steps.split(",")):
        env = {
            "CLAUDE_TEXT_PRUNE_KEEP": str(args.keep),
            "CLAUDE_TEXT_PRUNE_STEP": str(step),
            "CLAUDE_TEXT_PRUNE_THRESHOLD": str(args.threshold),
        }
        r = price([prune(m, env) for m in reqs])
        saved = 1 - r.sent / base.sent
        print(
            f"{'STEP=' + str(step):<12}{r.sent:>13,}{saved:>8.1%}{r.breaks:>14}"
            f"{r.cost:>14,.0f}{r.cost / base.cost - 1:>+14.1%}"
        )


if __name__ == "__main__":
    main()
