"""Legacy micro-compaction kept across requests (engine.replay.microcompact_incremental) against
its specification (engine.claude_code.microcompact.microcompact over the whole history on every
request): every run of a replay gives an equal result (the messages, what it cleared, the
sizes, the reason), and the replays' Simulations are identical, on shared real sessions of the
legacy profiles (runs that fire, copies of cleared results handed out again), one with images,
and a long synthetic one."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from shared_data import PUBLIC

from engine.claude_code.microcompact import microcompact
from engine.profiles import profile_for
from engine.replay import counterfactual as replay_mod
from engine.replay.microcompact_incremental import IncrementalMicrocompact
from engine.replay.session import simulate
from engine.transcript import build_transcript, load_transcript

from .conftest import need_shared, spotter_sessions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spotter-session.jsonl"


class Checked(IncrementalMicrocompact):
    """The incremental run, compared with the specification on every request."""

    runs: ClassVar[list[tuple[bool, int]]] = []

    def run(self, messages, already=frozenset()):
        got = super().run(messages, already)
        want = microcompact(messages, self.profile, self.thresholds, already)
        assert got == want
        Checked.runs.append((want.fired, len(already)))
        return got


def check(tr, scenario, monkeypatch):
    prof = profile_for(tr.version or "2.1.39")
    Checked.runs = []
    with monkeypatch.context() as m:
        m.setattr(replay_mod, "IncrementalMicrocompact", Checked)
        checked = simulate(tr, prof, scenario, microcompact_on=True)
    plain = simulate(tr, prof, scenario, microcompact_on=True)
    assert plain.requests == checked.requests and plain.events == checked.events
    return Checked.runs


def _legacy_sessions():
    paths = spotter_sessions()[:3] + sorted(PUBLIC.glob("*.jsonl.xz"))[:6]
    return [p for p in paths if p.stat().st_size > 100_000]


@pytest.mark.parametrize("scenario", ["unpatched", "patched"])
@pytest.mark.parametrize("path", _legacy_sessions() or [None], ids=lambda p: p and p.name[:40])
def test_shared_sessions_run_as_the_specification(path, scenario, monkeypatch):
    tr = load_transcript(need_shared(path or PUBLIC / "missing"))
    if profile_for(tr.version or "2.1.39").microcompact != "legacy":
        pytest.skip(f"{tr.version}: no legacy micro-compaction in its profile")
    runs = check(tr, scenario, monkeypatch)
    assert runs


def test_runs_that_fire_and_clear_again_are_the_specification(monkeypatch):
    """The example session four times over: micro-compactions fire, later requests carry the
    results they cleared (the copies handed out again), compactions restart the history."""
    from bench.bench_simulate import repeated

    tr = build_transcript(repeated(list(load_transcript(EXAMPLE).records), 4), "x4")
    assert profile_for(tr.version or "2.1.39").microcompact == "legacy"
    runs = check(tr, "unpatched", monkeypatch)
    assert any(fired for fired, _ in runs)  # a run fired
    assert any(n for fired, n in runs if not fired)  # later runs carried earlier clearings


def test_the_recorded_replay_runs_as_the_specification(monkeypatch):
    """The recorded replay (engine.replay.recorded) keeps the same state: the example session
    four times over, where micro-compactions fire."""
    from bench.bench_simulate import repeated
    from engine.replay import recorded as recorded_mod

    tr = build_transcript(repeated(list(load_transcript(EXAMPLE).records), 4), "x4")
    prof = profile_for(tr.version or "2.1.39")
    Checked.runs = []
    with monkeypatch.context() as m:
        m.setattr(recorded_mod, "IncrementalMicrocompact", Checked)
        checked = simulate(tr, prof, "recorded")
    plain = simulate(tr, prof, "recorded")
    assert plain.requests == checked.requests and plain.events == checked.events
    assert len(Checked.runs) > 50 and any(fired for fired, _ in Checked.runs)
