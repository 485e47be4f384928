"""The paid policy's ceiling in the replay of a native client (engine.twins.policy.ceiling_for):
scaled to the build's own auto-compact threshold, as the gateway scales it.

A never-seen 2.1.215 session with ``claude-fable-5`` (run at a 1,000,000 window) showed why: once
the messages that cannot be cleared passed the 200K default (90,000 tokens of 4 characters),
every request moved, each a rewrite of the whole prompt, for a compaction that was not coming
(48 rewrites, +249% against unpatched; scaled: 4, -11%). Here the same shape, synthetic: replies
whose thinking nobody clears, and a few small tool results a turn. Since then a move the ceiling
forces must also free a tenth of it (``engine.twins.policy.CEILING_SHARE``), so even the 200K
ceiling no longer rewrites on every request there: once per ~9,000 tokens of results."""

from __future__ import annotations

from engine.profiles import profile_for
from engine.replay.session import simulate

from .test_counterfactual_fidelity import Session


def _session(model: str, version: str) -> Session:
    s = Session(model, version)
    for n in range(30):
        s.turn(n, think=20_000, result=2_000, rounds=2)
    return s


def test_a_native_1m_client_is_not_moved_by_the_200k_ceiling() -> None:
    tr = _session("claude-opus-5", "2.1.217").transcript()
    profile = profile_for("2.1.217")
    unpatched = simulate(tr, profile, "unpatched").summary
    scaled = simulate(tr, profile, "server_clearing").summary
    old = simulate(tr, profile, "server_clearing", clear_env={"CLAUDE_CTX_CLEAR_CEILING": "90000"})
    assert unpatched["auto_compactions"] == scaled["auto_compactions"] == 0
    # the 200K ceiling: a move once the results since the last one reach 9,000 tokens
    # (36,000 characters: 9 turns of 2 x 2,000), not on every request once the thinking passed it
    # (before the share this test asserted 40 or more rewrites and over 3 x the cost)
    assert 1 <= old.summary["cache_breaks"] <= 90 // 18
    assert old.summary["cost"] < 1.5 * unpatched["cost"]
    assert scaled["cache_breaks"] <= 2
    assert scaled["cost"] <= unpatched["cost"] * 1.01


def test_a_cli_js_client_keeps_the_default_ceiling() -> None:
    tr = _session("claude-opus-4-6", "2.1.39").transcript()
    profile = profile_for("2.1.39")
    default = simulate(tr, profile, "server_clearing").summary
    set_ = simulate(tr, profile, "server_clearing", clear_env={"CLAUDE_CTX_CLEAR_CEILING": "90000"})
    assert default == set_.summary
