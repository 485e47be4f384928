"""The hindsight optimum (engine.replay.oracle): the dynamic programme against brute force, the replay
of its schedule, and the carried history the prompt cache reads (until a break)."""

from __future__ import annotations

import itertools
import math

import pytest

from engine.api.prompt_cache import PromptCache
from engine.profiles import profile_for
from engine.replay.oracle import Observed, plan, schedule_cost
from engine.replay.session import simulate
from engine.transcript import build_transcript

OPUS = "claude-opus-4-6"


def growing(
    n: int, result: float = 800.0, text: float = 200.0, stable: float | None = None
) -> list[Observed]:
    """``n`` requests; request ``r`` sends ``r + 1`` messages (one tool round each) and may
    clear its ``r`` older tool uses, each freeing ``result`` tokens. ``stable``: what a break
    still reads of the 5,000-token overhead (None: all of it)."""
    out = []
    for r in range(n):
        contents = [("user", k) for k in range(r + 1)]
        costs = [result + text] * (r + 1)
        freed = [result * b for b in range(r + 1)]
        out.append(Observed(contents, costs, [1] * (r + 1), 5_000.0, freed, r, stable))
    return out


def counts_prompts(seen: list[Observed]) -> tuple[list[int], list[int]]:
    """A probe that cleared nothing: each count is the previous prompt plus the new message."""
    prompts = [round(o.overhead + sum(o.costs)) for o in seen]
    counts = [0] + [prompts[r - 1] + round(seen[r].costs[-1]) for r in range(1, len(seen))]
    return counts, prompts


def brute_force(seen, counts, prompts, threshold, expired=()) -> float:
    best = math.inf
    limits = [o.limit for o in seen]
    for seq in itertools.product(*(range(lim + 1) for lim in limits)):
        if any(b < a for a, b in itertools.pairwise(seq)):
            continue  # the boundary only moves forward
        cost, ok = schedule_cost(seen, counts, prompts, threshold, seq, expired)
        if ok:
            best = min(best, cost)
    return best


@pytest.mark.parametrize("expired", [(), (False, False, True, False, False, True)])
@pytest.mark.parametrize("stable", [None, 1_500.0])
@pytest.mark.parametrize("threshold", [None, 11_000, 9_500])
@pytest.mark.parametrize("result", [100.0, 800.0, 3_000.0])
def test_the_programme_finds_the_cheapest_schedule(threshold, result, stable, expired):
    """``expired``: the cache had expired before those requests (they read nothing)."""
    seen = growing(6, result=result, stable=stable)
    counts, prompts = counts_prompts(seen)
    p = plan(seen, counts, prompts, threshold, expired)
    cost, ok = schedule_cost(seen, counts, prompts, threshold, p.boundaries, expired)
    assert ok and cost == pytest.approx(p.model_cost)
    assert p.model_cost == pytest.approx(brute_force(seen, counts, prompts, threshold, expired))
    assert all(b >= a for a, b in itertools.pairwise(p.boundaries))


def test_small_results_are_never_worth_a_rewrite_and_large_ones_are():
    for result, moves in ((20.0, False), (5_000.0, True)):
        seen = growing(8, result=result)
        counts, prompts = counts_prompts(seen)
        p = plan(seen, counts, prompts, None)
        assert any(p.boundaries) is moves


def test_a_move_rewrites_the_overhead_after_the_system_prompts_breakpoint():
    whole = growing(8, result=1_000.0)
    part = growing(8, result=1_000.0, stable=1_000.0)
    counts, prompts = counts_prompts(whole)
    # every move now also writes 4,000 tokens of the overhead again: 1.15 x 4,000 more each
    a, b = plan(whole, counts, prompts, None), plan(part, counts, prompts, None)
    moves = sum(1 for x, y in itertools.pairwise(a.boundaries) if y != x)
    assert moves and b.model_cost > a.model_cost
    cost, _ = schedule_cost(part, counts, prompts, None, a.boundaries)
    assert cost == pytest.approx(a.model_cost + moves * (1.25 - 0.1) * 4_000)
    # so the cheapest schedule moves less often
    assert sum(1 for x, y in itertools.pairwise(b.boundaries) if y != x) <= moves


def test_the_threshold_forces_clearing_and_an_impossible_one_is_reported():
    seen = growing(6, result=100.0)  # too small to pay for a rewrite
    counts, prompts = counts_prompts(seen)
    free = plan(seen, counts, prompts, None)
    assert not any(free.boundaries)
    tight = plan(seen, counts, prompts, 6_500)
    assert tight.model_cost > free.model_cost and any(tight.boundaries)
    assert schedule_cost(seen, counts, prompts, 6_500, free.boundaries)[1] is False
    assert tight.unavoidable == ()
    hopeless = plan(seen, counts, prompts, 5_400)  # the overhead alone nearly reaches it
    assert hopeless.unavoidable  # not even clearing everything keeps the count below


def test_the_cache_reads_the_carried_history_like_the_system_prompt_until_a_break():
    cache = PromptCache(100)
    cache.read(["a"], [5.0], [1], 160)
    assert cache.read(["a", "b"], [5.0, 6.0], [1, 1], 160) == 165
    # a change: only the system prompt's breakpoint is read; the carried history, messages
    # the file does not hold, lies after it and is written again
    assert cache.read(["x"], [5.0], [1], 160) == 100


# --- the replay of the plan ----------------------------------------------------------------


def session(tool_rounds: int, result_chars: int = 24_000) -> list[dict]:
    recs: list[dict] = []
    base = {"version": "2.1.39", "sessionId": "s", "cwd": "/w"}

    def add(rec: dict) -> None:
        recs.append({**base, "uuid": f"r{len(recs)}", **rec})

    add({"type": "user", "message": {"role": "user", "content": "read every file"}})
    prompt = 20_004
    for k in range(tool_rounds):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"path": f"/f{k}"}}
        usage = {
            "input_tokens": 1,
            "cache_creation_input_tokens": 7_000,
            "cache_read_input_tokens": prompt - 7_001,
            "output_tokens": 20,
        }
        msg = {"id": f"m{k}", "role": "assistant", "model": OPUS, "content": [use], "usage": usage}
        add({"type": "assistant", "message": msg})
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "x" * result_chars}
        add({"type": "user", "message": {"role": "user", "content": [res]}})
        prompt += result_chars // 4 + 30
    return recs


@pytest.fixture(scope="module")
def runs():
    tr = build_transcript(session(40))
    prof = profile_for("2.1.39")
    fixed = {"CLAUDE_CTX_CLEAR_STEP": "20", "CLAUDE_CTX_CLEAR_POLICY": "fixed"}
    out = {
        name: simulate(tr, prof, name, microcompact_on=False, clear_env=fixed)
        for name in ("unpatched", "server_clearing", "patched", "oracle")
    }
    out["paid"] = simulate(tr, prof, "server_clearing", microcompact_on=False)
    return out


def test_the_oracle_avoids_the_compaction_and_beats_every_fixed_step(runs):
    un, oracle = runs["unpatched"].summary, runs["oracle"].summary
    assert un["auto_compactions"] >= 1 and oracle["auto_compactions"] == 0
    assert runs["oracle"].scenario == "oracle" and set(oracle) == set(un)
    for name in ("server_clearing", "patched", "paid"):
        assert oracle["cost"] <= runs[name].summary["cost"]
    # the model the programme optimises prices its schedule as the replay does, but for the
    # reads after a move: the model reads only the system prompt's breakpoint (the file's break
    # read, 19,033 of the 20,000 overhead), the replay's cache also finds the first request's
    # entry, which still ends within the lookback on a session this short (1.0% here)
    knobs = runs["oracle"].knobs["oracle"]
    assert knobs["model_cost"] == pytest.approx(oracle["cost"], rel=0.02)
    assert knobs["model_cost"] >= oracle["cost"]
    assert knobs["moves"] and knobs["unavoidable_compactions_before"] == []
    assert oracle["cache_breaks"] == len(knobs["moves"])


def test_the_paid_policy_avoids_the_compaction_and_is_cheaper_than_the_fixed_step(runs):
    paid, fixed = runs["paid"].summary, runs["server_clearing"].summary
    assert runs["paid"].knobs["clear_policy"] == "paid"
    assert paid["auto_compactions"] == 0 and paid["server_clears"] > 0
    assert paid["cost"] < fixed["cost"]  # more moves (4 here, 1 for STEP 20), each one paid for
