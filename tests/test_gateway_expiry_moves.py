"""The gateway's expiry move (gateway.policy: ``_Kept.at``, ``Fitter.fit``'s ``now``) against its
twin (engine.twins.free_moves: ``free_edit(now=)``, ``is_expired``, ``lifetime_ms``): the
free-move sequences (tests/test_gateway_free_moves.py: prunes, emptied results, rewinds,
compactions, system prompts switching to the 1-hour cache's, two conversations interleaved) sent
on one clock with gaps under, at and over the cache's lifetime plus the slack: the same keep
request by request, expiry moves made that change keeps. Then the rule's edges one by one (the
1-hour lifetime, one conversation's request not refreshing another's time, a compaction, a
rewind, no time given, a body parsed whole), and through HTTP and the mock API with the server's
clock injected."""

from __future__ import annotations

import random
from collections.abc import Collection, Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_conversations import conversations
from test_gateway_free_moves import (
    SYSTEMS,
    Request,
    Scenario,
    _own,
    _plain,
    _pruned_sequence,
    _scenarios,
    interleaved,
    marked,
    spelt_twice,
)
from test_gateway_near_moves import sent_keeps
from test_gateway_policy import EDIT, MODEL, SERIALISE, SYSTEM, claude_code

from engine.twins.free_moves import (
    EXPIRY_1H_MS,
    EXPIRY_5M_MS,
    EXPIRY_SLACK_MS,
    NEW,
    Conversation,
    change,
    fingerprint,
    free_edit,
    lifetime_ms,
)
from engine.twins.policy import WRITE_EXTRA_X20_1H, paid_edit
from engine.twins.policy_scan import system_facts
from gateway.policy import Fitter, Knobs
from gateway.toplevel import scan

PAST_5M = EXPIRY_5M_MS + EXPIRY_SLACK_MS  # a gap of this much is not yet an expiry; one more is
PAST_1H = EXPIRY_1H_MS + EXPIRY_SLACK_MS
GAPS = [0, 1_000, 60_000, PAST_5M, PAST_5M + 1, 1_200_000, PAST_1H, PAST_1H + 1, 5_000_000]


def _fit(fitter: Fitter, messages: list[dict], system: Any, now: int | None) -> int:
    raw = SERIALISE["javascript"](claude_code(messages, system=system))
    top = scan(raw)
    assert top is not None
    return fitter.fit(EDIT, raw, top, None, MODEL, [], now)[0].keep


def check(
    requests: list[Request],
    times: list[int],
    ceiling: int,
    patience: int,
    free: bool = True,
    unknown: Collection[int] = (),
) -> tuple[int, int]:
    """The requests through one Fitter at their times, each to its conversation's twin at the
    same time: the same keep each time. ``unknown``: requests sent with no time (but a new
    conversation's, a compaction's: the twin, one memory across it, keeps the time from before
    it, which the gateway cannot link to the summary's first message; the server always gives
    a time). Returns (the gateway's expiry moves, requests whose keep the expiry move changed:
    the twin's keep against the same memory told no time)."""
    fitter = Fitter(Knobs("paid", 1, ceiling, patience, free))
    twins: dict[int, Conversation] = {}
    changed = 0
    for n, (r, t) in enumerate(zip(requests, times, strict=True)):
        twin = twins.setdefault(r.who, Conversation())
        new = change(twin.previous, fingerprint(r.messages)) == NEW
        now = None if n in unknown and not new else t
        got = _fit(fitter, r.messages, r.system, now)
        rest, extra = system_facts(r.system)
        if free:
            timeless = Conversation()  # the same memory, no time: no expiry move
            timeless.previous, timeless.forced = twin.previous, twin.forced
            timeless.moved = twin.moved
            alone = free_edit(timeless, EDIT, r.messages, ceiling, patience, 0, rest, extra)
            want = free_edit(
                twin, EDIT, r.messages, ceiling, patience, 0, rest, extra, now=now
            ).keep
            changed += want != alone.keep
        else:
            want = paid_edit(EDIT, r.messages, ceiling, patience, 0, rest, extra).keep
        assert got == want, (n, r.who, now, got, want)
    if free:
        assert fitter.free_moves == sum(t.moves for t in twins.values())
    else:
        assert fitter.free_moves == fitter.expiry_moves == 0
    return fitter.expiry_moves, changed


def clock(rng: random.Random, n: int) -> list[int]:
    """One clock for ``n`` requests (of any conversation) from a start of its own, each a
    random gap after the previous."""
    t = rng.randint(0, 10**9)
    out: list[int] = []
    for _ in range(n):
        t += rng.choice(GAPS)
        out.append(t)
    return out


SEEDS = range(24)


def test_generated_sequences_with_times_get_the_twins_keep() -> None:
    """Two conversations interleaved (or one) on one clock, with every event of the free-move
    sequences and the 1-hour system prompt now and then: the twin's keep on every request, and
    expiry moves made that change keeps (so this test would see a gateway without them)."""
    moves = changed = 0
    for seed in SEEDS:
        requests, _, ceiling, patience = _scenarios(seed)
        rng = random.Random(1_000 + seed)
        unknown = {n for n in range(len(requests)) if rng.random() < 0.1}
        m, c = check(requests, clock(rng, len(requests)), ceiling, patience, True, unknown)
        moves, changed = moves + m, changed + c
    assert moves >= len(SEEDS) // 2 and changed >= moves


def test_free_off_is_the_stateless_keep_whatever_the_time() -> None:
    for seed in SEEDS[:6]:
        requests, _, ceiling, patience = _scenarios(seed)
        times = clock(random.Random(seed), len(requests))
        assert check(requests, times, ceiling, patience, free=False) == (0, 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=conversations(odd=True),
    second=conversations(),
    rng=st.randoms(use_true_random=False),
    gaps=st.lists(st.sampled_from(GAPS) | st.integers(0, 2 * PAST_1H), min_size=1),
    ceiling=st.sampled_from([3_000, 20_000, 90_000]),
    patience=st.sampled_from([0, 100]),
)
def test_generated_odd_conversations_with_times_get_the_twins_keep(
    first, second, rng, gaps, ceiling, patience
) -> None:
    """The shared generator's conversations (odd ones too), interleaved with the same events,
    at times drawn gap by gap (cycled): the twin's keep."""
    requests = interleaved(rng, Scenario(0, _own(first, 0)), Scenario(1, _own(second, 1)))
    times: list[int] = []
    t = 0
    for i in range(len(requests)):
        t += gaps[i % len(gaps)]
        times.append(t)
    check(requests, times, ceiling, patience)


# --- the rule's edges, one by one ---------------------------------------------------------------


def _sequence(
    lists: list[list[dict]], times: list[int | None], system: Any = SYSTEM
) -> tuple[list[int], list[int], Fitter, Conversation]:
    """(the gateway's keeps, the twin's, the fitter, the twin) of one conversation."""
    fitter = Fitter(Knobs())
    twin = Conversation()
    rest, extra = system_facts(system)
    got, want = [], []
    for m, now in zip(lists, times, strict=True):
        got.append(_fit(fitter, m, system, now))
        want.append(free_edit(twin, EDIT, m, rest=rest, extra=extra, now=now).keep)
    return got, want, fitter, twin


def test_a_request_after_the_lifetime_clears_all_it_may_and_holds_it() -> None:
    """Seven growing requests: the fifth more than 5 minutes and 10 seconds after the fourth
    clears all but KEEP and holds it (the twin's keeps); at exactly that gap, no move."""
    lists = _pruned_sequence()[:7]
    base = [paid_edit(EDIT, m, rest=system_facts(SYSTEM)[0]).keep for m in lists]
    times = [0, 1_000, 2_000, 3_000, 3_000 + PAST_5M + 1, 3_000 + PAST_5M + 2, PAST_5M + 4_000]
    got, want, fitter, twin = _sequence(lists, times)
    assert got == want and fitter.expiry_moves == fitter.free_moves == twin.moves == 1
    assert got[:4] == base[:4] and got[4] == EDIT.keep < base[4]
    assert got[5:] == [EDIT.keep + 1, EDIT.keep + 2]  # held, not moved again
    exact = [0, 1_000, 2_000, 3_000, 3_000 + PAST_5M, 3_000 + PAST_5M + 1, PAST_5M + 4_000]
    got, want, fitter, _ = _sequence(lists, exact)
    assert got == want == base and fitter.free_moves == 0


def test_the_one_hour_cache_lives_an_hour() -> None:
    """Under a system prompt marked ``ttl: "1h"`` a 20-minute pause is no expiry, one of an
    hour and 10 seconds and a millisecond is; under the 5-minute one the 20 minutes are."""
    hour = SYSTEMS[1]
    assert lifetime_ms(system_facts(hour)[1]) == EXPIRY_1H_MS
    assert system_facts(hour)[1] == WRITE_EXTRA_X20_1H
    assert lifetime_ms(system_facts(SYSTEM)[1]) == EXPIRY_5M_MS
    lists = _pruned_sequence()[:6]
    twenty = [0, 1_000, 2_000, 2_000 + 1_200_000, 2_000 + 1_201_000, 2_000 + 1_202_000]
    got, want, fitter, _ = _sequence(lists, twenty, hour)
    assert got == want and fitter.free_moves == 0
    got, want, fitter, _ = _sequence(lists, twenty, SYSTEM)
    assert got == want and fitter.expiry_moves == 1 and got[3] == EDIT.keep
    late = [0, 1_000, 2_000, 2_000 + PAST_1H + 1, 2_000 + PAST_1H + 2, 2_000 + PAST_1H + 3]
    got, want, fitter, _ = _sequence(lists, late, hour)
    assert got == want and fitter.expiry_moves == 1 and got[3] == EDIT.keep


def test_one_conversations_request_does_not_refresh_anothers_time() -> None:
    """A at 0 s, B at 200 s, A at 400 s: A's cache expired (its own last request was 400 s
    before) though the gateway's last request came 200 s before; B at 420 s: not expired."""
    msgs_a, msgs_b = _own(_plain(14), 0), _own(_plain(14), 1)
    steps = [(0, 15, 0), (1, 15, 0), (1, 17, 200_000), (0, 17, 400_000)]
    steps += [(1, 19, 420_000), (0, 19, 421_000), (1, 21, 422_000)]
    fitter = Fitter(Knobs())
    twins = {0: Conversation(), 1: Conversation()}
    rest, extra = system_facts(SYSTEM)
    got, want = [], []
    for who, n, now in steps:
        m = marked((msgs_a, msgs_b)[who][:n], 1)
        got.append(_fit(fitter, m, SYSTEM, now))
        want.append(free_edit(twins[who], EDIT, m, rest=rest, extra=extra, now=now).keep)
    assert got == want
    assert fitter.expiry_moves == twins[0].moves == 1 and twins[1].moves == 0
    assert got[3] == EDIT.keep < got[2] and len(fitter) == 2


def test_a_compaction_a_rewind_and_no_time() -> None:
    """A compaction after a long pause is another conversation (no move), and its time is kept
    (the next request a second later: no expiry; the one after a pause: a move). A rewind after
    a pause breaks the cache anyway: a free move, not an expiry move. A request with no time
    never moves for expiry and leaves the conversation's time as it was."""
    msgs = _plain(14)
    lists = [marked(msgs[: 2 * k + 1], 1) for k in range(4, 8)]
    summary = {"role": "user", "content": "Summary of the conversation: " + "s" * 500}
    after = [marked([summary, *msgs[1 : 2 * k + 1]], 1) for k in range(8, 12)]
    times: list[int | None] = [0, 1_000, 2_000, 3_000, 3_000 + 2 * PAST_5M, 3_001 + 2 * PAST_5M]
    times += [4_000 + 3 * PAST_5M, 5_000 + 3 * PAST_5M]
    base = [paid_edit(EDIT, m, rest=system_facts(SYSTEM)[0]).keep for m in [*lists, *after]]
    got, want, fitter, twin = _sequence([*lists, *after], times)
    assert got == want and fitter.expiry_moves == twin.moves == 1 and got[6] == EDIT.keep
    # the compaction, and a second later: no move
    assert got[4:6] == base[4:6] and min(base[4:6]) > EDIT.keep
    # a rewind (to the second list) after a pause: the free move, once
    rewound = [*lists, lists[1], marked(msgs[:11], 1)]
    got, want, fitter, twin = _sequence(rewound, [0, 1, 2, 3, 4 + PAST_5M, 5 + PAST_5M])
    assert got == want and fitter.free_moves == twin.moves
    assert fitter.expiry_moves == 0 and fitter.free_moves >= 1
    # no time on the third and fourth requests: no move then; the time stays the second's
    times = [0, 1_000, None, None, 1_000 + PAST_5M + 1, 1_000 + PAST_5M + 2]
    six = [marked(msgs[: 2 * k + 1], 1) for k in range(4, 10)]
    got, want, fitter, _ = _sequence(six, times)
    assert got == want and fitter.expiry_moves == 1 and got[4] == EDIT.keep
    got, want, fitter, _ = _sequence(six, [None] * 6)
    assert got == want and fitter.free_moves == 0


def test_a_body_parsed_whole_has_no_memory() -> None:
    """A body whose messages the walk cannot place (spelt twice: parsed whole) gets the
    stateless keep after any pause, and leaves the kept conversation's time as it was."""
    lists = _pruned_sequence()[:6]
    fitter = Fitter(Knobs())
    for i, m in enumerate(lists[:3]):
        _fit(fitter, m, SYSTEM, i)
    m = lists[3]
    raw = spelt_twice(m)
    top = scan(raw)
    assert top is not None
    walked = fitter.walked
    stateless = paid_edit(EDIT, m, rest=system_facts(SYSTEM)[0]).keep
    assert fitter.fit(EDIT, raw, top, None, MODEL, [], 2 * PAST_5M)[0].keep == stateless
    assert fitter.walked == walked + 1 and fitter.free_moves == 0
    # the kept conversation's last request is still the third (at 2 ms): this one is past it
    assert _fit(fitter, lists[4], SYSTEM, 2 * PAST_5M + 1) == EDIT.keep
    assert fitter.expiry_moves == 1


# --- through the HTTP server --------------------------------------------------------------------


def test_the_server_reads_its_clock_once_per_request_and_moves_on_expiry() -> None:
    """Through HTTP and the mock API with the server's clock injected: the fifth request comes
    after the lifetime, so its keep is the expiry move (the twin's at the same times); with the
    free move off, the stateless keeps. One clock read per request. The default clock is
    :func:`gateway.server.monotonic_ms`."""

    from engine.twins.context_clear import knobs_from_env
    from gateway.server import Gateway, ThreadedGateway, monotonic_ms
    from lab.mock import MockConfig, MockServer

    lists = _pruned_sequence()[:7]
    times = [10_000, 11_000, 12_000, 13_000, 13_001 + PAST_5M, 13_002 + PAST_5M, 13_003 + PAST_5M]
    for env in ({}, {"CLAUDE_CTX_CLEAR_FREE": "0"}):
        edit = knobs_from_env(env)
        assert edit is not None
        rest, extra = system_facts(SYSTEM)
        twin = Conversation()
        want = [
            (
                free_edit(twin, edit, m, rest=rest, extra=extra, now=t)
                if not env
                else paid_edit(edit, m, rest=rest, extra=extra)
            ).keep
            for m, t in zip(lists, times, strict=True)
        ]
        ticks = iter(times)
        read: list[int] = []

        def tick(ticks: Iterator[int] = ticks, read: list[int] = read) -> int:
            read.append(next(ticks))
            return read[-1]

        with (
            MockServer(MockConfig()) as mock,
            ThreadedGateway(upstream=mock.base_url, env=env, ledger=None, clock=tick) as gw,
        ):
            sent, fitter = sent_keeps(gw, mock, [claude_code(m) for m in lists])
        assert read == times and sent == want
        moved = 0 if env else 1
        assert fitter.expiry_moves == twin.moves == moved
        if moved:
            assert sent[4] == edit.keep < paid_edit(edit, lists[4], rest=rest, extra=extra).keep
    assert Gateway(upstream="http://127.0.0.1:9", env={}, ledger=None).clock is monotonic_ms
    a = monotonic_ms()
    b = monotonic_ms()
    assert isinstance(a, int) and 0 <= b - a < 1_000
