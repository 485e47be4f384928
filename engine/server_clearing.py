"""Server-side tool-result clearing applied to the messages a replayed request sends.

Claude Code keeps its full history; with the patch each request carries a
``clear_tool_uses_20250919`` edit and the server applies it to its own copy
(:func:`engine.context_editing.apply_edits`) before counting. The usage it reports, which
Claude Code's auto-compact count follows, is that of the edited prompt.

The edit is the one the injected JavaScript sends with these messages
(:func:`engine.context_clear.edit_for_request`: ``keep`` covers at least the round in
progress). Here the messages are Claude Code records, each with a calibrated token cost. The server's
counter is ``overhead + Σ cost``; a record the edit changed costs its calibrated cost scaled by
the chars/4 estimate of its blocks after / before the edit (the same rule the replay uses for
any edited message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.context_clear import edit_for_request
from engine.context_editing import apply_edits
from engine.context_management import ClearToolUses
from engine.tokens import block_tokens

_IDX = "__record"


@dataclass(frozen=True)
class ServerView:
    costs: list[float]  # per sent record, as the server counts it after the edit
    changed: dict[int, tuple[int, ...]]  # record index -> indices of the blocks the edit changed
    cleared_tool_uses: int
    cleared_tokens: int  # the response's cleared_input_tokens


class BlockEstimates:
    """Per-replay memo: ``block_tokens`` by block identity, and the after/before estimate ratio
    of an edited record by (its content's identity, the changed block indices); the replay's
    records are never mutated and the edit is deterministic, so both stay valid."""

    def __init__(self) -> None:
        self._blocks: dict[int, tuple[Any, int]] = {}
        self._ratios: dict[tuple[int, tuple[int, ...]], tuple[Any, float]] = {}
        self._api: dict[tuple[int, int], tuple[Any, dict[str, Any]]] = {}

    def api_message(self, i: int, record: Mapping[str, Any]) -> dict[str, Any]:
        """:func:`_api_message` memoised by (index, record identity); nothing mutates it
        (``apply_edits`` works on copies)."""
        key = (i, id(record))
        hit = self._api.get(key)
        if hit is not None and hit[0] is record:
            return hit[1]
        value = _api_message(i, record)
        self._api[key] = (record, value)
        return value

    def __call__(self, block: Any) -> int:
        hit = self._blocks.get(id(block))
        if hit is not None and hit[0] is block:
            return hit[1]
        value = block_tokens(block)
        self._blocks[id(block)] = (block, value)
        return value

    def ratio(self, old: list, new: list, idx: tuple[int, ...]) -> float:
        key = (id(old), idx)
        hit = self._ratios.get(key)
        if hit is not None and hit[0] is old:
            return hit[1]
        before = sum(self(b) for b in old)
        after = before + sum(block_tokens(new[j]) - self(old[j]) for j in idx)
        value = after / before if before else 1.0
        self._ratios[key] = (old, value)
        return value


def _api_message(i: int, record: Mapping[str, Any]) -> dict[str, Any]:
    msg = record.get("message") if record.get("type") in ("user", "assistant") else None
    if not isinstance(msg, Mapping):
        return {"role": None, "content": None, _IDX: i}
    return {"role": msg.get("role"), "content": msg.get("content"), _IDX: i}


def clear_on_server(
    sent: Sequence[Mapping[str, Any]],
    costs: Sequence[float],
    overhead: float,
    edit: ClearToolUses,
    estimate: BlockEstimates,
    step: int = 1,
) -> ServerView:
    """The server's view of ``sent`` (records with per-record ``costs``) after ``edit``."""
    base = overhead + sum(costs)
    if edit.trigger_type == "input_tokens" and round(base) < edit.trigger_value:
        return ServerView(list(costs), {}, 0, 0)  # what apply_edits does below the trigger
    api = [estimate.api_message(i, r) for i, r in enumerate(sent)]
    memo: dict[int, tuple[Any, float, tuple[int, ...]]] = {}

    def edited(i: int, content: list) -> tuple[float, tuple[int, ...]]:
        hit = memo.get(i)
        if hit is not None and hit[0] is content:
            return hit[1], hit[2]
        old = api[i]["content"]
        idx = tuple(j for j, b in enumerate(content) if b is not old[j])
        cost = costs[i] * estimate.ratio(old, content, idx)
        memo[i] = (content, cost, idx)
        return cost, idx

    def count(messages: Sequence[Mapping[str, Any]]) -> int:
        total = base
        for m in messages:
            i = m[_IDX]
            if m["content"] is not api[i]["content"]:
                total += edited(i, m["content"])[0] - costs[i]
        return round(total)

    out = apply_edits(api, [edit_for_request(edit, api, step)], count)
    if not out.applied_edits:
        return ServerView(list(costs), {}, 0, 0)
    new_costs = list(costs)
    changed: dict[int, tuple[int, ...]] = {}
    for m in out.messages:
        i = m[_IDX]
        if m["content"] is not api[i]["content"]:
            new_costs[i], changed[i] = edited(i, m["content"])
    (applied,) = out.applied_edits
    return ServerView(
        new_costs, changed, applied["cleared_tool_uses"], applied["cleared_input_tokens"]
    )
