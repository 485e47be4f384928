"""How the injected text prune shortens an older message: its texts cut to their first line.

Part of the Python twin of ``_aggressiveTextPrune`` (the rules, "Pruning", are in
:mod:`engine.twins.textprune`'s docstring).
"""

from __future__ import annotations

from typing import Any

from engine.identity_memo import by_identity_and
from engine.javascript import utf16_len, utf16_units
from engine.twins.textprune_turns import conversation_message

__all__ = ["MARKER", "pruned_text", "shortened_message", "shortens"]

#: Appended to every shortened text.
MARKER = "\n[earlier context pruned]"


def pruned_text(text: str, max_chars: int) -> str:
    """The shortened form of ``text``, or ``text`` itself when it is short enough.

    Longer than ``max_chars`` UTF-16 units: the first line (up to the first ``"\\n"`` or
    ``"\\r"``), cut to ``max_chars`` units (``max_chars - 1`` rather than splitting a surrogate
    pair), plus :data:`MARKER`. A result that is not shorter than ``text`` returns ``text``
    (a text only a few units over ``max_chars`` is never made longer).
    """
    if utf16_len(text) <= max_chars:
        return text
    ends = [i for i in (text.find("\n"), text.find("\r")) if i != -1]
    first_line = text[: min(ends)] if ends else text
    units = utf16_units(first_line)
    if len(units) // 2 > max_chars:
        end = max_chars
        high = int.from_bytes(units[2 * end - 2 : 2 * end], "little")
        low = int.from_bytes(units[2 * end : 2 * end + 2], "little")
        if 0xD800 <= high <= 0xDBFF and 0xDC00 <= low <= 0xDFFF:
            end -= 1
        first_line = units[: 2 * end].decode("utf-16-le", "surrogatepass")
    result = first_line + MARKER
    return result if utf16_len(result) < utf16_len(text) else text


# Per (message object, max_chars), like ``shortens``: the same message gives the same copy on
# every call (nothing mutates either), so a replay that prunes one history request after request
# hands on the same objects, which its identity memos (engine.replay) rely on.
@by_identity_and
def shortened_message(msg: object, max_chars: int) -> tuple[Any, int]:
    """The shortened copy of an older message and how many texts it shortened, or ``(None, 0)``."""
    found = conversation_message(msg)
    if found is None:
        return None, 0
    msg, message = found
    content = message.get("content")
    if isinstance(content, str):
        if msg["type"] != "user":  # assistant strings stay
            return None, 0
        text = pruned_text(content, max_chars)
        if text is content:
            return None, 0
        return {**msg, "message": {**message, "content": text}}, 1
    if not isinstance(content, list):
        return None, 0
    copied: list[Any] | None = None
    count = 0
    for b, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text":
            continue
        old_text = block.get("text")
        if not isinstance(old_text, str):
            continue
        shortened = pruned_text(old_text, max_chars)
        if shortened is old_text:
            continue
        if copied is None:
            copied = list(content)
        copied[b] = {**block, "text": shortened}
        count += 1
    if copied is None:
        return None, 0
    return {**msg, "message": {**message, "content": copied}}, count


# Per (message object, max_chars), like engine.twins.textprune_turns.message_facts.
@by_identity_and
def shortens(msg: object, max_chars: int) -> bool:
    """Whether :func:`shortened_message` would shorten ``msg``."""
    return shortened_message(msg, max_chars)[0] is not None
