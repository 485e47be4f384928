"""The synthetic long session of the bench scripts (``step_sweep.py``, ``thinking_prune.py``).

The shared real sessions have only a few typed prompts each, too few for the prune's cutoff to
move; this one has ``turns`` typed prompts, each with 1-3 tool round trips (prose + a ``Read``
call, a long tool result) and a long final answer, recorded as Claude Code does: one record per
content block, the blocks of one reply sharing ``message.id``.
"""

from __future__ import annotations

import random
from typing import Any

WORDS = [
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


def synthetic(turns: int, seed: int = 7, thinking_from: int | None = 0) -> list[dict[str, Any]]:
    """The history; every reply of a turn ``>= thinking_from`` starts with a signed thinking
    block (``None``: no thinking)."""
    rng = random.Random(seed)

    def prose(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    history: list[dict[str, Any]] = []
    serial = 0

    def reply(t: int, blocks: list[dict[str, Any]]) -> None:
        nonlocal serial
        serial += 1
        if thinking_from is not None and t >= thinking_from:
            thinking = {"type": "thinking", "thinking": prose(120), "signature": f"sig{serial}"}
            blocks = [thinking, *blocks]
        for block in blocks:
            history.append(
                {
                    "type": "assistant",
                    "message": {"id": f"msg{serial}", "role": "assistant", "content": [block]},
                }
            )

    for t in range(turns):
        history.append(
            {"type": "user", "message": {"role": "user", "content": f"Task {t}: " + prose(60)}}
        )
        for k in range(rng.randint(1, 3)):
            tid = f"toolu_{t}_{k}"
            reply(
                t,
                [
                    {"type": "text", "text": prose(40) + "\n" + prose(80)},
                    {"type": "tool_use", "id": tid, "name": "Read", "input": {"path": f"f{k}.py"}},
                ],
            )
            history.append(
                {
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": tid, "content": prose(250)}
                        ],
                    },
                }
            )
        reply(t, [{"type": "text", "text": prose(50) + "\n\n" + prose(200)}])
    return history
