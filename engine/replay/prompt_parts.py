"""Each sent message's share of a replayed prompt, carried from request to request.

A counterfactual replay (:mod:`engine.replay.counterfactual`) prices every request message by
message: the *live factor* of a message (the part of its fitted cost still in the prompt: what a
resumed process did not reload, ``Calibration.resume_factor``; on a model that leaves out the
thinking of earlier turns, ``1 - thinking share`` before the last human prompt), its cost
(fitted cost x factor) and its part of the prompt-cache signature (its line and estimate, the
blocks the server cleared in it, its factor). :class:`SpecParts` is the specification: all of
it computed again for every message of every request, so a replay of ``n`` requests over a
history that keeps growing (clearing delays compaction) does ``O(n²)`` work in Python.

:class:`PromptParts` gives the identical lists (the same floats, the same tuples by value)
from what it kept of the previous request: the messages are never mutated, so the values of
the leading messages both requests share (by identity) still hold, except where their inputs
moved:

* a new human prompt moves the last turn start: the messages between the old and the new one
  change their thinking factor (each message once per turn: linear over the replay);
* the request passes the line of a resumed process: every factor is computed again (once per
  resume);
* the blocks the server cleared in a message changed: its signature entry is made again
  (one comparison of the two clearing maps when nothing moved).

What stays per request is C-level: the identity check of the shared prefix. The costs and the
signature are handed out as kept, not copied (a copy of a history's costs or signature, made
and freed per request, was a quadratic share of a long replay): later requests only append to
a list handed out, and make a new one where an earlier entry moves
(:func:`engine.identity_memo.kept_prefix`'s contract).
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import accumulate, compress, repeat
from typing import Any

from engine.api.previous_thinking import starts_turn
from engine.api.prompt_cache import block_count
from engine.identity_memo import kept_prefix
from engine.replay.calibration import Calibration
from engine.replay.prefix_sums import PrefixSums
from engine.replay.recorded import LINE_KEY

Message = Mapping[str, Any]
OnServer = Mapping[int, tuple[int, ...]]


class SpecParts:
    """The specification: every message's factor, cost and signature entry computed afresh."""

    def __init__(
        self,
        cal: Calibration,
        strip: bool,
        cost: Callable[[Message], float],
        sig_key: Callable[[Message], tuple[Any, int]],
        share: Callable[[Message], float],
    ) -> None:
        self.cal, self.strip = cal, strip
        self.cost, self.sig_key, self.share = cost, sig_key, share
        self._sent: Sequence[Message] = []
        self._factors: list[float] = []
        # leading entries of the last signature that are the very objects of the one before
        # (the caller compares the two lists from there; none: every entry is made afresh)
        self.same = 0

    def factors(self, sent: Sequence[Message], at: int) -> list[float]:
        """Each sent message's share of its cost in the prompt of the request at ``at``:
        earlier turns' thinking left out (``strip``), what a resumed process did not reload."""
        cal = self.cal
        factors = [cal.resume_factor(m.get(LINE_KEY), at) for m in sent] if cal.resumes else []
        if not factors:
            factors = [1.0] * len(sent)
        if self.strip:
            last = max((i for i, m in enumerate(sent) if starts_turn(m)), default=-1)
            for i in range(last):
                s = self.share(sent[i])
                if s:
                    factors[i] *= 1.0 - s
        return factors

    def price(self, sent: Sequence[Message], at: int) -> list[float]:
        """The cost of each sent message in the prompt of the request at ``at``."""
        self._sent = sent
        self._factors = self.factors(sent, at)
        return [self.cost(m) * f for m, f in zip(sent, self._factors, strict=True)]

    def blocks(self) -> list[int]:
        """The number of content blocks of each message last priced (``block_count``: how far
        back the prompt cache looks)."""
        return [block_count(m) for m in self._sent]

    def sums(self) -> Sequence[float] | None:
        """The prefix sums of the costs last priced (``sums()[k] == sum(costs[:k])``), read
        before the next :meth:`price`; ``None``: the caller sums the costs."""
        return None

    def signature(self, on_server: OnServer) -> list[Hashable]:
        """The prompt-cache signature of the messages last priced, with the blocks the server
        cleared in each (``on_server``, a map not changed once passed, as a ``ServerView``'s)."""
        return [
            (*self.sig_key(m), on_server.get(i, ()), self._factors[i])
            for i, m in enumerate(self._sent)
        ]


class PromptParts(SpecParts):
    """:class:`SpecParts`' lists from state kept across the requests of one replay."""

    def __init__(
        self,
        cal: Calibration,
        strip: bool,
        cost: Callable[[Message], float],
        sig_key: Callable[[Message], tuple[Any, int]],
        share: Callable[[Message], float],
    ) -> None:
        super().__init__(cal, strip, cost, sig_key, share)
        # the list last priced, by reference (identity_memo.kept_prefix), and its length then
        self._sent = []
        self._n = 0
        self._costs: list[float] = []
        self._sig: list[Hashable] = []
        self._on: OnServer = {}  # a copy of the last map of the blocks the server cleared
        self._on_given: OnServer | None = None  # that map as it was given
        self._turns: list[int] = []  # indices of the turn starts in the messages last priced
        self._last = -1  # the last turn start the factors were computed with
        self._resumed: tuple[bool, ...] = ()  # which resumes the request last priced had passed
        self._kept = 0  # leading messages whose signature entries still hold
        self._redo: list[int] = []  # earlier messages whose factor moved
        self._blocks: list[int] = []  # block_count of each message last priced
        self._sums = PrefixSums()  # of the costs last priced

    def _factor(self, m: Message, i: int, at: int, last: int) -> float:
        # the specification's expression, operation for operation
        f = self.cal.resume_factor(m.get(LINE_KEY), at) if self.cal.resumes else 1.0
        if self.strip and i < last:
            s = self.share(m)
            if s:
                f *= 1.0 - s
        return f

    def price(self, sent: Sequence[Message], at: int) -> list[float]:
        p = kept_prefix(sent, self._sent, self._n)
        resumed = tuple(r.line <= at for r in self.cal.resumes)
        if resumed != self._resumed:
            p = 0
            self._resumed = resumed
        turns = self._turns
        del turns[bisect_left(turns, p) :]
        n = len(sent)
        turns.extend(compress(range(p, n), map(starts_turn, sent[p:])))
        last = turns[-1] if turns else -1
        factors, costs, blocks = self._factors, self._costs, self._blocks
        redo: list[int] = []
        if self.strip and last != self._last:
            # the messages whose "before the last turn start" changed, among those kept
            redo = list(range(max(0, min(last, self._last)), min(max(last, self._last), p)))
        if redo or p < len(costs):
            # the list handed out last keeps its values: a new one (kept_prefix's contract)
            costs = self._costs = costs[:p]
        del factors[p:], blocks[p:]
        blocks.extend(map(block_count, sent[p:]))  # a slice: islice would step over the first p
        cost = self.cost
        for i in redo:
            m = sent[i]
            factors[i] = f = self._factor(m, i, at, last)
            costs[i] = cost(m) * f
        # without resumes, a message from the last turn start on (any, without ``strip``) has
        # the factor 1.0 (_factor's, multiplied by nothing): those are priced in C
        plain = n if self.cal.resumes else min(max(p, last), n) if self.strip else p
        for i in range(p, plain):
            m = sent[i]
            f = self._factor(m, i, at, last)
            factors.append(f)
            costs.append(cost(m) * f)
        if plain < n:
            factors.extend(repeat(1.0, n - plain))
            costs.extend(map(operator.mul, map(cost, sent[plain:]), repeat(1.0, n - plain)))
        self._sent, self._n = sent, n
        self._last = last
        self._kept = min(self._kept, p)
        self._redo = redo
        self._sums.update(costs, min(p, redo[0]) if redo else p)
        return costs  # not a copy: only ever appended to once handed out

    def blocks(self) -> list[int]:
        """The list kept, not a copy: read it before the next :meth:`price`."""
        return self._blocks

    def sums(self) -> Sequence[float] | None:
        return self._sums.table()

    def signature(self, on_server: OnServer) -> list[Hashable]:
        """The list kept, not a copy: later calls only append to a list handed out, and make a
        new one where an entry before its end moves (kept_prefix's contract): the prompt
        cache keeps each signature with its length then."""
        sent, factors, sig = self._sent, self._factors, self._sig
        sig_key = self.sig_key
        kept = self._kept
        same = kept  # the entries before it are the objects handed out last time
        moved: list[int] = []  # the entries kept whose inputs moved
        for i in self._redo:
            if i < kept:
                moved.append(i)
        # the clearing hands out the same map while the edit does not move (and never changes
        # one it handed out): the entries kept still hold, no comparison needed
        if on_server is not self._on_given:
            if on_server != self._on:
                before = self._on
                # the records whose entry differs in the two maps, found in C (the maps hold
                # every record the edit changed: as many as the history has tool results)
                for i in {i for i, _ in on_server.items() ^ before.items()}:
                    if i < kept and on_server.get(i, ()) != before.get(i, ()):
                        moved.append(i)
            self._on = dict(on_server)
            self._on_given = on_server
        if moved or kept < len(sig):
            sig = self._sig = sig[:kept]  # a new list: the one handed out keeps its entries
        for i in moved:
            sig[i] = (*sig_key(sent[i]), on_server.get(i, ()), factors[i])
            same = min(same, i)
        for i in range(kept, self._n):
            sig.append((*sig_key(sent[i]), on_server.get(i, ()), factors[i]))
        self._kept = self._n
        self._redo = []
        self.same = same
        return sig


def spec_prune_saving(
    cost: Callable[[Message], float], sent: Sequence[Message], pruned: Sequence[Message]
) -> float:
    """The specification of :class:`PruneSaving`: what the text prune took off the prompt,
    message by message (the pairs the prune replaced, in order)."""
    return sum(cost(a) - cost(b) for a, b in zip(sent, pruned, strict=False) if a is not b)


class PruneSaving:
    """:func:`spec_prune_saving` from the previous request's sum: the prune hands out the same
    copies for the same messages (``engine.twins.textprune``), so the pairs it replaced are
    mostly the previous request's plus newer ones, whose terms continue the same running sum
    (the specification's order, float for float). The positions of the replaced pairs are kept
    with the running sums: those before the prefix both lists share with the previous request's
    (by identity, in C) still hold, and only the pairs past it are compared and summed."""

    def __init__(self, cost: Callable[[Message], float]) -> None:
        self.cost = cost
        # the lists last given, by reference (identity_memo.kept_prefix), and their lengths then
        self._sent: Sequence[Message] = []
        self._pruned: Sequence[Message] = []
        self._n = self._m = 0
        self._at: list[int] = []  # the positions of the replaced pairs, ascending
        self._sums: list[float] = [0]  # running sums: _sums[k] is the sum of the first k terms

    def __call__(self, sent: Sequence[Message], pruned: Sequence[Message]) -> float:
        # the pairs before ``p`` are the previous request's, the same objects: so are their
        # positions and the running sums of their terms
        p = min(kept_prefix(sent, self._sent, self._n), kept_prefix(pruned, self._pruned, self._m))
        at, sums = self._at, self._sums
        k = bisect_left(at, p)
        del at[k:], sums[k + 1 :]
        n = min(len(sent), len(pruned))
        if p < n:
            at.extend(
                # slices: islice(sent, p, n) steps over the first ``p`` items, a whole history
                # per request
                compress(range(p, n), map(operator.is_not, sent[p:n], pruned[p:n]))
            )
        new = at[k:]
        if new:
            # total += cost(sent[i]) - cost(pruned[i]), one running sum per pair, looped in C
            cost = self.cost
            terms = map(
                operator.sub,
                map(cost, map(sent.__getitem__, new)),
                map(cost, map(pruned.__getitem__, new)),
            )
            more = accumulate(terms, operator.add, initial=sums[-1])
            next(more)  # the initial value, already in place
            sums.extend(more)
        self._sent, self._pruned = sent, pruned
        self._n, self._m = len(sent), len(pruned)
        return sums[-1]
