"""How CLAUDE_TEXT_PRUNE_STEP trades tokens saved against prompt-cache breaks.

The shared real sessions have only 3-5 typed prompts each, too few for the cutoff to move, so
this replays a synthetic long session (N typed turns, each with prose, tool round trips and a
long answer) through the Python twin of the injected function (engine.textprune, identical to
the JS by the differential test), request by request, and prices every request the way
Anthropic's prompt cache does: the longest prefix of messages identical to the previous
request is read from the cache (0.1x input price), the rest is written (1.25x).

    python bench/step_sweep.py [--turns 60] [--keep 4] [--steps 1,2,4,8]

Printed per STEP: tokens sent, cache breaks (requests whose prefix changed before its end),
and the cost in input-token equivalents, next to the unpatched session.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.textprune import estimate_tokens, prune

CACHE_READ, CACHE_WRITE = 0.1, 1.25


def session(turns: int, seed: int = 7) -> list[list[dict]]:
    """The message array of every request of a synthetic session (one request per step)."""
    rng = random.Random(seed)
    words = [
        "the",
        "of",
        "a",
        "context",
        "session",
        "compaction",
        "token",
        "cache",
        "prompt",
        "tool",
        "result",
        "file",
        "test",
    ]

    def prose(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    history: list[dict] = []
    requests: list[list[dict]] = []
    for t in range(turns):
        history.append(
            {
                "type": "user",
                "uuid": f"u{t}",
                "message": {"role": "user", "content": f"Task {t}: " + prose(60)},
            }
        )
        for k in range(rng.randint(1, 3)):  # tool round trips
            requests.append(list(history))
            tid = f"t{t}.{k}"
            history.append(
                {
                    "type": "assistant",
                    "uuid": f"a{tid}",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": prose(40) + "\n" + prose(80)},
                            {
                                "type": "tool_use",
                                "id": tid,
                                "name": "Read",
                                "input": {"path": f"f{k}.py"},
                            },
                        ],
                    },
                }
            )
            history.append(
                {
                    "type": "user",
                    "uuid": f"r{tid}",
                    "message": {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": tid, "content": prose(250)}
                        ],
                    },
                }
            )
        requests.append(list(history))
        history.append(
            {
                "type": "assistant",
                "uuid": f"a{t}",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": prose(50) + "\n\n" + prose(200)}],
                },
            }
        )
    return requests


def price(requests: list[list[dict]]) -> dict[str, float]:
    sent = breaks = 0
    cost = 0.0
    prev: list[str] = []
    for msgs in requests:
        keys = [json.dumps(m, sort_keys=True) for m in msgs]
        common = 0
        while common < min(len(keys), len(prev)) and keys[common] == prev[common]:
            common += 1
        if prev and common < len(prev):
            breaks += 1
        cached = estimate_tokens(msgs[:common])
        total = estimate_tokens(msgs)
        sent += total
        cost += CACHE_READ * cached + CACHE_WRITE * (total - cached)
        prev = keys
    return {"sent": sent, "breaks": breaks, "cost": cost}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--keep", type=int, default=4)
    ap.add_argument("--threshold", type=int, default=20000)
    ap.add_argument("--steps", default="1,2,4,8")
    args = ap.parse_args()
    reqs = session(args.turns)
    base = price(reqs)
    print(
        f"synthetic session: {args.turns} typed turns, {len(reqs)} requests, largest request "
        f"{estimate_tokens(reqs[-1]):,} tokens; KEEP={args.keep}, THRESHOLD={args.threshold}"
    )
    print(
        f"{'scenario':<12}{'tokens sent':>13}{'saved':>8}{'cache breaks':>14}{'cost':>14}{'vs unpatched':>14}"
    )
    print(
        f"{'unpatched':<12}{base['sent']:>13,}{'':>8}{base['breaks']:>14}{base['cost']:>14,.0f}{'':>14}"
    )
    for step in (int(s) for s in args.steps.split(",")):
        env = {
            "CLAUDE_TEXT_PRUNE_KEEP": str(args.keep),
            "CLAUDE_TEXT_PRUNE_STEP": str(step),
            "CLAUDE_TEXT_PRUNE_THRESHOLD": str(args.threshold),
        }
        r = price([prune(m, env) for m in reqs])
        saved = 1 - r["sent"] / base["sent"]
        print(
            f"{'STEP=' + str(step):<12}{r['sent']:>13,}{saved:>8.1%}{r['breaks']:>14}"
            f"{r['cost']:>14,.0f}{r['cost'] / base['cost'] - 1:>+14.1%}"
        )


if __name__ == "__main__":
    main()
