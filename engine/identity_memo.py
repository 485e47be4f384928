"""Values computed from objects that are never mutated, remembered by the object's identity.

A replay hands the twins the same message and block objects request after request, and
nothing mutates them (the twins copy what they change), so a value computed from one object
can be kept under its ``id``. Each entry holds the object itself, so the id cannot be reused
by another object while it is cached; a memo is emptied when it reaches :data:`SIZE`, and every
memo by :func:`clear_memos` (a process that replays many sessions, one after the other: what a
memo holds of one session keeps that session's objects alive, hundreds of MB, for nothing).
"""

from __future__ import annotations

import operator
import struct
import sys
import weakref
from collections.abc import Callable, Hashable, Sequence
from itertools import compress, count
from typing import Any, TypeVar

T = TypeVar("T")
V = TypeVar("V")
A = TypeVar("A", bound=Hashable)

SIZE = 1 << 16


# every memo of the process -> its tables (a memo made for one replay leaves with it)
_MISSING = object()


class _Table:
    """A memo's entries: the objects and the values in two dicts under the same key rather than
    one dict of (object, value) pairs: a pair holding a container is one more object the cycle
    collector tracks, and a long replay's memos hold tens of thousands of them (its full
    collections walked them all)."""

    __slots__ = ("objects", "values")

    def __init__(self) -> None:
        self.objects: dict[Any, Any] = {}
        self.values: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self.objects)

    def clear(self) -> None:
        self.objects.clear()
        self.values.clear()


_TABLES: weakref.WeakKeyDictionary[Callable[..., Any], _Table] = weakref.WeakKeyDictionary()


def clear_memos() -> None:
    """Empty every memo of this process (their values are computed again when asked for)."""
    for table in list(_TABLES.values()):
        table.clear()


def by_identity(compute: Callable[[T], V]) -> Callable[[T], V]:
    """``compute(obj)``, computed once per ``obj`` object."""
    table = _Table()
    objects: dict[int, T] = table.objects
    values: dict[int, V] = table.values

    def memoised(obj: T) -> V:
        key = id(obj)
        if objects.get(key, _MISSING) is obj:
            return values[key]
        value = compute(obj)
        if len(objects) >= SIZE:
            table.clear()
        objects[key] = obj
        values[key] = value
        return value

    memoised.__doc__ = compute.__doc__
    _TABLES[memoised] = table
    return memoised


def by_identity_and(compute: Callable[[T, A], V]) -> Callable[[T, A], V]:
    """``compute(obj, arg)``, computed once per ``obj`` object and ``arg`` value."""
    table = _Table()
    objects: dict[tuple[int, A], T] = table.objects
    values: dict[tuple[int, A], V] = table.values

    def memoised(obj: T, arg: A) -> V:
        key = (id(obj), arg)
        if objects.get(key, _MISSING) is obj:
            return values[key]
        value = compute(obj, arg)
        if len(objects) >= SIZE:
            table.clear()
        objects[key] = obj
        values[key] = value
        return value

    memoised.__doc__ = compute.__doc__
    _TABLES[memoised] = table
    return memoised


def _item_pointers() -> Callable[[list[Any], int], bytes] | None:
    """On CPython, a reader of the first ``n`` item pointers of a list, as bytes: a list's items
    are an array of object pointers (``ob_item``) the list's header points to, so two lists
    hold the very same first ``n`` objects exactly when these bytes are equal (both lists hold
    their objects, so no address is reused while they are compared). ``None`` on another
    implementation or another layout (a debug or free-threaded build), which a check of a few
    lists against ``id`` rules out."""
    if sys.implementation.name != "cpython":
        return None
    try:
        import ctypes

        width = ctypes.sizeof(ctypes.c_void_p)
        at = 3 * width  # after the reference count, the type and the size
        items = ctypes.c_void_p.from_address
        string_at = ctypes.string_at

        def read(lst: list[Any], n: int) -> bytes:
            address = items(id(lst) + at).value
            if address is None:  # pragma: no cover - a list with items has its array
                raise ValueError("a list without its item array")
            return string_at(address, n * width)

        for sample in ([object() for _ in range(k)] for k in (2, 3, 8, 65)):
            expected = b"".join(id(o).to_bytes(width, sys.byteorder) for o in sample)
            if (
                read(sample, len(sample)) != expected
                or read(sample[:-1], len(sample) - 1) != expected[:-width]
            ):
                return None
    except Exception:  # pragma: no cover - any surprise means the portable comparison
        return None
    return read


_POINTERS = _item_pointers()
_POINTER_BITS = 8 * struct.calcsize("P")


def _memcmp_prefix() -> Callable[[list[Any], list[Any], int], int] | None:
    """Where :func:`_item_pointers` reads CPython's layout and the C library's ``memcmp`` can be
    called: how many of the first ``n`` item pointers two lists share, with no copy of either
    array (reading them as bytes copies both: tens of microseconds for a history of a few
    thousand messages, compared several times per replayed request). One ``memcmp`` over the
    ``n`` pointers; where they differ, a binary search for the first pointer that differs, one
    ``memcmp`` per halving. ``None`` where ``memcmp`` is not found or a check on a few lists
    does not answer as the item-by-item comparison."""
    if _POINTERS is None:
        return None
    try:
        import ctypes

        memcmp = ctypes.CDLL(None).memcmp
        memcmp.restype = ctypes.c_int
        memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
        width = ctypes.sizeof(ctypes.c_void_p)
        at = 3 * width  # after the reference count, the type and the size
        items = ctypes.c_void_p.from_address

        def shared(new: list[Any], old: list[Any], n: int) -> int:
            a, b = items(id(new) + at).value, items(id(old) + at).value
            if a is None or b is None:  # pragma: no cover - a list with items has its array
                raise ValueError("a list without its item array")
            if not memcmp(a, b, n * width):
                return n
            lo, hi = 0, n  # the first ``lo`` pointers are the same; the first ``hi`` are not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if memcmp(a + lo * width, b + lo * width, (mid - lo) * width):
                    hi = mid
                else:
                    lo = mid
            return lo

        pool = [object() for _ in range(70)]
        for k in (1, 2, 3, 8, 65, 70):
            for i in {0, k // 2, k - 1}:
                other = list(pool[:k])
                other[i] = object()
                if shared(pool[:k], list(pool[:k]), k) != k or shared(other, pool, k) != i:
                    return None
    except Exception:  # pragma: no cover - any surprise means the bytes comparison
        return None
    return shared


_MEMCMP = _memcmp_prefix()


def _scan(new: Sequence[Any], old: Sequence[Any]) -> int:
    """The specification of :func:`shared_prefix`: the items compared one by one."""
    return next(compress(count(), map(operator.is_not, old, new)), min(len(old), len(new)))


def kept_prefix(new: Sequence[Any], old: Sequence[Any], n: int) -> int:
    """How many leading items of ``new`` are the first ``n`` items of ``old``: the list a replay's
    stage was given last time, kept by reference with its length ``n`` rather than copied. The
    replay only appends to a list it passed on (its history grows), never changes one of its
    items, so the first ``n`` items of ``old`` are still the ones that were given; ``new`` may be
    ``old`` itself, longer. A copy of a history of a thousand messages touches every message's
    reference count twice (copied, freed), messages spread over a large heap: that, not the
    comparison, was the per-request cost.

    ``new`` being ``old`` itself (the history passed on again, grown or not) is answered
    without reading either list: its first ``n`` items are still the ones given."""
    if new is old:
        return min(len(new), n)
    return min(shared_prefix(new, old), n)


def shared_prefix(new: Sequence[Any], old: Sequence[Any]) -> int:
    """How many leading items of ``new`` are the very objects of ``old`` (compared by identity,
    in C): what an incremental replay may keep of its previous request's state.

    Two lists are compared as the arrays of pointers they hold, in place by the C library's
    ``memcmp`` (:func:`_memcmp_prefix`), else read as bytes (:func:`_item_pointers`: one
    comparison and, where they differ, the lowest differing byte of the two arrays read as
    integers); a replay compares its whole history with the previous request's on every
    request, and comparing item by item (:func:`_scan`, the portable way) made that a
    quadratic share of a long replay's time."""
    n = min(len(old), len(new))
    read = _POINTERS
    if read is None or not n or type(new) is not list or type(old) is not list:
        return _scan(new, old)
    if _MEMCMP is not None:
        return _MEMCMP(new, old, n)
    a, b = read(new, n), read(old, n)
    if a == b:
        return n
    x = int.from_bytes(a, "little") ^ int.from_bytes(b, "little")
    return ((x & -x).bit_length() - 1) // _POINTER_BITS
