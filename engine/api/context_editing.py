"""A pure twin of what the API's server-side context editing does to the prompt.

The edits of a request's ``context_management`` field (:mod:`engine.api.context_management`: the
types, their validation and JSON form) are applied by :func:`apply_edits` to the server's copy
of the prompt (the client's history is never touched):

``clear_tool_uses_20250919`` (:class:`~engine.api.context_management.ClearToolUses`)
    * Runs only when the trigger is reached: ``input_tokens`` -> ``count(messages) >= value``;
      ``tool_uses`` -> the number of ``tool_use`` blocks in the messages ``>= value``.
    * The most recent ``keep`` tool uses are kept (``keep`` counts every tool use, excluded
      tools included, like Anthropic's own SDK twin of this edit); every older one whose tool is
      not in ``exclude_tools`` is cleared, oldest first: its ``tool_result`` content becomes
      :data:`PLACEHOLDER` (one constant; the API documents only "placeholder text that tells
      the model the result was removed", not its exact words), other keys (``tool_use_id``,
      ``is_error``, ``cache_control``) stay. With ``clear_tool_inputs`` (``True``, or the names
      of the tools concerned) the cleared ``tool_use`` blocks also get ``input`` :data:`CLEARED_INPUT`.
      No block is ever removed, so every ``tool_use`` keeps its ``tool_result``.
    * ``clear_at_least``: when clearing everything it may clear frees fewer input tokens than
      that (``count(before) - count(after)``), nothing is cleared at all.
    * A tool use whose result is already the placeholder (and, where inputs are cleared, whose
      input is already empty) is not cleared again: applying the edits to their own output
      changes nothing.
``clear_thinking_20251015`` (:class:`~engine.api.context_management.ClearThinking`)
    * ``keep`` = the number of most recent *thinking turns* whose ``thinking`` /
      ``redacted_thinking`` blocks stay, or ``"all"``. A turn is everything the assistant says
      between two human messages (a user message with any block other than ``tool_result``),
      so a tool loop in progress is one turn; a thinking turn is a turn holding a thinking block.
      Thinking blocks of older turns are removed (the only blocks this module ever removes).
    * With thinking on and no such edit the API keeps only the last assistant turn's thinking:
      :func:`default_thinking_clearing` (and ``apply_edits(..., thinking_enabled=True)``).

Edits apply in list order, each on the previous one's output; each reports
``cleared_input_tokens = count(before it) - count(after it)``, and an edit that changed nothing
is not listed in ``applied_edits``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.api.context_management import (
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    ClearThinking,
    ClearToolUses,
    Edit,
)

PLACEHOLDER = "[Tool result cleared by context editing]"
CLEARED_INPUT: dict[str, Any] = {}
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


@dataclass(frozen=True)
class Applied:
    messages: list[dict]  # new list; the input is never mutated
    applied_edits: list[dict]  # the response's context_management.applied_edits


def blocks_of(msg: Mapping[str, Any]) -> list[Any]:
    """An API message's content blocks (``[]`` for string content)."""
    content = msg.get("content")
    return content if isinstance(content, list) else []


def is_block(block: Any, kind: str) -> bool:
    """Whether ``block`` is a content block of type ``kind``."""
    return isinstance(block, Mapping) and block.get("type") == kind


def tool_uses(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int, Mapping[str, Any]]]:
    """``(message index, block index, block)`` of every ``tool_use``, oldest first."""
    return [
        (i, j, b)
        for i, m in enumerate(messages)
        if m.get("role") == "assistant"
        for j, b in enumerate(blocks_of(m))
        if is_block(b, "tool_use")
    ]


def _results(messages: Sequence[Mapping[str, Any]]) -> dict[Any, tuple[int, int]]:
    return {
        b.get("tool_use_id"): (i, j)
        for i, m in enumerate(messages)
        if m.get("role") == "user"
        for j, b in enumerate(blocks_of(m))
        if is_block(b, "tool_result")
    }


def _clears_input(edit: ClearToolUses, name: Any) -> bool:
    ci = edit.clear_tool_inputs
    return ci if isinstance(ci, bool) else name in ci


def _clear_tool_uses(
    messages: list[dict], edit: ClearToolUses, count: Callable[[Sequence[Mapping]], int]
) -> tuple[list[dict], int]:
    uses = tool_uses(messages)
    if edit.trigger_type == "tool_uses":
        reached = len(uses) >= edit.trigger_value
    else:
        reached = count(messages) >= edit.trigger_value
    if not reached:
        return messages, 0
    results = _results(messages)
    out = list(messages)
    copied: set[int] = set()

    def block_copy(i: int, j: int) -> dict:
        if i not in copied:
            out[i] = {**out[i], "content": list(blocks_of(out[i]))}
            copied.add(i)
        block = dict(out[i]["content"][j])
        out[i]["content"][j] = block
        return block

    cleared = 0
    older = uses[: max(0, len(uses) - edit.keep)]
    for i, j, use in older:
        if use.get("name") in edit.exclude_tools:
            continue
        changed = False
        where = results.get(use.get("id"))
        if where is not None:
            result = messages[where[0]]["content"][where[1]]
            if result.get("content") != PLACEHOLDER:
                block_copy(*where)["content"] = PLACEHOLDER
                changed = True
        if _clears_input(edit, use.get("name")) and use.get("input") != CLEARED_INPUT:
            block_copy(i, j)["input"] = dict(CLEARED_INPUT)
            changed = True
        cleared += changed
    if not cleared:
        return messages, 0
    if edit.clear_at_least is not None and count(messages) - count(out) < edit.clear_at_least:
        return messages, 0
    return out, cleared


def _is_human(msg: Mapping[str, Any]) -> bool:
    if msg.get("role") != "user":
        return False
    content = msg.get("content")
    if not isinstance(content, list):
        return True
    return not content or any(not is_block(b, "tool_result") for b in content)


def assistant_turns(messages: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """Indices of the assistant messages of each turn (a turn ends at a human message)."""
    turns: list[list[int]] = [[]]
    for i, m in enumerate(messages):
        if _is_human(m):
            if turns[-1]:
                turns.append([])
        elif m.get("role") == "assistant":
            turns[-1].append(i)
    return [t for t in turns if t]


def _clear_thinking(messages: list[dict], keep: int | str) -> tuple[list[dict], int]:
    if keep == "all":
        return messages, 0
    thinking_turns = [
        t for t in assistant_turns(messages) if any(_has_thinking(messages[i]) for i in t)
    ]
    older = thinking_turns[: max(0, len(thinking_turns) - int(keep))]
    if not older:
        return messages, 0
    out = list(messages)
    for turn in older:
        for i in turn:
            content = messages[i].get("content")
            if isinstance(content, list):
                out[i] = {**messages[i], "content": [b for b in content if not _thinking(b)]}
    return out, len(older)


def _thinking(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in THINKING_TYPES


def _has_thinking(msg: Mapping[str, Any]) -> bool:
    return any(_thinking(b) for b in blocks_of(msg))


def default_thinking_clearing(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the API does with thinking on and no ``clear_thinking_20251015`` edit: only the
    last assistant turn's thinking stays (``keep`` 1 thinking turn). A new list."""
    return _clear_thinking([dict(m) for m in messages], 1)[0]


def apply_edits(
    messages: Sequence[Mapping[str, Any]],
    edits: Sequence[Edit],
    count: Callable[[Sequence[Mapping]], int],
    *,
    thinking_enabled: bool = False,
) -> Applied:
    """The server's copy of ``messages`` after ``edits`` (in order), and ``applied_edits``.

    ``count`` is the server's token counter over a message list (add the system prompt and
    tools inside it when they should count toward an ``input_tokens`` trigger). With
    ``thinking_enabled`` and no :class:`ClearThinking` edit the implicit default (keep the last
    thinking turn) runs first; it is not reported, as the API reports only requested edits.
    """
    current = [dict(m) for m in messages]
    applied: list[dict] = []
    if thinking_enabled and not any(isinstance(e, ClearThinking) for e in edits):
        current = _clear_thinking(current, 1)[0]
    for edit in edits:
        before = count(current)
        if isinstance(edit, ClearThinking):
            current, n = _clear_thinking(current, edit.keep)
            key, kind = "cleared_thinking_turns", CLEAR_THINKING
        else:
            current, n = _clear_tool_uses(current, edit, count)
            key, kind = "cleared_tool_uses", CLEAR_TOOL_USES
        if n:
            applied.append({"type": kind, key: n, "cleared_input_tokens": before - count(current)})
    return Applied(current, applied)
