"""Server-side tool-result clearing applied to the messages a replayed request sends.

Claude Code keeps its full history; with the patch each request carries a
``clear_tool_uses_20250919`` edit and the server applies it to its own copy
(:func:`engine.api.context_editing.apply_edits`) before counting. The usage it reports, which
Claude Code's auto-compact count follows, is that of the edited prompt.

The edit is the one the injected JavaScript sends with these messages
(:func:`engine.twins.context_clear.edit_for_request`: ``keep`` covers at least the round in
progress). Here the messages are Claude Code records, each with a calibrated token cost. The server's
counter is ``overhead + Σ cost``; a record the edit changed costs its calibrated cost scaled by
the chars/4 estimate of its blocks after / before the edit (the same rule the replay uses for
any edited message).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.api.context_editing import apply_edits
from engine.api.context_management import ClearToolUses
from engine.identity_memo import by_identity, by_identity_and
from engine.tokens import block_tokens
from engine.twins.context_clear import edit_for_request

_IDX = "__record"

# Chooses the edit sent with one request instead of ``edit_for_request`` (the oracle's plan,
# the online policy's twin): (the knobs' edit, the request's API messages, their costs, the
# overhead) -> the edit the client sends.
ClearPolicy = Callable[
    [ClearToolUses, Sequence[Mapping[str, Any]], Sequence[float], float], ClearToolUses
]


@dataclass(frozen=True)
class ServerView:
    costs: list[float]  # per sent record, as the server counts it after the edit
    changed: dict[int, tuple[int, ...]]  # record index -> indices of the blocks the edit changed
    cleared_tool_uses: int
    cleared_tokens: int  # the response's cleared_input_tokens


class BlockEstimates:
    """Per-replay memos (:mod:`engine.identity_memo`): a record's API message by (record
    identity, index), ``block_tokens`` by block identity, and the after/before estimate ratio
    of an edited record by (its content's identity, the changed block indices); the replay's
    records are never mutated (``apply_edits`` works on copies) and the edit is deterministic,
    so all stay valid."""

    def __init__(self) -> None:
        self.api_message = by_identity_and(_api_message)
        self.tokens = by_identity(block_tokens)
        # by hand: the ratio also reads the edited blocks ``new``, which the key leaves out
        # (the same content and indices always come with the same edit)
        self._ratios: dict[tuple[int, tuple[int, ...]], tuple[Any, float]] = {}

    def ratio(self, old: list, new: list, idx: tuple[int, ...]) -> float:
        key = (id(old), idx)
        hit = self._ratios.get(key)
        if hit is not None and hit[0] is old:
            return hit[1]
        tokens = self.tokens
        before = sum(tokens(b) for b in old)
        after = before + sum(block_tokens(new[j]) - tokens(old[j]) for j in idx)
        value = after / before if before else 1.0
        self._ratios[key] = (old, value)
        return value


def _api_message(record: Mapping[str, Any], i: int) -> dict[str, Any]:
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
    policy: ClearPolicy | None = None,
) -> ServerView:
    """The server's view of ``sent`` (records with per-record ``costs``) after ``edit``
    (fitted to the messages by ``policy`` when given, else by ``edit_for_request``)."""
    base = overhead + sum(costs)
    api = [estimate.api_message(r, i) for i, r in enumerate(sent)]
    sent_edit = (
        policy(edit, api, costs, overhead)
        if policy is not None
        else edit_for_request(edit, api, step)
    )
    if edit.trigger_type == "input_tokens" and round(base) < edit.trigger_value:
        return ServerView(list(costs), {}, 0, 0)  # what apply_edits does below the trigger

    @by_identity_and
    def edited(content: list, i: int) -> tuple[float, tuple[int, ...]]:
        """Record ``i``'s cost with ``content`` as edited, and the indices of the blocks the
        edit changed."""
        old = api[i]["content"]
        idx = tuple(j for j, b in enumerate(content) if b is not old[j])
        return costs[i] * estimate.ratio(old, content, idx), idx

    def count(messages: Sequence[Mapping[str, Any]]) -> int:
        total = base
        for m in messages:
            i = m[_IDX]
            if m["content"] is not api[i]["content"]:
                total += edited(m["content"], i)[0] - costs[i]
        return round(total)

    out = apply_edits(api, [sent_edit], count)
    if not out.applied_edits:
        return ServerView(list(costs), {}, 0, 0)
    new_costs = list(costs)
    changed: dict[int, tuple[int, ...]] = {}
    for m in out.messages:
        i = m[_IDX]
        if m["content"] is not api[i]["content"]:
            new_costs[i], changed[i] = edited(m["content"], i)
    (applied,) = out.applied_edits
    return ServerView(
        new_costs, changed, applied["cleared_tool_uses"], applied["cleared_input_tokens"]
    )
