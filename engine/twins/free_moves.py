"""The ``paid`` policy's one stateful rule: a *free move* where the cache breaks anyway.

:mod:`engine.twins.policy` decides from the message list alone, so it cannot know that a
request's prefix changed anyway: the text prune's step rewrote an older message, a
micro-compaction emptied an old tool result, the user rewound the conversation. Such a request
rewrites the prompt cache from the first changed message whatever the clearing does, so a move
of the cleared part costs nothing extra there. The hindsight optimum (``engine/replay/oracle.py``)
puts its moves on exactly those requests. ``bench/oracle_gap.py`` measures the rule with it and,
under ``--env CLAUDE_CTX_CLEAR_FREE=0``, without it (``docs/clearing-defaults.md``).

The rule, per conversation (:class:`Conversation`, the twin of the injected JavaScript's and the
gateway's memory):

* each request's messages are reduced to a *fingerprint*: per message its role and its size
  (:func:`message_size`: the policy's characters, without any ``cache_control`` mark, which
  Claude Code moves to the newest messages on every request);
* the request *broke* the cache when a previous request of the conversation is remembered, both
  lists start with the same message (else it is another conversation, or this one after a
  compaction: nothing is held) and the new list is shorter than the previous one, or differs
  from it anywhere before its last message (the previous last message is the one Claude Code
  re-marks; what follows it is new);
* on a break, when the tool uses the edit may clear (all but KEEP and the round in progress,
  ``limit``) are more than the ``paid`` rule clears and more than the last free move cleared,
  the edit clears ``limit``, and that boundary is held (*forced*) on the later requests until
  the list holds fewer tool uses than it (a compaction);
* the edit then clears ``max(paid, min(forced, limit))``.

The *near move* (:func:`near_level`, :func:`is_near`): the memory also keeps the prompt tokens the
reply to the conversation's last request reported (its usage's input, cache write and cache read
tokens; :meth:`Conversation.observe`), the real size Claude Code's auto-compaction counts, which
the message list does not give. When it reached Claude Code's threshold (the window less its
reserve of 33,000) less ``CLAUDE_CTX_CLEAR_MARGIN`` (default :data:`DEFAULT_MARGIN`; 0: never), the
next request of the conversation (not another one) clears ``limit`` and holds it, as a free move
does, where that frees at least the margin (:func:`near_need`: in tokens of 4 characters, beyond
the larger of the paid rule's boundary and the one held): unlike a break or an expired cache, a
near move is paid for, and one for a result or two only put the compaction off by a request. The
prompt is read once.

The *expiry move* (:func:`is_expired`): the memory also keeps the time of the conversation's last
request. A request that comes more than the prompt cache's lifetime after it (5 minutes, or an
hour where the system prompt's breakpoints say ``ttl: "1h"``: :func:`lifetime_ms`), plus
:data:`EXPIRY_SLACK_MS` for the request's way to the API, finds nothing cached: it writes its
whole prompt whatever the edit says, so it clears ``limit`` and holds it, as a free move does.
Times are integer milliseconds (the injected code's ``Date.now()``, the gateway's clock, a
replay's transcript timestamps).

The memory hands its last move (free, near or expiry) to the stateless rule's walk
(:meth:`Conversation.paid_move`, :func:`engine.twins.policy.paid_boundary`'s ``moved``), which takes
it as its own move there: the rule then does not pay for a second move soon after one it did not
make.

Off with ``CLAUDE_CTX_CLEAR_FREE=0`` (also ``false``, ``no``, ``off``): the stateless ``paid``
rule alone (no memory: no free move, no near move). Integers and equality only, so that JavaScript and Python agree exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine.api.context_management import ClearToolUses
from engine.javascript import utf16_len
from engine.twins.context_clear import (
    ENV_FREE,
    ENV_MARGIN,
    FREE_OFF,
    _env_int,
    trailing_results,
    window_threshold,
)
from engine.twins.policy import (
    DEFAULT_CEILING,
    DEFAULT_PATIENCE,
    WRITE_EXTRA_X20,
    WRITE_EXTRA_X20_1H,
    assistant_tool_uses,
    block_size,
    paid_boundary,
    value_size,
)

MARK = "cache_control"
MARK_LEN = utf16_len(MARK)

Fingerprint = list[tuple[Any, int]]


DEFAULT_MARGIN = 10_000
EXPIRY_5M_MS = 300_000  # the 5-minute cache's lifetime after an entry's last use
EXPIRY_1H_MS = 3_600_000  # the 1-hour cache's
EXPIRY_SLACK_MS = 10_000  # the request's way to the API: a longer gap than this is surely past


def lifetime_ms(extra: int) -> int:
    """The cache lifetime of a request whose write costs ``extra`` (:func:`write_extra`: the
    1-hour cache's where the system prompt's breakpoints say ``ttl: "1h"``), in milliseconds."""
    return EXPIRY_1H_MS if extra == WRITE_EXTRA_X20_1H else EXPIRY_5M_MS


def is_expired(at: int | None, now: int | None, lifetime: int) -> bool:
    """Whether a request at ``now`` (ms; ``None``: unknown) finds the conversation's cache expired:
    its last request, at ``at`` (``None``: none remembered), came more than ``lifetime`` plus
    :data:`EXPIRY_SLACK_MS` before."""
    return at is not None and now is not None and now - at > lifetime + EXPIRY_SLACK_MS


def margin_from_env(env: Mapping[str, str]) -> int:
    """``CLAUDE_CTX_CLEAR_MARGIN``: tokens under Claude Code's auto-compact threshold from which a
    reply's prompt makes the next request a near move (0: never); else :data:`DEFAULT_MARGIN`."""
    value = _env_int(env, ENV_MARGIN, 0)
    return DEFAULT_MARGIN if value is None else value


def free_from_env(env: Mapping[str, str]) -> bool:
    """``CLAUDE_CTX_CLEAR_FREE``: on unless ``0``, ``false``, ``no`` or ``off`` (blanks around
    and case ignored)."""
    return (env.get(ENV_FREE) or "").strip().lower() not in FREE_OFF


def stable_block_size(block: Any) -> int:
    """:func:`engine.twins.policy.block_size` without the block's ``cache_control`` entry (a
    text, thinking, media or tool_result block's size never counts it; any other block's
    counts its keys and values)."""
    size = block_size(block)
    if isinstance(block, dict) and MARK in block:
        kind = block.get("type")
        if kind not in ("text", "thinking", "image", "document", "tool_result"):
            size -= MARK_LEN + value_size(block[MARK], 1)
    return size


def message_size(message: Any) -> int:
    """A message's size as the free-move rule compares it: its content's characters, blocks as
    :func:`stable_block_size` (a string content: its length; anything else 0)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return utf16_len(content)
    if not isinstance(content, list):
        return 0
    return sum(stable_block_size(b) for b in content)


def role_of(message: Any) -> Any:
    """A message's role as the rule compares it (``None`` for a value that is not an object)."""
    return message.get("role") if isinstance(message, dict) else None


def fingerprint(messages: Sequence[Any]) -> Fingerprint:
    return [(role_of(m), message_size(m)) for m in messages]


NEW, GREW, BROKE = "new", "grew", "broke"
"""How a request's list follows the conversation's previous one (:func:`change`)."""


def change(previous: Fingerprint | None, current: Fingerprint) -> str:
    """:data:`NEW` when no previous request is remembered, or either list is empty, or their
    first messages differ (another conversation, or this one after a compaction, which replaces
    the first message by its summary); else :data:`BROKE` when ``current`` is shorter than
    ``previous`` or differs from it before ``previous``'s last message (it rewrites the cache
    anyway); else :data:`GREW`."""
    if not previous or not current or current[0] != previous[0]:
        return NEW
    n = len(previous)
    return BROKE if len(current) < n or current[: n - 1] != previous[: n - 1] else GREW


def near_need(margin: int) -> int:
    """The characters a near move must free beyond what the edit clears without it: the
    ``margin`` itself, in tokens of 4 characters as the paid rule counts them (0: no near move).
    A move for a result or two rewrote the whole prompt on every request past the level, each
    putting the compaction off by a request (a synthetic session whose thinking fills the
    margin: +58% against unpatched, with the compaction where it came anyway)."""
    return 4 * margin if margin > 0 else 0


def _frees(gains: Sequence[int], base: int, limit: int) -> int:
    """Characters clearing uses ``base`` to ``limit`` frees (-1: ``gains`` does not reach)."""
    return gains[limit] - gains[base] if limit < len(gains) else -1


def free_step(
    how: str,
    forced: int,
    uses: int,
    limit: int,
    paid: int,
    near: bool = False,
    expired: bool = False,
    gains: Sequence[int] = (),
    need: int = 0,
) -> tuple[int, int, bool]:
    """The rule for one request told :func:`change` ``how``: (tool uses the edit clears, the
    boundary held after it, whether a move was made). ``forced``: the boundary held before;
    ``uses``: the list's tool uses, of which the edit may clear ``limit``; ``paid``: what the
    stateless rule clears; ``near``: the previous reply's prompt reached the near level (the
    near move, :func:`is_near`); ``expired``: the cache expired (the expiry move,
    :func:`is_expired`). A near move must free at least ``need`` characters (:func:`near_need`)
    beyond what the edit clears without it: ``gains``, the prefix sums of what clearing the
    oldest uses frees (:func:`engine.twins.policy.paid_boundary`'s, ``PolicyScan.gains``; without
    them, as in the JavaScript, no near move). Pure:
    :class:`Conversation` and the gateway's kept conversations (``gateway.policy``) hold
    ``forced`` each their own way."""
    if how == NEW or uses < forced:  # another conversation, or a shorter one
        forced = 0
    base = max(paid, forced)
    near = near and (need <= 0 or _frees(gains, base, limit) >= need)
    moved = limit > base and (how == BROKE or (how == GREW and (near or expired)))
    if moved:
        forced = limit
    return max(paid, min(forced, limit)), forced, moved


def free_keep(
    how: str,
    forced: int,
    uses: int,
    floor: int,
    edit_keep: int,
    paid_keep: int,
    near: bool = False,
    expired: bool = False,
    gains: Sequence[int] = (),
    need: int = 0,
) -> tuple[int, int, bool]:
    """:func:`free_step` as a keep: (the keep sent, the boundary held after, whether a move
    was made). ``paid_keep``: the stateless rule's keep; ``floor``: the list's tool results
    after its last assistant message (the round in progress); ``edit_keep``: KEEP."""
    limit = max(0, uses - max(edit_keep, floor))
    paid = max(0, uses - paid_keep)
    cleared, forced, moved = free_step(how, forced, uses, limit, paid, near, expired, gains, need)
    return max(uses - cleared, floor, edit_keep), forced, moved


def near_level(model: str, betas: Sequence[str], margin: int, threshold: int | None = None) -> int:
    """The prompt (tokens) from which a reply makes the next request a near move: Claude Code's
    auto-compact threshold less ``margin``; 0 (never) when ``margin`` is 0. ``threshold``: the
    threshold where the client's build is known to be a native one (the engine's for its
    version, model and environment: :func:`engine.claude_code.thresholds.near_threshold`, the
    gateway's :func:`gateway.window.near_threshold`). Else (the ``cli.js`` builds, the rule of
    the JavaScript ``apply`` injects) the window less its reserve
    (:func:`engine.twins.context_clear.window_threshold`: 20,000 output + 13,000 buffer; the
    window 1,000,000 for a ``[1m]`` model or a ``context-1m`` beta, else 200,000).

    The native builds needed their own: from 2.1.195 some models run at a 1M window with
    neither mark (``claude-opus-5``, ...), and without a configured window a build compacts
    only once the API refuses the prompt, at the window, not 33,000 under it. A level at
    157,000 there, once a conversation's uncleared part alone passed it, made every request a
    near move, each a cache rewrite, for a compaction that was not coming (the shared 2.1.217
    session ``6c0a282a``: +21.5% cost against unpatched, 112 cache breaks with clearing alone)."""
    if margin <= 0:
        return 0
    if threshold is not None:
        return max(0, threshold - margin)
    return window_threshold(model, betas) - margin


def is_near(prompt: int | None, level: int) -> bool:
    """Whether the previous reply's prompt (``None``: not seen) reached ``level`` (0: never)."""
    return level > 0 and prompt is not None and prompt >= level


class Conversation:
    """What the rule remembers of one conversation: the last request's fingerprint, the
    boundary the last move set (held until a compaction), the prompt tokens of the reply
    to the last request (:meth:`observe`; used once, by the next request), and the last
    request's time (:meth:`asked`)."""

    __slots__ = ("at", "forced", "lifetime", "moved", "moves", "now", "previous", "prompt")

    def __init__(self) -> None:
        self.at: int | None = None  # the last request's time (ms)
        self.now: int | None = None  # the coming request's (:meth:`asked`; None: unknown)
        self.lifetime = EXPIRY_5M_MS  # the coming request's cache lifetime
        self.previous: Fingerprint | None = None
        self.forced = 0  # tool uses the last move cleared
        self.moves = 0  # moves made (free and near)
        self.prompt: int | None = None  # the last reply's prompt tokens, until the next request
        # (the index of the last message of the request the last move was made on, forced)
        self.moved: tuple[int, int] | None = None

    def observe(self, prompt: int) -> None:
        """The reply to the last request reported ``prompt`` tokens of prompt (its usage's
        input, cache write and cache read tokens)."""
        self.prompt = prompt

    def asked(self, now: int | None, lifetime: int = EXPIRY_5M_MS) -> None:
        """The coming request is sent at ``now`` (ms) and its cache lives ``lifetime`` ms
        (:func:`lifetime_ms`); :meth:`keep` reads both."""
        self.now, self.lifetime = now, lifetime

    def keep(
        self,
        how: str,
        prints: Fingerprint,
        uses: int,
        floor: int,
        edit_keep: int,
        paid_keep: int,
        level: int = 0,
        gains: Sequence[int] = (),
        need: int = 0,
    ) -> int:
        """The keep sent: ``paid_keep`` (the stateless rule's) lowered by a free or near move.
        ``uses``: the list's tool uses; ``floor``: its tool results after the last assistant
        message (the round in progress); ``edit_keep``: KEEP; ``level``: :func:`near_level`;
        ``gains`` and ``need``: what a near move would free and must (:func:`free_step`)."""
        near = is_near(self.prompt, level)
        expired = is_expired(self.at, self.now, self.lifetime)
        self.previous, self.prompt = prints, None
        if self.now is not None:
            self.at, self.now = self.now, None
        keep, self.forced, moved = free_keep(
            how, self.forced, uses, floor, edit_keep, paid_keep, near, expired, gains, need
        )
        self.moves += moved
        if moved:
            self.moved = (len(prints) - 1, self.forced)
        elif not self.forced:
            self.moved = None
        return keep

    def paid_move(self, how: str, uses: int) -> tuple[int, int] | None:
        """The last move for the stateless rule's walk of a request told :func:`change` ``how``
        with ``uses`` tool uses (:func:`engine.twins.policy.paid_boundary`'s ``moved``): none
        for another conversation or a list below the boundary held (both end the hold)."""
        if how == NEW or uses < self.forced:
            return None
        return self.moved


def free_edit(
    conversation: Conversation,
    edit: ClearToolUses,
    messages: Sequence[Mapping[str, Any]],
    ceiling: int = DEFAULT_CEILING,
    patience: int = DEFAULT_PATIENCE,
    preceding: int = 0,
    rest: int = 0,
    extra: int = WRITE_EXTRA_X20,
    level: int = 0,
    now: int | None = None,
    need: int = 0,
) -> ClearToolUses:
    """The edit the injected JavaScript sends with ``messages`` under the ``paid`` policy with
    the free move on: :func:`engine.twins.policy.paid_edit`'s, lowered by a free, near or expiry
    move of ``conversation`` (which this call updates: call it once per request, in order, and
    :meth:`Conversation.observe` each reply). ``level``: :func:`near_level`; ``need``:
    :func:`near_need`; ``now``: the request's time in ms (``None``: unknown, no expiry move; the
    cache's lifetime from ``extra``)."""
    if now is not None:
        conversation.asked(now, lifetime_ms(extra))
    prints = fingerprint(messages)
    uses = assistant_tool_uses(messages)
    how = change(conversation.previous, prints)
    moved = conversation.paid_move(how, uses)
    cleared, gains = paid_boundary(messages, edit, ceiling, patience, preceding, rest, extra, moved)
    trailing = trailing_results(messages)
    keep = conversation.keep(
        how,
        prints,
        uses,
        trailing,
        edit.keep,
        max(uses - cleared, trailing, edit.keep),
        level,
        gains,
        need,
    )
    return edit if keep == edit.keep else replace(edit, keep=keep)
