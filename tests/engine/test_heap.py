"""engine.replay.heap.frozen_heap: the objects of the process out of the cycle collector during a
replay and no collection by itself meanwhile, both given back after it (also after an error), only
by the outermost replay and never when the process froze objects itself; a replay under it gives
the same Simulation and leaves no reference cycle (what makes going without collections safe)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from engine.profiles import profile_for
from engine.replay import session
from engine.replay.counterfactual import simulate_counterfactual
from engine.replay.heap import frozen_heap
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
    assert gc.isenabled()
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # out of every generation
        assert not gc.isenabled()
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
    assert any(o is kept for o in gc.get_objects(2))  # back, in the oldest generation


def test_garbage_made_in_the_block_is_still_collected() -> None:
    with frozen_heap():
        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1


def test_given_back_after_an_error() -> None:
    with pytest.raises(RuntimeError), frozen_heap():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
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
    with frozen_heap():
        assert 0 < gc.get_freeze_count() <= frozen  # nothing more frozen (some may be freed)
        assert gc.isenabled()  # nor its collections stopped
    assert gc.get_freeze_count() > 0  # not unfrozen by the replay


def test_a_process_that_disabled_the_collector_keeps_it_disabled() -> None:
    gc.disable()
    try:
        with frozen_heap():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


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


@pytest.mark.parametrize(
    "scenario", ["recorded", "unpatched", "text_prune", "server_clearing", "patched", "oracle"]
)
def test_a_replay_leaves_no_reference_cycle(scenario: str) -> None:
    """What the replay made is freed by reference counts alone: nothing for a collection to find
    (the collector's own lists as the replay left them, with DEBUG_SAVEALL keeping what it finds)."""
    tr = load_transcript(EXAMPLE)
    profile = profile_for(tr.version or "2.1.39")
    session.simulate(tr, profile, scenario)  # the memos filled, as in a later replay
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        sim = session.simulate(tr, profile, scenario)
        del sim
        gc.collect()
        assert gc.garbage == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
