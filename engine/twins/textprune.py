"""Pure-Python twin of the injected ``_aggressiveTextPrune`` (``patcher/snippets/text_prune.js``).

This module holds the whole rule (below), the settings and the entry points (:func:`prune`,
:func:`prune_detailed`); the parts live in :mod:`engine.twins.textprune_estimate` (the token
estimate), :mod:`engine.twins.textprune_turns` (turns, cutoff, rounds), :mod:`engine.twins.textprune_shorten`
(the shortened texts) and :mod:`engine.twins.textprune_thinking` (the thinking-safe rule's plan).

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
    ``isCompactSummary`` not truthy (JavaScript truthiness, :func:`engine.javascript.js_truthy`), and a
    ``message`` object whose ``content`` is a string or a list holding at least one block whose
    type is not ``"tool_result"`` (an empty list, or a list of tool results only, does not
    start a turn; a block that is not an object counts as "not a tool_result").
    With ``n`` turn starts at indices ``starts``: ``P = n - KEEP``; ``P' = floor(P / STEP) *
    STEP``; when ``P' <= 0`` nothing is pruned, else ``cutoff = starts[P']``. Messages before
    ``cutoff`` are *older*; nothing at or after ``cutoff`` is ever touched.

Token estimate (:func:`engine.twins.textprune_estimate.estimate_tokens`, Claude Code 2.x's rough count)
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
    (``engine/api/thinking_check.py`` models the check). For a prefix ``messages[0:k]``, its *edit end*
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

Settled
    Leaving thinking out can change what the rule says of the result: the thinking block that
    held the edit end back may be gone, and where the round in progress holds turn starts after
    its free point (typed messages after a tool result), a second pass shortens more. Within a
    round Claude Code feeds the pruned list back, so the next request would be that second pass,
    and it can shorten text before the thinking of a reply in between: with a typed message
    between a tool use and its result (a history Claude Code does not write) the modelled check
    rejects that request. So while a pass leaves thinking out, the rule is applied again to its
    own result (:func:`settled`; each further pass empties a thinking message, so there are at
    most ``len(messages)`` of them). A second pass cannot change anything when no message from
    the edit end to the whole list's cutoff shortens (its cutoff is at most that one, and what
    is before the edit end is shortened already or never shortens): then it is skipped
    (``ThinkingPlan.settled``), as on most requests (of the passes that leave thinking out at
    the reply points of the shared sessions with thinking, 7,351 of 7,555). The result is a
    fixed point: ``prune(prune(x)) is prune(x)`` for every list.

Result
    The input is never mutated. The same list object is returned when nothing changed;
    otherwise a new list in which each changed message is a shallow copy with a new
    ``message`` dict and a new ``content`` (list or string), and every untouched message and
    block is the same object as in the input. Errors never escape: any exception returns the
    input.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.identity_memo import by_identity
from engine.twins.textprune_estimate import estimate_tokens
from engine.twins.textprune_shorten import shortened_message, shortens
from engine.twins.textprune_thinking import plan_thinking
from engine.twins.textprune_turns import (
    THINKING_TYPES,
    find_cutoff,
    message_facts,
    turn_starts,
    type_of,
)

__all__ = [
    "PruneOutcome",
    "PruneSettings",
    "prune",
    "prune_detailed",
    "prune_outcome",
    "settled",
    "without_thinking",
]

ENV_KEEP = "CLAUDE_TEXT_PRUNE_KEEP"
ENV_THRESHOLD = "CLAUDE_TEXT_PRUNE_THRESHOLD"
ENV_MAX_CHARS = "CLAUDE_TEXT_PRUNE_MAX_CHARS"
ENV_STEP = "CLAUDE_TEXT_PRUNE_STEP"
ENV_DISABLE = "CLAUDE_TEXT_PRUNE_DISABLE"
ENV_DEBUG = "CLAUDE_TEXT_PRUNE_DEBUG"
ENV_THINKING = "CLAUDE_TEXT_PRUNE_THINKING"
#: every variable that changes what the prune does (:meth:`PruneSettings.from_env` reads them;
#: ``CLAUDE_TEXT_PRUNE_DEBUG`` only writes a log)
ENV_NAMES = (ENV_KEEP, ENV_THRESHOLD, ENV_MAX_CHARS, ENV_STEP, ENV_DISABLE, ENV_THINKING)

#: ``CLAUDE_TEXT_PRUNE_THINKING`` values. Exactly ``"ignore"`` restores the pruning of 0.1.0
#: (thinking blocks are left where they are, whatever the cutoff); anything else is ``"drop"``.
THINKING_DROP = "drop"
THINKING_IGNORE = "ignore"

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


@dataclass(frozen=True)
class PruneOutcome:
    """What one call did (the Python side of the JavaScript debug line, minus the I/O).

    ``reason`` is one of ``"disabled"``, ``"not-a-list"``, ``"few-turns"`` (``n <= KEEP``),
    ``"step"`` (``P' == 0``), ``"nothing-to-prune"``, ``"below-threshold"``, ``"pruned"``,
    ``"error"``. ``cutoff`` is ``None`` unless a cutoff was found; ``messages`` is the input
    object itself unless ``reason == "pruned"``. Under the thinking-safe rule, ``edit_end`` is
    the edit end in force, ``thinking_dropped`` the blocks left out and ``messages_removed`` the
    messages left out with them (all 0 under the 0.1.0 rule); ``unsettled``: a pass that left
    thinking out and whose result a second pass may still change (:func:`settled`).
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
    unsettled: bool = False

    @property
    def changed(self) -> bool:
        return self.reason == "pruned"


def prune_detailed(messages: list[Any], env: Mapping[str, str] | None = None) -> PruneOutcome:
    """:func:`prune` with the bookkeeping: turns, cutoff, counts and why nothing happened."""
    return prune_outcome(messages, PruneSettings.from_env(env))


def prune_outcome(messages: list[Any], settings: PruneSettings) -> PruneOutcome:
    """:func:`prune_detailed` under settings already read."""
    try:
        return settled(_prune(messages, settings), settings)
    except Exception:
        return PruneOutcome(messages, "error")


def settled(
    outcome: PruneOutcome,
    settings: PruneSettings,
    again_pass: Callable[[list[Any], int], PruneOutcome] | None = None,
) -> PruneOutcome:
    """``outcome`` (one pass of the rule) with the rule applied again to its own result while
    a pass leaves thinking blocks out and may not be a fixed point (``unsettled``; module
    docstring, "Settled"): the result is a fixed point. The turns are the first pass's, the
    cutoff and edit end the last changing pass's, the counts the sums of the passes.
    ``again_pass(messages, k)``: the ``k``-th further pass (1, 2, ...) when the caller keeps
    state for it (``IncrementalPrune``), equal to one pass of the rule on ``messages``."""
    total = last = outcome
    # a pass that goes on emptied at least one thinking message: len + 1 passes at most
    for k in range(1, len(outcome.messages) + 2):
        if not last.changed or not last.unsettled:
            break
        messages = last.messages
        again = _prune(messages, settings) if again_pass is None else again_pass(messages, k)
        if not again.changed:
            break
        total = PruneOutcome(
            again.messages,
            "pruned",
            settings,
            total.turns,
            again.cutoff,
            total.messages_changed + again.messages_changed,
            total.blocks_pruned + again.blocks_pruned,
            total.thinking_dropped + again.thinking_dropped,
            total.messages_removed + again.messages_removed,
            again.edit_end,
            again.unsettled,
        )
        last = again
    return total


def prune(messages: list[Any], env: Mapping[str, str] | None = None) -> list[Any]:
    """Exactly what ``_aggressiveTextPrune(messages)`` returns under ``env`` (default ``os.environ``).

    Older texts longer than ``MAX_CHARS`` become their cut first line plus the marker only when
    that is shorter than the text (:func:`engine.twins.textprune_shorten.pruned_text`): nothing is made
    longer.
    The input is never mutated; the same list object comes back when nothing changed.
    """
    return prune_detailed(messages, env).messages


def _prune(messages: list[Any], settings: PruneSettings) -> PruneOutcome:
    if not isinstance(messages, list):
        return PruneOutcome(messages, "not-a-list", settings)
    if settings.disabled:
        return PruneOutcome(messages, "disabled", settings)
    starts = turn_starts(messages)
    if settings.thinking == THINKING_DROP and any(message_facts(m)[1] for m in messages):
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
        shortened, count = shortened_message(messages[index], settings.max_chars)
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


# --------------------------------------------------------------------------- thinking


@by_identity
def without_thinking(msg: Any) -> tuple[Any, int]:
    """``msg`` without its thinking blocks (``None`` when nothing else is left) and how many
    went; the same copy for the same message (see ``shortened_message``)."""
    content = msg["message"]["content"]
    kept = [b for b in content if type_of(b) not in THINKING_TYPES]
    if not kept:
        return None, len(content)
    return {**msg, "message": {**msg["message"], "content": kept}}, len(content) - len(kept)


def _prune_thinking(
    messages: list[Any], settings: PruneSettings, starts: list[int]
) -> PruneOutcome:
    """The thinking-safe rule (module docstring, "Thinking blocks"): the plan of
    :func:`engine.twins.textprune_thinking.plan_thinking`, applied."""
    plan = plan_thinking(
        messages,
        starts,
        keep=settings.keep,
        step=settings.step,
        threshold=settings.threshold,
        max_chars=settings.max_chars,
    )
    end, drop = plan.end, plan.drop
    if end == 0:
        return PruneOutcome(messages, plan.reason, settings, len(starts), plan.cutoff)
    out: list[Any] = []
    changed = pruned_blocks = dropped = removed = 0
    for i, msg in enumerate(messages):
        new = msg
        if i < end and shortens(msg, settings.max_chars):
            shortened, count = shortened_message(msg, settings.max_chars)
            if shortened is not None:
                new, pruned_blocks = shortened, pruned_blocks + count
        if i in drop:
            without, count = without_thinking(new)
            dropped += count
            if without is None:
                removed += 1
                continue
            new = without
        if new is not msg:
            changed += 1
        out.append(new)
    return PruneOutcome(
        out,
        "pruned",
        settings,
        len(starts),
        plan.cutoff,
        changed,
        pruned_blocks,
        dropped,
        removed,
        end,
        not plan.settled,
    )
