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
import weakref
from collections.abc import Callable, Hashable, Sequence
from itertools import compress, count
from typing import Any, TypeVar

T = TypeVar("T")
V = TypeVar("V")
A = TypeVar("A", bound=Hashable)

SIZE = 1 << 16


# every memo of the process -> its table (a memo made for one replay leaves with it)
_TABLES: weakref.WeakKeyDictionary[Callable[..., Any], dict[Any, Any]] = weakref.WeakKeyDictionary()


def clear_memos() -> None:
    """Empty every memo of this process (their values are computed again when asked for)."""
    for entries in list(_TABLES.values()):
        entries.clear()


def by_identity(compute: Callable[[T], V]) -> Callable[[T], V]:
    """``compute(obj)``, computed once per ``obj`` object."""
    entries: dict[int, tuple[T, V]] = {}

    def memoised(obj: T) -> V:
        hit = entries.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = compute(obj)
        if len(entries) >= SIZE:
            entries.clear()
        entries[id(obj)] = (obj, value)
        return value

    memoised.__doc__ = compute.__doc__
    _TABLES[memoised] = entries
    return memoised


def by_identity_and(compute: Callable[[T, A], V]) -> Callable[[T, A], V]:
    """``compute(obj, arg)``, computed once per ``obj`` object and ``arg`` value."""
    entries: dict[tuple[int, A], tuple[T, V]] = {}

    def memoised(obj: T, arg: A) -> V:
        key = (id(obj), arg)
        hit = entries.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = compute(obj, arg)
        if len(entries) >= SIZE:
            entries.clear()
        entries[key] = (obj, value)
        return value

    memoised.__doc__ = compute.__doc__
    _TABLES[memoised] = entries
    return memoised


def shared_prefix(new: Sequence[Any], old: Sequence[Any]) -> int:
    """How many leading items of ``new`` are the very objects of ``old`` (compared by identity,
    in C): what an incremental replay may keep of its previous request's state."""
    return next(compress(count(), map(operator.is_not, old, new)), min(len(old), len(new)))
