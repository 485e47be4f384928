"""The paid policy's ceiling for a native client: the default (90,000 tokens of 4 characters of
the messages kept, measured against a 200K window's 167,000 threshold) scaled to the client's own
auto-compact threshold (engine.twins.policy.ceiling_for, gateway.policy.Knobs.ceiling_at), as the
near move's level is; the knob, when set, as it is; a client whose threshold is not known (a
cli.js one) scaled to the window its request shows, as the injected JavaScript does."""

from __future__ import annotations

from test_gateway_policy import EDIT, MODEL, SERIALISE, SYSTEM, claude_code

from engine.twins.conversation_policy import clear_policy_from_env
from engine.twins.policy import (
    CEILING_THRESHOLD,
    DEFAULT_CEILING,
    ceiling_for,
    paid_edit,
    uncached_system,
    write_extra,
)
from gateway.policy import Fitter, Knobs
from gateway.toplevel import scan

ONE_M = 1_000_001  # a build that compacts only when the API refuses a 1M prompt


def test_the_default_ceiling_scales_to_the_threshold_and_a_set_one_does_not() -> None:
    assert ceiling_for({}) == DEFAULT_CEILING == ceiling_for({}, CEILING_THRESHOLD)
    assert ceiling_for({}, ONE_M) == 538_923  # 90,000 x 1,000,001 / 167,000, rounded
    assert ceiling_for({}, 200_001) == 107_785
    assert ceiling_for({}, 1) == 1
    set_ = {"CLAUDE_CTX_CLEAR_CEILING": "70000"}
    assert ceiling_for(set_, ONE_M) == 70_000
    assert ceiling_for({"CLAUDE_CTX_CLEAR_CEILING": "0"}, ONE_M) == 538_923  # invalid: default
    assert Knobs.from_env({}).ceiling_at(ONE_M) == 538_923
    assert Knobs.from_env({}).ceiling_at(None) == DEFAULT_CEILING
    assert Knobs.from_env({}).ceiling_at(None, "claude-opus-4-6[1m]") == 521_138  # 967,000
    assert Knobs.from_env({}).ceiling_at(None, MODEL, ("context-1m-2025-08-07",)) == 521_138
    assert Knobs.from_env(set_).ceiling_at(None, "claude-opus-4-6[1m]") == 70_000
    assert Knobs.from_env(set_).ceiling_at(ONE_M) == 70_000
    # the replays' policy object (engine.replay passes the native session's threshold)
    for env, th, want in (({}, ONE_M, 538_923), ({}, None, DEFAULT_CEILING), (set_, ONE_M, 70_000)):
        policy = clear_policy_from_env(env, threshold=th)
        assert policy is not None and policy.ceiling == want
    policy = clear_policy_from_env({}, model="claude-opus-4-6[1m]")  # a cli.js client at 1M
    assert policy is not None and policy.ceiling == 521_138


def _messages(rounds: int) -> list[dict]:
    """A long typed prompt nothing clears (500,000 characters: 125,000 tokens of 4, past the
    200K default and under the 1M one), then ``rounds`` tool rounds with results of 40,000
    characters (each more than the tenth of the 200K ceiling that a move it forces must free,
    ``CEILING_SHARE``)."""
    out: list[dict] = [{"role": "user", "content": "p" * 500_000}]
    for n in range(rounds):
        use = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"f": n}}
        out.append({"role": "assistant", "content": [use]})
        res = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "r" * 40_000}
        out.append({"role": "user", "content": [res]})
    return out


def test_the_gateway_fits_a_native_clients_request_with_its_scaled_ceiling() -> None:
    msgs = _messages(6)
    raw = SERIALISE["javascript"](claude_code(msgs, system=SYSTEM))
    top = scan(raw)
    assert top is not None
    rest, extra = uncached_system(SYSTEM), write_extra(SYSTEM)
    keeps = {}
    for th in (None, ONE_M):
        fitter = Fitter(Knobs("paid", 1, None, 100, False, 0))
        got, _ = fitter.fit(EDIT, raw, top, None, MODEL, [], None, th)
        ceiling = Knobs().ceiling_at(th)
        want = paid_edit(EDIT, msgs, ceiling, 100, 0, rest, extra)
        assert got.keep == want.keep, th
        keeps[th] = got.keep
    # 200K: the messages kept passed the ceiling, so all but KEEP are cleared whatever it costs;
    # 1M: nothing pays yet and the ceiling is far, so the cache is kept
    assert keeps[None] == EDIT.keep == 3 and keeps[ONE_M] == 6
