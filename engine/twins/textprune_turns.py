"""Turns and rounds of a message list as the injected text prune sees them.

Part of the Python twin of ``_aggressiveTextPrune`` (the rules, "Turns and cutoff" and
"Thinking blocks", are in :mod:`engine.twins.textprune`'s docstring): which messages start a turn,
where the cutoff falls, which messages hold thinking blocks or carry tool results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.identity_memo import by_identity
from engine.javascript import js_truthy

__all__ = [
    "THINKING_TYPES",
    "conversation_message",
    "find_cutoff",
    "is_turn_start",
    "message_facts",
    "turn_starts",
    "type_of",
]

THINKING_TYPES = ("thinking", "redacted_thinking")


def type_of(block: object) -> object:
    """A block's ``type``, or None for a block that is not an object."""
    return block.get("type") if isinstance(block, dict) else None


def conversation_message(msg: object) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(msg, msg["message"])`` of a user/assistant message that is neither meta nor a compact
    summary (JavaScript truthiness) and has a ``message`` object; else None."""
    if not isinstance(msg, dict) or msg.get("type") not in ("user", "assistant"):
        return None
    if js_truthy(msg.get("isMeta")) or js_truthy(msg.get("isCompactSummary")):
        return None
    message = msg.get("message")
    if not isinstance(message, dict):
        return None
    return msg, message


def is_turn_start(msg: object) -> bool:
    """Whether ``msg`` is a user message a person typed (see :mod:`engine.twins.textprune`)."""
    found = conversation_message(msg)
    if found is None or found[0]["type"] != "user":
        return False
    content = found[1].get("content")
    if isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    return any(type_of(block) != "tool_result" for block in content)


def turn_starts(messages: Sequence[object]) -> list[int]:
    """Indices of the messages that start a turn."""
    return [i for i, msg in enumerate(messages) if message_facts(msg)[0]]


def find_cutoff(starts: Sequence[int], keep: int, step: int) -> int | None:
    """The index of the first message kept intact, or ``None`` when nothing may be pruned.

    ``P = len(starts) - keep``; ``P' = floor(P / step) * step``; ``starts[P']`` if ``P' > 0``.
    """
    prunable = len(starts) - keep
    if prunable <= 0:
        return None
    prunable = prunable // step * step
    if prunable == 0:
        return None
    return starts[prunable]


def _content_list(msg: object, kind: str) -> list[Any] | None:
    if not isinstance(msg, dict) or msg.get("type") != kind:
        return None
    message = msg.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    return content if isinstance(content, list) else None


def _has_thinking(msg: object) -> bool:
    """An assistant message holding a ``thinking`` or ``redacted_thinking`` block."""
    content = _content_list(msg, "assistant")
    return content is not None and any(type_of(b) in THINKING_TYPES for b in content)


def _carries_tool_result(msg: object) -> bool:
    content = _content_list(msg, "user")
    return content is not None and any(type_of(b) == "tool_result" for b in content)


# A replay sends the same (never mutated) message objects request after request, so these are
# computed once per object.
@by_identity
def message_facts(msg: object) -> tuple[bool, bool, bool]:
    """``(starts a turn, an assistant message holding thinking, a user message carrying a
    tool_result)`` of one message."""
    return is_turn_start(msg), _has_thinking(msg), _carries_tool_result(msg)
