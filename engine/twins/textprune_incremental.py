"""The text prune replayed request after request in time linear in the new messages.

:func:`engine.twins.textprune.prune_detailed` is the specification: on every request it finds the
turn starts of the whole list and, under the thinking-safe rule, walks it again for the plan
(:func:`engine.twins.textprune_thinking.plan_thinking`: every prefix's turns, estimate, last
shortened message and free request point) and once more to build the result. A replay sends the
previous request's list plus new messages (the same objects, never mutated), so
:class:`IncrementalPrune` returns an equal :class:`~engine.twins.textprune.PruneOutcome` from state
kept across the requests of one replay:

* the per-prefix facts of the plan are kept for the longest prefix the list shares with the
  previous one (compared by identity, in C) and computed for the messages past it only; the
  rule without thinking (or under ``CLAUDE_TEXT_PRUNE_THINKING=ignore``) is the plan's edit end
  of the whole list with no thinking left out;
* each thinking message's edit end in force (of the request that produced it) is kept while
  ``first``, the earliest such request, stays the same;
* when the list only grew and its edit end in force and ``first`` are the previous request's,
  the result is the previous one plus the new messages (their thinking left out where the rule
  says: nothing older changes); otherwise it is built from the plan as the specification builds
  it, from the messages that shorten and the thinking messages that lose their blocks.

A pass that leaves thinking out is settled as the specification settles it
(:func:`engine.twins.textprune.settled`: the rule applied again to its result), each further
pass by an :class:`IncrementalPrune` of its own, kept across the requests (``_again``).

The result holds the same message copies as the specification's (the copies are memoised by
identity, :mod:`engine.identity_memo`); its list is the one the state keeps, not a copy (a copy
of a whole history per request was a quadratic share of a long replay). A result that continues
the previous one grows that list in place rather than copying it with the new messages (a copy
per request of a pruned history of thousands of messages, each message's reference count
touched twice: made, then freed by the next request): the state only ever appends to a list it
handed out, never changes an entry of it (the next result that differs before its end is a new
list), as :func:`engine.identity_memo.kept_prefix` expects of a list passed on, and callers must
not change it either. An exception empties the state and the call answers as the specification
does.
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

from engine.identity_memo import kept_prefix
from engine.twins.textprune import (
    THINKING_DROP,
    PruneOutcome,
    PruneSettings,
    prune_outcome,
    settled,
    without_thinking,
)
from engine.twins.textprune_estimate import TOKEN_FACTOR, message_tokens
from engine.twins.textprune_shorten import shortened_message, shortens
from engine.twins.textprune_turns import message_facts

__all__ = ["IncrementalPrune"]

_NO_THINKING = sys.maxsize  # ``first`` of a list without thinking messages
_GONE = object()  # a message left out of the result (no block left)


class IncrementalPrune:
    """``prune_detailed(messages, env)`` for the successive requests of one replay (see the
    module docstring); the settings are read from ``env`` (default ``os.environ``) once, or
    given as ``settings``."""

    def __init__(
        self, env: Mapping[str, str] | None = None, *, settings: PruneSettings | None = None
    ) -> None:
        self.settings = PruneSettings.from_env(env) if settings is None else settings
        self._reset()

    def _again(self, messages: list[Any], k: int) -> PruneOutcome:
        """The ``k``-th further pass of ``settled`` (one pass of the rule on the previous pass's
        result), from state kept for that pass across the requests: the results a pass hands
        on grow as the requests do, so the pass is incremental too (the specification's
        ``_prune`` walked the whole list again, on 119 requests of the x10 bench session)."""
        passes = self._passes
        while len(passes) < k:
            passes.append(IncrementalPrune(settings=self.settings))
        return passes[k - 1]._prune(messages)

    def _reset(self) -> None:
        # the states of the further passes of ``settled`` (``_again``)
        self._passes: list[IncrementalPrune] = []
        # the previous request's list, by reference (identity_memo.kept_prefix), and its length
        self._messages: list[Any] = []
        self._n = 0
        self._starts: list[int] = []  # turn starts
        self._shortening: list[int] = []  # indices of the messages the prune would shorten
        # per prefix messages[0:k], k = 0..n: turn starts, rough estimate, the last index < k
        # that shortens, the last free request point, in a tool round, smallest thinking request
        self._turns = [0]
        self._tokens = [0]
        self._changed = [-1]
        self._free = [0]
        self._open = [False]
        self._first = [_NO_THINKING]
        self._first_of_id: dict[str, int] = {}  # message.id -> its first index (in index order)
        self._thinking: list[tuple[int, int]] = []  # (index, request) of each thinking message
        self._ends: list[int] = []  # their requests' edit ends in force under ``_ends_first``
        self._ends_first = _NO_THINKING
        # the previous result: (list length, edit end, first, messages, counts)
        self._result: tuple[int, int, int, list[Any], tuple[int, int, int, int]] | None = None

    # --- the entry points ---------------------------------------------------------------------

    def prune(self, messages: list[Any]) -> list[Any]:
        """What :func:`engine.twins.textprune.prune` returns for ``messages``."""
        return self.prune_detailed(messages).messages

    def prune_detailed(self, messages: list[Any]) -> PruneOutcome:
        """What :func:`engine.twins.textprune.prune_detailed` returns for ``messages``."""
        settings = self.settings
        if not isinstance(messages, list):
            return PruneOutcome(messages, "not-a-list", settings)
        if settings.disabled:
            return PruneOutcome(messages, "disabled", settings)
        try:
            return settled(self._prune(messages), settings, self._again)
        except Exception:
            self._reset()
            return prune_outcome(messages, settings)

    # --- the plan's facts ---------------------------------------------------------------------

    def _sync(self, messages: list[Any]) -> int:
        """Bring the facts to ``messages``; returns the length of the prefix it shares with the
        previous request's list."""
        shared = kept_prefix(messages, self._messages, self._n)
        if shared < self._n:
            self._truncate(shared)
        for i in range(shared, len(messages)):
            self._add(i, messages[i])
        self._messages, self._n = messages, len(messages)
        return shared

    def _truncate(self, k: int) -> None:
        for facts in (self._turns, self._tokens, self._changed, self._free, self._open):
            del facts[k + 1 :]
        del self._first[k + 1 :]
        del self._starts[self._turns[k] :]
        del self._shortening[bisect_left(self._shortening, k) :]
        first_of_id = self._first_of_id
        while first_of_id and next(reversed(first_of_id.values())) >= k:
            first_of_id.popitem()
        thinking = self._thinking
        while thinking and thinking[-1][0] >= k:
            thinking.pop()
        del self._ends[len(thinking) :]
        self._result = None

    def _add(self, i: int, msg: Any) -> None:
        """The facts of ``messages[0:i + 1]`` from those of ``messages[0:i]`` (the loop of
        ``plan_thinking``, step for step)."""
        turn_start, has_thinking, carries_tool_result = message_facts(msg)
        if turn_start:
            self._starts.append(i)
        self._turns.append(len(self._starts))
        self._tokens.append(self._tokens[i] + message_tokens(msg))
        if shortens(msg, self.settings.max_chars):
            self._shortening.append(i)
            self._changed.append(i)
        else:
            self._changed.append(self._changed[i])
        open_round = self._open[i]
        first = self._first[i]
        is_assistant = isinstance(msg, dict) and msg.get("type") == "assistant"
        if is_assistant:
            open_round = False
            message = msg.get("message")
            mid = message.get("id") if isinstance(message, dict) else None
            start = self._first_of_id.setdefault(mid, i) if isinstance(mid, str) else i
            if has_thinking:
                self._thinking.append((i, start))
                first = min(first, start)
        elif carries_tool_result:
            open_round = True
        self._open.append(open_round)
        self._free.append(self._free[i] if open_round or is_assistant else i + 1)
        self._first.append(first)

    def _edit_end(self, k: int) -> tuple[int, str, int | None]:
        """The prune of the request ``messages[0:k]``: (end of the edited prefix, reason,
        cutoff), as ``plan_thinking``'s ``edit_end``."""
        s = self.settings
        turns = self._turns[k]
        if turns <= s.keep:
            return 0, "few-turns", None
        prunable = (turns - s.keep) // s.step * s.step
        if prunable == 0:
            return 0, "step", None
        cutoff = self._starts[prunable]
        last = self._changed[cutoff]
        if last < 0:
            return 0, "nothing-to-prune", cutoff
        estimate = math.ceil(self._tokens[k] * TOKEN_FACTOR)
        if s.threshold > 0 and estimate < s.threshold:
            return 0, "below-threshold", cutoff
        return last + 1, "pruned", cutoff

    def _in_force(self, k: int, first: int) -> tuple[int, str, int | None]:
        return self._edit_end(k if k <= first else max(first, self._free[k]))

    def _thinking_ends(self, first: int) -> list[int]:
        """The edit end in force at each thinking message's request."""
        ends = self._ends
        if first != self._ends_first:
            ends.clear()
            self._ends_first = first
        for _, request in self._thinking[len(ends) :]:
            ends.append(self._in_force(request, first)[0])
        return ends

    # --- the result ---------------------------------------------------------------------------

    def _prune(self, messages: list[Any]) -> PruneOutcome:
        s = self.settings
        previous = self._n
        shared = self._sync(messages)
        n = len(messages)
        turns = self._turns[n]
        first = self._first[n] if s.thinking == THINKING_DROP else _NO_THINKING
        thinking = first != _NO_THINKING
        end, reason, cutoff = self._in_force(n, first) if thinking else self._edit_end(n)
        if end == 0:
            self._result = None
            return PruneOutcome(messages, reason, s, turns, cutoff)
        ends = self._thinking_ends(first) if thinking else []
        result = self._result
        if result is not None and shared == previous == result[0] and result[1:3] == (end, first):
            out, counts = self._extended(messages, result[3], result[4], previous, end, ends)
        else:
            out, counts = self._built(messages, end, ends)
        self._result = (n, end, first, out, counts)
        changed, pruned, dropped, removed = counts
        if not thinking:
            return PruneOutcome(out, "pruned", s, turns, cutoff, changed, pruned)
        whole = self._edit_end(n)[2]  # plan_thinking's ``settled``
        unsettled = dropped > 0 and whole is not None and self._changed[whole] >= end
        return PruneOutcome(
            out, "pruned", s, turns, cutoff, changed, pruned, dropped, removed, end, unsettled
        )

    def _dropped(self, ends: list[int], end: int, since: int) -> list[int]:
        """The thinking messages at ``since`` or later that lose their blocks, in index order
        (none without ``ends``: the rule without thinking)."""
        thinking = self._thinking
        at = bisect_left(thinking, (since, -1))
        return [thinking[j][0] for j in range(at, len(ends)) if ends[j] < end]

    def _built(
        self, messages: list[Any], end: int, ends: list[int]
    ) -> tuple[list[Any], tuple[int, int, int, int]]:
        """The result as the specification builds it, from the plan."""
        max_chars = self.settings.max_chars
        out = list(messages)
        changed = pruned = dropped = removed = 0
        shortening = self._shortening
        for i in shortening[: bisect_left(shortening, end)]:
            out[i], blocks = shortened_message(messages[i], max_chars)
            pruned += blocks
            changed += 1
        for i in self._dropped(ends, end, 0):
            new = out[i]
            without, blocks = without_thinking(new)
            dropped += blocks
            shortened = new is not messages[i]
            if without is None:
                removed += 1
                changed -= shortened
                out[i] = _GONE
            else:
                changed += not shortened
                out[i] = without
        if removed:
            out = [m for m in out if m is not _GONE]
        return out, (changed, pruned, dropped, removed)

    def _extended(
        self,
        messages: list[Any],
        before: list[Any],
        counts: tuple[int, int, int, int],
        previous: int,
        end: int,
        ends: list[int],
    ) -> tuple[list[Any], tuple[int, int, int, int]]:
        """The previous result plus the messages past ``previous`` (all at or after the edit
        end, so none is shortened; their thinking goes when their request's edit end in force
        is below ``end``): ``before`` itself, grown (see the module docstring). ``before`` is
        never ``messages``: it differs from the previous list before the edit end, which the
        list given shares."""
        changed, pruned, dropped, removed = counts
        going = self._dropped(ends, end, previous)
        if not going:
            before += messages[previous:]
            return before, counts
        tail = messages[previous:]
        for i in going:
            without, blocks = without_thinking(messages[i])
            dropped += blocks
            if without is None:
                removed += 1
                tail[i - previous] = _GONE
            else:
                changed += 1
                tail[i - previous] = without
        before += [m for m in tail if m is not _GONE]
        return before, (changed, pruned, dropped, removed)
