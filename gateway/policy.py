"""The clearing policy the gateway runs: the ``keep`` of the edit, fitted to each request's messages.

The same rule as the injected JavaScript and its twin, with the same knobs
(``CLAUDE_CTX_CLEAR_POLICY``: ``paid`` by default, :mod:`engine.twins.policy`; ``fixed``: every
``CLAUDE_CTX_CLEAR_STEP`` tool uses, :func:`engine.twins.context_clear.edit_for_request`), and
the same edit for the same body (``tests/differential/test_gateway_policy_vs_node.py``).

Speed. The rule walks the whole message list (~600 KB for a conversation near its threshold);
parsing it and walking it costs ~10 ms in Python, on every request. But a conversation's list
only grows: each request repeats the previous one's messages byte for byte and adds a few. So
the gateway keeps, per conversation, the last body and the walk's state after each of its
messages (:class:`engine.twins.policy_scan.PolicyScan`) with each message's byte offset. A new
body is matched against the kept ones (``bytes.startswith``, a memcmp: the longest prefix of
whole messages both bodies share, found by a binary search over the offsets); only the
messages after it are decoded (``json``'s ``raw_decode``, from that offset) and walked. The
first request of a conversation (or one that rewrote its history: a compaction, a resumed
session) pays the whole walk once. Claude Code marks the newest message for the cache and
takes the mark off on the next request: the kept last message (its value kept) is shared too
when its new bytes are its compact writing without the marks a walk never counts
(:func:`engine.twins.policy_scan.unmarked`), so a request parses and walks its new messages
only, whatever the conversation's length (what grows with it is the memcmp).

The paid rule also weighs what a move writes again of the system prompt (its blocks after the
last ``cache_control``: :func:`engine.twins.policy_scan.system_rest`) and the price of a write
(the 1-hour cache's when the system prompt's breakpoints say ``ttl: "1h"``:
:func:`engine.twins.policy.write_extra`), so the walk is kept per system prompt too. Claude Code sends ``system`` right after ``messages``: its value (tens of
KB) is decoded only when the bytes after the messages are not the kept body's; anywhere the
top-level walk cannot vouch for a single ``system`` member, the body is parsed.

The free move (:mod:`engine.twins.free_moves`, ``CLAUDE_CTX_CLEAR_FREE``, on by default; the
``paid`` policy only): where a request's prefix changed anyway (an older message rewritten, a
rewind) the cleared part moves as far as it may, and stays there until a compaction. A kept
conversation is the rule's memory: its walk's points are its last request's fingerprint (each
:class:`engine.twins.policy_scan.Point` holds its message's role and size without cache marks,
computed by the walk itself), ``_Kept.forced`` the boundary held. A resumed body's change is told
from the messages after the resumed point only (those before it are the kept body's bytes); a
body that repeats no kept body's first message is a new conversation (a compaction replaces the
first message); one that does but cannot be resumed is walked from the start and compared whole.
Off: the keep of the stateless rule, exactly as before.

The near move (``CLAUDE_CTX_CLEAR_MARGIN``, :func:`engine.twins.free_moves.near_level`): a kept
conversation also holds the prompt the reply to its body reported (``_Kept.prompt``; the server
reads it off the reply, :mod:`gateway.reply_prompt`, and tells the handle :meth:`Fitter.fit`
gave, :meth:`Kept.observe`). The conversation's next request reads it once (the new kept body
starts without one): at or past the level of the request's model and betas, a list that only
grew moves as a free move does where the move frees at least the margin
(:func:`engine.twins.free_moves.near_need`, weighed on the walk's ``PolicyScan.gains``).

The expiry move (:func:`engine.twins.free_moves.is_expired`, with the free move): a kept
conversation also holds the time of its last request (``_Kept.at``, integer milliseconds of the
clock the server reads once per request and hands to :meth:`Fitter.fit`; every request of the
conversation sets it, a new one too). A request more than the prompt cache's lifetime (5
minutes, an hour where the system prompt's breakpoints say ``ttl: "1h"``: the ``extra`` of its
system facts, :func:`engine.twins.free_moves.lifetime_ms`) plus
:data:`engine.twins.free_moves.EXPIRY_SLACK_MS` after it finds nothing cached: a list that only
grew moves as a free move does. No time given (``now=None``): no expiry move, the time kept.

Bounds (:mod:`gateway.limits`): at most :data:`MEMO_CONVERSATIONS` conversations and
:data:`MEMO_BYTES` of kept bodies and state (:data:`PER_MESSAGE` bytes a message), least recently
used dropped first; a body larger than half of that is walked but not kept. Where the messages cannot be placed by the fast walk of the top
level (another key order, a key spelt twice), the body is parsed whole and walked from the start
(exact, not kept). Malformed messages (not a JSON array the API would take) get the plain edit.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import orjson

from engine.api.context_management import ClearToolUses
from engine.twins.context_clear import step_from_env, window_threshold
from engine.twins.free_moves import (
    BROKE,
    DEFAULT_MARGIN,
    GREW,
    NEW,
    change,
    free_from_env,
    free_keep,
    is_expired,
    is_near,
    lifetime_ms,
    margin_from_env,
    near_level,
    near_need,
)
from engine.twins.policy import (
    ceiling_for,
    ceiling_set,
    patience_from_env,
    policy_from_env,
)
from engine.twins.policy_scan import (
    Facts,
    PolicyScan,
    fingerprint_of,
    system_facts,
    unmarked,
)
from gateway import limits
from gateway.toplevel import TopLevel, value_end

MEMO_CONVERSATIONS = limits.MEMO_CONVERSATIONS
MEMO_BYTES = limits.MEMO_BYTES
WINDOW = 64 * 1024  # the first stretch decoded after the shared prefix (grown x4 as needed)
PER_MESSAGE = 640  # bytes held per kept message (a Point, offset, ids; ~565 measured)
LAST_PER_BYTE = 4  # bytes held per byte of the kept last message's value (an upper estimate)
TRIES = 4  # resumable points tried per kept conversation before walking from the start
_WS = re.compile(r"[ \t\n\r]*")
_ESCAPED_ASCII = re.compile(rb"\\u00[5-7]")
_DECODER = json.JSONDecoder()
_RBRACKET, _COMMA = 0x5D, 0x2C
_BLANK = b" \t\n\r"  # JSON's whitespace (an int in it: a byte of the body)
_MESSAGES = b'"messages"'
_SYSTEM = b'"system"'
_SYSTEM_NEXT = re.compile(rb'[ \t\n\r]*,[ \t\n\r]*"system"[ \t\n\r]*:[ \t\n\r]*')


@dataclass(frozen=True)
class Knobs:
    """The policy and its knobs, read once when the gateway starts."""

    policy: str = "paid"
    step: int = 1
    ceiling: int | None = None  # CLAUDE_CTX_CLEAR_CEILING; None: the default, scaled (ceiling_at)
    patience: int = 100
    free: bool = True  # the free move where the cache breaks anyway (CLAUDE_CTX_CLEAR_FREE)
    margin: int = DEFAULT_MARGIN  # the near move's (CLAUDE_CTX_CLEAR_MARGIN; 0: never)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Knobs:
        return cls(
            policy_from_env(env),
            step_from_env(env),
            ceiling_set(env),
            patience_from_env(env),
            free_from_env(env),
            margin_from_env(env),
        )

    def ceiling_at(self, threshold: int | None, model: str = "", betas: Sequence[str] = ()) -> int:
        """The ceiling for a client whose auto-compact threshold is ``threshold``
        (:func:`gateway.window.near_threshold`; None: unknown, then the one the request's
        ``model`` and ``betas`` give, as the injected JavaScript reads it:
        :func:`engine.twins.context_clear.window_threshold`): the one set, else the default
        scaled to it (:func:`engine.twins.policy.ceiling_for`)."""
        if self.ceiling is not None:
            return self.ceiling
        if threshold is None:
            threshold = window_threshold(model, betas)
        return ceiling_for({}, threshold)


@dataclass
class _Kept:
    """One conversation: its last body, where its messages array starts, each message's end
    (offsets from that start) and the walk's state after each."""

    body: bytes
    start: int
    ends: list[int]
    scan: PolicyScan
    end: int  # one past the messages array
    rest: int  # one past what follows it up to the walked members (checked: no second one)
    forced: int = 0  # the boundary the conversation's last move set (free_moves.free_step)
    # (the index of the last message of the request the last move was made on, forced): the
    # move the walk takes as its own (free_moves.Conversation.moved, PolicyScan.move)
    moved: tuple[int, int] | None = None
    prompt: int | None = None  # what the reply to this body reported (the near move), or None
    # the value of the last message (the one Claude Code marks for the cache), or None: the
    # next body's bytes of it proven to be its writing without the marks resume after it
    last: Any = None
    at: int | None = None  # the time (ms) of the conversation's last request (the expiry move)

    def observe(self, prompt: int) -> None:
        """The reply to this body reported ``prompt`` tokens of prompt (its usage's input,
        cache write and cache read tokens; :mod:`gateway.reply_prompt`): the conversation's
        next request reads it once."""
        self.prompt = prompt


Kept = _Kept  # the handle a fitted request carries to its reply (Fitter.fit)


class _Found(NamedTuple):
    """Where a body resumes a kept conversation (:meth:`Fitter._resume`)."""

    key: int  # the kept conversation's
    j: int  # the last message shared (or proven the same but for its marks)
    at: int  # one past it in the body
    tail: list[Any]  # the messages after it
    facts: list[Facts]  # theirs (PolicyScan.resumable, PolicyScan.extend)
    ends: list[int]  # one past each in the body
    end: int  # one past the array
    same_rest: bool  # the bytes after the array proven the kept body's (_tail_as_kept_ends)


class _Malformed(Exception):
    """The messages value is not a JSON array of values."""


class Fitter:
    """``fit(edit, body, top)``: the edit to send with this body (see the module docstring)."""

    def __init__(
        self,
        knobs: Knobs,
        conversations: int = MEMO_CONVERSATIONS,
        max_bytes: int = MEMO_BYTES,
    ) -> None:
        self.knobs = knobs
        self.conversations = conversations
        self.max_bytes = max_bytes
        self._kept: OrderedDict[int, _Kept] = OrderedDict()
        self._bytes = 0
        # the free move (paid policy only): the kept walks hold each message's fingerprint entry
        self._free = knobs.free and knobs.policy == "paid"
        self.resumed = self.walked = 0  # requests walked from a kept point / from the start
        self.tails_parsed_whole = 0  # resumed with the new messages in one orjson parse
        self.remarked = 0  # the kept last message proven the same but for its cache marks
        # the near move (free move on, CLAUDE_CTX_CLEAR_MARGIN > 0): kept bodies hear their
        # reply's prompt (_Kept.observe)
        self._near = self._free and knobs.margin > 0
        self.free_moves = 0  # moves made, free and near (engine.twins.free_moves)
        self.near_moves = 0  # of which near moves (a list that grew, after a prompt >= level)
        self.expiry_moves = 0  # and expiry moves (a list that grew, after the cache's lifetime)

    def fit(
        self,
        edit: ClearToolUses,
        body: bytes,
        top: TopLevel,
        request: Any = None,
        model: str = "",
        betas: Collection[str] = (),
        now: int | None = None,
        threshold: int | None = None,
    ) -> tuple[ClearToolUses, Kept | None]:
        """(``edit`` with the keep the policy sends with ``body``'s messages, the kept
        conversation the body was fitted in). ``top``: the body's top level
        (:func:`gateway.toplevel.scan`); ``request``: the parsed body when the caller has it;
        ``model`` and ``betas`` (its ``anthropic-beta`` values): the window the near move's level
        is of (:func:`engine.twins.free_moves.near_level`) and the default ceiling is scaled to
        (:meth:`Knobs.ceiling_at`), unless ``threshold``, a native client's auto-compact
        threshold (:func:`gateway.window.near_threshold`), says it; ``now``:
        the request's time in
        milliseconds of a monotonic clock (the expiry move's; None: unknown, no expiry move, the
        conversation's time left as it was). Raises on anything unexpected (the
        caller sends the plain edit then).

        The kept conversation is the handle to tell the prompt the reply reports
        (:meth:`Kept.observe`, the near move's); None: no near move (off,
        ``CLAUDE_CTX_CLEAR_MARGIN=0``), or a body with no memory. The free move (``Knobs.free``)
        remembers a conversation in its kept body (the kept walk's points are its last request's
        fingerprint; ``_Kept.forced`` the boundary it holds). A body parsed whole instead
        (another key order, a key spelt twice) has no memory: it gets the stateless ``paid``
        keep and leaves the kept conversation as it was. A body over the bound is walked but
        not kept: the request after it starts its conversation anew."""
        k = self.knobs
        start = _messages_at(body, top)
        if start is not None and body[start : start + 1] != b"[":
            return edit, None  # not an array: the JavaScript sends the plain edit
        listed = betas if isinstance(betas, Sequence) else tuple(betas)
        ceiling = k.ceiling_at(threshold, model, listed)
        keep = None
        kept: _Kept | None = None
        if start is not None:
            level = 0
            if self._near:
                level = near_level(model, listed, k.margin, threshold)
            try:
                walked = self._walk(edit, body, top, start, level, now, ceiling)
            except _Malformed:
                return edit, None
            if walked is not None:
                keep, kept = walked
        if keep is None:  # not placed by the walk: the parse says (the last one, as JSON.parse)
            if request is None:
                request = _loads(body)
            messages = request.get("messages") if isinstance(request, dict) else None
            if not isinstance(messages, list):
                return edit, None
            rest, extra = system_facts(request.get("system"))
            scan = PolicyScan(edit, ceiling, k.patience, rest, extra)
            scan.extend(messages)
            self.walked += 1
            keep = scan.keep(k.policy, k.step)
        fitted = edit if keep == edit.keep else replace(edit, keep=keep)
        return fitted, (kept if self._near else None)

    # --- the kept conversations ----------------------------------------------------------------

    def _walk(
        self,
        edit: ClearToolUses,
        body: bytes,
        top: TopLevel,
        start: int,
        level: int,
        now: int | None,
        ceiling: int,
    ) -> tuple[int, _Kept] | None:
        """(the keep, the conversation kept for the next request), from the kept conversation
        the body resumes or from a walk of its whole messages array; None: the caller parses
        the body. ``level``: the near move's (0: none); ``now``: the request's time (ms);
        ``ceiling``: the policy's (:meth:`Knobs.ceiling_at`)."""
        k = self.knobs
        found, same = self._resume(body, start, (edit, ceiling, k.patience), top)
        if found is None:
            return self._walk_all(edit, body, top, start, same, level, now, ceiling)
        key, j, at, tail, facts, tail_ends, end, same_rest = found
        kept = self._kept[key]
        rest = _alone(body, top, end, kept, same_rest)
        if rest is None:
            return None
        system = _system_facts(body, top, end, rest, kept, same_rest)
        if system is None:
            return None
        self._drop(key)  # an error below leaves nothing half-walked behind
        if system != kept.scan.system:  # another system prompt: every decision again
            return self._walk_all(edit, body, top, start, kept, level, now, ceiling)
        scan = kept.scan
        n = len(scan.points)
        # the old fingerprint past the shared messages (the truncation drops it) up to its last
        before = scan.points[j + 1 : n - 1] if self._free else []
        scan.truncate(j)
        # the conversation's last move, for the walk (Conversation.paid_move: this list is not
        # another conversation; whether it holds the boundary's tool uses is known after it)
        moved = kept.moved if self._free else None
        scan.move(moved)
        scan.extend(tail, facts)
        if moved is not None and scan.points[-1].uses < kept.forced:
            moved = None  # below the boundary held: no move to take (it was after j)
            scan.truncate(j)
            scan.move(None)
            scan.extend(tail, facts)
        if not scan.takes_only(moved):
            # the kept points took an earlier move (the last one is moved, or the boundary is
            # let go): the twin's walk takes the last move only, so walk it all again (once)
            scan = PolicyScan(edit, ceiling, k.patience, *system, prints=self._free)
            scan.move(moved)
            scan.extend(_elements(body, start + 1, True, WINDOW)[0])
        self.resumed += 1
        ends = kept.ends[: j + 1]
        if ends:
            ends[-1] = at - start  # the message's end (shorter by its marks: _unmarked_end)
        ends.extend(e - start for e in tail_ends)
        how = NEW
        if self._free:  # free_moves.change: the first j + 1 messages are the same bytes
            after = scan.points
            how = BROKE if len(after) < n else GREW
            for old, new in zip(before, after[j + 1 : n - 1], strict=False):
                if old.size != new.size or old.sent_role != new.sent_role:
                    how = BROKE
                    break
        near = is_near(kept.prompt, level)
        expired = is_expired(kept.at, now, lifetime_ms(system[1]))
        keep, forced, moved = self._decide(scan, how, kept.forced, near, moved, expired)
        last = tail[-1] if tail else None
        when = kept.at if now is None else now
        kept = _Kept(body, start, ends, scan, end, rest, forced, moved, last=last, at=when)
        self._keep(kept)
        return keep, kept

    def _walk_all(
        self,
        edit: ClearToolUses,
        body: bytes,
        top: TopLevel,
        start: int,
        same: _Kept | None,
        level: int,
        now: int | None,
        ceiling: int,
    ) -> tuple[int, _Kept] | None:
        """The walk of the whole messages array, kept for the next request. ``same``: the kept
        conversation whose first message the body repeats (none: a new conversation, or one
        after a compaction), which it replaces."""
        k = self.knobs
        tail, tail_ends, end = _elements(body, start + 1, True, WINDOW)
        rest = _alone(body, top, end, None)
        if rest is None:
            return None
        system = _system_facts(body, top, end, rest, None)
        if system is None:
            return None
        # the conversation's last move, for the walk (Conversation.paid_move), as it most
        # likely is: walked again without it if the list turns out not to take it
        moved = same.moved if self._free and same is not None else None
        scan = PolicyScan(edit, ceiling, k.patience, *system, prints=self._free)
        scan.move(moved)
        scan.extend(tail)
        self.walked += 1
        how, forced, near, expired, when = NEW, 0, False, False, now
        if self._free and same is not None:
            how = change(fingerprint_of(same.scan.points), fingerprint_of(scan.points))
            forced, near = same.forced, is_near(same.prompt, level)
            expired = is_expired(same.at, now, lifetime_ms(system[1]))
            if now is None:
                when = same.at
            if moved is not None and (
                how == NEW or not scan.points or scan.points[-1].uses < forced
            ):
                moved = None
                scan = PolicyScan(edit, ceiling, k.patience, *system, prints=self._free)
                scan.extend(tail)
            if self._kept.get(id(same)) is same:
                self._drop(id(same))
        keep, forced, moved = self._decide(scan, how, forced, near, moved, expired)
        new = _Kept(
            body,
            start,
            [e - start for e in tail_ends],
            scan,
            end,
            rest,
            forced,
            moved,
            last=tail[-1] if tail else None,
            at=when,
        )
        self._keep(new)
        return keep, new

    def _decide(
        self,
        scan: PolicyScan,
        how: str,
        forced: int,
        near: bool,
        moved: tuple[int, int] | None,
        expired: bool = False,
    ) -> tuple[int, int, tuple[int, int] | None]:
        """(the keep sent with the list ``scan`` walked, the boundary its conversation holds
        after it, its last move after it): the policy's keep, lowered by a free, near or expiry
        move (:func:`free_keep`) when on. ``near``: the reply to the conversation's last request
        reported a prompt at least the near level (:func:`engine.twins.free_moves.is_near`);
        ``expired``: the request came after the cache's lifetime
        (:func:`engine.twins.free_moves.is_expired`); ``moved``: the conversation's last move
        (``_Kept.moved``). A move made here is handed to the walk on its last point
        (:meth:`PolicyScan.move`), as the twin's ``Conversation.moved`` is to ``paid_edit`` on
        the next requests."""
        k = self.knobs
        keep = scan.keep(k.policy, k.step)
        if not self._free:
            return keep, 0, None
        if not scan.points:  # an empty list: nothing to clear, nothing held
            return keep, 0, None
        p = scan.points[-1]
        keep, forced, made = free_keep(
            how,
            forced,
            p.uses,
            p.trailing_any,
            scan.edit.keep,
            keep,
            near,
            expired,
            scan.gains,
            near_need(k.margin),
        )
        self.free_moves += made
        if made and how == GREW:
            if expired:
                self.expiry_moves += 1
            else:
                self.near_moves += 1
        if made:
            moved = (len(scan.points) - 1, forced)
            scan.move(moved)
        elif not forced:
            moved = None
        return keep, forced, moved

    def _resume(
        self, body: bytes, start: int, knobs: tuple[ClearToolUses, int, int], top: TopLevel
    ) -> tuple[_Found | None, _Kept | None]:
        """(:class:`_Found`: the kept conversation sharing the longest resumable prefix with
        ``body`` and where it resumes, or None; the most recent kept conversation whose first
        message ``body`` repeats, or None). The kept last message counts as shared when its new
        bytes are its writing without its cache marks (:func:`_unmarked_end`)."""
        same: _Kept | None = None
        for key in reversed(self._kept):
            kept = self._kept[key]
            if not kept.ends:
                continue
            old = memoryview(kept.body)
            base, ends = kept.start, kept.ends
            if not body.startswith(old[base : base + ends[0]], start):
                continue
            if same is None:
                same = kept
            if kept.scan.knobs[:3] != knobs:
                continue
            hi = _shared(body, start, old, base, ends)
            last = len(ends) - 1
            remarked = None  # where the kept last message ends in body, its marks taken off
            if hi == last - 1 and kept.last is not None:
                remarked = _unmarked_end(body, start + ends[hi], kept.last)
                if remarked is not None:
                    hi = last
                    self.remarked += 1
            points = kept.scan.points
            tries = 0
            j = hi
            while j >= 0 and tries < TRIES:
                p = points[j]
                if p.role is None or p.reach > j:
                    j -= 1
                    continue
                tries += 1
                at = remarked if remarked is not None and j == last else start + ends[j]
                found = _tail_as_kept_ends(body, at, kept, top)
                same_rest = found is not None  # it proved the bytes after the array the same
                if found is not None:
                    self.tails_parsed_whole += 1
                else:
                    try:
                        window = 2 * (kept.end - base - ends[j]) + 8192  # the tail grew a little
                        found = _elements(body, at, False, window)
                    except _Malformed:
                        return None, same
                tail, tail_ends, end = found
                facts = list(map(kept.scan.sizes.facts, tail))
                if kept.scan.resumable(j, tail, facts):
                    return _Found(key, j, at, tail, facts, tail_ends, end, same_rest), same
                j -= 1
        return None, same

    def _keep(self, kept: _Kept) -> None:
        size = _held(kept)
        if size > self.max_bytes // 2:
            return
        while self._kept and (
            len(self._kept) >= self.conversations or self._bytes + size > self.max_bytes
        ):
            self._drop(next(iter(self._kept)))
        self._kept[id(kept)] = kept
        self._bytes += size

    def _drop(self, key: int) -> None:
        kept = self._kept.pop(key)
        self._bytes -= _held(kept)

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._kept)


def _held(kept: _Kept) -> int:
    """What a kept conversation holds: its body and, per message, the walk's state, offset and
    ids (:data:`PER_MESSAGE`, an upper estimate: a list of millions of tiny messages is bounded
    by its count, not only by its bytes), and its last message's value (:data:`LAST_PER_BYTE`
    times its bytes)."""
    held = len(kept.body) + PER_MESSAGE * len(kept.ends)
    if kept.last is not None and kept.ends:
        held += LAST_PER_BYTE * (kept.ends[-1] - (kept.ends[-2] if len(kept.ends) > 1 else 1))
    return held


def _unmarked_end(body: bytes, at: int, last: Any) -> int | None:
    """Where the message after byte ``at`` (the end of the one before it) ends when its bytes
    are orjson's compact writing (JSON.stringify's) of ``last`` without its cache marks
    (:func:`engine.twins.policy_scan.unmarked`: the walk reads it as it read ``last``), else
    None. Claude Code marks the newest message's last block for the cache and takes the mark
    off on the next request: this message is then resumed after, not parsed and walked
    again."""
    if body[at : at + 1] != b",":
        return None
    value = unmarked(last)
    if value is None:
        return None
    try:
        written = orjson.dumps(value)
    except TypeError:
        return None
    return at + 1 + len(written) if body.startswith(written, at + 1) else None


# --- reading the body -------------------------------------------------------------------------


def _shared(body: bytes, start: int, old: memoryview, base: int, ends: list[int]) -> int:
    """The last of the kept messages whose bytes, and all before, ``body`` repeats (the first
    one does). One memcmp of the prefix up to the last message but one (Claude Code marks the
    last block for the cache, so the last kept message usually differs), then the messages
    after it one by one; a binary search when the prefix differs earlier (a retry, a fork, a
    rewritten history)."""
    lo, hi = 0, len(ends) - 1
    c = max(hi - 1, 0)
    if not body.startswith(old[base : base + ends[c]], start):
        hi = c - 1  # ends[lo] is shared, ends[hi + 1] is not
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if body.startswith(old[base : base + ends[mid]], start):
                lo = mid
            else:
                hi = mid - 1
        return lo
    while c < hi and body.startswith(old[base + ends[c] : base + ends[c + 1]], start + ends[c]):
        c += 1
    return c


def _messages_at(body: bytes, top: TopLevel) -> int | None:
    """Where the messages value starts, when the top-level walk places the one member so named
    (else None: the body is parsed). A member walked after the unread stretch is the last one
    (JSON.parse and the API read the last); one before it is checked by :func:`_alone`."""
    named = top.named("messages")
    if len(named) > 1:
        return None
    if top.gap is None or top.gap_key != "messages":
        return named[0].start if named else None
    return None if named else top.gap[0]


def _alone(
    body: bytes, top: TopLevel, end: int, kept: _Kept | None, same_rest: bool = False
) -> int | None:
    """Where the stretch after the messages array ending at ``end`` stops (the walked members)
    when no second ``messages`` member can hide in it (it holds neither the key's spelling nor
    an escaped ASCII letter, or it is byte for byte the kept body's, which was checked), else
    None. ``same_rest``: the caller proved those bytes the kept body's."""
    if top.gap is None or end > top.gap[1]:
        return end  # nothing unread after it
    gap_end = top.gap[1]
    same = kept is not None and gap_end - end == kept.rest - kept.end
    if same and (
        same_rest or body.startswith(memoryview(kept.body)[kept.end : kept.rest], end)  # type: ignore[union-attr]
    ):
        return gap_end  # system, tools...: the same bytes as last time (~100 KB, a memcmp)
    if body.find(_MESSAGES, end, gap_end) >= 0:
        return None
    return None if _ESCAPED_ASCII.search(body, end, gap_end) else gap_end


def _tail_as_kept_ends(
    body: bytes, at: int, kept: _Kept, top: TopLevel
) -> tuple[list[Any], list[int], int] | None:
    """:func:`_elements` from ``at`` (just after a shared message) for a body whose messages are
        followed by the kept body's very bytes (``system``, ``tools``: the usual case), in one
        orjson parse (several times faster than ``json``'s ``raw_decode`` over decoded text). The
        array's end is where those bytes start (the gap's end less their length, checked); the
        stretch up to it parsed as the rest of an array proves it is the array's end (its brackets
        and strings balance). Each message's end is then found, and proven, by its bytes being
        orjson's own compact writing of the value parsed (JSON.stringify's, byte for byte, for the
        strings, objects and integers Claude Code sends); the last one ends where the array does (it
    holds what the parse read after the others' ends, no blank at either end), so the largest
    message, the newest tool result, is not written again. None when any of this does not hold
        (whitespace, another number format, NaN, a lone surrogate, a key spelt twice): the
        decoding walk settles it, exactly as before."""
    if top.gap is None:
        return None
    rest = memoryview(kept.body)[kept.end : kept.rest]
    after = top.gap[1] - len(rest)  # one past the array's "]", if the same bytes follow
    close = after - 1
    if close < at or body[close] != _RBRACKET or not body.startswith(rest, after):
        return None
    if close == at:
        return [], [], after
    if body[at] != _COMMA:
        return None
    try:
        values = orjson.loads(b"[" + memoryview(body)[at + 1 : close] + b"]")
    except orjson.JSONDecodeError:
        return None
    ends: list[int] = []
    pos = at
    for value in values[:-1]:
        if body[pos] != _COMMA:
            return None
        pos += 1
        try:
            written = orjson.dumps(value)
        except TypeError:
            return None
        if not body.startswith(written, pos):
            return None
        pos += len(written)
        ends.append(pos)
    # the last one: from the comma after the others to the array's end (no blank at either)
    if (
        body[pos] != _COMMA
        or pos + 1 >= close
        or body[pos + 1] in _BLANK
        or body[close - 1] in _BLANK
    ):
        return None
    ends.append(close)
    return values, ends, after


def _system_facts(
    body: bytes, top: TopLevel, end: int, rest: int, kept: _Kept | None, same_rest: bool = False
) -> tuple[int, int] | None:
    """:func:`engine.twins.policy_scan.system_facts` of the body's ``system`` as ``JSON.parse``
    reads it (what a cache break writes again of the system prompt, the price of a write), when the body says where
    it is without a full parse; else None (the caller parses the body). ``end``: one past the
    messages array, ``rest``: where the stretch after it that :func:`_alone` checked stops.

    Claude Code sends ``system`` right after ``messages``: its value is decoded (a few tens of
    KB) unless the stretch after the messages is byte for byte the kept body's, whose figure
    is reused. A member so named among those the top-level walk read is decoded too; more than
    one anywhere, or one the unread stretch may hide elsewhere, sends the caller to the parse."""
    walked = top.named("system")
    if top.gap is None or end > top.gap[1]:
        # nothing unread after the messages array: a system member is one the walk read
        if top.gap is not None and top.gap_may_hold(body, "system"):
            return None
        return _walked_facts(body, walked)
    g0, g1 = top.gap
    value: int | None
    if top.gap_key == "system" and g0 >= end:
        value, stop = g0, g1  # the unread stretch starts with the system value
    elif top.gap_key == "messages" and g0 < end:
        if (
            kept is not None
            and not walked
            and rest - end == kept.rest - kept.end
            and (same_rest or body.startswith(memoryview(kept.body)[kept.end : kept.rest], end))
        ):
            return kept.scan.system  # the same system prompt and tools as last time
        m = _SYSTEM_NEXT.match(body, end, rest)
        value, stop = (m.end() if m is not None else None), rest
    elif not top.gap_may_hold(body, "system"):
        return _walked_facts(body, walked)
    else:
        return None
    after = end if value is None else value_end(body, value, stop)
    if after is None:
        return None
    if body.find(_SYSTEM, after, stop) >= 0 or _ESCAPED_ASCII.search(body, after, stop):
        return None  # another member might be named system
    if value is None:
        return _walked_facts(body, walked)
    if walked:
        return None  # two of them: the parse says which one JSON.parse keeps
    return system_facts(_loads(body[value:after]))


def _walked_facts(body: bytes, walked: list[Any]) -> tuple[int, int] | None:
    if len(walked) > 1:
        return None
    return system_facts(_loads(body[walked[0].start : walked[0].end]) if walked else None)


def _elements(body: bytes, at: int, first: bool, window: int) -> tuple[list[Any], list[int], int]:
    """The array elements from byte ``at`` (just after the ``[`` when ``first``, else just after
    an element) to the closing ``]``: the values, the byte offset one past each, and one past the
    ``]``. Decodes a window of the body and grows it until the array closes inside it."""
    n = len(body)
    while True:
        stop = min(n, at + window)
        while stop < n and stop > at and 0x80 <= body[stop] < 0xC0:
            stop -= 1  # not inside a UTF-8 sequence
        try:
            text = body[at:stop].decode("utf-8")
            values, char_ends, close = _parse(text, first)
        except (ValueError, IndexError, RecursionError) as exc:  # ValueError: JSON, UTF-8
            if stop >= n:
                raise _Malformed from exc
            window *= 4
            continue
        if text.isascii():
            return values, [at + c for c in char_ends], at + close
        ends: list[int] = []
        c0, b0 = 0, at
        for c in [*char_ends, close]:
            b0 += len(text[c0:c].encode("utf-8"))
            c0 = c
            ends.append(b0)
        return values, ends[:-1], ends[-1]


def _parse(text: str, first: bool) -> tuple[list[Any], list[int], int]:
    values: list[Any] = []
    ends: list[int] = []
    i = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if first and text[i] == "]":
        return values, ends, i + 1
    while True:
        if not first or values:
            if text[i] == "]":
                return values, ends, i + 1
            if text[i] != ",":
                raise ValueError("expected , or ]")
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        value, i = _DECODER.raw_decode(text, i)
        values.append(value)
        ends.append(i)
        i = _WS.match(text, i).end()  # type: ignore[union-attr]


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)
