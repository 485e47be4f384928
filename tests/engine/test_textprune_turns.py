"""engine.twins.textprune_turns: turn starts, the cutoff and its STEP, the threshold."""

from __future__ import annotations

from typing import Any

import pytest
from msgs import (
    assistant,
    changed_indices,
    conversation,
    env,
    text,
    tool_result,
    user,
)

from engine.twins.textprune import prune, prune_detailed
from engine.twins.textprune_estimate import estimate_tokens
from engine.twins.textprune_turns import find_cutoff, is_turn_start, turn_starts

# --------------------------------------------------------------------------- turns


@pytest.mark.parametrize(
    ("msg", "starts"),
    [
        (user("hi"), True),
        (user(""), True),
        (user([text("hi")]), True),
        (user([{"type": "image", "source": {}}]), True),
        (user([tool_result("out"), text("and a remark")]), True),
        (user([None]), True),  # a non-object block is not a tool_result
        (user([]), False),
        (user([tool_result("out")]), False),
        (user([tool_result("out"), tool_result("more", "toolu_2")]), False),
        (user(None), False),
        (user(42), False),
        ({"type": "user"}, False),
        ({"type": "user", "message": None}, False),
        ({"type": "user", "message": ["hi"]}, False),
        (assistant("hi"), False),
        (assistant([text("hi")]), False),
        ({"type": "system", "message": {"content": "hi"}}, False),
        (user("hi", isMeta=True), False),
        (user("hi", isMeta=1), False),
        (user("hi", isMeta="yes"), False),
        (user("hi", isMeta=[]), False),  # truthy in JavaScript
        (user("hi", isMeta={}), False),
        (user("hi", isMeta=False), True),
        (user("hi", isMeta=0), True),
        (user("hi", isMeta=""), True),
        (user("hi", isMeta=None), True),
        (user("hi", isCompactSummary=True), False),
        (user([text("summary")], isCompactSummary=True), False),
        (user("hi", isCompactSummary=False), True),
        ("not a message", False),
        (None, False),
    ],
)
def test_turn_start(msg: Any, starts: bool) -> None:
    assert is_turn_start(msg) is starts


def test_tool_result_carriers_do_not_start_turns() -> None:
    msgs = [
        user("do it"),  # 0: turn
        assistant([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]),
        user([tool_result("done")]),  # carrier
        assistant([text("ok")]),
        user("next", isMeta=True),  # meta
        user("again"),  # 5: turn
        user([]),  # empty
        user("summary", isCompactSummary=True),
        user([text("last")]),  # 8: turn
    ]
    assert turn_starts(msgs) == [0, 5, 8]


# --------------------------------------------------------------------------- cutoff / STEP


@pytest.mark.parametrize(
    ("n", "keep", "step", "expected"),
    [
        (4, 4, 4, None),  # P = 0
        (3, 4, 4, None),  # P < 0
        (7, 4, 4, None),  # P = 3 -> P' = 0
        (8, 4, 4, 4),  # P = 4 -> P' = 4
        (11, 4, 4, 4),  # P = 7 -> P' = 4: 7 turns kept
        (12, 4, 4, 8),  # P = 8 -> P' = 8: the cutoff jumps by STEP turns
        (7, 2, 3, 3),  # P = 5 -> P' = 3
        (5, 4, 1, 1),  # STEP=1: the KEEP-th last turn start
        (10, 1, 1, 9),
        (10, 1, 20, None),
    ],
)
def test_find_cutoff(n: int, keep: int, step: int, expected: int | None) -> None:
    starts = [10 * i + 3 for i in range(n)]  # turn start positions are not their ordinals
    cutoff = find_cutoff(starts, keep, step)
    assert cutoff == (None if expected is None else starts[expected])


@pytest.mark.parametrize(
    ("turns", "keep", "step", "pruned_turns"),
    [(8, 4, 4, 4), (9, 4, 4, 4), (11, 4, 4, 4), (12, 4, 4, 8), (7, 4, 4, 0), (5, 2, 1, 3)],
)
def test_step_moves_the_cutoff(turns: int, keep: int, step: int, pruned_turns: int) -> None:
    msgs = conversation(turns)
    outcome = prune_detailed(msgs, env(keep=str(keep), step=str(step)))
    # each turn is two messages and both are long enough to prune
    assert changed_indices(msgs, outcome.messages) == list(range(2 * pruned_turns))
    if pruned_turns:
        assert outcome.reason == "pruned"
        assert outcome.cutoff == 2 * pruned_turns
        assert outcome.turns == turns
        assert outcome.blocks_pruned == outcome.messages_changed == 2 * pruned_turns
    else:
        assert outcome.messages is msgs
        assert outcome.reason == "step"


def test_few_turns() -> None:
    msgs = conversation(1)
    assert prune_detailed(msgs, env()).reason == "few-turns"
    assert prune(msgs, env()) is msgs
    assert prune([], env()) == []


# --------------------------------------------------------------------------- threshold


def test_threshold_boundary() -> None:
    msgs = conversation(3)
    est = estimate_tokens(msgs)
    assert est > 0
    at = prune_detailed(msgs, env(threshold=str(est)))
    assert at.reason == "pruned"
    above = prune_detailed(msgs, env(threshold=str(est + 1)))
    assert above.reason == "below-threshold"
    assert above.messages is msgs
    assert prune(msgs, env(threshold="0")) is not msgs


def test_default_threshold_gates_small_conversations() -> None:
    msgs = conversation(10)
    assert estimate_tokens(msgs) < 20000
    assert prune(msgs, {"CLAUDE_TEXT_PRUNE_KEEP": "1", "CLAUDE_TEXT_PRUNE_STEP": "1"}) is msgs
    big = conversation(10, body="x" * 8000)
    assert estimate_tokens(big) >= 20000
    assert prune(big, {"CLAUDE_TEXT_PRUNE_KEEP": "1", "CLAUDE_TEXT_PRUNE_STEP": "1"}) is not big
