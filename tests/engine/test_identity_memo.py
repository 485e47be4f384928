"""engine.identity_memo: values remembered by object identity, and emptied on demand
(clear_memos: a process that replays many sessions one after the other)."""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import identity_memo as memo


def test_a_value_is_computed_once_per_object_until_the_memos_are_cleared() -> None:
    calls: list[int] = []

    @memo.by_identity
    def size(obj: list[int]) -> int:
        calls.append(1)
        return len(obj)

    @memo.by_identity_and
    def scaled(obj: list[int], k: int) -> int:
        calls.append(2)
        return len(obj) * k

    a, b = [1, 2], [1, 2]
    assert (size(a), size(a), size(b)) == (2, 2, 2) and calls == [1, 1]
    assert (scaled(a, 3), scaled(a, 3), scaled(a, 4)) == (6, 6, 8) and calls.count(2) == 2
    memo.clear_memos()
    assert (size(a), scaled(a, 3)) == (2, 6) and calls == [1, 1, 2, 2, 1, 2]


def test_cleared_memos_no_longer_hold_their_objects() -> None:
    """What a memo held of a session is freed once the memos are cleared; a memo made for one
    replay leaves the registry with it."""
    import weakref

    class Block(dict):
        pass

    @memo.by_identity
    def length(obj: Block) -> int:
        return len(obj)

    block = Block(a=1)
    ref = weakref.ref(block)
    assert length(block) == 1
    del block
    gc.collect()
    assert ref() is not None  # the memo holds it
    memo.clear_memos()
    gc.collect()
    assert ref() is None
    before = len(memo._TABLES)
    local = memo.by_identity(len)
    assert len(memo._TABLES) == before + 1
    del local
    gc.collect()
    assert len(memo._TABLES) == before


def test_shared_prefix_counts_the_same_objects_up_to_the_first_other_one():
    a, b, c = [1000 + i for i in range(3)], object(), object()
    old = [*a, b]
    assert memo.shared_prefix(old, old) == 4
    assert memo.shared_prefix([*old, c], old) == 4  # grown
    assert memo.shared_prefix(a, old) == 3  # cut
    assert memo.shared_prefix([*a, c], old) == 3  # the last one replaced
    assert memo.shared_prefix([a[0], c, *a[2:], b], old) == 1
    assert memo.shared_prefix([], old) == 0 and memo.shared_prefix(old, []) == 0
    # equal but not the same objects: not shared (a twin's state is kept by identity)
    assert memo.shared_prefix([int(str(x)) for x in a], a) == 0


def test_shared_prefix_reads_the_lists_pointers_on_cpython():
    """The comparison of the two lists' pointer arrays is in use where the layout is the one it
    reads (CPython's), and it answers as the item-by-item comparison on every kind of change."""
    import platform

    if platform.python_implementation() == "CPython":
        assert memo._POINTERS is not None
        if platform.system() in ("Linux", "Darwin"):  # the C library's memcmp, in place
            assert memo._MEMCMP is not None
    objs = [object() for _ in range(300)]
    for n in (1, 2, 7, 8, 9, 63, 64, 65, 300):
        old = objs[:n]
        cases = [old, [*old, object()], old[:-1], old[: n // 2]]
        for i in {0, n // 3, n - 1}:
            changed = list(old)
            changed[i] = object()
            cases.append(changed)
        for new in cases:
            assert memo.shared_prefix(new, old) == memo._scan(new, old)
            assert memo.shared_prefix(old, new) == memo._scan(old, new)
            m = min(len(new), len(old))
            if memo._MEMCMP is not None and m:  # the bytes comparison it stands in for, too
                assert memo._MEMCMP(new, old, m) == memo._scan(new, old)
                a, b = memo._POINTERS(new, m), memo._POINTERS(old, m)
                assert (a == b) == (memo._MEMCMP(new, old, m) == m)
    # not lists: compared item by item
    assert memo.shared_prefix(tuple(objs[:5]), objs[:4]) == 4


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(0, 200),
    edits=st.lists(st.tuples(st.integers(0, 250), st.sampled_from(["set", "cut", "grow"]))),
)
def test_shared_prefix_is_the_item_by_item_comparison(size, edits):
    pool = [object() for _ in range(size)]
    old = list(pool)
    new = list(pool)
    for at, kind in edits:
        if kind == "set" and new:
            new[at % len(new)] = object()
        elif kind == "cut":
            del new[at % (len(new) + 1) :]
        else:
            new.extend(object() for _ in range(at % 5))
    assert memo.shared_prefix(new, old) == memo._scan(new, old)
    assert memo.shared_prefix(old, new) == memo._scan(old, new)


def test_kept_prefix_reads_a_list_kept_by_reference_up_to_its_length_then() -> None:
    a, b, c = object(), object(), object()
    history = [a, b]
    n = len(history)  # what a stage keeps: the list itself and its length
    history.append(c)  # the replay appends to the list it passed on
    assert memo.kept_prefix(history, history, n) == 2  # not 3: c was never seen
    assert memo.kept_prefix([a, b, c], history, n) == 2
    assert memo.kept_prefix([a, object(), c], history, n) == 1
    assert memo.kept_prefix([a], history, n) == 1
    assert memo.kept_prefix([], history, n) == 0
    assert memo.kept_prefix((a, b), [a, b], 2) == 2  # any sequence
