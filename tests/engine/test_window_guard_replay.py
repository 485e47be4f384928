"""The window guard in the replay (issue 16 item 5): with ``CLAUDE_CTX_CLEAR_WINDOW_GUARD=1`` the
injected snippet (``nearWindow``) and the gateway (``gateway/window.py``) leave the edit out once the
request may have reached Claude Code's auto-compact threshold, for the builds before 2.1.330, so
Claude Code compacts inside the window. The engine replays exactly that, on the embedded real
session (2.1.39, Opus, one real auto-compaction)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.claude_code.thresholds import compute_thresholds
from engine.javascript import js_json_stringify, utf16_len
from engine.profiles import profile_for
from engine.replay.counterfactual import OVERHEAD_CHARS_PER_TOKEN, window_guard_limit
from engine.replay.recorded import LINE_KEY
from engine.replay.session import simulate
from engine.transcript import load_transcript
from engine.twins.context_clear import ENV_WINDOW_GUARD, near_window, near_window_limit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spotter-session.jsonl"
GUARD = {ENV_WINDOW_GUARD: "1"}


@pytest.fixture(scope="module")
def tr():
    return load_transcript(EXAMPLE)


@pytest.fixture(scope="module")
def runs(tr):
    profile = profile_for(tr.version)
    return {
        "unpatched": simulate(tr, profile, "unpatched"),
        "off": simulate(tr, profile, "server_clearing"),
        "on": simulate(tr, profile, "server_clearing", clear_env=GUARD),
    }


def kinds(sim, kind):
    return [e for e in sim.events if e.kind == kind]


def test_the_limit_is_the_smaller_of_the_snippets_and_the_gateways(tr):
    """On 2.1.39 (a cli.js build) with the guard on: the snippet's window less 33,000 at 3
    characters a token, or Claude Code's own threshold at 3 when that is lower; off, or on a build
    that compacts on 'prompt is too long' by itself (2.1.330+): no limit."""
    profile = profile_for(tr.version)
    th = compute_thresholds(profile, "claude-opus-4-6", {})
    limit = window_guard_limit(GUARD, profile, tr.version, "claude-opus-4-6", th)
    assert limit == min(near_window_limit(False), th.auto_compact * 3)
    assert limit == 167_000 * 3
    assert window_guard_limit({}, profile, tr.version, "claude-opus-4-6", th) is None
    new = profile_for("2.1.330")
    th_new = compute_thresholds(new, "claude-opus-4-6", {})
    assert window_guard_limit(GUARD, new, "2.1.330", "claude-opus-4-6", th_new) is None
    th_1m = compute_thresholds(profile, "claude-opus-4-6[1m]", {})
    one_m = window_guard_limit(GUARD, profile, tr.version, "claude-opus-4-6[1m]", th_1m)
    assert one_m is not None and one_m > limit


def test_off_by_default_the_replay_keeps_clearing(runs):
    """Without the variable nothing changes: no stop, the compaction avoided."""
    assert kinds(runs["off"], "clear_stopped") == []
    assert len(kinds(runs["unpatched"], "auto_compact")) == 1
    assert kinds(runs["off"], "auto_compact") == []


def test_on_clearing_stops_and_claude_code_compacts_inside_the_window(runs, tr):
    """With the guard: clearing stops once (at the first request past the limit), that request
    and the following ones report the whole prompt, and Claude Code's own auto-compaction fires
    below the window (as unpatched: at its threshold), after which clearing resumes."""
    on = runs["on"]
    stops = kinds(on, "clear_stopped")
    autos = kinds(on, "auto_compact")
    assert len(stops) == 1 and len(autos) == 1
    stop, auto = stops[0], autos[0]
    assert stop.line < auto.line
    assert auto.tokens < 200_000 - 20_000  # inside the window, with room for the summary
    assert on.summary["max_unedited_prompt_tokens"] < 200_000
    before = [r for r in on.requests if r.line < stop.line]
    between = [r for r in on.requests if stop.line <= r.line <= auto.line]
    after = [r for r in on.requests if r.line > auto.line]
    assert any(r.server_cleared for r in before)  # it was clearing before the stop
    assert between and not any(r.server_cleared for r in between)
    assert after and any(r.server_cleared for r in after)  # and clears again after compacting


def test_the_measure_is_the_snippets():
    """The limit and the per-message measure the replay uses are the snippet's (its Python twin
    ``near_window``): a request of ``limit`` characters is past it, one fewer is not; a message
    counts as its JSON without the replay's line key, in UTF-16 units."""
    limit = near_window_limit(False)
    # ["xxx..."]: the string's characters, its two quotes and the brackets
    assert near_window({"model": "claude-opus-4-6", "messages": ["x" * (limit - 4)]})
    assert not near_window({"model": "claude-opus-4-6", "messages": ["x" * (limit - 5)]})
    msg = {"role": "user", "content": "h\u00e9llo \U0001f600", LINE_KEY: 3}
    measured = utf16_len(js_json_stringify({k: v for k, v in msg.items() if k != LINE_KEY}))
    assert measured == len('{"role":"user","content":"héllo "}') + 2  # the emoji: 2 units
    assert OVERHEAD_CHARS_PER_TOKEN == 4


def test_on_a_build_that_recovers_the_guard_changes_nothing(tr):
    """2.1.330 compacts on 'prompt is too long' by itself: the guard stays out of the way."""
    new = profile_for("2.1.330")
    same = replace(tr, versions=("2.1.330",))  # the session as the newest build would have run it
    plain = simulate(same, new, "server_clearing")
    guarded = simulate(same, new, "server_clearing", clear_env=GUARD)
    assert kinds(
        simulate(replace(tr, versions=("2.1.329",)), new, "server_clearing", clear_env=GUARD),
        "clear_stopped",
    )
    assert kinds(guarded, "clear_stopped") == []
    assert [r.prompt_tokens for r in guarded.requests] == [r.prompt_tokens for r in plain.requests]


def test_a_request_sent_without_the_edit_still_passes_the_policys_memory(tr, monkeypatch):
    """The injected code and the gateway remember every request of a conversation for the free
    move (engine.twins.free_moves), also one the guard sends without the edit; so does the
    replay: the memory sees as many requests with the guard on as without it, and more than the
    requests that were edited."""
    from engine.twins.free_moves import Conversation

    seen: list[int] = []
    real = Conversation.keep

    def spy(self, how, prints, *rest):
        seen.append(len(prints))
        return real(self, how, prints, *rest)

    monkeypatch.setattr(Conversation, "keep", spy)
    profile = profile_for(tr.version)
    on = simulate(tr, profile, "server_clearing", clear_env=GUARD)
    on_seen = list(seen)
    seen.clear()
    off = simulate(tr, profile, "server_clearing")
    stopped = [r for r in on.requests if "clear_stopped" in r.events]
    assert stopped  # the guard did stop a request
    assert len(on_seen) == len(on.requests) and len(seen) == len(off.requests)
