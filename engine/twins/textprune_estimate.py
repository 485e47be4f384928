"""The rough token estimate the injected text prune computes: Claude Code 2.x's, x4/3.

Part of the Python twin of ``_aggressiveTextPrune`` (the rules, "Token estimate", are in
:mod:`engine.twins.textprune`'s docstring); the prune skips a list whose estimate is below
``CLAUDE_TEXT_PRUNE_THRESHOLD``, and :mod:`engine.api.thinking_check` counts with it too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine.identity_memo import by_identity
from engine.javascript import js_json_stringify, utf16_len

__all__ = ["TOKEN_FACTOR", "estimate_tokens", "message_tokens"]

#: Claude Code's factor from the rough character count to the reported estimate.
TOKEN_FACTOR = 1.3333333333333333


def _quarter_len(value: object) -> int:
    """``Math.round(length / 4)`` of a string's UTF-16 length; non-strings count 0."""
    if not isinstance(value, str):
        return 0
    return (utf16_len(value) + 2) // 4


def _tool_result_tokens(content: object) -> int:
    if isinstance(content, str):
        return _quarter_len(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            total += _quarter_len(block.get("text"))
        elif kind == "image" or kind == "document":
            total += 2000
    return total


# chars/4 of a block's JSON and the count of a message are remembered per object: a replay asks
# for the same tool_use blocks at every request (quadratic otherwise; 10 s on a 307-request
# session).
def _json_tokens(block: object) -> int:
    return (utf16_len(js_json_stringify(block)) + 2) // 4


_json_tokens_memo = by_identity(_json_tokens)


def _block_tokens(block: object) -> int:
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text":
            return _quarter_len(block.get("text"))
        if kind == "thinking":
            return _quarter_len(block.get("thinking"))
        if kind == "image" or kind == "document":
            return 2000
        if kind == "tool_result":
            return _tool_result_tokens(block.get("content"))
        return _json_tokens_memo(block)
    return _json_tokens(block)


@by_identity
def message_tokens(msg: object) -> int:
    """The rough (unscaled) token count of one message; 0 for anything not user/assistant."""
    if not isinstance(msg, dict) or msg.get("type") not in ("user", "assistant"):
        return 0
    message = msg.get("message")
    if not isinstance(message, dict):
        return 0
    content = message.get("content")
    if isinstance(content, str):
        return _quarter_len(content)
    if not isinstance(content, list):
        return 0
    return sum(_block_tokens(block) for block in content)


def estimate_tokens(messages: Sequence[object]) -> int:
    """Claude Code's rough token estimate of a message list: ``ceil(sum * 1.3333333333333333)``."""
    total = sum(message_tokens(msg) for msg in messages)
    return math.ceil(total * TOKEN_FACTOR)
