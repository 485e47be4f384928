"""Pure-Python twin of the injected ``_aggressiveTextPrune`` (``patcher/snippets/text_prune.js``).

(Over 500 lines on purpose: it mirrors one JavaScript function, JavaScript's semantics included,
and reads best next to it as one file.)

The JavaScript snippet runs inside Claude Code on every API request; this module computes
exactly the same result so the pruning can be simulated offline. ``tests/differential`` runs
both on the same generated inputs and compares the results as parsed JSON.

Input
    The list the query loop is about to send: Claude Code message objects
    ``{type, message: {role, content}, isMeta?, isCompactSummary?, uuid, ...}``. Only
    ``type == "user"`` / ``"assistant"`` messages are looked at; ``content`` is a string or a
    list of blocks (``text``, ``tool_use``, ``tool_result``, ``thinking``,
    ``redacted_thinking``, ``image``, ``document``, anything else).

Settings (:class:`PruneSettings`, read from the environment on every call)
    A valid value is a string of 1 to 9 ASCII digits, nothing else (no trimming, no sign),
    whose integer value is at least the minimum; anything else means the default.

    - ``CLAUDE_TEXT_PRUNE_KEEP`` (default 4, min 1): most recent turns kept intact.
    - ``CLAUDE_TEXT_PRUNE_THRESHOLD`` (default 20000, min 0): do nothing while the estimate of
      the whole list is below this many tokens.
    - ``CLAUDE_TEXT_PRUNE_MAX_CHARS`` (default 80, min 1): longest text (UTF-16 units) kept.
    - ``CLAUDE_TEXT_PRUNE_STEP`` (default 4, min 1): the cutoff moves by this many turns.
    - ``CLAUDE_TEXT_PRUNE_DISABLE``: exactly ``"1"`` turns pruning off.
    - ``CLAUDE_TEXT_PRUNE_THINKING``: exactly ``"ignore"`` restores the 0.1.0 rule when thinking
      blocks are present; anything else (or unset) is the thinking-safe rule below.

    ``CLAUDE_TEXT_PRUNE_DEBUG`` (the JavaScript side appends a JSON line per pruning call to
    that file) is ignored here: this module does no I/O.

Turns and cutoff
    A turn starts at a message a person typed: ``type == "user"``, ``isMeta`` and
    ``isCompactSummary`` not truthy (JavaScript truthiness, see :func:`js_truthy`), and a
    ``message`` object whose ``content`` is a string or a list holding at least one block whose
    type is not ``"tool_result"`` (an empty list, or a list of tool results only, does not
    start a turn; a block that is not an object counts as "not a tool_result").
    With ``n`` turn starts at indices ``starts``: ``P = n - KEEP``; ``P' = floor(P / STEP) *
    STEP``; when ``P' <= 0`` nothing is pruned, else ``cutoff = starts[P']``. Messages before
    ``cutoff`` are *older*; nothing at or after ``cutoff`` is ever touched.

Token estimate (:func:`estimate_tokens`, Claude Code 2.x's rough count)
    Sum over user/assistant messages with an object ``message``: string content ``round(len
    / 4)``; list content per block: ``text`` ``round(len(text) / 4)``; ``thinking``
    ``round(len(thinking) / 4)``; ``image``/``document`` 2000; ``tool_result`` its content
    (string ``round(len / 4)``, list: text ``round(len / 4)``, image/document 2000, other 0;
    anything else 0); any other block ``round(len(JSON.stringify(block)) / 4)``. Lengths are
    UTF-16 code units, ``round`` is JavaScript's ``Math.round`` (``(L + 2) // 4``), a missing or
    non-string text counts as length 0. Total ``ceil(sum * 1.3333333333333333)``.

Pruning
    Nothing happens when disabled, when ``P' <= 0``, when no older block qualifies, or when the
    estimate of the whole input is below ``THRESHOLD``. Otherwise, in older user/assistant
    messages that are neither meta nor compact summaries: every ``text`` block with a string
    ``text`` longer than ``MAX_CHARS`` UTF-16 units gets ``text = cut(first line) +
    "\\n[earlier context pruned]"`` (a new block, other fields copied), when that is shorter
    (in UTF-16 units) than the text; otherwise the block is left alone, so a text only a few
    units over ``MAX_CHARS`` is never made longer. The first line ends at the first ``"\\n"``
    or ``"\\r"``; the cut keeps ``MAX_CHARS`` units, or ``MAX_CHARS - 1`` when that would
    split a surrogate pair. The string content of an older typed user message (a turn start)
    is shortened the same way; assistant string content is not. A shortened text re-prunes to
    itself, which is not shorter, so it is left alone: ``prune(prune(x)) == prune(x)`` and the
    second call returns its input object.

Thinking blocks (the thinking-safe rule)
    Used when some ``type == "assistant"`` message with an object ``message`` has a list
    ``content`` holding a ``thinking`` or ``redacted_thinking`` block, and THINKING is not
    ``"ignore"``. The API binds each such block to everything before it when it was produced
    (``engine/thinking_check.py`` models the check). For a prefix ``messages[0:k]``, its *edit end*
    is what the rule above would do to that prefix as a whole list: 0 when disabled by the gates
    (turns of the prefix, STEP, nothing to shorten before its cutoff, its estimate below
    THRESHOLD), else 1 + the index of the last message before its cutoff that pruning shortens.
    A *free* request point ``k`` follows a message that is not ``type == "assistant"`` with no
    ``tool_result``-carrying user message (list content) since the last assistant message;
    ``free(k)`` is the largest free point ``<= k`` (0 at least). An assistant message's
    *request* is the index of the first assistant message with the same string ``message.id``
    (itself without one); ``first`` is the smallest request of a thinking message. The edit end
    *in force* at ``k`` is ``edit_end(k)`` for ``k <= first``, else ``edit_end(max(first,
    free(k)))``. With ``E`` the edit end in force at ``len(messages)``: nothing changes when
    ``E == 0``; otherwise messages before ``E`` are shortened as above, every thinking message
    whose request had an edit end in force ``< E`` loses its thinking/redacted_thinking blocks
    (a new message and content list; a message left with no block is left out of the result),
    and everything else is shared. The edit end in force only grows with ``k``, so the blocks left
    out are a run from the front; the round in progress (no free point since its prompt) shares
    ``E``, so its thinking always goes back; a list that was pruned and then extended within a
    round (what Claude Code's query loop feeds back) comes back unchanged.

Result
    The input is never mutated. The same list object is returned when nothing changed;
    otherwise a new list in which each changed message is a shallow copy with a new
    ``message`` dict and a new ``content`` (list or string), and every untouched message and
    block is the same object as in the input. Errors never escape: any exception returns the
    input.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.javascript import js_json_stringify, js_truthy, utf16_len, utf16_units

__all__ = [
    "MARKER",
    "TOKEN_FACTOR",
    "PruneOutcome",
    "PruneSettings",
    "estimate_tokens",
    "find_cutoff",
    "is_turn_start",
    "js_json_stringify",
    "js_truthy",
    "message_tokens",
    "prune",
    "prune_detailed",
    "pruned_text",
    "turn_starts",
    "utf16_len",
]

#: Appended to every shortened text.
MARKER = "\n[earlier context pruned]"
#: Claude Code's factor from the rough character count to the reported estimate.
TOKEN_FACTOR = 1.3333333333333333

ENV_KEEP = "CLAUDE_TEXT_PRUNE_KEEP"
ENV_THRESHOLD = "CLAUDE_TEXT_PRUNE_THRESHOLD"
ENV_MAX_CHARS = "CLAUDE_TEXT_PRUNE_MAX_CHARS"
ENV_STEP = "CLAUDE_TEXT_PRUNE_STEP"
ENV_DISABLE = "CLAUDE_TEXT_PRUNE_DISABLE"
ENV_DEBUG = "CLAUDE_TEXT_PRUNE_DEBUG"
ENV_THINKING = "CLAUDE_TEXT_PRUNE_THINKING"

#: ``CLAUDE_TEXT_PRUNE_THINKING`` values. Exactly ``"ignore"`` restores the pruning of 0.1.0
#: (thinking blocks are left where they are, whatever the cutoff); anything else is ``"drop"``.
THINKING_DROP = "drop"
THINKING_IGNORE = "ignore"
THINKING_TYPES = ("thinking", "redacted_thinking")

_VALID_SETTING = re.compile(r"[0-9]{1,9}")  # used with fullmatch: no "$"-before-newline leniency


# --------------------------------------------------------------------------- settings


def _setting(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name)
    if not isinstance(raw, str) or _VALID_SETTING.fullmatch(raw) is None:
        return default
    value = int(raw)
    return value if value >= minimum else default


@dataclass(frozen=True)
class PruneSettings:
    """The settings of one call, as the snippet reads them from ``process.env``."""

    keep: int = 4
    threshold: int = 20000
    max_chars: int = 80
    step: int = 4
    disabled: bool = False
    thinking: str = THINKING_DROP

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PruneSettings:
        """Read the ``CLAUDE_TEXT_PRUNE_*`` variables; invalid values fall back to defaults.

        ``env`` defaults to ``os.environ``.
        """
        if env is None:
            env = os.environ
        return cls(
            keep=_setting(env, ENV_KEEP, 4, 1),
            threshold=_setting(env, ENV_THRESHOLD, 20000, 0),
            max_chars=_setting(env, ENV_MAX_CHARS, 80, 1),
            step=_setting(env, ENV_STEP, 4, 1),
            disabled=env.get(ENV_DISABLE) == "1",
            thinking=THINKING_IGNORE if env.get(ENV_THINKING) == THINKING_IGNORE else THINKING_DROP,
        )


# --------------------------------------------------------------------------- estimate


def _type_of(block: object) -> object:
    return block.get("type") if isinstance(block, dict) else None


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


_JSON_TOKENS: dict[int, tuple[object, int]] = {}  # id(block) -> (block, tokens); bounded
_JSON_TOKENS_MAX = 1 << 16
_MESSAGE_TOKENS: dict[int, tuple[object, int]] = {}  # the same, per message object


def _json_block_tokens(block: object) -> int:
    """chars/4 of the block's JSON, remembered per block object: a replay asks for the same
    tool_use blocks at every request (quadratic otherwise; 10 s on a 307-request session). The
    entry holds the block, so its id cannot be reused while cached; the prune never mutates its
    input (it copies what it changes), and neither do its callers."""
    hit = _JSON_TOKENS.get(id(block))
    if hit is not None and hit[0] is block:
        return hit[1]
    n = (utf16_len(js_json_stringify(block)) + 2) // 4
    if len(_JSON_TOKENS) >= _JSON_TOKENS_MAX:
        _JSON_TOKENS.clear()
    _JSON_TOKENS[id(block)] = (block, n)
    return n


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
        return _json_block_tokens(block)
    return (utf16_len(js_json_stringify(block)) + 2) // 4


def message_tokens(msg: object) -> int:
    """The rough (unscaled) token count of one message; 0 for anything not user/assistant."""
    if not isinstance(msg, dict) or msg.get("type") not in ("user", "assistant"):
        return 0
    hit = _MESSAGE_TOKENS.get(id(msg))
    if hit is not None and hit[0] is msg:
        return hit[1]
    n = _message_tokens(msg)
    if len(_MESSAGE_TOKENS) >= _JSON_TOKENS_MAX:
        _MESSAGE_TOKENS.clear()
    _MESSAGE_TOKENS[id(msg)] = (msg, n)
    return n


def _message_tokens(msg: dict) -> int:
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


# --------------------------------------------------------------------------- turns


def is_turn_start(msg: object) -> bool:
    """Whether ``msg`` is a user message a person typed (see the module docstring)."""
    if not isinstance(msg, dict) or msg.get("type") != "user":
        return False
    if js_truthy(msg.get("isMeta")) or js_truthy(msg.get("isCompactSummary")):
        return False
    message = msg.get("message")
    if not isinstance(message, dict):
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    return any(_type_of(block) != "tool_result" for block in content)


def turn_starts(messages: Sequence[object]) -> list[int]:
    """Indices of the messages that start a turn."""
    return [i for i, msg in enumerate(messages) if _facts(msg)[0]]


# Per message object: (is_turn_start, _has_thinking, _carries_tool_result). A replay sends the
# same (never mutated) message objects request after request, so these are computed once per
# object, like message_tokens above; the held reference keeps the id from being reused.
_FACTS: dict[int, tuple[object, tuple[bool, bool, bool]]] = {}
# Per (message object, max_chars): whether _pruned_message would shorten it.
_SHORTENS: dict[tuple[int, int], tuple[object, bool]] = {}


def _facts(msg: object) -> tuple[bool, bool, bool]:
    hit = _FACTS.get(id(msg))
    if hit is not None and hit[0] is msg:
        return hit[1]
    value = (is_turn_start(msg), _has_thinking(msg), _carries_tool_result(msg))
    if len(_FACTS) >= _JSON_TOKENS_MAX:
        _FACTS.clear()
    _FACTS[id(msg)] = (msg, value)
    return value


def _shortens(msg: object, max_chars: int) -> bool:
    key = (id(msg), max_chars)
    hit = _SHORTENS.get(key)
    if hit is not None and hit[0] is msg:
        return hit[1]
    value = _pruned_message(msg, max_chars)[0] is not None
    if len(_SHORTENS) >= _JSON_TOKENS_MAX:
        _SHORTENS.clear()
    _SHORTENS[key] = (msg, value)
    return value


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


# --------------------------------------------------------------------------- pruning


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


@dataclass(frozen=True)
class PruneOutcome:
    """What one call did (the Python side of the JavaScript debug line, minus the I/O).

    ``reason`` is one of ``"disabled"``, ``"not-a-list"``, ``"few-turns"`` (``n <= KEEP``),
    ``"step"`` (``P' == 0``), ``"nothing-to-prune"``, ``"below-threshold"``, ``"pruned"``,
    ``"error"``. ``cutoff`` is ``None`` unless a cutoff was found; ``messages`` is the input
    object itself unless ``reason == "pruned"``. Under the thinking-safe rule, ``edit_end`` is
    the edit end in force, ``thinking_dropped`` the blocks left out and ``messages_removed`` the
    messages left out with them (all 0 under the 0.1.0 rule).
    """

    messages: list[Any]
    reason: str
    settings: PruneSettings | None = None
    turns: int = 0
    cutoff: int | None = None
    messages_changed: int = 0
    blocks_pruned: int = 0
    thinking_dropped: int = 0
    messages_removed: int = 0
    edit_end: int = 0

    @property
    def changed(self) -> bool:
        return self.reason == "pruned"


def prune_detailed(messages: list[Any], env: Mapping[str, str] | None = None) -> PruneOutcome:
    """:func:`prune` with the bookkeeping: turns, cutoff, counts and why nothing happened."""
    try:
        return _prune(messages, PruneSettings.from_env(env))
    except Exception:
        return PruneOutcome(messages, "error")


def prune(messages: list[Any], env: Mapping[str, str] | None = None) -> list[Any]:
    """Exactly what ``_aggressiveTextPrune(messages)`` returns under ``env`` (default ``os.environ``).

    Older texts longer than ``MAX_CHARS`` become their cut first line plus :data:`MARKER` only
    when that is shorter than the text (see :func:`pruned_text`): nothing is made longer.
    The input is never mutated; the same list object comes back when nothing changed.
    """
    return prune_detailed(messages, env).messages


def _prune(messages: list[Any], settings: PruneSettings) -> PruneOutcome:
    if not isinstance(messages, list):
        return PruneOutcome(messages, "not-a-list", settings)
    if settings.disabled:
        return PruneOutcome(messages, "disabled", settings)
    starts = turn_starts(messages)
    if settings.thinking == THINKING_DROP and any(_facts(m)[1] for m in messages):
        return _prune_thinking(messages, settings, starts)
    turns = len(starts)
    if turns <= settings.keep:
        return PruneOutcome(messages, "few-turns", settings, turns)
    cutoff = find_cutoff(starts, settings.keep, settings.step)
    if cutoff is None:
        return PruneOutcome(messages, "step", settings, turns)

    out: list[Any] | None = None
    blocks_pruned = 0
    messages_changed = 0
    for index in range(cutoff):
        shortened, count = _pruned_message(messages[index], settings.max_chars)
        if shortened is None:
            continue
        if out is None:
            out = list(messages)
        out[index] = shortened
        blocks_pruned += count
        messages_changed += 1

    if out is None:
        return PruneOutcome(messages, "nothing-to-prune", settings, turns, cutoff)
    if settings.threshold > 0 and estimate_tokens(messages) < settings.threshold:
        return PruneOutcome(messages, "below-threshold", settings, turns, cutoff)
    return PruneOutcome(out, "pruned", settings, turns, cutoff, messages_changed, blocks_pruned)


def _prunable(msg: object) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(msg, msg["message"])`` of a user/assistant message the prune may shorten."""
    if not isinstance(msg, dict) or msg.get("type") not in ("user", "assistant"):
        return None
    if js_truthy(msg.get("isMeta")) or js_truthy(msg.get("isCompactSummary")):
        return None
    message = msg.get("message")
    if not isinstance(message, dict):
        return None
    return msg, message


def _pruned_message(msg: object, max_chars: int) -> tuple[Any, int]:
    """The shortened copy of an older message and how many texts it shortened, or ``(None, 0)``."""
    found = _prunable(msg)
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


# --------------------------------------------------------------------------- thinking


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
    return content is not None and any(_type_of(b) in THINKING_TYPES for b in content)


def _carries_tool_result(msg: object) -> bool:
    content = _content_list(msg, "user")
    return content is not None and any(_type_of(b) == "tool_result" for b in content)


def _prune_thinking(
    messages: list[Any], settings: PruneSettings, starts: list[int]
) -> PruneOutcome:
    """The thinking-safe rule (module docstring, "Thinking blocks")."""
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
        turn_start, has_thinking, carries_tool_result = _facts(msg)
        if turn_start:
            turns += 1
        turns_before[i + 1] = turns
        tokens_before[i + 1] = tokens_before[i] + message_tokens(msg)
        last_changed[i + 1] = i if _shortens(msg, settings.max_chars) else last_changed[i]
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
        if count <= settings.keep:
            return 0, "few-turns", None
        prunable = (count - settings.keep) // settings.step * settings.step
        if prunable == 0:
            return 0, "step", None
        cutoff = starts[prunable]
        if last_changed[cutoff] < 0:
            return 0, "nothing-to-prune", cutoff
        estimate = math.ceil(tokens_before[k] * TOKEN_FACTOR)
        if settings.threshold > 0 and estimate < settings.threshold:
            return 0, "below-threshold", cutoff
        return last_changed[cutoff] + 1, "pruned", cutoff

    first = min(request_of.values())

    def in_force(k: int) -> tuple[int, str, int | None]:
        return edit_end(k if k <= first else max(first, last_free[k]))

    end, reason, cutoff = in_force(n)
    if end == 0:
        return PruneOutcome(messages, reason, settings, len(starts), cutoff)
    drop = {i for i, k in request_of.items() if in_force(k)[0] < end}

    out: list[Any] = []
    changed = pruned_blocks = dropped = removed = 0
    for i, msg in enumerate(messages):
        new = msg
        if i < end and _shortens(msg, settings.max_chars):
            shortened, count = _pruned_message(msg, settings.max_chars)
            if shortened is not None:
                new, pruned_blocks = shortened, pruned_blocks + count
        if i in drop:
            content = new["message"]["content"]
            kept = [b for b in content if _type_of(b) not in THINKING_TYPES]
            dropped += len(content) - len(kept)
            if not kept:
                removed += 1
                continue
            new = {**new, "message": {**new["message"], "content": kept}}
        if new is not msg:
            changed += 1
        out.append(new)
    return PruneOutcome(
        out, "pruned", settings, len(starts), cutoff, changed, pruned_blocks, dropped, removed, end
    )
