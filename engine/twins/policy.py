"""Python twin of the injected JavaScript's online clearing policy ``paid`` (the default).

The cleared part of the prompt (the oldest tool uses, cleared by ``clear_tool_uses_20250919``)
moves only when the move pays for the cache it rewrites. ``docs/oracle.md`` derives the rule;
in short, with the prices of :mod:`engine.api.prompt_cache`:

* a move rewrites what stays of the prompt after the system prompt's cache breakpoint (the API
  finds no other entry before the change): the messages kept, ``K - C`` (``K`` the messages
  kept now, ``C`` what the move clears), and ``U``, the system prompt's blocks after its last
  ``cache_control`` (:func:`uncached_system`; what Claude Code prepends to the messages is
  among the messages): ``1.25 × (K - C + U)`` written instead of ``0.1 ×`` that read, an extra
  ``1.15 × (K - C + U)`` (in a session that caches for an hour, a write costs ``2.0 ×``: an
  extra ``1.9 × (K - C + U)``; the request says which, :func:`write_extra`);
* every later request then reads ``C`` tokens fewer: ``0.1 × C`` each, ``0.1 × C × R`` over the
  ``R`` requests until the next move. A move pays when ``0.1 × C × R ≥ 1.15 × (K - C)``.
* ``R`` is not known at request time. The policy puts the reads the clearable part *already*
  cost since the last move in its place (the deterministic ski-rental rule: pay rent until the
  rent paid equals the price of buying): it moves when ``Σ 0.1 × C_j ≥ PATIENCE × 1.15 × (K - C + U)``
  over the requests ``j`` since the last move, which never costs more than twice the best move
  time for one move whatever ``R`` turns out to be.
* Whatever it costs, the policy moves when the messages kept reach ``CEILING`` tokens of 4
  characters, so that Claude Code's count stays below its auto-compact threshold (the system
  prompt and tools are left out: counting them, 110-125K, cost more on the real sessions than
  90K of messages alone, for no compaction fewer). The default, 90,000, was measured against
  the 167,000 threshold of a 200K window; for a native client whose own threshold the gateway
  knows (:func:`engine.claude_code.thresholds.near_threshold`) it is scaled to that threshold
  (:func:`ceiling_for`): at a 1M window's 1,000,001, 90,000 is a tenth of the way, and where the
  messages that cannot be cleared pass it, every request moves, each a rewrite of the whole
  prompt, for a compaction that is not coming (a never-seen 2.1.215 session, ``claude-fable-5``:
  48 rewrites, +249% against unpatched; scaled, 4 and -11%). The injected JavaScript, which
  knows no build's threshold, scales it the same way to the one the request's window gives
  (:func:`ceiling_from_env`: a ``[1m]`` model or a ``context-1m`` beta).
* A move the ceiling forces must free at least a tenth of the ceiling (:data:`CEILING_SHARE`;
  9,000 tokens at the default): where what can be cleared comes a few results at a time and the
  rest of the messages stays past the ceiling (a conversation of text or thinking, or a replayed
  file that starts mid-conversation), a move on every request rewrote the whole prompt on every
  request, for a compaction it only put off (a never-seen 2.1.14 session that starts at 149,000
  tokens: 20 rewrites in a row and the compaction 16 requests later anyway, +210% against
  unpatched; with the share: the compaction where unpatched has it, -14%). The moves it still
  makes clear the results gathered since the last one in one rewrite.

Stateless: the injected code sees one request at a time, so the policy is replayed over the
message list itself (its stateful additions, the free move where the cache breaks anyway and the
near move where the last reply's prompt neared Claude Code's threshold, are
:mod:`engine.twins.free_moves`, which hands the walk its last move as ``moved``; the replays'
policy object, :mod:`engine.twins.conversation_policy`). Every earlier request is a *request point* (a user message followed by an
assistant one: the list the model answered then), the current request the last; the same
list always gives the same edit and a list that only grew repeats the decisions taken before. Sizes are characters (:func:`value_size`: no serialisation, which
would cost the injected code ~10 ms per request), the ceiling is in tokens of 4 characters.
Integers only, so that JavaScript and Python agree exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine.api.context_editing import blocks_of, is_block
from engine.api.context_management import ClearToolUses
from engine.api.previous_thinking import thinking_chars
from engine.identity_memo import by_identity
from engine.javascript import utf16_len
from engine.twins.context_clear import (
    DEFAULT_POLICY,
    ENV_CEILING,
    ENV_PATIENCE,
    ENV_POLICY,
    POLICIES,
    _env_int,
    policy_from_env,
    trailing_results,
    window_threshold,
)

__all__ = [
    "CEILING_THRESHOLD",
    "DEFAULT_POLICY",
    "ENV_CEILING",
    "ENV_PATIENCE",
    "ENV_POLICY",
    "POLICIES",
    "ceiling_for",
    "ceiling_set",
    "move_due",
    "paid_edit",
    "policy_from_env",
    "thinking_size",
    "uncached_system",
    "write_extra",
]
DEFAULT_CEILING = 90_000  # tokens of 4 characters of the messages kept
CEILING_SHARE = 10  # a move the ceiling forces frees at least 1/CEILING_SHARE of the ceiling
DEFAULT_PATIENCE = 100  # percent of the break-even rent
WRITE_EXTRA_X20 = 23  # 20 × (1.25 - 0.1): the extra price of writing instead of reading
WRITE_EXTRA_X20_1H = 38  # 20 × (2.0 - 0.1): the same for the 1-hour cache
READ_X20 = 2  # 20 × 0.1


CEILING_THRESHOLD = 167_000  # the auto-compact threshold DEFAULT_CEILING was measured against


def ceiling_from_env(env: Mapping[str, str], model: str = "", betas: Sequence[str] = ()) -> int:
    """The ceiling of a request whose client's threshold is not known (the injected
    JavaScript's, and the gateway's for an unknown client): the knob's, else
    :data:`DEFAULT_CEILING` scaled to the threshold the request's window gives
    (:func:`engine.twins.context_clear.window_threshold`: 167,000 at 200K, where it is 90,000;
    967,000 for a ``[1m]`` model or a ``context-1m`` beta, 521,138)."""
    return ceiling_for(env, window_threshold(model, betas))


def ceiling_set(env: Mapping[str, str]) -> int | None:
    """``CLAUDE_CTX_CLEAR_CEILING`` when it holds a valid value (then it is never scaled); else
    None (the default, scaled to the client's threshold)."""
    return _env_int(env, ENV_CEILING, 1)


def ceiling_for(env: Mapping[str, str], threshold: int | None = None) -> int:
    """``CLAUDE_CTX_CLEAR_CEILING`` when set; else :data:`DEFAULT_CEILING`, scaled to
    ``threshold`` (the client's auto-compact threshold; None: not scaled) against
    :data:`CEILING_THRESHOLD`, rounded half up, at least 1."""
    value = ceiling_set(env)
    if value is not None:
        return value
    if threshold is None:
        return DEFAULT_CEILING
    return max(1, (2 * DEFAULT_CEILING * threshold + CEILING_THRESHOLD) // (2 * CEILING_THRESHOLD))


def patience_from_env(env: Mapping[str, str]) -> int:
    value = _env_int(env, ENV_PATIENCE, 0)
    return DEFAULT_PATIENCE if value is None else value


MEDIA_CHARS = 8000  # an image or document
MAX_DEPTH = 10


def value_size(value: Any, depth: int = 0) -> int:
    """Characters of a JSON value as the policy counts them (no serialisation): a string its
    UTF-16 length, a number / boolean / null 1, containers their keys and values, 10 levels
    deep at most."""
    if isinstance(value, str):
        return utf16_len(value)
    if not isinstance(value, (dict, list)):
        return 1
    if depth >= MAX_DEPTH:
        return 0
    if isinstance(value, list):
        return sum(value_size(v, depth + 1) for v in value)
    return sum(utf16_len(str(k)) + value_size(v, depth + 1) for k, v in value.items())


def _text_len(value: Any) -> int:
    return utf16_len(value) if isinstance(value, str) else 0


def thinking_size(block: Mapping[str, Any]) -> int:
    """Characters of a ``thinking`` block: its text; where the text is omitted (the request's
    ``thinking.display`` ``"omitted"``, the native builds' default: an empty string and the
    signature), 3 per 4 characters of its ``signature``. The signature is the base64 of the
    encrypted thinking, which the API counts in the prompt of every later request of a model
    that keeps earlier thinking (:mod:`engine.api.previous_thinking`); the 3/4 is the engine's
    measured rule for the thinking behind a block, :func:`engine.api.previous_thinking.thinking_chars`,
    which this calls. Sized by its empty text, such a block
    counted 0, and the policy took a move's rewrite for a fraction of what it is (a never-seen
    2.1.205 session: 9,300 tokens estimated, 43,303 written). A shown text (a summary, shorter
    than the thinking behind it) stays its size: the defaults were measured with it."""
    return _text_len(block.get("thinking")) or thinking_chars(block)


@by_identity
def result_size(content: Any) -> int:
    """Characters of a ``tool_result``'s content."""
    if isinstance(content, str):
        return utf16_len(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            total += _text_len(b.get("text"))
        elif kind in ("image", "document"):
            total += MEDIA_CHARS
    return total


@by_identity
def block_size(block: Any) -> int:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return _text_len(block.get("text"))
    if kind == "thinking":
        return thinking_size(block)
    if kind in ("image", "document"):
        return MEDIA_CHARS
    if kind == "tool_result":
        return result_size(block.get("content"))
    return value_size(block)


@by_identity
def content_size(content: Any) -> int:
    if isinstance(content, str):
        return utf16_len(content)
    if not isinstance(content, list):
        return 0
    return sum(block_size(b) for b in content)


@by_identity
def _input_size(use: Mapping[str, Any]) -> int:
    return value_size(use.get("input"), 1)


def _use_gain(use: Mapping[str, Any], result: Any, inputs: bool) -> int:
    """Characters clearing one tool use frees: its result's content, its input."""
    gain = result_size(result.get("content")) if isinstance(result, Mapping) else 0
    return gain + (_input_size(use) if inputs else 0)


def uncached_system(system: Any, size: Callable[[Any], int] = block_size) -> int:
    """Characters of the system prompt after its last ``cache_control`` block: what a cache break
    writes again of it (the API reads the cache only at a breakpoint). A string, or blocks none
    of which is marked, count whole; anything else 0. Block sizes as ``size`` (:func:`block_size`;
    the gateway's walk passes one without the identity memo)."""
    if isinstance(system, str):
        return utf16_len(system)
    if not isinstance(system, list):
        return 0
    start = 0
    for i, b in enumerate(system):
        if isinstance(b, dict) and isinstance(b.get("cache_control"), dict):
            start = i + 1
    return sum(size(b) for b in system[start:])


def write_extra(system: Any) -> int:
    """:data:`WRITE_EXTRA_X20_1H` when the request caches for an hour (a system block's
    ``cache_control`` has ``ttl: "1h"``: Claude Code marks every breakpoint of a request with
    the same lifetime), else :data:`WRITE_EXTRA_X20`."""
    if isinstance(system, list):
        for b in system:
            mark = b.get("cache_control") if isinstance(b, dict) else None
            if isinstance(mark, dict) and mark.get("ttl") == "1h":
                return WRITE_EXTRA_X20_1H
    return WRITE_EXTRA_X20


def _clears_input(edit: ClearToolUses, name: Any) -> bool:
    ci = edit.clear_tool_inputs
    return ci if isinstance(ci, bool) else name in ci


def move_due(
    kept: int, free: int, rent: int, ceiling4: int, extra_patience: int, rest: int
) -> bool:
    """Whether the ``paid`` policy moves the cleared part at a request point (the rule of the
    module's docstring; :func:`paid_boundary` and the resumable walk,
    :class:`engine.twins.policy_scan.PolicyScan`, both ask it): ``kept`` characters of messages
    after the boundary, ``free`` of them clearable now, ``rent`` the clearable characters summed
    over the request points since the last move (this one's included), ``ceiling4`` the ceiling in
    characters, ``extra_patience`` the write's extra price x 20 times PATIENCE, ``rest`` the system
    prompt's characters a move writes again. At the ceiling, a move that frees a tenth of it;
    else, one whose rent paid for the rewrite."""
    if kept >= ceiling4 and CEILING_SHARE * free >= ceiling4:
        return True
    return READ_X20 * rent * 100 >= extra_patience * (kept - free + rest)


def paid_boundary(
    messages: Sequence[Mapping[str, Any]],
    edit: ClearToolUses,
    ceiling: int = DEFAULT_CEILING,
    patience: int = DEFAULT_PATIENCE,
    preceding: int = 0,
    rest: int = 0,
    extra: int = WRITE_EXTRA_X20,
    moved: tuple[int, int] | None = None,
) -> tuple[int, list[int]]:
    """(how many of the oldest tool uses the ``paid`` policy clears with ``messages``, the
    prefix sums of the characters clearing the oldest uses frees: entry ``n`` for the first
    ``n``, which the near move weighs, :func:`engine.twins.free_moves.free_step`).

    ``preceding``: estimated tokens of history before the list (0 for a real request; a replay
    passes the history its file does not hold, which the client would send as messages).
    ``rest``: characters of the prompt before the messages that a move writes again
    (:func:`uncached_system` of the request's system prompt). ``extra``: 20 × the extra price
    of a write over a read (:func:`write_extra` of the request's system prompt). ``moved``:
    (the index of a message, a boundary): the conversation's memory moved the cleared part to
    that boundary on the request whose list ended with that message (a free or near move,
    :mod:`engine.twins.free_moves`); the walk takes it as its own move there, after that
    message's own decision (the boundary, if higher, and the rent restarted), so that the rule
    does not pay for a second move soon after one it did not make."""
    results: dict[Any, Any] = {}
    for m in messages:
        if m.get("role") == "user":
            for b in blocks_of(m):
                if is_block(b, "tool_result"):
                    results[b.get("tool_use_id")] = b
    gains = [0]  # prefix sums of the characters clearing the oldest uses frees
    total = 4 * preceding  # characters of the messages so far
    trailing = 0  # tool results since the last assistant message
    cleared = 0  # the boundary: tool uses cleared
    rent = 0  # Σ clearable characters over the requests since the last move
    roles = [m.get("role") for m in messages]
    last = len(messages) - 1
    # the role of the next user or assistant message after each one
    following: list[Any] = [None] * len(messages)
    nxt: Any = None
    for i in range(last, -1, -1):
        following[i] = nxt
        if roles[i] in ("user", "assistant"):
            nxt = roles[i]
    for i, m in enumerate(messages):
        role = roles[i]
        total += content_size(m.get("content")) if role in ("user", "assistant") else 0
        if role == "assistant":
            trailing = 0
            for b in blocks_of(m):
                if is_block(b, "tool_use"):
                    name = b.get("name")
                    gain = 0
                    if name not in edit.exclude_tools:
                        gain = _use_gain(b, results.get(b.get("id")), _clears_input(edit, name))
                    gains.append(gains[-1] + gain)
        else:
            if role == "user":
                trailing += sum(1 for b in blocks_of(m) if is_block(b, "tool_result"))
            if i == last or (role == "user" and following[i] == "assistant"):
                # a request point: the list up to here was (or is) sent
                limit = len(gains) - 1 - max(edit.keep, trailing)
                if limit > cleared:
                    free = gains[limit] - gains[cleared]
                    kept = total - gains[cleared]
                    rent += free
                    if move_due(kept, free, rent, 4 * ceiling, extra * patience, rest):
                        cleared = limit
                        rent = 0
        if moved is not None and i == moved[0] and moved[1] > cleared:
            cleared, rent = moved[1], 0  # the memory's move there, taken as the walk's own
    return cleared, gains


def assistant_tool_uses(messages: Sequence[Mapping[str, Any]]) -> int:
    """The ``tool_use`` blocks of the list's assistant messages: what the edit's ``keep`` counts."""
    return sum(
        1
        for m in messages
        if m.get("role") == "assistant"
        for b in blocks_of(m)
        if is_block(b, "tool_use")
    )


def paid_edit(
    edit: ClearToolUses,
    messages: Sequence[Mapping[str, Any]],
    ceiling: int = DEFAULT_CEILING,
    patience: int = DEFAULT_PATIENCE,
    preceding: int = 0,
    rest: int = 0,
    extra: int = WRITE_EXTRA_X20,
    moved: tuple[int, int] | None = None,
) -> ClearToolUses:
    """The edit the injected JavaScript sends with ``messages`` under the ``paid`` policy: it
    keeps all but the policy's boundary (never fewer than KEEP or the round in progress).
    ``rest``: :func:`uncached_system` of the request's system prompt; ``extra``:
    :func:`write_extra` of it; ``moved``: see :func:`paid_boundary`."""
    n = assistant_tool_uses(messages)
    cleared, _ = paid_boundary(messages, edit, ceiling, patience, preceding, rest, extra, moved)
    keep = max(n - cleared, trailing_results(messages), edit.keep)
    return edit if keep == edit.keep else replace(edit, keep=keep)
