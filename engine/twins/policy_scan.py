"""The clearing policies' walk over a message list, resumable where a list only grew.

:func:`engine.twins.policy.paid_boundary` (the twin of the injected JavaScript) walks the whole
list on every request: ~8 ms in Python for 600 KB of messages, too slow for the gateway, which
decides on every request of a conversation whose list grows by a few messages each time.
:class:`PolicyScan` is the same walk kept as state: the state after each message
(:class:`Point`), so that the walk of a longer list can start again after a message both lists
share (:meth:`PolicyScan.resumable`, :meth:`PolicyScan.truncate`, :meth:`PolicyScan.extend`)
and give the same ``keep`` as :func:`engine.twins.policy.paid_edit` (``paid``) or
:func:`engine.twins.context_clear.edit_for_request` (``fixed``) on the whole list
(``tests/engine/test_policy_scan.py`` holds them together).

What makes a point resumable (the twin looks ahead: a tool use's gain is the size of its result,
which comes in a later message, and a message is a request point when an assistant message
follows it):

* the point's message is a ``user`` or ``assistant`` one, and every tool use up to it has its
  (last) result up to it (``reach``): nothing after it changes the gains before it;
* its request-point status is the same in the new list (a ``user`` message stays the last one
  or stays followed by an ``assistant`` one);
* the new messages after it name no tool use id of the messages before it (their results would
  change the gains counted before, or a result there would be looked up for a use after).

Anything else (duplicate ids, a result before its use, a round whose results come later) only
makes fewer points resumable; the walk from the start is always exact. Messages that are not
JSON objects count as messages without a role, as the injected JavaScript reads them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, NamedTuple

from engine.api.context_management import ClearToolUses
from engine.javascript import utf16_len
from engine.twins.free_moves import MARK, MARK_LEN, Fingerprint
from engine.twins.policy import (
    DEFAULT_CEILING,
    DEFAULT_PATIENCE,
    MAX_DEPTH,
    MEDIA_CHARS,
    WRITE_EXTRA_X20,
    _clears_input,
    move_due,
    thinking_size,
    uncached_system,
    write_extra,
)

_USER, _ASSISTANT = "user", "assistant"
_NO_IDS: tuple[tuple[Any, ...], tuple[Any, ...]] = ((), ())  # a message that names no id first
_NAMES_IDS = partial(operator.is_not, _NO_IDS)  # an entry of a message that names one


class Point(NamedTuple):
    """The walk's state after one message (a named tuple: a walk makes one per message, and
    a frozen dataclass's ``__init__`` sets its eleven fields one call at a time, several times
    the cost of the tuple; a replay walks a long history again after every prune that
    rewrites an early message)."""

    total: int  # characters of the user and assistant messages so far
    trailing: int  # tool results in user messages since the last assistant one (the policy's)
    trailing_any: int  # tool results in any non-assistant message since then (the keep floor)
    cleared: int  # the boundary: tool uses cleared
    rent: int  # clearable characters summed over the request points since the last move
    uses: int  # tool uses so far
    reach: int  # the last message holding the result of a tool use up to here (-1: none)
    role: str | None  # "user", "assistant" or None (another role, or not an object)
    decided: bool  # whether it was a request point
    # the message's entry in the free-move rule's fingerprint (engine.twins.free_moves
    # fingerprint: its role as sent, its size without cache_control marks), when the scan
    # was asked for it (``PolicyScan(prints=True)``); else None and 0
    sent_role: Any = None
    size: int = 0


# Point(...) from its eleven fields in C: a named tuple's ``__new__`` is a Python function (one
# frame per message walked), the tuple's own constructor is not
_new_point = tuple.__new__


def _role(m: Any) -> str | None:
    role = m.get("role") if isinstance(m, dict) else None
    return role if role in (_USER, _ASSISTANT) else None


def _blocks(m: Any) -> list[Any]:
    content = m.get("content") if isinstance(m, dict) else None
    return content if isinstance(content, list) else []


def _typed(block: Any, kind: str) -> bool:
    # a dict first: the Mapping check runs Python code (abc), several times the cost
    return (type(block) is dict or isinstance(block, Mapping)) and block.get("type") == kind


# The sizes of engine.twins.policy (value_size, result_size, block_size, content_size), without
# its identity memo: the gateway walks freshly parsed objects, which a memo would only keep alive.


def _len(s: Any) -> int:
    if not isinstance(s, str):
        return 0
    return len(s) if s.isascii() else utf16_len(s)


def _value_size(value: Any, depth: int = 0) -> int:
    if isinstance(value, str):
        return _len(value)
    if not isinstance(value, (dict, list)):
        return 1
    if depth >= MAX_DEPTH:
        return 0
    if isinstance(value, list):
        return sum(_value_size(v, depth + 1) for v in value)
    return sum(_len(str(k)) + _value_size(v, depth + 1) for k, v in value.items())


def _result_size(content: Any) -> int:
    if isinstance(content, str):
        return _len(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            total += _len(b.get("text"))
        elif kind in ("image", "document"):
            total += MEDIA_CHARS
    return total


def _block_size(block: Any) -> int:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return _len(block.get("text"))
    if kind == "thinking":
        return thinking_size(block)
    if kind in ("image", "document"):
        return MEDIA_CHARS
    if kind == "tool_result":
        return _result_size(block.get("content"))
    return _value_size(block)


def _content_size(content: Any) -> int:
    if isinstance(content, str):
        return _len(content)
    if not isinstance(content, list):
        return 0
    return sum(_block_size(b) for b in content)


_UNMARKED = ("text", "thinking", "image", "document", "tool_result")  # sizes never count a mark


def _marks_size(content: Any) -> int:
    """What ``cache_control`` entries add to :func:`_content_size` (on blocks whose size counts
    their keys): :func:`engine.twins.free_moves.message_size` is the size without them."""
    if not isinstance(content, list):
        return 0
    n = 0
    for b in content:
        if isinstance(b, dict) and MARK in b and b.get("type") not in _UNMARKED:
            n += MARK_LEN + _value_size(b[MARK], 1)
    return n


def unmarked(message: Any) -> Any:
    """``message`` without the ``cache_control`` entries of its blocks whose sizes never count
    one (text, thinking, media, ``tool_result``), or None when it has none. The walk reads both
    alike (the same sizes, fingerprint entry, ids and roles: the same :class:`Point` after the
    same messages). Claude Code marks the newest message's last block and takes the mark off
    on the next request: the gateway proves a message's new bytes to be this value's writing and
    resumes after it (``gateway.policy``) instead of walking it again."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return None
    out: list[Any] | None = None
    for i, b in enumerate(content):
        if isinstance(b, dict) and MARK in b and b.get("type") in _UNMARKED:
            if out is None:
                out = list(content)
            out[i] = {k: v for k, v in b.items() if k != MARK}
    return None if out is None else {**message, "content": out}


def fingerprint_of(points: Sequence[Point]) -> Fingerprint:
    """:func:`engine.twins.free_moves.fingerprint` of the list a ``prints`` scan walked."""
    return [(p.sent_role, p.size) for p in points]


def system_facts(system: Any) -> tuple[int, int]:
    """What the ``paid`` rule takes from a request's system prompt: (:func:`system_rest`,
    :func:`engine.twins.policy.write_extra`)."""
    return system_rest(system), write_extra(system)


def _input_size(value: Any) -> int:
    """What clearing a tool use's ``input`` frees (the twin's ``value_size(input, 1)``)."""
    return _value_size(value, 1)


Facts = tuple[str | None, tuple[tuple[Any, Any, Any], ...], tuple[Any, ...]]
"""What the walk reads of one message's blocks (:func:`message_facts`)."""


def message_facts(m: Any) -> Facts:
    """(role, its tool uses as (id, name, input) when an assistant message, its
    ``tool_result`` blocks when not): what the walk and :meth:`PolicyScan.resumable` read of a
    message's blocks, whatever the messages around it."""
    role = _role(m)
    blocks = _blocks(m)
    if role == _ASSISTANT:
        uses = tuple(
            (b.get("id"), b.get("name"), b.get("input")) for b in blocks if _typed(b, "tool_use")
        )
        return role, uses, ()
    return role, (), tuple(b for b in blocks if _typed(b, "tool_result"))


@dataclass(frozen=True, slots=True)
class Sizes:
    """The sizes the walk reads: a message's content, a tool result's content, a tool use's
    input, a message's blocks as the walk reads them (:func:`message_facts`). The defaults compute
    them afresh; a replay, which hands the walk the same objects request after request (never
    mutated), passes memoised ones (:func:`engine.identity_memo.by_identity`), so walking a
    list again after an edit early in it reads the edited messages only."""

    content: Callable[[Any], int] = _content_size
    result: Callable[[Any], int] = _result_size
    input: Callable[[Any], int] = _input_size
    facts: Callable[[Any], Facts] = message_facts


def system_rest(system: Any) -> int:
    """:func:`engine.twins.policy.uncached_system` without its identity memo: characters of the
    system prompt after its last ``cache_control`` block."""
    return uncached_system(system, _block_size)


class PolicyScan:
    """The walk of :func:`engine.twins.policy.paid_boundary` over a list that grows."""

    def __init__(
        self,
        edit: ClearToolUses,
        ceiling: int = DEFAULT_CEILING,
        patience: int = DEFAULT_PATIENCE,
        rest: int = 0,
        extra: int = WRITE_EXTRA_X20,
        sizes: Sizes | None = None,
        prints: bool = False,
    ) -> None:
        self.edit = edit
        self.ceiling = ceiling
        self.patience = patience
        self.rest = rest  # characters a move writes again before the messages (paid_boundary)
        self.extra = extra  # 20 × a write's extra price over a read (policy.write_extra)
        self.sizes = sizes or Sizes()
        self.prints = prints  # each Point also holds the message's fingerprint entry
        self.points: list[Point] = []
        self.gains = [0]  # prefix sums of the characters clearing the oldest uses frees
        self.use_at: dict[Any, int] = {}  # tool use id -> the first message naming it
        self.result_at: dict[Any, int] = {}  # tool result id -> the first user message naming it
        self._introduced: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
        # paid_boundary's ``moved``: (message index, boundary), applied when the walk passes it
        self.moved: tuple[int, int] | None = None
        self._applied: list[int] = []  # the points a move changed, in order (takes_only)

    @property
    def knobs(self) -> tuple[ClearToolUses, int, int, int, int]:
        return self.edit, self.ceiling, self.patience, self.rest, self.extra

    @property
    def system(self) -> tuple[int, int]:
        """What the walk took from the system prompt: :func:`system_facts`."""
        return self.rest, self.extra

    def __len__(self) -> int:
        return len(self.points)

    def move(self, moved: tuple[int, int] | None) -> None:
        """The conversation's last move (:func:`engine.twins.policy.paid_boundary`'s ``moved``,
        in this walk's message indices), or ``None``. A move on the last message walked is
        taken into its point at once; one on a later message when the walk passes it; one on a
        message walked before the last cannot change what was walked (it is only remembered:
        call it before :meth:`extend` walks that message, or after it, on the last one)."""
        self.moved = moved
        if moved is None or moved[0] != len(self.points) - 1:
            return
        p = self.points[-1]
        if moved[1] > p.cleared:
            self.points[-1] = p._replace(cleared=moved[1], rent=0)
            self._applied.append(moved[0])

    def takes_only(self, moved: tuple[int, int] | None) -> bool:
        """Whether the points walked took no move but ``moved`` (``paid_boundary`` takes the
        conversation's last move only). An earlier move the walk took stays in the points it
        kept: after the next move, or when the conversation lets its boundary go, the caller
        walks the list again from a point before it (:meth:`other_move`), or from the start."""
        return self.other_move(moved) is None

    def other_move(self, moved: tuple[int, int] | None) -> int | None:
        """The first point that took a move but ``moved`` (``None``: :meth:`takes_only`). The
        points before it took none: a walk resumed before it (:meth:`resumable`,
        :meth:`truncate`) with ``moved`` set is the twin's walk again, without walking the list
        from the start."""
        m = moved[0] if moved is not None else None
        return next((a for a in self._applied if a != m), None)

    # --- resuming ------------------------------------------------------------------------------

    def resumable(self, j: int, tail: Sequence[Any], facts: Sequence[Facts] | None = None) -> bool:
        """Whether the list of the first ``j + 1`` messages walked so far, followed by ``tail``,
        is walked exactly by :meth:`truncate` ``(j)`` then :meth:`extend` ``(tail)``.
        ``facts``: the tail's facts (``sizes.facts`` of each message) when the caller has
        them."""
        if not 0 <= j < len(self.points):
            return j == -1
        p = self.points[j]
        if p.role is None or p.reach > j:
            return False
        if facts is None:
            facts = list(map(self.sizes.facts, tail))
        if p.role == _USER:
            nxt = next((f[0] for f in facts if f[0] is not None), None)
            if p.decided != (not tail or nxt == _ASSISTANT):
                return False
        use_at, result_at = self.use_at, self.result_at
        for role, uses, results in facts:
            if role == _USER:
                for b in results:
                    at = use_at.get(b.get("tool_use_id"))
                    if at is not None and at <= j:
                        return False
            elif role == _ASSISTANT:
                for uid, _, _ in uses:
                    at = result_at.get(uid)
                    if at is not None and at <= j:
                        return False
        return True

    def truncate(self, j: int) -> None:
        """Keep the walk of the first ``j + 1`` messages only."""
        # the messages that named an id first (most name none: skipped in C)
        for uses, results in filter(_NAMES_IDS, self._introduced[j + 1 :]):
            for i in uses:
                self.use_at.pop(i, None)
            for i in results:
                self.result_at.pop(i, None)
        del self._introduced[j + 1 :]
        del self.points[j + 1 :]
        applied = self._applied
        while applied and applied[-1] > j:
            applied.pop()
        del self.gains[(self.points[-1].uses if self.points else 0) + 1 :]

    def extend(self, tail: Sequence[Any], facts: Sequence[Facts] | None = None) -> None:
        """Walk ``tail``, the messages after those walked so far (see :meth:`resumable`;
        ``facts``: as there)."""
        base = len(self.points)
        if facts is None:
            facts = list(map(self.sizes.facts, tail))
        roles = [f[0] for f in facts]
        # the tail's results, last one per id (the twin's dict), and where each id's last is
        results: dict[Any, Any] = {}
        last_result: dict[Any, int] = {}
        for k, f in enumerate(facts):
            if f[0] == _USER:
                for b in f[2]:
                    results[b.get("tool_use_id")] = b
                    last_result[b.get("tool_use_id")] = base + k
        # the role of the next user or assistant message after each one
        following: list[str | None] = [None] * len(tail)
        nxt: str | None = None
        for k in range(len(tail) - 1, -1, -1):
            following[k] = nxt
            if roles[k] is not None:
                nxt = roles[k]
        p = self.points[-1] if self.points else None
        total = p.total if p else 0
        trailing = p.trailing if p else 0
        trailing_any = p.trailing_any if p else 0
        cleared = p.cleared if p else 0
        rent = p.rent if p else 0
        reach = p.reach if p else -1
        edit = self.edit
        keep, exclude = edit.keep, edit.exclude_tools
        gains = self.gains
        content_size, result_size, input_size = (
            self.sizes.content,
            self.sizes.result,
            self.sizes.input,
        )
        last = len(tail) - 1
        prints = self.prints
        ceiling4, extra_patience, rest = 4 * self.ceiling, self.extra * self.patience, self.rest
        use_at, result_at = self.use_at, self.result_at
        introduce, add_point = self._introduced.append, self.points.append
        moved = self.moved
        sent_role: Any = None
        size = 0
        for k, m in enumerate(tail):
            role, uses, tool_results = facts[k]
            index = base + k
            # the ids this message names first (most name none: no list made)
            new_uses: list[Any] | tuple[()] = ()
            new_results: list[Any] | tuple[()] = ()
            decided = False
            if role is not None:
                size = content_size(m.get("content"))
                total += size
            if prints:
                if role is not None:
                    sent_role = role
                    size -= _marks_size(m.get("content"))
                elif isinstance(m, dict):
                    sent_role = m.get("role")
                    content = m.get("content")
                    size = content_size(content) - _marks_size(content)
                else:
                    sent_role, size = None, 0
            if role == _ASSISTANT:
                trailing = trailing_any = 0
                for uid, name, use_input in uses:
                    if uid not in use_at:
                        use_at[uid] = index
                        new_uses = [*new_uses, uid]
                    reach = max(reach, last_result.get(uid, -1))
                    gain = 0
                    if name not in exclude:
                        result = results.get(uid)
                        if type(result) is dict or isinstance(result, Mapping):
                            gain = result_size(result.get("content"))
                        if _clears_input(edit, name):
                            gain += input_size(use_input)
                    gains.append(gains[-1] + gain)
            else:
                n_results = len(tool_results)
                if role == _USER:
                    for b in tool_results:
                        rid = b.get("tool_use_id")
                        if rid not in result_at:
                            result_at[rid] = index
                            new_results = [*new_results, rid]
                trailing_any += n_results
                if role == _USER:
                    trailing += n_results
                if k == last or (role == _USER and following[k] == _ASSISTANT):
                    decided = True
                    limit = len(gains) - 1 - max(keep, trailing)
                    if limit > cleared:
                        free = gains[limit] - gains[cleared]
                        kept = total - gains[cleared]
                        rent += free
                        if move_due(kept, free, rent, ceiling4, extra_patience, rest):
                            cleared = limit
                            rent = 0
            if moved is not None and index == moved[0] and moved[1] > cleared:
                cleared, rent = moved[1], 0  # the memory's move there (paid_boundary)
                self._applied.append(index)
            introduce((tuple(new_uses), tuple(new_results)) if new_uses or new_results else _NO_IDS)
            add_point(
                _new_point(
                    Point,
                    (
                        total,
                        trailing,
                        trailing_any,
                        cleared,
                        rent,
                        len(gains) - 1,
                        reach,
                        role,
                        decided,
                        sent_role,
                        size if prints else 0,
                    ),
                )
            )

    # --- the edit ------------------------------------------------------------------------------

    def keep(self, policy: str = "paid", step: int = 1) -> int:
        """The keep sent with the list walked: ``paid`` (:func:`engine.twins.policy.paid_edit`)
        or ``fixed`` with ``step`` (:func:`engine.twins.context_clear.edit_for_request`)."""
        keep = self.edit.keep
        if not self.points:
            return keep
        p = self.points[-1]
        if policy == "paid":
            return max(p.uses - p.cleared, p.trailing_any, keep)
        if step > 1 and p.uses > keep:
            keep = p.uses - (p.uses - keep) // step * step
        return max(keep, p.trailing_any)

    def fitted(self, policy: str = "paid", step: int = 1) -> ClearToolUses:
        keep = self.keep(policy, step)
        return self.edit if keep == self.edit.keep else replace(self.edit, keep=keep)


def scan_of(
    messages: Sequence[Any],
    edit: ClearToolUses,
    ceiling: int = DEFAULT_CEILING,
    patience: int = DEFAULT_PATIENCE,
    rest: int = 0,
    extra: int = WRITE_EXTRA_X20,
) -> PolicyScan:
    """The walk of a whole list."""
    scan = PolicyScan(edit, ceiling, patience, rest, extra)
    scan.extend(messages)
    return scan
