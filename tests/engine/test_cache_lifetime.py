"""A session that caches for an hour pays 2.0x for a cache write, not 1.25x
(engine.api.prompt_cache): the recorded requests at their own split of the two caches, the
replays and the oracle at the session's, and the paid policy weighs its moves so."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.api.prompt_cache import (
    READ_PRICE,
    WRITE_PRICE,
    WRITE_PRICE_1H,
    caches_for_an_hour,
    recorded_write_price,
    write_price,
)
from engine.profiles import profile_for
from engine.replay.calibration import calibrate
from engine.replay.model import Request
from engine.replay.session import simulate
from engine.transcript import load_transcript
from engine.twins.conversation_policy import clear_policy_from_env
from engine.twins.policy import WRITE_EXTRA_X20, WRITE_EXTRA_X20_1H

from .conftest import PUBLIC, need_shared

HOUR_SESSION = "entireio__cli__9d7a9d52-7eb4-427d-847d-ee5451884f3d.jsonl.xz"
FIVE_SESSION = "entireio__cli__0276a600-2f22-4d2b-844c-3feb9c5aa108.jsonl.xz"


def _usage(five: int, hour: int) -> dict:
    return {
        "cache_creation_input_tokens": five + hour,
        "cache_creation": {"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour},
    }


def test_a_write_costs_what_its_cache_charges():
    assert (write_price(False), write_price(True)) == (WRITE_PRICE, WRITE_PRICE_1H) == (1.25, 2.0)
    assert recorded_write_price(_usage(1_000, 0), True) == 1.25
    assert recorded_write_price(_usage(0, 1_000), False) == 2.0
    assert recorded_write_price(_usage(1_000, 3_000), False) == pytest.approx(
        (1.25 * 1_000 + 2.0 * 3_000) / 4_000
    )
    # no split (older replies, or nothing written): the session's
    assert recorded_write_price({"cache_creation_input_tokens": 9}, True) == 2.0
    assert recorded_write_price(_usage(0, 0), False) == 1.25
    assert (
        recorded_write_price({"cache_creation": {"ephemeral_1h_input_tokens": "x"}}, False) == 1.25
    )
    # the session's: where more was written
    assert caches_for_an_hour([_usage(10, 0), _usage(0, 11)])
    assert not caches_for_an_hour([_usage(10, 0), _usage(0, 10)])
    assert not caches_for_an_hour([])


def test_a_requests_cost_and_json_carry_its_write_price():
    five = Request(0, 1, 100, 1_000, 10, False, False, (), cache_read=600, cache_write=300)
    hour = replace(five, write_price=WRITE_PRICE_1H)
    assert five.cost == pytest.approx(100 + 1.25 * 300 + READ_PRICE * 600)
    assert hour.cost == pytest.approx(100 + 2.0 * 300 + READ_PRICE * 600)
    assert "write_price" not in five.as_dict({}) and hour.as_dict({})["write_price"] == 2.0


def test_the_policy_weighs_a_move_at_the_sessions_write_price():
    five, hour = clear_policy_from_env({}), clear_policy_from_env({}, one_hour=True)
    assert five is not None and hour is not None
    assert (five.extra, hour.extra) == (WRITE_EXTRA_X20, WRITE_EXTRA_X20_1H) == (23, 38)


def test_a_session_that_caches_for_an_hour_is_priced_so():
    tr = load_transcript(need_shared(PUBLIC / HOUR_SESSION))
    prof = profile_for(tr.version)
    cal = calibrate(tr, prof)
    assert cal.one_hour and cal.write_price == 2.0
    rec = simulate(tr, prof, "recorded", calibration=cal)
    by_line = {r.line: r for r in tr.replies}
    for q in rec.requests:
        u = by_line[q.line].usage
        assert q.write_price == recorded_write_price(u, True)
        uncached = q.prompt_tokens - q.cache_read - q.cache_write
        assert q.cost == pytest.approx(
            uncached + q.write_price * q.cache_write + 0.1 * q.cache_read
        )
    assert all(c.write_price == 2.0 for c in rec.compactions) and rec.compactions
    un = simulate(tr, prof, "unpatched", calibration=cal)
    assert {q.write_price for q in un.requests} == {2.0}
    assert all(c.write_price == 2.0 for c in un.compactions)
    # the same replay priced for the 5-minute cache: the same tokens, cheaper writes
    five = simulate(tr, prof, "unpatched", calibration=replace(cal, one_hour=False))
    assert [q.prompt_tokens for q in five.requests] == [q.prompt_tokens for q in un.requests]
    writes = sum(q.cache_write for q in un.requests) + sum(c.cache_write for c in un.compactions)
    assert un.summary["cost"] - five.summary["cost"] == pytest.approx(0.75 * writes, abs=2)


def test_a_session_on_the_five_minute_cache_is_priced_as_before():
    tr = load_transcript(need_shared(PUBLIC / FIVE_SESSION))
    cal = calibrate(tr, profile_for(tr.version))
    assert not cal.one_hour
    un = simulate(tr, profile_for(tr.version), "unpatched", calibration=cal)
    assert {q.write_price for q in un.requests} == {1.25}


def test_the_oracles_model_prices_a_move_at_the_sessions_write_price():
    from engine.replay.oracle import Observed, Probe, _requests

    seen = [
        Observed([("user", 10)], [1_000.0], [1], 500.0, [0.0, 400.0], 1, 300.0, w)
        for w in (WRITE_PRICE, WRITE_PRICE_1H)
    ]
    five, hour = (_requests([s, s], [0, 0], [0, 0], None)[1] for s in seen)
    # a move: only the system prompt's breakpoint (300) is read, the rest written again
    assert five.cost(1, False) == pytest.approx(0.1 * 300 + 1.25 * (1_100 - 300))
    assert hour.cost(1, False) == pytest.approx(0.1 * 300 + 2.0 * (1_100 - 300))
    assert Probe(write_at=WRITE_PRICE_1H).write_at == 2.0
