"""Which text prune survives the preserved-thinking check: the candidates, measured.

Replays sessions request by request the way Claude Code sends them (``engine.api.thinking_check.replay``:
a typed prompt starts from the full history, a tool round continues from what the previous request
sent) through each candidate prune, runs the modelled binding check over every request, and prices
the requests like the prompt cache (longest identical message prefix read at 0.1x, the rest
written at 1.25x).

Candidates:
  unpatched  no prune
  ignore     the 0.1.0 prune: shortens old text, leaves thinking where it is
             (CLAUDE_TEXT_PRUNE_THINKING=ignore)
  drop       (a) the cutoff moves only at a request outside a tool round; every thinking block
             produced under an earlier cutoff is left out (a run from the front)  [the default]
  hold       (b) prune nothing while a thinking block follows the first edited message

Sessions: the real spotter sessions (``../shared/transcripts/spotter``, main chain) and synthetic
thinking-heavy ones (every reply starts with a thinking block; tool rounds; long prose).

    python bench/thinking_prune.py [--turns 40] [--shared PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthetic import synthetic  # bench/synthetic.py

from engine.api.thinking_check import check, replay
from engine.transcript import is_message, is_sidechain, load_transcript
from engine.twins.textprune import prune
from engine.twins.textprune_turns import THINKING_TYPES

KNOBS = {
    "defaults": {},
    "eager": {
        "CLAUDE_TEXT_PRUNE_KEEP": "1",
        "CLAUDE_TEXT_PRUNE_STEP": "1",
        "CLAUDE_TEXT_PRUNE_THRESHOLD": "0",
    },
}


def spotter(shared: Path) -> dict[str, list[dict[str, Any]]]:
    out = {}
    folder = shared / "transcripts" / "spotter"
    for path in sorted(folder.glob("*.jsonl")):
        tr = load_transcript(path)
        history = [r for r in tr.records if r and is_message(r) and not is_sidechain(r)]
        out[path.stem[:12]] = history
    return out


def candidates(env: dict[str, str]) -> dict[str, Callable[[list[Any]], list[Any]]]:
    ignore = {**env, "CLAUDE_TEXT_PRUNE_THINKING": "ignore"}

    def hold(messages: list[Any]) -> list[Any]:
        out = prune(messages, ignore)
        if out is messages:
            return messages
        first = next(i for i, (a, b) in enumerate(zip(messages, out, strict=True)) if a is not b)
        for msg in messages[first:]:
            content = (msg.get("message") or {}).get("content") if isinstance(msg, dict) else None
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") in THINKING_TYPES for b in content
            ):
                return messages
        return out

    return {
        "unpatched": lambda m: m,
        "ignore": lambda m: prune(m, ignore),
        "drop": lambda m: prune(m, env),
        "hold": hold,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--shared", default=os.environ.get("CTXPATCH_SHARED", "../shared"))
    args = ap.parse_args()
    sessions: dict[str, list[dict[str, Any]]] = {}
    shared = Path(args.shared)
    if (shared / "transcripts" / "spotter").is_dir():
        sessions.update(spotter(shared))
    else:
        print(f"(no spotter sessions under {shared}: synthetic only)")
    sessions[f"synthetic-{args.turns}"] = synthetic(args.turns)
    sessions[f"synthetic-{args.turns}-late"] = synthetic(args.turns, seed=3, thinking_from=10)
    header = (
        f"{'session':<22}{'knobs':<10}{'candidate':<11}{'requests':>9}{'HTTP 400':>9}"
        f"{'lost':>6}{'middle':>7}{'round':>6}{'dropped':>8}{'tokens sent':>13}{'saved':>7}"
        f"{'breaks':>7}{'cost':>7}"
    )
    print(header)
    for name, history in sessions.items():
        for knobs, env in KNOBS.items():
            base = None
            for label, fn in candidates(env).items():
                r = check(history, replay(history, fn))
                if base is None:
                    base = r
                saved = 1 - r.tokens_sent / base.tokens_sent if base.tokens_sent else 0.0
                cost = r.cost / base.cost - 1 if base.cost else 0.0
                print(
                    f"{name:<22}{knobs:<10}{label:<11}{r.requests:>9}{r.rejected_requests:>9}"
                    f"{r.mismatched_blocks:>6}{r.not_contiguous:>7}{r.round_broken:>6}"
                    f"{r.dropped_blocks:>8}{r.tokens_sent:>13,}{saved:>7.1%}{r.cache_breaks:>7}"
                    f"{cost:>+7.1%}"
                )
    print(
        "HTTP 400: requests an enforced account rejects; lost: blocks a drop_block account loses;"
        "\nmiddle: thinking removed from the middle; round: a tool round sent without its thinking;"
        "\ndropped: distinct thinking blocks the prune left out; cost vs unpatched at cache prices."
    )


if __name__ == "__main__":
    main()
