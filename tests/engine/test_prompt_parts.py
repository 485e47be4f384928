"""The per-message prompt parts carried across requests (engine.replay.prompt_parts.PromptParts,
PruneSaving) against their specification (SpecParts: every factor, cost and signature entry
computed again on every request; spec_prune_saving: the prune's saving summed over every pair): the same Simulation, request for request and event for event, in every
counterfactual scenario, on sessions that leave out earlier turns' thinking, sessions with a
resumed process, the largest shared session, and a long synthetic one that compacts."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_data import PUBLIC, SPOTTER

from engine.profiles import profile_for
from engine.replay import counterfactual as replay_mod
from engine.replay.calibration import calibrate
from engine.replay.prompt_parts import SpecParts, spec_prune_saving
from engine.replay.session import simulate
from engine.transcript import build_transcript, load_transcript

from .conftest import need_shared, spotter_sessions

SCENARIOS = ("unpatched", "text_prune", "server_clearing", "patched")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spotter-session.jsonl"
# a model that leaves out earlier turns' thinking; a file with a resumed process
STRIPS = "M-Thisness__M-Claude__3af9b1a7-6512-4883-ad18-320658ced099.jsonl.xz"
RESUMES = "entireio__cli__545b45d4-729e-4d0b-8e6b-45cb65d43f00.jsonl.xz"


def both(tr, scenario, monkeypatch, clear_env=None):
    prof = profile_for(tr.version or "2.1.39")
    made: list[SpecParts] = []

    def spec(*args):
        made.append(SpecParts(*args))
        return made[-1]

    with monkeypatch.context() as m:
        m.setattr(replay_mod, "PromptParts", spec)
        m.setattr(replay_mod, "PruneSaving", lambda cost: partial(spec_prune_saving, cost))
        old = simulate(tr, prof, scenario, clear_env=clear_env)
    assert made  # the replay priced through the specification
    new = simulate(tr, prof, scenario, clear_env=clear_env)
    return old, new


def assert_same(old, new):
    assert new.requests == old.requests
    assert new.events == old.events
    assert len(new.requests) > 10


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("name", [STRIPS, RESUMES])
def test_thinking_and_resumes_replay_the_same(name, scenario, monkeypatch):
    tr = load_transcript(need_shared(PUBLIC / name))
    cal = calibrate(tr, profile_for(tr.version or "2.1.39"))
    assert cal.strips_thinking if name == STRIPS else cal.resumes  # what the case is for
    # a low trigger, so that the clearing scenarios clear (their signatures carry it)
    old, new = both(tr, scenario, monkeypatch, {"CLAUDE_CTX_CLEAR_TRIGGER": "20000"})
    assert_same(old, new)
    if name == STRIPS and scenario in ("text_prune", "patched"):
        # the prune's saving, summed from the previous request's (PruneSaving)
        assert any(e.kind == "text_prune" and e.saved_tokens for e in new.events)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_largest_shared_session_replays_the_same(scenario, monkeypatch):
    path = max(spotter_sessions() or [need_shared(SPOTTER)], key=lambda p: p.stat().st_size)
    old, new = both(load_transcript(path), scenario, monkeypatch)
    assert_same(old, new)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_long_session_that_compacts_replays_the_same(scenario, monkeypatch):
    from bench.bench_simulate import repeated

    tr = build_transcript(repeated(list(load_transcript(EXAMPLE).records), 3), "x3")
    old, new = both(tr, scenario, monkeypatch)
    assert_same(old, new)
    # the list restarts at a compaction; with the clearing, the edit moves (it avoids them)
    kind = "server_clear" if "clear" in scenario or scenario == "patched" else "auto_compact"
    assert any(e.kind == kind for e in new.events)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 3),  # messages appended
            st.integers(0, 40),  # a message the prune replaces (modulo the length)
            st.integers(0, 40),  # a message the prune leaves out
            st.booleans(),  # the history restarts (a compaction)
        ),
        min_size=1,
        max_size=25,
    )
)
def test_prune_saving_is_the_sum_over_the_replaced_pairs(steps):
    """PruneSaving, call after call, equals spec_prune_saving on lists that grow, restart, and
    are pruned anew (replaced and removed messages, misaligned pairs), float for float."""
    from engine.replay.prompt_parts import PruneSaving

    def cost(m):
        return m["cost"]

    saving = PruneSaving(cost)
    history: list[dict] = []
    copies: dict[int, dict] = {}  # the prune hands out the same copy of a message
    k = 0
    for grow, replace, drop, restart in steps:
        if restart:
            history = history[-2:]
        for _ in range(grow):
            k += 1
            history.append({"cost": k * 0.37 + 1 / (k + 2)})
        sent = list(history)
        if not sent:
            continue
        i = replace % len(sent)
        copy = copies.setdefault(id(sent[i]), {"cost": sent[i]["cost"] * 0.3})
        pruned = [*sent[:i], copy, *sent[i + 1 :]]
        if drop % 3 == 0:
            del pruned[drop % len(pruned)]
        assert saving(sent, pruned) == spec_prune_saving(cost, sent, pruned)


def test_lists_handed_out_keep_their_entries(monkeypatch):
    """The costs and signatures PromptParts hands out (and the clearing's costs after its edit)
    are its own lists, not copies: a later request only appends to one, or prices in a new list
    where an earlier entry moves (a new turn's thinking factors, the server's edit moving), so
    every list keeps the entries it had when handed out (kept_prefix's contract, which the
    prompt cache and the clearing rely on). Both ways happen on this session."""
    from engine.replay.clearing_incremental import IncrementalClearing
    from engine.replay.prompt_parts import PromptParts

    handed: list[tuple[list, tuple]] = []

    class Kept(PromptParts):
        def price(self, sent, at):
            got = super().price(sent, at)
            handed.append((got, tuple(got)))
            return got

        def signature(self, on_server):
            got = super().signature(on_server)
            handed.append((got, tuple(got)))
            return got

    class KeptClearing(IncrementalClearing):
        def view(self, *args, **kwargs):
            got = super().view(*args, **kwargs)
            handed.append((got.costs, tuple(got.costs)))
            return got

    tr = load_transcript(need_shared(PUBLIC / STRIPS))
    prof = profile_for(tr.version or "2.1.39")
    knobs = {"CLAUDE_CTX_CLEAR_TRIGGER": "20000"}
    want = simulate(tr, prof, "patched", clear_env=knobs)
    with monkeypatch.context() as m:
        m.setattr(replay_mod, "PromptParts", Kept)
        m.setattr(replay_mod, "IncrementalClearing", KeptClearing)
        got = simulate(tr, prof, "patched", clear_env=knobs)
    assert got == want
    for lst, entries in handed:
        assert tuple(lst[: len(entries)]) == entries
    grown = sum(1 for lst, entries in handed if len(lst) > len(entries))
    lists = {id(lst) for lst, _ in handed}
    assert grown > 100 and len(lists) > 10, (grown, len(lists))
