"""engine.identity_memo: values remembered by object identity, and emptied on demand
(clear_memos: a process that replays many sessions one after the other)."""

from __future__ import annotations

import gc

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
