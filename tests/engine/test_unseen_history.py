"""A file that starts mid-conversation: why a compaction was not avoided (``Event.cause``).

Its first prompt holds history the file does not hold (``Calibration.carried``), which a replay
can neither see nor clear. Each auto-compaction while that history is in the prompt says how
many tokens it is, Claude Code's count had the previous request cleared every tool use it may
(the floor), and the cause; the summary says how many compactions the unseen history forced.
"""

from __future__ import annotations

import pytest

from engine.profiles import profile_for
from engine.replay.calibration import calibrate
from engine.replay.edit_limit import ORACLE_ENV
from engine.replay.model import COMPACTION_CAUSES
from engine.replay.report import render_compare, render_simulation
from engine.replay.session import simulate

from .test_counterfactual_fidelity import OPUS45, OVERHEAD, Session

THRESHOLD = 155_000  # opus 4.5 on 2.1.7: 200K window


def _session(
    carried: int, think: int, result: int, last_prompt: int = 0, until: int = 140_000
) -> Session:
    """Turns of two tool rounds up to ``until`` tokens, then a human prompt (``last_prompt``
    characters more) and a large read after which the count passes the threshold, a real
    compaction, then five more turns."""
    s = Session(OPUS45, "2.1.7", carried=carried)
    n = 0
    while s.prompt() < until:
        s.turn(n, think=think, result=result, rounds=2)
        n += 1
    s.human("and now the tests " + "x" * last_prompt)
    s.reply([{"type": "tool_use", "id": "big", "name": "Read", "input": {"path": "/big"}}])
    s.tool_result("big", 80_000)
    assert s.prompt() > THRESHOLD
    s.compaction("auto", "Summary: " + "the work so far. " * 1_500, cache_read=OVERHEAD - 2_000)
    for k in range(n, n + 5):
        s.turn(k, think=think, result=result, rounds=2)
    return s


def _replay(s: Session, scenario: str, **kw):
    tr = s.transcript()
    prof = profile_for("2.1.7")
    return tr, simulate(tr, prof, scenario, calibration=calibrate(tr, prof), **kw)


def _compactions(sim) -> list:
    return [e for e in sim.events if e.kind == "auto_compact"]


def test_history_the_file_does_not_hold_forces_the_compaction():
    """Thinking fills what the file shows: clearing every tool result it holds leaves the count
    above the threshold, which the 90,000 unseen tokens alone put it over."""
    s = _session(carried=90_000, think=24_000, result=400)
    tr, sim = _replay(s, "unpatched")
    (e,) = _compactions(sim)
    assert e.line == tr.boundaries[0].line
    assert e.unseen_tokens == 90_000 == calibrate(tr, profile_for("2.1.7")).carried
    assert e.floor_tokens is not None and e.tokens > e.floor_tokens >= THRESHOLD
    assert e.floor_tokens - e.unseen_tokens < THRESHOLD
    assert e.cause == "unseen_history"
    assert sim.summary["unseen_history_tokens"] == 90_000
    assert sim.summary["compactions_unseen_history"] == 1
    d = e.as_dict()
    assert (d["unseen_tokens"], d["floor_tokens"], d["cause"]) == (90_000, e.floor_tokens, e.cause)
    # the hindsight optimum cannot avoid it either, and says why
    _, orc = _replay(s, "oracle")
    assert [c.cause for c in _compactions(orc)] == ["unseen_history"]
    assert orc.summary["compactions_unseen_history"] == 1
    # its plan names the request before which no schedule avoids it (the probe's count before
    # the compaction, not the count after it)
    (at,) = [r.index for r in orc.requests if "auto_compact" in r.events]
    assert orc.knobs["oracle"]["unavoidable_compactions_before"] == [at]


def test_the_floor_is_the_count_after_clearing_everything_at_the_previous_request():
    """The floor equals the count of a replay that clears every tool use and input at every
    request (the incremental clearing, another code path than the floor's specification)."""
    s = _session(carried=90_000, think=24_000, result=400)
    _, sim = _replay(s, "unpatched", recall_tools=0)
    (e,) = _compactions(sim)
    env = {**ORACLE_ENV, "CLAUDE_CTX_CLEAR_POLICY": "fixed"}
    _, most = _replay(
        s, "server_clearing", clear_env=env, env={"DISABLE_AUTO_COMPACT": "1"}, recall_tools=0
    )
    at = next(r for r in most.requests if r.line > e.line)
    assert at.tokens == e.floor_tokens


def test_a_compaction_clearing_could_have_avoided_says_so():
    """Tool results fill what the file shows: clearing them at the previous request would have
    kept the count below the threshold, so the unseen history did not force it."""
    s = _session(carried=60_000, think=400, result=24_000)
    _, sim = _replay(s, "unpatched")
    (e,) = _compactions(sim)
    assert e.unseen_tokens == 60_000 and e.floor_tokens is not None
    assert e.floor_tokens < THRESHOLD <= e.tokens
    assert e.cause == "not_cleared"
    assert sim.summary["compactions_unseen_history"] == 0
    # with clearing from the first request there is none, and nothing to explain
    _, orc = _replay(s, "oracle")
    assert _compactions(orc) == [] and orc.summary["unseen_history_tokens"] == 60_000


def test_a_compaction_without_the_unseen_history_is_unclearable():
    """A 90,000-token prompt of text lifts the count so far over the threshold that even
    without the 30,000 unseen tokens and with every tool use cleared it stays over."""
    s = _session(carried=30_000, think=24_000, result=400, last_prompt=360_000, until=100_000)
    _, sim = _replay(s, "patched")
    (e,) = _compactions(sim)
    assert e.floor_tokens is not None and e.floor_tokens - e.unseen_tokens >= THRESHOLD
    assert e.cause == "unclearable" and e.cause in COMPACTION_CAUSES
    assert sim.summary["compactions_unseen_history"] == 0


def test_a_file_that_starts_at_the_beginning_has_none_of_it():
    """Every other session's output stays as it was: no field, no summary row."""
    s = _session(carried=0, think=24_000, result=400)
    _, sim = _replay(s, "unpatched")
    (e,) = _compactions(sim)
    assert e.unseen_tokens is e.floor_tokens is e.cause is None
    assert not {"unseen_tokens", "floor_tokens", "cause"} & set(e.as_dict())
    assert "unseen_history_tokens" not in sim.summary
    assert "compactions_unseen_history" not in sim.summary
    assert "cause" not in render_simulation(sim)


def test_the_compactions_after_the_first_one_have_no_unseen_history():
    """The first compaction takes the unseen history with it: a later one is explained by the
    file alone."""
    s = _session(carried=90_000, think=24_000, result=400)
    n = 100
    while s.prompt() < 150_000:
        s.turn(n, think=24_000, result=400, rounds=2)
        n += 1
    s.human("again")
    s.reply([{"type": "tool_use", "id": "big2", "name": "Read", "input": {"path": "/big"}}])
    s.tool_result("big2", 80_000)
    s.compaction("auto", "Summary: " + "more work. " * 1_500, cache_read=OVERHEAD - 2_000)
    s.turn(n, think=2_000, result=400)
    _, sim = _replay(s, "unpatched")
    first, second = _compactions(sim)
    assert first.cause == "unseen_history" and first.unseen_tokens == 90_000
    assert second.cause is None and second.unseen_tokens is None


@pytest.mark.parametrize("scenario", ["patched", "oracle"])
def test_the_text_outputs_say_why(scenario):
    s = _session(carried=90_000, think=24_000, result=400)
    _, un = _replay(s, "unpatched")
    _, other = _replay(s, scenario)
    text = render_simulation(other)
    assert "cause unseen_history (unseen history 90,000, count with all clearable cleared" in text
    table = render_compare([un, other])
    row = next(x for x in table.splitlines() if x.startswith("compactions_unseen_history"))
    assert row.split()[1:] == ["1", "1"]
    row = next(x for x in table.splitlines() if x.startswith("unseen_history_tokens"))
    assert row.split()[1:] == ["90,000", "90,000"]
    assert f"{scenario}: 1 compaction forced by the 90,000 tokens of history" in table
    assert "unpatched: 1 compaction forced" in table
