"""Server-side clearing replayed request after request in time linear in the requests.

:func:`engine.server_clearing.clear_on_server` is the specification: on every request it
builds the API view of every sent record, applies ``clear_tool_uses_20250919`` to all of it
(:func:`engine.context_editing.apply_edits`: copies of every cleared block) and counts the
result three times, so a replay of ``n`` requests does ``O(n²)`` work with a large constant.
:class:`IncrementalClearing` gives the identical :class:`~engine.server_clearing.ServerView`
(the same floats, summed in the same order) from state kept across the requests of one replay:

* the API view of each sent record, its ``tool_use`` and ``tool_result`` blocks, are read once
  per record (the replay's records are never mutated; a record is known by identity), and the
  tool uses and the ``tool_use_id -> result`` map grow as records are appended. When the sent
  list is not the previous one plus new records (a compaction, a micro-compaction, a prune
  rewrote a record), the state is rebuilt from the first record that differs;
* what the edit clears is the oldest ``len(uses) - keep`` tool uses, a prefix that only grows
  while the conversation does (``edit_for_request``): the changed blocks of that prefix are
  kept and extended by the newly older uses; a shorter prefix (a round with more parallel
  results) or a result that arrives for an already cleared use recomputes them; a list that
  differs from record ``k`` on takes back the uses whose fold read a record from ``k`` on (the
  others read the same objects);
* an edited record's cost ratio (the chars/4 estimate after / before, as ``BlockEstimates``)
  is kept per (record, changed blocks);
* under the ``paid`` policy (:class:`engine.twins.policy.PaidPolicy`, the default) the keep is
  the policy's walk kept as state (:class:`engine.twins.policy_scan.PolicyScan`), resumed after
  the last record both lists share where the walk says it may be (before the earlier move
  its points took, after a move: ``PolicyScan.other_move``), else walked again; the
  history the file does not hold (the policy's ``preceding``) enters the walk as one leading
  assistant message of that many characters (no tool use, never a request point: it only adds
  its size to the walk's total, as ``paid_boundary``'s ``preceding`` does).

What stays per request is linear with a tiny constant: the identity check of the sent prefix
(in C). The count after the edit comes from prefix sums of the edited records' differences
(:func:`rounded_left_sum`); they are added again one by one, in the specification's order, only
where the two ways of adding could round to different counts.
"""

from __future__ import annotations

import math
import operator
import sys
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from itertools import accumulate, compress
from typing import Any

from engine.api.context_editing import CLEARED_INPUT, PLACEHOLDER
from engine.api.context_management import ClearToolUses
from engine.api.server_clearing import BlockEstimates, ServerView
from engine.identity_memo import by_identity, kept_prefix
from engine.replay.prefix_sums import PrefixSums, summed
from engine.tokens import block_tokens
from engine.twins.conversation_policy import PaidPolicy
from engine.twins.free_moves import BROKE, GREW, NEW, Fingerprint, message_size
from engine.twins.policy_scan import Facts, PolicyScan, Sizes


def _sum_is_plain() -> bool:
    """Whether ``sum`` adds floats one after the other as ``+`` does (3.11; 3.12 on compensates
    the rounding errors: Neumaier's summation, which gives 1.0 here)."""
    return sum([1e100, 1.0, -1e100]) == 0.0


_PLAIN_SUM = _sum_is_plain()


def left_sum(values: Iterable[float], start: float) -> float:
    """``start + v0 + v1 + ...``, added left to right as ``functools.reduce(operator.add)`` adds
    them, bit for bit: in C by ``sum`` where it adds that way (tens of times faster than
    ``reduce``, which calls ``operator.add`` for every value), else by ``reduce``."""
    if _PLAIN_SUM:
        return sum(values, start)
    return reduce(operator.add, values, start)


_UNIT = 2.0**-53  # the unit roundoff of a double: an addition's error is at most this, relative


def rounded_left_sum(
    start: float, values: Sequence[float], sums: Sequence[float], sizes: Sequence[float]
) -> int:
    """``round(left_sum(values, start))``, from the prefix sums of ``values`` (``sums[k]``:
    ``0.0 + values[0] + ... + values[k - 1]`` added left to right) and of their magnitudes
    (``sizes``), without adding every value again when the two ways of adding cannot round
    apart.

    Added left to right, ``n`` values and ``start`` are off their exact sum by at most
    ``n·u/(1 - n·u)`` times the sum of their magnitudes (``u``: :data:`_UNIT`; the recursive
    summation bound), and so is ``start + sums[n]`` (one addition more); so the two lie within
    ``bound`` of each other. ``round`` never decreases as its argument grows: where it gives the
    same integer at both ends of that interval, it gives it for the left-to-right sum inside
    it. Else (a sum within ``bound`` of a half) the values are added again, as
    :func:`left_sum` adds them."""
    n = len(values)
    near = start + sums[n]
    # twice the bound of both ways together (the magnitudes' own sum is rounded too)
    bound = 4.0 * (n + 2) * _UNIT * (abs(start) + sizes[n])
    if math.isfinite(near) and math.isfinite(bound):
        low = round(near - bound)
        if low == round(near + bound):
            return low
    return round(left_sum(values, start))


RESUME_TRIES = 8  # points tried, newest first, before the policy's walk starts again
_FRESH = sys.maxsize  # ``IncrementalClearing._stale`` when every changed record is up to date


_PRINT = operator.attrgetter("print")
_API = operator.attrgetter("api")
_NAMES = operator.attrgetter("names")


class _Record:
    """What the edit needs of one sent record (its API message)."""

    __slots__ = (
        "api",
        "assistant",
        "content",
        "names",
        "print",
        "results",
        "role",
        "trailing",
        "uses",
    )

    def __init__(self, record: Mapping[str, Any]) -> None:
        msg = record.get("message") if record.get("type") in ("user", "assistant") else None
        role = msg.get("role") if isinstance(msg, Mapping) else None
        content = msg.get("content") if isinstance(msg, Mapping) else None
        blocks = content if isinstance(content, list) else []
        self.role = role
        self.content = content
        # the message the policy walks (``server_clearing._api_message`` without its index)
        self.api = {"role": role, "content": content}
        # what the free-move rule compares of it (engine.twins.free_moves.fingerprint)
        self.print = (role, message_size(self.api))
        self.assistant = role == "assistant"
        # (block index, block) of each tool_use; (block index, tool_use_id) of each tool_result
        # (tuples: most records have none, and the empty tuple is no new object to track)
        self.uses = tuple(
            (j, b)
            for j, b in enumerate(blocks)
            if role == "assistant" and isinstance(b, Mapping) and b.get("type") == "tool_use"
        )
        self.results = tuple(
            (j, b.get("tool_use_id"))
            for j, b in enumerate(blocks)
            if role == "user" and isinstance(b, Mapping) and b.get("type") == "tool_result"
        )
        self.names = bool(self.uses or self.results)  # whether it names a tool use id
        # tool_result blocks this message adds to the round in progress (trailing_results
        # counts them in any message that is not the assistant's)
        self.trailing = sum(
            1 for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_result"
        )


def _new_block_tokens(block: Mapping[str, Any]) -> int:
    """A cleared block's tokens: a tool use with the cleared input, a result with the
    placeholder."""
    if block.get("type") == "tool_use":
        return block_tokens({**block, "input": dict(CLEARED_INPUT)})
    return block_tokens({**block, "content": PLACEHOLDER})


class IncrementalClearing:
    """``clear_on_server`` for the successive requests of one replay (see the module doc)."""

    def __init__(
        self,
        edit: ClearToolUses,
        estimate: BlockEstimates,
        step: int = 1,
        policy: PaidPolicy | None = None,
    ) -> None:
        self.edit = edit
        self.estimate = estimate
        self.step = step
        self.policy = policy
        self._scan: PolicyScan | None = None
        # the walk's sizes and each record's facts, memoised by identity: after a prune rewrote
        # an early record, the records after it are walked and read again, the same objects
        plain = Sizes()
        self._sizes = Sizes(
            by_identity(plain.content),
            by_identity(plain.result),
            by_identity(plain.input),
            by_identity(plain.facts),
        )
        self._record = by_identity(_Record)
        self._scanned = 0  # records the scan has walked
        self._preceding = 0  # characters of the leading message the scan walked first
        # the list last synced, by reference, and its length then (identity_memo.kept_prefix)
        self._sent: Sequence[Mapping[str, Any]] = []
        self._n = 0
        # the free-move rule's view of the last list synced: its fingerprint, and whether it
        # broke the previous one's cache (engine.twins.free_moves.broke)
        self._prints: Fingerprint = []
        self._change = NEW
        self._recs: list[_Record] = []
        self._apis: list[Mapping[str, Any]] = []  # each record's ``api``: the list the walk reads
        self._uses: list[tuple[int, int, Mapping[str, Any]]] = []  # (record, block, tool_use)
        self._results: dict[Any, tuple[int, int]] = {}
        self._reset_prefix()
        # id(content) -> (content, changed blocks, ratio): a record's ratio depends on its
        # content only, so it holds when a list that changed earlier shifts the record
        # (the contents by id, and apart: their changed blocks and ratio; see identity_memo)
        self._ratio_of: dict[int, Any] = {}
        self._ratios: dict[int, tuple[tuple[int, ...], float]] = {}
        self._new_block_tokens = by_identity(_new_block_tokens)
        # the last view's costs in and out, its edited records and their cost differences
        # (by reference, as the sent list: the replay never changes a list it was handed)
        self._costs: Sequence[float] = []
        self._costs_n = 0
        self._new_costs: list[float] = []
        self._new_sums = PrefixSums()  # of _new_costs
        self._edited_last: list[int] = []
        self._diffs: list[float] = []
        # prefix sums of the differences and of their magnitudes (rounded_left_sum)
        self._diff_sums: list[float] = [0.0]
        self._diff_sizes: list[float] = [0.0]

    # --- the sent records ---------------------------------------------------------------------

    def _reset_prefix(self) -> None:
        self._done = 0  # uses folded into the changed blocks below
        self._folded_ids: set[Any] = set()
        # per use folded: the blocks it changed, and the last record its fold read (its own or
        # its result's) as a running maximum, so that a truncation unfolds only the uses that
        # read a record it drops (``_unfold``); a use id folded twice makes that a reset
        self._adds: list[tuple[tuple[int, int], ...]] = []
        self._reads: list[int] = []
        self._uses_folded: list[Any] = []  # their ids
        self._twice = False
        self._changed: dict[int, set[int]] = {}
        self._cleared = 0
        # the records with changed blocks by index (``_edited``), each with its changed blocks
        # (``_changed_view``) and its ratio (``_factors``), valid for the records before
        # ``_stale``: a fold that changes a record lowers it to that record's index
        self._edited: list[int] = []
        self._factors: list[float] = []
        self._changed_view: dict[int, tuple[int, ...]] = {}
        self._stale = 0
        # leading entries of _edited and _factors unchanged since the last view used them
        self._kept_edits = 0

    def _sync(self, sent: Sequence[Mapping[str, Any]]) -> None:
        n = self._n
        k = kept_prefix(sent, self._sent, n)
        if k < n:
            self._truncate(k)
        # the fingerprint kept in place: only what the comparison below needs of the old one
        prints = self._prints
        first = prints[0] if prints else None
        old_mid = prints[k : n - 1]
        del prints[k:]
        new = list(map(self._record, sent[k:]))
        prints.extend(map(_PRINT, new))
        self._recs.extend(new)
        self._apis.extend(map(_API, new))
        # the records with tool uses or results, in order (most have neither)
        for i in compress(range(k, len(sent)), map(_NAMES, new)):
            r = new[i - k]
            for j, b in r.uses:
                self._uses.append((i, j, b))
            for j, uid in r.results:
                self._results[uid] = (i, j)
                if uid in self._folded_ids:
                    self._reset_prefix()  # a result for a use already folded in
        # engine.twins.free_moves.change; the records shared by identity print the same, so
        # only the rest before the old last one is compared
        if not n or not prints or prints[0] != first:
            self._change = NEW
        elif len(sent) < n or prints[k : n - 1] != old_mid:
            self._change = BROKE
        else:
            self._change = GREW
        self._sent, self._n = sent, len(sent)

    def _truncate(self, k: int) -> None:
        self._recs = self._recs[:k]
        del self._apis[k:]
        self._scanned = min(self._scanned, k)
        del self._uses[bisect_left(self._uses, k, key=operator.itemgetter(0)) :]
        self._results = {}
        recs = self._recs
        for i in compress(range(len(recs)), map(_NAMES, recs)):  # those naming a tool use id
            for j, uid in recs[i].results:
                self._results[uid] = (i, j)
        self._unfold(k)

    def _unfold(self, k: int) -> None:
        """Take back the folds of the uses that read a record from ``k`` on (the records kept
        are the same objects: the folds of the uses before them still hold)."""
        if self._twice:
            self._reset_prefix()
            return
        start = bisect_left(self._reads, k)
        if not start:  # every fold goes
            self._reset_prefix()
            return
        changed = self._changed
        for t in range(self._done - 1, start - 1, -1):
            adds = self._adds[t]
            for i, j in adds:
                blocks = changed[i]
                blocks.discard(j)
                if not blocks:
                    del changed[i]
                self._stale = min(self._stale, i)
            if adds:
                self._cleared -= 1
            self._folded_ids.discard(self._uses_folded[t])
        del self._adds[start:], self._reads[start:], self._uses_folded[start:]
        self._done = min(self._done, start)

    # --- the edit -----------------------------------------------------------------------------

    def _paid_keep(self, overhead: float) -> int:
        """``PaidPolicy``'s keep for the records synced, with ``overhead`` before them."""
        policy = self.policy
        assert policy is not None
        preceding = max(0, round(overhead - policy.fixed)) if policy.fixed else 0
        lead = 1 if preceding else 0
        scan = self._scan
        recs = self._recs
        n = len(recs)
        conversation = policy.conversation
        moved = None  # the conversation's last move, taken by the walk (paid_boundary's moved)
        if conversation is not None:
            last = conversation.paid_move(self._change, len(self._uses))
            moved = None if last is None else (lead + last[0], last[1])
        start = None  # records the walk keeps
        facts = None  # the facts of the records it walks, when _resume read them
        if scan is not None and preceding == self._preceding:
            start, facts = self._resume(scan, lead, min(self._scanned, n))
            other = None if start is None else scan.other_move(moved)
            if start is not None and other is not None:
                # the points kept took an earlier move, which the twin's walk does not take:
                # walk again from a point before it (the points before it took no move)
                start, facts = self._resume(scan, lead, min(start, other - lead))
        if start is None or scan is None:
            scan = PolicyScan(
                self.edit,
                policy.ceiling,
                policy.patience,
                policy.rest,
                policy.extra,
                self._sizes,
            )
            if preceding:
                scan.extend([{"role": "assistant", "content": "x" * (4 * preceding)}])
            self._scan, self._preceding, start, facts = scan, preceding, 0, None
        if conversation is not None:
            scan.move(moved)
        scan.extend(self._apis[start:], facts)
        self._scanned = n
        keep = scan.keep("paid")
        if conversation is None:
            return keep
        floor = 0  # tool results after the last assistant message (trailing_results)
        for r in reversed(recs):
            if r.assistant:
                break
            floor += r.trailing
        moves = conversation.moves
        keep = conversation.keep(
            self._change,
            self._prints,
            len(self._uses),
            floor,
            self.edit.keep,
            keep,
            policy.level,
            scan.gains,
            policy.need,
        )
        if conversation.moves != moves:  # a move on this request: the walk's last point
            scan.move((lead + n - 1, conversation.forced))
        return keep

    def _resume(
        self, scan: PolicyScan, lead: int, done: int
    ) -> tuple[int | None, list[Facts] | None]:
        """The records the walk keeps when resumed at one of the :data:`RESUME_TRIES` points
        before record ``done``, the newest that may be (``PolicyScan.resumable``); the scan is
        truncated there. ``None``: no such point (the list is walked again from the start).
        With it, the facts of the records after it (read once for every point tried and the
        walk: after a prune rewrote an early record, a thousand records)."""
        low = max(0, done - RESUME_TRIES) + 1
        if low > done:
            return None, None
        facts = list(map(scan.sizes.facts, self._apis[low:]))
        for k in range(done, low - 1, -1):
            tail = facts[k - low :]
            if scan.resumable(lead + k - 1, self._apis[k:], tail):
                scan.truncate(lead + k - 1)
                return k, tail
        return None, None

    def _keep(self) -> int:
        """``edit_for_request``'s keep for the records synced."""
        keep = self.edit.keep
        if self.step > 1:
            n = len(self._uses)
            if n > keep:
                keep = n - (n - keep) // self.step * self.step
        trailing = 0
        for r in reversed(self._recs):
            if r.assistant:
                break
            trailing += r.trailing
        return max(keep, trailing)

    def _fold(self, older: int) -> None:
        """Fold the uses ``self._done:older`` into the changed blocks (``_clear_tool_uses``)."""
        edit = self.edit
        ci = edit.clear_tool_inputs
        recs = self._recs
        adds_of, reads, folded = self._adds, self._reads, self._uses_folded
        last_read = reads[-1] if reads else -1
        for k in range(self._done, older):
            i, j, use = self._uses[k]
            uid = use.get("id")
            if uid in self._folded_ids:
                self._twice = True
            self._folded_ids.add(uid)
            folded.append(uid)
            adds: tuple[tuple[int, int], ...] = ()
            read = i
            name = use.get("name")
            if name not in edit.exclude_tools:
                where = self._results.get(uid)
                if where is not None:
                    read = max(i, where[0])
                    block = recs[where[0]].content[where[1]]  # type: ignore[index]
                    if block.get("content") != PLACEHOLDER:
                        self._changed.setdefault(where[0], set()).add(where[1])
                        self._stale = min(self._stale, where[0])
                        adds = (where,)
                if (ci if isinstance(ci, bool) else name in ci) and use.get(
                    "input"
                ) != CLEARED_INPUT:
                    self._changed.setdefault(i, set()).add(j)
                    self._stale = min(self._stale, i)
                    adds = (*adds, (i, j))
                if adds:
                    self._cleared += 1
            adds_of.append(adds)
            last_read = max(last_read, read)
            reads.append(last_read)
        self._done = older

    def _refresh(self) -> None:
        """The changed records from ``_stale`` on, with their changed blocks and ratios."""
        at = bisect_left(self._edited, self._stale)
        self._kept_edits = min(self._kept_edits, at)
        # a new dict: the one views handed out stays as it was
        view = self._changed_view = dict(self._changed_view)
        for i in self._edited[at:]:
            del view[i]
        # a new list: the last view's (``_edited_last``) stays as it was
        self._edited = self._edited[:at]
        del self._factors[at:]
        for i in sorted(filter(self._stale.__le__, self._changed)):  # those from _stale on
            idx, ratio = self._ratio(i)
            self._edited.append(i)
            self._factors.append(ratio)
            view[i] = idx
        self._stale = _FRESH

    def _ratio(self, i: int) -> tuple[tuple[int, ...], float]:
        idx = tuple(sorted(self._changed[i]))
        old = self._recs[i].content
        if self._ratio_of.get(id(old)) is old:
            known, ratio = self._ratios[id(old)]
            if known == idx:
                return idx, ratio
        assert isinstance(old, list)
        tokens = self.estimate.tokens
        before = sum(tokens(b) for b in old)
        after = before + sum(self._new_block_tokens(old[j]) - tokens(old[j]) for j in idx)
        ratio = after / before if before else 1.0
        self._ratio_of[id(old)] = old
        self._ratios[id(old)] = (idx, ratio)
        return idx, ratio

    def _edited_costs(self, costs: Sequence[float], base: float) -> tuple[list[float], int]:
        """The costs after the edit and the count, rounded: for each edited record in order,
        ``cost = costs[i] * ratio; total += cost - costs[i]`` from ``total = base``, the
        specification's float operations in its order.

        The previous view's products and differences still hold for the edited records before
        the first cost that is not the previous request's (the same float objects: the replay's
        prompt parts hand out the costs they kept) when their ratios did not move; only those
        after it are computed, and the count is the sum of the differences from ``base``, added
        left to right (:func:`rounded_left_sum`: from their prefix sums, kept as the
        differences are, where that cannot round otherwise)."""
        edited, factors = self._edited, self._factors
        m = kept_prefix(costs, self._costs, self._costs_n)
        j = min(bisect_left(edited, m), self._kept_edits, len(self._diffs))
        # positions before ``p``: the same cost, edited in both views with the same ratio or in
        # neither; so the same cost after the edit
        p = min(
            m,
            edited[j] if j < len(edited) else m,
            self._edited_last[j] if j < len(self._edited_last) else m,
        )
        old = list(map(costs.__getitem__, edited[j:]))
        new = list(map(operator.mul, old, factors[j:]))
        diffs, sums, sizes = self._diffs, self._diff_sums, self._diff_sizes
        del diffs[j:], sums[j + 1 :], sizes[j + 1 :]
        diffs.extend(map(operator.sub, new, old))
        more = accumulate(diffs[j:], operator.add, initial=sums[j])
        next(more)  # the initial value, already in place
        sums.extend(more)
        more = accumulate(map(abs, diffs[j:]), operator.add, initial=sizes[j])
        next(more)
        sizes.extend(more)
        after = rounded_left_sum(base, diffs, sums, sizes)
        new_costs = self._new_costs
        if p < len(new_costs):
            new_costs = new_costs[:p]  # a new list: the one handed out keeps its values
        new_costs.extend(costs[p:])  # else the list handed out grows (kept_prefix's contract)
        deque(map(new_costs.__setitem__, edited[j:], new), maxlen=0)  # new_costs[i] = cost
        self._costs, self._costs_n = costs, len(costs)
        self._new_costs = new_costs  # handed out: only ever appended to afterwards
        self._new_sums.update(new_costs, p)  # its costs before ``p`` are the previous list's
        self._edited_last = edited  # _refresh replaces the list rather than change it
        self._kept_edits = len(edited)
        return new_costs, after

    def view(
        self,
        sent: Sequence[Mapping[str, Any]],
        costs: Sequence[float],
        overhead: float,
        sums: Sequence[float] | None = None,
    ) -> ServerView:
        """What ``clear_on_server(sent, costs, overhead, edit, estimate, step)`` returns;
        ``sums``: the prefix sums of ``costs`` when the caller keeps them
        (``engine.replay.prefix_sums``)."""
        edit = self.edit
        base = overhead + summed(costs, sums)
        policy = self.policy
        keep = None
        if policy is not None and policy.conversation is not None:
            # the policy remembers the conversation: it sees every request, as the
            # specification's call does (before the trigger)
            self._sync(sent)
            keep = self._paid_keep(overhead)
        if edit.trigger_type == "input_tokens" and round(base) < edit.trigger_value:
            return ServerView(list(costs), {}, 0, 0)
        if keep is None:
            self._sync(sent)
        if edit.trigger_type == "tool_uses" and len(self._uses) < edit.trigger_value:
            return ServerView(list(costs), {}, 0, 0)
        if keep is None:
            keep = self._paid_keep(overhead) if policy is not None else self._keep()
        older = max(0, len(self._uses) - keep)
        if older < self._done:
            self._reset_prefix()
        self._fold(older)
        if not self._cleared:
            return ServerView(list(costs), {}, 0, 0)
        if self._stale != _FRESH:
            self._refresh()
        before = round(base)
        new_costs, after = self._edited_costs(costs, base)
        changed = self._changed_view  # never changed once handed out (_refresh makes a new one)
        if edit.clear_at_least is not None and before - after < edit.clear_at_least:
            return ServerView(list(costs), {}, 0, 0)
        return ServerView(new_costs, changed, self._cleared, before - after)

    def sums(self, costs: Sequence[float]) -> Sequence[float] | None:
        """The prefix sums of ``costs`` when they are the costs of the last view that cleared
        (``sums(costs)[k] == sum(costs[:k])``, read before the next :meth:`view`), else ``None``."""
        return self._new_sums.table() if costs is self._new_costs else None
