"""Where the top-level members of a JSON object body are, by byte offset, without parsing it all.

The gateway changes one member of a ~600 KB request body (``context_management``) and must leave
every other byte as the client sent it, whatever the body holds (``\\u`` escapes, unicode, nested
objects with a key of the same name, whitespace). A byte search for the key is not enough (the
key may be spelt with escapes, or appear nested in a tool's input) and a full parse says where
nothing is. This module walks the TOP level of the object as a JSON parser would: keys are
matched with the exact JSON string grammar and decoded (escapes included), values are skipped
(strings by their closing quote, honouring backslash runs; arrays and objects by bracket depth,
skipping the strings inside them), and each member's key, key offset and value span are kept.

Two walks:

* :func:`scan` (fast): walks forward from the ``{`` and backward from the ``}`` through small
  values only (Claude Code puts ``model`` first and ``context_management`` near the end), and
  leaves the stretch of large values in the middle (``messages``, ``system``, ``tools``) as a
  *gap* it never reads. What may hide in the gap is bounded by :meth:`TopLevel.gap_may_hold`:
  a member named ``context_management`` there needs either its literal spelling (one byte
  search) or an escaped ASCII letter (``\\u005f`` to ``\\u007a``, one regex search; JSON
  encoders escape only control characters and non-ASCII). Values in the gap are not validated.
* :func:`scan` with ``full=True``: walks every member (any order, any size); exact for any valid
  JSON, a few milliseconds on 600 KB, used when the fast walk cannot decide.

Bracket kinds are not matched against each other and nested values are not validated: the
caller parses what it uses (``model``, ``context_management``) and validates the whole body with
a JSON parser before relying on the full walk.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass

# the exact JSON string grammar (RFC 8259): keys and top-level strings are matched with it
_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_SCALAR_CHARS = re.compile(rb"[0-9A-Za-z.+\-]+")
_WS = re.compile(rb"[ \t\r\n]*")
_NEXT = re.compile(rb'["\[\]{}]')  # the next byte that matters inside an array or object
_ESCAPED_ASCII = re.compile(rb"\\u00[5-7]")  # \u0050-\u007f: `_` and every lower-case letter

_QUOTE, _BACKSLASH, _COLON, _COMMA = 0x22, 0x5C, 0x3A, 0x2C
_OPEN, _CLOSE = b"[{", b"]}"
_LBRACE, _RBRACE = 0x7B, 0x7D

VALUE_BUDGET = 1024  # the fast walk skips values up to this size (Claude Code's tail: < 1 KB)
TAIL_WINDOW = 16384  # and reads at most this much of the body's end backward


@dataclass(frozen=True)
class Member:
    """One top-level member: its decoded key and where the key and the value are."""

    key: str
    key_at: int  # the key's opening quote
    start: int  # the value's first byte
    end: int  # one past the value's last byte


@dataclass(frozen=True)
class TopLevel:
    """The members walked, in body order; all of them when ``gap`` is None.

    ``gap`` is ``(start, end)``: a stretch of whole members not walked, from the value of the
    member keyed ``gap_key`` (whose key was read) to the end of the last value before the
    members walked backward. ``last_end`` is one past the object's last value (where a new
    member goes), None for an empty object."""

    members: tuple[Member, ...]
    last_end: int | None
    gap: tuple[int, int] | None = None
    gap_key: str | None = None

    def named(self, key: str) -> list[Member]:
        return [m for m in self.members if m.key == key]

    def gap_may_hold(self, body: bytes, key: str) -> bool:
        """Whether the gap could hold a member named ``key`` (False: it certainly does not).

        A JSON string spells ``key`` either literally or with at least one ``\\u`` escape of an
        ASCII character; ``key`` is assumed to be lower-case ASCII letters and ``_``."""
        if self.gap is None:
            return False
        if self.gap_key == key:
            return True
        start, end = self.gap
        if body.find(b'"' + key.encode() + b'"', start, end) >= 0:
            return True
        return _ESCAPED_ASCII.search(body, start, end) is not None


def scan(body: bytes, *, full: bool = False) -> TopLevel | None:
    """The top level of ``body`` if it is a JSON object as far as the walk reads, else None.

    Fast (default): small values from both ends, the middle left as a gap. ``full``: every
    member; None then means the body is not a JSON object the walk understands."""
    n = len(body)
    front = None if full else _seen_front(body, n)
    if front is None:
        front = _forward(body, n, None if full else VALUE_BUDGET)
        if front is None:
            return None
        if not full:
            _remember_front(body, n, front)
    members, complete, gap_start, gap_key = front
    if complete:
        return TopLevel(tuple(members), members[-1].end if members else None)
    if full:
        return None
    back = _seen_back(body, n)
    if back is None:
        back = _backward(body, n)
        if back is None:
            return None
        _remember_back(body, n, back)
    tail, back_complete, gap_end, last_end, _ = back
    if back_complete:  # the backward walk read every member: it is the whole object
        return TopLevel(tuple(tail), last_end)
    assert gap_start is not None and gap_end is not None
    if gap_end <= gap_start or (members and tail and tail[0].key_at < gap_end):
        return None
    return TopLevel(tuple(members + tail), last_end, (gap_start, gap_end), gap_key)


def _ws(b: bytes, i: int) -> int:
    m = _WS.match(b, i)
    return m.end() if m else i


def decode_key(raw: bytes) -> str:
    """A JSON string's text (``raw`` matched :data:`_STRING`); escapes decoded."""
    text = raw[1:-1]
    if _BACKSLASH not in text:
        return text.decode("utf-8", "replace")  # invalid UTF-8 names no key we look for
    return str(json.loads(raw.decode("utf-8", "replace")))


# --- forward ---------------------------------------------------------------------------------


def _string_end(b: bytes, j: int, limit: int) -> int | None:
    """One past the string opening at ``b[j]``: the first ``"`` after an even run of ``\\``."""
    k = j + 1
    while True:
        q = b.find(b'"', k, limit)
        if q < 0:
            return None
        r = q
        while b[r - 1] == _BACKSLASH:
            r -= 1
        if (q - r) % 2 == 0:
            return q + 1
        k = q + 1


def _nested_end(
    b: bytes, i: int, limit: int, reverse: bool = False, exact_edge: bool = True
) -> int | None:
    """One past the array or object opening at ``b[i]``, if it ends before ``limit``. With
    ``reverse``, ``b`` is reversed bytes and the value's closing bracket is at ``b[i]``
    (``exact_edge``: the end of ``b`` is the body's start, not a window's edge)."""
    opening = _CLOSE if reverse else _OPEN
    depth = 0
    while True:
        m = _NEXT.search(b, i, limit)
        if m is None:
            return None
        j = m.start()
        c = b[j]
        if c == _QUOTE:
            if reverse:
                end = _rstring_end(b, j, limit, exact_edge and limit == len(b))
            else:
                end = _string_end(b, j, limit)
            if end is None:
                return None
            i = end
            continue
        if c in opening:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return j + 1
        i = j + 1


def value_end(body: bytes, i: int, limit: int) -> int | None:
    """One past the JSON value starting at byte ``i`` (skipped, not validated), if it ends
    before ``limit``; else None."""
    return _value_end(body, i, limit)


def _value_end(b: bytes, i: int, limit: int) -> int | None:
    if i >= limit:
        return None
    c = b[i]
    if c == _QUOTE:
        m = _STRING.match(b, i, limit)
        return m.end() if m else None
    if c in _OPEN:
        return _nested_end(b, i, limit)
    m = _SCALAR.match(b, i, limit)
    if m is None or (m.end() == limit and limit < len(b)):  # a number may go on past limit
        return None
    return m.end()


_Front = tuple[list[Member], bool, int | None, str | None]


def _forward(b: bytes, n: int, budget: int | None) -> _Front | None:
    """(members, complete, gap start, gap key): the members from the ``{`` up to the first value
    over ``budget`` bytes (none: all of them); None if the bytes read are not an object's."""
    i = _ws(b, 0)
    if i >= n or b[i] != _LBRACE:
        return None
    i = _ws(b, i + 1)
    members: list[Member] = []
    if i < n and b[i] == _RBRACE:
        return (members, True, None, None) if _ws(b, i + 1) == n else None
    while True:
        k = _STRING.match(b, i)
        if k is None:
            return None
        key = decode_key(k.group())
        i = _ws(b, k.end())
        if i >= n or b[i] != _COLON:
            return None
        start = _ws(b, i + 1)
        end = _value_end(b, start, n if budget is None else min(n, start + budget))
        if end is None:
            if budget is None or start >= n:
                return None
            return members, False, start, key
        members.append(Member(key, k.start(), start, end))
        i = _ws(b, end)
        if i < n and b[i] == _COMMA:
            i = _ws(b, i + 1)
            continue
        if i < n and b[i] == _RBRACE and _ws(b, i + 1) == n:
            return members, True, None, None
        return None


# --- backward (on the reversed tail: w[x] is b[n - 1 - x]) ------------------------------------


def _rstring_end(w: bytes, x: int, m: int, exact_edge: bool) -> int | None:
    """In reversed bytes, one past the opening quote of the string whose closing quote is
    ``w[x]``: the next ``"`` not followed (in ``w``) by an odd run of ``\\``."""
    k = x + 1
    while True:
        q = w.find(b'"', k, m)
        if q < 0:
            return None
        r = q + 1
        while r < m and w[r] == _BACKSLASH:
            r += 1
        if r == m and not exact_edge:
            return None  # the run of backslashes may go on before the window
        if (r - q - 1) % 2 == 0:
            return q + 1
        k = q + 1


# (members, complete, gap end, last_end, reach): ``reach`` is how many bytes from the body's end
# the walk read when it stopped at a value over the budget inside the window (None otherwise)
_Back = tuple[list[Member], bool, int | None, int | None, int | None]


def _backward(b: bytes, n: int) -> _Back | None:
    """(members, complete, gap end, last_end): the members walked back from the ``}`` through
    values of at most :data:`VALUE_BUDGET` bytes within :data:`TAIL_WINDOW`; None if the bytes
    read are not an object's end."""
    base = max(0, n - TAIL_WINDOW)
    w = b[base:][::-1]
    m = len(w)
    exact_edge = base == 0
    x = _ws(w, 0)
    if x >= m or w[x] != _RBRACE:
        return None
    x = _ws(w, x + 1)
    if x >= m:
        return None
    last_end = n - x
    members: list[Member] = []
    if w[x] == _LBRACE:  # {}
        return (members, True, None, None, None) if _ws(b, 0) == n - 1 - x else None
    while True:
        end = n - x  # in b: one past the value's last byte
        if x >= m:  # the window ends between two members
            return None if exact_edge else (list(reversed(members)), False, end, last_end, None)
        y = _rvalue_end(w, x, m, exact_edge)
        if y is None:
            # over the budget (read up to x + VALUE_BUDGET) or past the window (read to its end)
            reach = x + VALUE_BUDGET if x + VALUE_BUDGET < m else None
            return list(reversed(members)), False, end, last_end, reach
        start = n - y
        x = _ws(w, y)
        if x >= m or w[x] != _COLON:
            if exact_edge or x < m:
                return None
            return list(reversed(members)), False, end, last_end, None
        x = _ws(w, x + 1)
        if x >= m or w[x] != _QUOTE:
            if exact_edge or x < m:
                return None
            return list(reversed(members)), False, end, last_end, None
        y = _rstring_end(w, x, m, exact_edge)
        if y is None:
            return list(reversed(members)), False, end, last_end, None
        key_at = n - y
        k = _STRING.match(b, key_at, n - x)
        if k is None or k.end() != n - x:
            return None
        members.append(Member(decode_key(k.group()), key_at, start, end))
        x = _ws(w, y)
        if x >= m:
            if exact_edge:
                return None
            return list(reversed(members[:-1])), False, end, last_end, None
        if w[x] == _COMMA:
            x = _ws(w, x + 1)
            continue
        if w[x] == _LBRACE and _ws(b, 0) == n - 1 - x:
            return list(reversed(members)), True, None, last_end, None
        return None


def _rvalue_end(w: bytes, x: int, m: int, exact_edge: bool) -> int | None:
    """In reversed bytes, one past the first byte of the value whose last byte is ``w[x]``,
    if that is within :data:`VALUE_BUDGET` and the window; None otherwise."""
    limit = min(m, x + VALUE_BUDGET)
    c = w[x]
    if c == _QUOTE:
        return _rstring_end(w, x, limit, exact_edge and limit == m)
    if c in _CLOSE:
        return _nested_end(w, x, limit, reverse=True, exact_edge=exact_edge)
    s = _SCALAR_CHARS.match(w, x, limit)
    if s is None or (s.end() == limit and not (exact_edge and limit == m)):
        return None
    if _SCALAR.fullmatch(w[x : s.end()][::-1]) is None:
        return None
    return s.end()


# --- the walks of earlier bodies --------------------------------------------------------------
#
# The requests of one conversation begin and end with the same bytes (``model`` and the first
# messages; ``system``, ``tools`` and the small members after them), and what the fast walk
# finds depends only on the bytes it read. So the last :data:`SEEN` walks are kept with those
# bytes (about 1 KB at each end): a body that starts (ends) with the bytes an earlier walk read
# has the same front (back) members, at the same offsets from its start (end), and is not walked
# again (~0.1 ms less per request; ``tests/test_gateway_toplevel_seen.py`` holds the results
# equal to a fresh walk). Kept per process, a few KB in all; the tuples are never changed, so
# gateways on several threads may share them.

SEEN = 8
# each walk kept with the budget and window it read under (what it read depends on them: a walk
# under another budget stopped elsewhere)
_FRONTS: deque[tuple[bytes, tuple[Member, ...], int, str | None, int]] = deque(maxlen=SEEN)
_BACKS: deque[tuple[bytes, int, tuple[Member, ...], int, int | None, tuple[int, int]]] = deque(
    maxlen=SEEN
)


def _remember_front(b: bytes, n: int, front: _Front) -> None:
    """Keep a front walk that stopped at a value over the budget, with the bytes it read: those
    before the value and :data:`VALUE_BUDGET` of it (when the body goes on past them, so the
    body's length played no part)."""
    members, complete, gap_start, gap_key = front
    if complete or gap_start is None or gap_start + VALUE_BUDGET >= n:
        return
    read = b[: gap_start + VALUE_BUDGET]
    _FRONTS.appendleft((read, tuple(members), gap_start, gap_key, VALUE_BUDGET))


def _seen_front(b: bytes, n: int) -> _Front | None:
    for read, members, gap_start, gap_key, budget in tuple(_FRONTS):  # a copy: others add
        if budget == VALUE_BUDGET and n > len(read) and b.startswith(read):
            return list(members), False, gap_start, gap_key
    return None


def _remember_back(b: bytes, n: int, back: _Back) -> None:
    """Keep a backward walk that stopped at a value over the budget inside the window, with the
    bytes it read (for a body longer than the window: the window is then the same size and
    its edge is not the body's start)."""
    members, complete, gap_end, last_end, reach = back
    if complete or reach is None or gap_end is None or n <= TAIL_WINDOW:
        return
    limits = (VALUE_BUDGET, TAIL_WINDOW)
    _BACKS.appendleft((b[n - reach :], n, tuple(members), gap_end, last_end, limits))


def _seen_back(b: bytes, n: int) -> _Back | None:
    if n <= TAIL_WINDOW:
        return None
    for read, n0, members, gap_end, last_end, limits in tuple(_BACKS):
        if limits == (VALUE_BUDGET, TAIL_WINDOW) and b.endswith(read):
            d = n - n0
            shifted = [Member(m.key, m.key_at + d, m.start + d, m.end + d) for m in members]
            return shifted, False, gap_end + d, None if last_end is None else last_end + d, None
    return None
