"""engine.replay.heap.frozen_heap: the objects of the process out of the cycle collector during a
replay and its youngest generation collected less often, both given back after it (also after an
error), only by the outermost replay and never when the process froze objects itself; a replay
under it gives the same Simulation."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from engine.profiles import profile_for
from engine.replay import session
from engine.replay.counterfactual import simulate_counterfactual
from engine.replay.heap import YOUNG_THRESHOLD, frozen_heap
from engine.transcript import load_transcript

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spotter-session.jsonl"


@pytest.fixture(autouse=True)
def _unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_frozen_during_the_block_and_given_back_after() -> None:
    kept = [{"a": [1, 2]}]  # a container tracked before the block
    assert gc.get_freeze_count() == 0
    before = gc.get_threshold()
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # out of every generation
        assert gc.get_threshold() == (max(before[0], YOUNG_THRESHOLD), *before[1:])
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    assert any(o is kept for o in gc.get_objects(2))  # back, in the oldest generation


def test_garbage_made_in_the_block_is_still_collected() -> None:
    with frozen_heap():
        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1


def test_given_back_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), frozen_heap():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    with frozen_heap():  # and the next block freezes again
        assert gc.get_freeze_count() > 0


def test_nested_blocks_leave_it_to_the_outermost() -> None:
    with frozen_heap():
        with frozen_heap():
            assert gc.get_freeze_count() > 0
        # the inner block did not unfreeze (a count, not equality: a frozen object may be freed)
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_its_heap_keeps_it_frozen() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    before = gc.get_threshold()
    with frozen_heap():
        assert 0 < gc.get_freeze_count() <= frozen  # nothing more frozen (some may be freed)
        assert gc.get_threshold() == before  # nor its thresholds
    assert gc.get_freeze_count() > 0  # not unfrozen by the replay


def test_simulate_replays_under_it_and_gives_the_same_simulation(monkeypatch) -> None:
    tr = load_transcript(EXAMPLE)
    profile = profile_for(tr.version or "2.1.39")
    seen: list[int] = []
    inner = session._simulate

    def spy(*a, **kw):
        seen.append(gc.get_freeze_count())
        return inner(*a, **kw)

    monkeypatch.setattr(session, "_simulate", spy)
    sim = session.simulate(tr, profile, "patched")
    assert seen and seen[0] > 0
    assert gc.get_freeze_count() == 0
    assert sim == simulate_counterfactual(tr, profile, "patched")
