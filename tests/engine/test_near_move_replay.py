"""The near move in the replay, on the real session where the free move alone left a compaction:
entireio/cli 9d7a9d52 (2.1.25, Claude Code's threshold 167,000). With the near move off
(CLAUDE_CTX_CLEAR_MARGIN=0) the paid policy's last move leaves the count to reach the threshold at
line 1079; with the default margin the replies' prompts near the threshold make the next requests
clear all they may, and the session ends without a compaction. The replay tells the policy every
reply's prompt: the near moves are on requests whose previous prompt reached the level."""

from __future__ import annotations

from engine.profiles import profile_for
from engine.replay.session import simulate
from engine.transcript import load_transcript
from engine.twins.free_moves import DEFAULT_MARGIN, near_level

from .conftest import PUBLIC, need_shared

SESSION = "entireio__cli__9d7a9d52-7eb4-427d-847d-ee5451884f3d.jsonl.xz"


def test_the_near_move_avoids_the_compaction_the_free_move_left() -> None:
    tr = load_transcript(need_shared(PUBLIC / SESSION))
    profile = profile_for(tr.version)
    off = simulate(tr, profile, "patched", clear_env={"CLAUDE_CTX_CLEAR_MARGIN": "0"})
    on = simulate(tr, profile, "patched")
    threshold = on.thresholds.auto_compact
    assert threshold == 167_000
    assert [e.line for e in off.events if e.kind == "auto_compact"] == [1079]
    assert on.summary["auto_compactions"] == 0
    assert max(r.tokens for r in on.requests) < threshold
    level = near_level(on.model or "", (), DEFAULT_MARGIN)
    assert level == threshold - DEFAULT_MARGIN
    # every cache break of the near-move run that the run without it has not is a request whose
    # previous prompt had reached the level (a near move), and there is at least one
    breaks_off = {r.line for r in off.requests if r.cache_break}
    new_breaks = [
        i for i, r in enumerate(on.requests) if r.cache_break and r.line not in breaks_off
    ]
    assert new_breaks
    for i in new_breaks:
        assert i > 0 and on.requests[i - 1].prompt_tokens >= level, on.requests[i].line


NATIVE_1M_SESSION = "JanDeDobbeleer__oh-my-posh__6c0a282a-886f-458d-a426-93d95104b4a6.jsonl.xz"


def test_a_natively_1m_model_moves_near_the_1m_window_not_the_200k_one() -> None:
    """oh-my-posh 6c0a282a: Claude Code 2.1.217 with claude-opus-5, which that build runs at a
    1,000,000 window (no ``[1m]`` in the id), prompts up to 400,879 tokens and no
    auto-compaction. Its near level is its build's threshold less the margin (990,001: it
    compacts only when the API refuses the prompt), so no request moves near; when
    the level was taken from a 200,000 window (157,000), the uncleared part alone stayed past it
    and every request moved, a cache rewrite each: clearing alone cost +377% against unpatched
    (112 cache breaks), with the text prune +21.5%. Now clearing is cheaper than unpatched, and
    the margin's knob at 0 (no near move at all) replays the same requests."""
    from engine.claude_code.thresholds import native_1m, near_threshold

    tr = load_transcript(need_shared(PUBLIC / NATIVE_1M_SESSION))
    profile = profile_for(tr.version)
    model = tr.model or ""
    assert tr.version == "2.1.217" and model.startswith("claude-opus-5")
    assert native_1m(model, profile, {})
    unpatched = simulate(tr, profile, "unpatched")
    assert unpatched.thresholds.context_window == 1_000_000
    assert near_threshold(unpatched.thresholds, tr.version) == 1_000_001  # the level 990,001
    assert unpatched.summary["auto_compactions"] == 0
    assert max(r.tokens for r in unpatched.requests) > 400_000
    for scenario in ("server_clearing", "patched"):
        on = simulate(tr, profile, scenario)
        off = simulate(tr, profile, scenario, clear_env={"CLAUDE_CTX_CLEAR_MARGIN": "0"})
        assert on.summary == off.summary, scenario
        assert on.summary["cost"] < unpatched.summary["cost"], scenario
        assert on.summary["cache_breaks"] <= 10, scenario


def test_a_near_move_that_frees_less_than_the_margin_is_not_made() -> None:
    """A synthetic 2.1.217 session (its build compacts at 200,001 with ``claude-sonnet-4-5``: the
    near level 190,001) whose replies carry 6,000 characters of thinking and two 2,000-character
    results a turn, a compaction recorded where its prompt passed 167,000. Past the level each
    request could clear only the results since the last move: before the near move had to free
    the margin it moved on 5 requests of 7 (each a rewrite of ~170,000 tokens) and the
    compaction still came, +58% against unpatched. Now no near move is made there: the margin's
    knob at 0 replays the same requests, and the cost is within 15% of unpatched's (the paid
    rule's own moves, which put the compaction off by 48 requests)."""
    from engine.claude_code.thresholds import near_threshold

    from .test_counterfactual_fidelity import Session

    s = Session("claude-sonnet-4-5", "2.1.217")
    for n in range(60):
        if s.prompt() >= 167_000:
            s.compaction("auto", "summary " * 500, 20_000)
        s.turn(n, think=6_000, result=2_000, rounds=2)
    tr = s.transcript()
    profile = profile_for("2.1.217")
    unpatched = simulate(tr, profile, "unpatched")
    on = simulate(tr, profile, "server_clearing")
    off = simulate(tr, profile, "server_clearing", clear_env={"CLAUDE_CTX_CLEAR_MARGIN": "0"})
    level = near_threshold(on.thresholds, "2.1.217") - DEFAULT_MARGIN
    assert level == 190_001
    # replies at the level: the next requests asked for the near move
    assert sum(r.prompt_tokens >= level for r in on.requests[:-1]) >= 5
    assert on.summary == off.summary
    assert on.summary["cache_breaks"] <= 4
    assert on.summary["cost"] < 1.15 * unpatched.summary["cost"]
