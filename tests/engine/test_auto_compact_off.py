"""A session that ran past its auto-compact threshold with no compaction ran with auto-compaction
off (engine.replay.auto_compact_off): the replays predict no compaction there. Synthetic sessions
built as the API reports them (the fidelity tests' builder); each prompt is what the API counted."""

from __future__ import annotations

from engine.profiles import profile_for
from engine.replay.auto_compact_off import ran_past_threshold
from engine.replay.session import simulate
from engine.tokens import usage_prompt

from .test_counterfactual_fidelity import SONNET, Session

VERSION = "2.1.6"  # threshold 155,000 for a 200K model


def _past(compact: bool) -> Session:
    """Turns of a 20,000-token prompt and a short answer; with ``compact``, the compaction
    Claude Code makes before the first request after a reply whose prompt reached 155,000."""
    s = Session(SONNET, VERSION)
    for n in range(12):
        s.human(f"part {n}: " + "x" * 80_000)
        s.reply([{"type": "text", "text": f"read part {n}"}])
        if compact and s.prompt() >= 155_000:
            s.compaction("auto", "Summary: " + "the work so far. " * 200, cache_read=20_000)
    return s


def test_a_session_that_went_on_past_the_threshold_ran_with_auto_compaction_off() -> None:
    tr = _past(compact=False).transcript()
    profile = profile_for(VERSION)
    line = ran_past_threshold(tr, 155_000)
    assert line is not None
    first = next(r for r in tr.replies if usage_prompt(r.usage) >= 155_000)
    assert line == first.lines[-1]
    for scenario in ("recorded", "unpatched"):
        sim = simulate(tr, profile, scenario)
        assert not sim.thresholds.auto_compact_enabled, scenario
        assert f"at line {line}" in sim.thresholds.explain[-1]
        assert [e for e in sim.events if e.kind == "auto_compact"] == [], scenario
    assert max(r.tokens for r in simulate(tr, profile, "recorded").requests) > 200_000


def test_a_session_that_compacted_there_keeps_auto_compaction_on() -> None:
    tr = _past(compact=True).transcript()
    assert tr.boundaries
    assert ran_past_threshold(tr, 155_000) is None
    sim = simulate(tr, profile_for(VERSION), "recorded")
    assert sim.thresholds.auto_compact_enabled
    # the replay still compacts where the session did
    recorded = [e for e in sim.events if e.kind == "auto_compact" and e.recorded]
    assert len(recorded) == len(tr.boundaries) and all(e.predicted for e in recorded)
