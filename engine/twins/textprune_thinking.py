"""The thinking-safe rule of the injected text prune: how far it may edit, and which thinking
blocks go.

Part of the Python twin of ``_aggressiveTextPrune`` (the rule, "Thinking blocks", is in
:mod:`engine.twins.textprune`'s docstring): the API binds each thinking block to everything before it
when it was produced (:mod:`engine.api.thinking_check` models the check), so the prefix the prune
edits is the one in force at the earliest request that produced thinking, and the thinking of
every request that saw a shorter edit is left out. This module plans; :mod:`engine.twins.textprune`
builds the list.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.twins.textprune_estimate import TOKEN_FACTOR, message_tokens
from engine.twins.textprune_shorten import shortens
from engine.twins.textprune_turns import message_facts

__all__ = ["ThinkingPlan", "plan_thinking"]


@dataclass(frozen=True)
class ThinkingPlan:
    """``end``: the edit end in force at ``len(messages)`` (0: nothing changes); ``reason`` and
    ``cutoff``: the prune of that prefix; ``drop``: the thinking messages that lose their
    thinking blocks; ``settled``: whether the result is a fixed point for certain (no message
    from ``end`` to the cutoff of the whole list shortens, so a second pass, whose cutoff is
    at most that one and before whose ``end`` nothing shortens again, changes nothing)."""

    end: int
    reason: str
    cutoff: int | None
    drop: frozenset[int]
    settled: bool = True


def plan_thinking(
    messages: Sequence[Any],
    starts: Sequence[int],
    *,
    keep: int,
    step: int,
    threshold: int,
    max_chars: int,
) -> ThinkingPlan:
    """The thinking-safe rule over ``messages`` (which hold thinking), ``starts`` their turn
    starts, under the ``CLAUDE_TEXT_PRUNE_*`` settings given."""
    n = len(messages)
    turns_before = [0] * (n + 1)  # turn starts in messages[0:k]
    tokens_before = [0] * (n + 1)  # rough (unscaled) estimate of messages[0:k]
    last_changed = [-1] * (n + 1)  # the last index < k that the prune would shorten
    last_free = [0] * (n + 1)  # the last free request point <= k
    first_of_id: dict[str, int] = {}
    request_of: dict[int, int] = {}  # thinking message index -> the request that produced it
    turns = 0
    open_round = False
    for i, msg in enumerate(messages):
        turn_start, has_thinking, carries_tool_result = message_facts(msg)
        if turn_start:
            turns += 1
        turns_before[i + 1] = turns
        tokens_before[i + 1] = tokens_before[i] + message_tokens(msg)
        last_changed[i + 1] = i if shortens(msg, max_chars) else last_changed[i]
        is_assistant = isinstance(msg, dict) and msg.get("type") == "assistant"
        if is_assistant:
            open_round = False
            message = msg.get("message")
            mid = message.get("id") if isinstance(message, dict) else None
            start = first_of_id.setdefault(mid, i) if isinstance(mid, str) else i
            if has_thinking:
                request_of[i] = start
        elif carries_tool_result:
            open_round = True
        # a free request point: after a message that is not an assistant record, and outside
        # a tool round (no tool_result since the last assistant record)
        last_free[i + 1] = last_free[i] if open_round or is_assistant else i + 1

    def edit_end(k: int) -> tuple[int, str, int | None]:
        """The prune of the request messages[0:k]: (end of the edited prefix, reason, cutoff)."""
        count = turns_before[k]
        if count <= keep:
            return 0, "few-turns", None
        prunable = (count - keep) // step * step
        if prunable == 0:
            return 0, "step", None
        cutoff = starts[prunable]
        if last_changed[cutoff] < 0:
            return 0, "nothing-to-prune", cutoff
        estimate = math.ceil(tokens_before[k] * TOKEN_FACTOR)
        if threshold > 0 and estimate < threshold:
            return 0, "below-threshold", cutoff
        return last_changed[cutoff] + 1, "pruned", cutoff

    first = min(request_of.values())

    def in_force(k: int) -> tuple[int, str, int | None]:
        return edit_end(k if k <= first else max(first, last_free[k]))

    end, reason, cutoff = in_force(n)
    if end == 0:
        return ThinkingPlan(0, reason, cutoff, frozenset())
    drop = frozenset(i for i, k in request_of.items() if in_force(k)[0] < end)
    whole = edit_end(n)[2]
    settled = not drop or whole is None or last_changed[whole] < end
    return ThinkingPlan(end, reason, cutoff, drop, settled)
