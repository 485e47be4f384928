"""The cache's price and lifetime (engine.api.prompt_cache). A session that caches for an hour
pays 2.0x for a cache write, not 1.25x: the recorded requests at their own split of the two
caches, the replays and the oracle at the session's, and the paid policy weighs its moves so. An
entry lives 5 minutes (an hour) after its last use: a request after a longer pause reads nothing,
in the replays (checked against the recorded usage) and in the oracle's model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.api.prompt_cache import (
    READ_PRICE,
    TTL_1H,
    TTL_5M,
    WRITE_PRICE,
    WRITE_PRICE_1H,
    PromptCache,
    caches_for_an_hour,
    lifetime,
    recorded_write_price,
    seconds,
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
    # the same replay priced for the 5-minute cache: the same tokens, cheaper writes, and the
    # cache gone after each of the session's three pauses of 6-56 minutes (none reaches an hour)
    five = simulate(tr, prof, "unpatched", calibration=replace(cal, one_hour=False))
    assert [q.prompt_tokens for q in five.requests] == [q.prompt_tokens for q in un.requests]
    assert un.summary["cache_expiries"] == 0 and five.summary["cache_expiries"] == 3
    for a, b in zip(un.requests, five.requests, strict=True):
        if b.cache_expired:
            assert b.cache_read == 0 and a.cache_read > 0
        else:
            assert b.cache_write == a.cache_write
            assert a.cost - b.cost == pytest.approx(0.75 * a.cache_write)


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


def test_an_entry_lives_its_lifetime_after_its_last_use():
    assert (lifetime(False), lifetime(True)) == (TTL_5M, TTL_1H) == (300.0, 3600.0)
    cache = PromptCache(100, ttl=300.0)
    assert cache.read(["a"], [5.0], [1], at=1_000.0) == 0 and not cache.expired
    # read within the lifetime, each read extending it: 1,000 -> 1,299 -> 1,599 (300 exactly)
    assert cache.read(["a", "b"], [5.0, 7.0], [1, 1], at=1_299.0) == 105
    assert cache.read(["a", "b", "c"], [5.0, 7.0, 2.0], [1, 1, 1], at=1_599.0) == 112
    assert not cache.expired
    # a second past it: nothing is read, not even the system prompt's part
    assert cache.read(["a", "b", "c", "d"], [5.0, 7.0, 2.0, 1.0], [1] * 4, at=1_900.0) == 0
    assert cache.expired
    # what that request wrote is read again by the next one
    assert cache.read(["a", "b", "c", "d", "e"], [5.0, 7.0, 2.0, 1.0, 3.0], [1] * 5, at=1_901.0)
    assert not cache.expired
    # no time (or no lifetime) given: entries never expire
    for kw, times in (({"ttl": 300.0}, (None, None)), ({}, (0.0, 99_999.0))):
        c = PromptCache(100, **kw)
        c.read(["a"], [5.0], [1], at=times[0])
        assert c.read(["a", "b"], [5.0, 7.0], [1, 1], at=times[1]) == 105 and not c.expired


def test_timestamps_parse_or_give_none():
    assert seconds("1970-01-01T00:05:00.000Z") == 300.0
    assert seconds("2026-01-02T03:04:05+00:00") == seconds("2026-01-02T03:04:05.000Z")
    assert seconds(None) is None and seconds("yesterday") is None and seconds(12) is None


def test_the_replays_cache_expires_where_the_recorded_one_did():
    """The 5-minute session's pauses: every request the replay finds the cache expired for came
    more than 300 s after the previous one, and the real requests there mostly read (almost)
    nothing from the cache: their recorded usage is the check."""
    tr = load_transcript(need_shared(PUBLIC / FIVE_SESSION))
    prof = profile_for(tr.version)
    cal = calibrate(tr, prof)
    un = simulate(tr, prof, "unpatched", calibration=cal)
    expired = [q for q in un.requests if q.cache_expired]
    assert len(expired) == un.summary["cache_expiries"] >= 5
    assert all(q.cache_read == 0 and q.cache_write == q.prompt_tokens for q in expired)
    by_line = {r.line: r for r in tr.replies}
    cold = 0
    for q in expired:
        u = by_line[q.line].usage
        read = u.get("cache_read_input_tokens") or 0
        cold += read < 0.5 * (read + (u.get("cache_creation_input_tokens") or 0))
    assert cold >= 0.7 * len(expired)
    # every pause is priced in every scenario: the patched replay expires at the same requests
    pa = simulate(tr, prof, "patched", calibration=cal)
    assert [q.line for q in pa.requests if q.cache_expired] == [q.line for q in expired]
    # and the paid policy moves the cleared part where it writes everything anyway (the expiry
    # move, engine.twins.free_moves): a changed prefix on a request that read nothing
    assert any(q.cache_break for q in pa.requests if q.cache_expired)


def test_the_oracle_moves_for_free_where_the_cache_expired():
    from engine.replay.oracle import plan, schedule_cost

    from .test_oracle import brute_force, counts_prompts, growing

    seen = growing(8, result=20.0)  # results too small to pay for a rewrite
    counts, prompts = counts_prompts(seen)
    assert not any(plan(seen, counts, prompts, None).boundaries)
    expired = [r == 5 for r in range(8)]
    p = plan(seen, counts, prompts, None, expired)
    # request 5 writes its whole prompt anyway: clearing there costs nothing and saves reads
    assert p.boundaries[:5] == (0,) * 5 and p.boundaries[5] == 5
    cost, ok = schedule_cost(seen, counts, prompts, None, p.boundaries, expired)
    assert ok and cost == pytest.approx(p.model_cost)
    assert p.model_cost == pytest.approx(brute_force(seen, counts, prompts, None, expired))
