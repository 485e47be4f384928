"""Server-side clearing in the replay: the cache model, the server's view, the scenarios."""

from __future__ import annotations

import itertools

import pytest

from engine.api.context_editing import PLACEHOLDER
from engine.api.context_management import ClearToolUses
from engine.api.prompt_cache import LOOKBACK_BLOCKS, PromptCache, price
from engine.api.server_clearing import BlockEstimates, clear_on_server
from engine.profiles import profile_for
from engine.replay.calibration import calibrate
from engine.replay.counterfactual import SCENARIOS
from engine.replay.recall_tools import RECALL_TOOLS_ESTIMATE, recall_tools_tokens
from engine.replay.session import simulate
from engine.transcript import build_transcript

OPUS = "claude-opus-4-6"
OVERHEAD = 20_000
RESULT_CHARS = 24_000  # 6,000 tokens at chars/4


# --- prompt cache --------------------------------------------------------------------------------


def test_price_is_the_prompt_cache_formula():
    assert price(100, 0, 0) == 100
    assert price(0, 100, 0) == 125
    assert price(0, 0, 100) == pytest.approx(10)


def test_nothing_cached_on_the_first_request():
    assert PromptCache(100).read(["a"], [5.0], [1]) == 0


def test_an_unchanged_prefix_is_read_whole():
    cache = PromptCache(100)
    cache.read(["a", "b"], [5.0, 6.0], [1, 1])
    assert cache.read(["a", "b", "c"], [5.0, 6.0, 7.0], [1, 1, 1]) == 111


def test_a_change_reads_only_an_earlier_entry_it_still_starts_with():
    cache = PromptCache(100)
    cache.read(["a"], [5.0], [1])
    cache.read(["a", "b"], [5.0, 6.0], [1, 1])
    # "b" changed: the entry ["a", "b"] is lost, the entry ["a"] still matches
    assert cache.read(["a", "b2", "c"], [5.0, 6.0, 7.0], [1, 1, 1]) == 105
    # "a" changed: no entry matches, only the system prompt and tools are read
    assert cache.read(["a2", "b2", "c"], [5.0, 6.0, 7.0], [1, 1, 1]) == 100


def test_a_break_reads_only_up_to_the_system_prompts_breakpoint():
    cache = PromptCache(100, stable=60)
    cache.read(["a", "b"], [5.0, 6.0], [1, 1])
    # the prefix still matches: the whole overhead and the messages are read
    assert cache.read(["a", "b", "c"], [5.0, 6.0, 7.0], [1, 1, 1]) == 111
    # a change before the last breakpoint: only the system prompt's breakpoint is read, the
    # rest of the overhead is written again
    assert cache.read(["a2", "b", "c"], [5.0, 6.0, 7.0], [1, 1, 1]) == 60
    # never more than the prompt's own fixed prefix
    assert cache.read(["a3"], [5.0], [1], overhead=40) == 40


def test_an_entry_beyond_the_lookback_is_not_found():
    n = LOOKBACK_BLOCKS
    cache = PromptCache(100)
    cache.read(["a"], [5.0], [1])
    assert cache.read(["a", "b"], [5.0, 1.0], [1, n]) == 105  # n blocks after it: found
    cache = PromptCache(100)
    cache.read(["a"], [5.0], [1])
    assert cache.read(["a", "b"], [5.0, 1.0], [1, n + 1]) == 100


# --- a synthetic session ------------------------------------------------------------------------


def session(tool_rounds: int, version: str = "2.1.39") -> list[dict]:
    """One typed prompt, then ``tool_rounds`` Read round trips of 6,000-token results; each reply
    carries the usage the API reported, growing with the conversation (unpatched truth)."""
    recs: list[dict] = []
    base = {"version": version, "sessionId": "s", "cwd": "/w"}

    def add(rec: dict) -> None:
        recs.append({**base, "uuid": f"r{len(recs)}", **rec})

    add({"type": "user", "message": {"role": "user", "content": "read every file"}})
    prompt = OVERHEAD + 4
    for k in range(tool_rounds):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"path": f"/f{k}"}}
        add(
            {
                "type": "assistant",
                "message": {
                    "id": f"m{k}",
                    "role": "assistant",
                    "model": OPUS,
                    "content": [use],
                    "usage": {
                        "input_tokens": 1,
                        "cache_creation_input_tokens": 7_000,
                        "cache_read_input_tokens": prompt - 7_001,
                        "output_tokens": 20,
                    },
                },
            }
        )
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "x" * RESULT_CHARS}
        add({"type": "user", "message": {"role": "user", "content": [res]}})
        prompt += 6_030
    return recs


@pytest.fixture(scope="module")
def tr():
    return build_transcript(session(40))


def test_server_view_below_the_trigger_changes_nothing():
    recs = session(3)
    costs = [10.0] * len(recs)
    view = clear_on_server(
        recs, costs, OVERHEAD, ClearToolUses(trigger_value=10**6), BlockEstimates()
    )
    assert view.costs == costs and view.changed == {} and view.cleared_tool_uses == 0


def test_server_view_scales_the_cleared_records_and_reports_the_tokens():
    recs = session(5)
    costs = [6_000.0 if i % 2 == 0 and i else 30.0 for i in range(len(recs))]
    edit = ClearToolUses(trigger_value=1, keep=2)
    view = clear_on_server(recs, costs, OVERHEAD, edit, BlockEstimates())
    assert view.cleared_tool_uses == 3
    # the results of t0..t2 (records 2, 4, 6) are cleared, nothing else
    assert sorted(view.changed) == [2, 4, 6] and all(v == (0,) for v in view.changed.values())
    for i in (2, 4, 6):
        assert view.costs[i] < 20  # the placeholder's share of 6,000 tokens
    assert view.costs[8] == costs[8] and view.costs[1] == costs[1]
    assert view.cleared_tokens == round(sum(costs) - sum(view.costs))
    assert recs[2]["message"]["content"][0]["content"] == "x" * RESULT_CHARS  # never mutated
    assert len(PLACEHOLDER) < 60


def test_unknown_scenario_is_refused(tr):
    with pytest.raises(ValueError, match="unknown scenario"):
        simulate(tr, profile_for("2.1.39"), "everything")


@pytest.fixture(scope="module")
def runs(tr):
    prof = profile_for("2.1.39")
    env = {"CLAUDE_CTX_CLEAR_TRIGGER": "100000", "CLAUDE_CTX_CLEAR_KEEP": "3"}
    env |= {"CLAUDE_CTX_CLEAR_STEP": "1", "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "0"}
    env |= {"CLAUDE_CTX_CLEAR_POLICY": "fixed"}  # the plain API keep: a move per tool use
    return {
        name: simulate(tr, prof, name, clear_env=env, microcompact_on=False) for name in SCENARIOS
    }


def test_unpatched_replay_compacts_like_claude_code(runs):
    s = runs["unpatched"].summary
    assert s["auto_compactions"] >= 1 and s["server_clears"] == 0
    assert s["max_prompt_tokens"] <= 167_000 + 6_100


def test_clearing_lowers_the_usage_claude_code_counts_and_avoids_compaction(runs):
    clearing = runs["server_clearing"]
    s = clearing.summary
    assert s["auto_compactions"] == 0 and s["server_clears"] > 0
    # past the trigger, the server keeps the overhead, the texts and 3 results (+ the new one)
    assert s["max_prompt_tokens"] < 100_000 + 4 * 6_100
    assert s["max_unedited_prompt_tokens"] > 200_000
    first = next(r for r in clearing.requests if "server_clear" in r.events)
    assert first.prompt_tokens + first.server_cleared >= 100_000
    later = [r for r in clearing.requests if r.index > first.index]
    assert all(r.tokens < 100_000 + 4 * 6_100 for r in later)  # Claude Code's own count


def test_each_move_of_the_cleared_part_rewrites_the_cache(tr, runs):
    base, clearing = runs["unpatched"].summary, runs["server_clearing"].summary
    # what a break still reads: the prefix up to the system prompt's breakpoint (the file's
    # own break read, below the overhead), and with ctxpatch recall's tool definitions
    cal = calibrate(tr, profile_for("2.1.39"))
    assert cal.break_prefix < cal.overhead
    fixed = cal.break_prefix + recall_tools_tokens(RECALL_TOOLS_ESTIMATE, cal.ratio)
    assert clearing["cache_breaks"] > base["cache_breaks"]
    assert clearing["tokens_sent"] < base["tokens_sent"]
    req = runs["server_clearing"].requests
    breaks = [r for r in req if r.cache_break]
    # the server clears one more use per request: no earlier breakpoint is a prefix any more
    assert breaks and all(r.cache_read == fixed for r in breaks)
    assert all(r.cache_read > fixed for r in req[1:] if not r.cache_break)


def test_step_moves_the_cleared_part_every_step_tool_uses(tr):
    prof = profile_for("2.1.39")

    def run(step: str):
        env = {"CLAUDE_CTX_CLEAR_TRIGGER": "100000", "CLAUDE_CTX_CLEAR_STEP": step}
        env["CLAUDE_CTX_CLEAR_POLICY"] = "fixed"
        return simulate(tr, prof, "server_clearing", clear_env=env, microcompact_on=False)

    one, five = run("1"), run("5")
    first = next(r.index for r in one.requests if r.cache_break)
    assert [r.index for r in one.requests if r.cache_break] == list(range(first, 40))
    moves = [r.index for r in five.requests if r.cache_break]
    assert len(moves) >= 3 and all(b - a == 5 for a, b in itertools.pairwise(moves[1:]))
    assert five.summary["cost"] < one.summary["cost"]
    assert five.summary["auto_compactions"] == 0
    assert five.knobs["clear_step"] == 5


def test_patched_is_prune_and_clearing(runs):
    # one typed prompt: the text prune has nothing to do, so patched == server_clearing
    assert runs["text_prune"].summary == runs["unpatched"].summary
    assert runs["patched"].summary == runs["server_clearing"].summary
    assert runs["patched"].knobs["clear_edit"]["keep"] == {"type": "tool_uses", "value": 3}
    assert runs["unpatched"].knobs["clear_edit"] is None


def test_request_cost_adds_up(runs):
    for sim in runs.values():
        calls = sum(c.cost for c in sim.compactions)  # the summary requests
        total = sum(r.cost for r in sim.requests) + calls
        assert sim.summary["cost"] == round(total)
        assert (calls > 0) == (sim.summary["auto_compactions"] > 0)
        for r in sim.requests:
            assert 0 <= r.cache_read <= r.prompt_tokens
            assert r.cache_read + r.cache_write == r.prompt_tokens


def test_native_builds_count_the_usage_of_ctxpatchs_edit_as_it_is(tr):
    """2.1.284+ adds back what the server cleared only for an edit it built itself (the record
    then holds applied_edits); ctxpatch's edit leaves the record without them, so on 2.1.330 the
    replay's usage is the edited prompt, as on 2.1.112 (measured on the real 2.1.330 through
    the gateway: tests/e2e/test_native_gateway.py)."""
    env = {"CLAUDE_CTX_CLEAR_TRIGGER": "100000"}
    new = profile_for("2.1.330")
    assert new.count_adds_server_cleared
    sim = simulate(tr, new, "server_clearing", clear_env=env, microcompact_on=False, model=OPUS)
    plain = simulate(tr, new, "unpatched", microcompact_on=False, model=OPUS)
    assert sim.summary["server_clears"] > 0
    assert plain.summary["auto_compactions"] >= 1 and sim.summary["auto_compactions"] == 0
