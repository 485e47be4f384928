"""When the gateway stops clearing near the window (gateway.window): only for Claude Code builds
that do not recover from "prompt is too long", from the body's size, at Claude Code's own
auto-compact threshold as the engine computes it."""

from __future__ import annotations

from gateway_bodies import EDIT, body_of, compact
from test_gateway_hostile import recorder
from test_gateway_http import HEADERS, AppThread, post

from gateway.server import ThreadedGateway
from gateway.window import BYTES_PER_TOKEN, client_version, stop_clearing, threshold

OLD = "claude-cli/2.1.113 (external, cli)"
NEW = "claude-cli/2.1.330 (external, cli)"
MODEL = "claude-sonnet-4-5-20250929"


def test_the_client_version_comes_from_claude_codes_user_agent() -> None:
    assert client_version(OLD) == (2, 1, 113)
    assert client_version("Anthropic/Python 0.70.0") is None


def test_the_threshold_is_the_engines_auto_compact_one() -> None:
    assert threshold((2, 1, 113), MODEL, [], {}) == 167_000
    assert threshold((2, 0, 76), MODEL, [], {}) == 155_000
    # a 1M context: the [1m] model id or the beta
    assert threshold((2, 1, 113), MODEL, ["context-1m-2025-08-07"], {}) > 900_000
    # a version the engine has no profile for: the window less Claude Code's default reserve
    assert threshold((9, 9, 9), MODEL, [], {}) == 200_000 - 33_000


def test_clearing_stops_only_for_builds_that_do_not_recover() -> None:
    near = 167_000 * BYTES_PER_TOKEN
    on = {"CLAUDE_CTX_CLEAR_WINDOW_GUARD": "1"}
    assert stop_clearing(OLD, MODEL, [], near, on)
    assert not stop_clearing(OLD, MODEL, [], near, {})  # off by default
    assert not stop_clearing(OLD, MODEL, [], near - 1, on)
    assert not stop_clearing(NEW, MODEL, [], near * 2, on)  # 2.1.330 compacts on the 400
    assert not stop_clearing("Anthropic/Python 0.70.0", MODEL, [], near * 2, on)  # an SDK


def test_through_the_gateway_a_large_body_from_an_old_build_goes_without_the_edit() -> None:
    app, seen = recorder()
    small = compact(body_of())
    large = compact(body_of(messages=[{"role": "user", "content": "x" * 510_000}]))
    guard = {"CLAUDE_CTX_CLEAR_WINDOW_GUARD": "1"}  # opt-in (gateway/window.py)
    with AppThread(app) as up:
        for env in (guard, {}):
            with ThreadedGateway(upstream=up.url, edit=EDIT, env=env) as gw:
                for body, ua in ((small, OLD), (large, OLD), (large, NEW)):
                    headers = {**HEADERS, "user-agent": ua}
                    assert post(gw.url, "/v1/messages", body, headers)[0] == 200
    edited = [b"clear_tool_uses_20250919" in sent for _, sent, _ in seen]
    assert edited == [True, False, True, True, True, True]  # without the guard: always edited
    assert seen[1][1] == large  # untouched: the prompt reports its whole size
