"""The summary request of a compaction is priced (engine.replay.compaction_cost): in the replays
that compact, in the recorded scenario, and in the dollars."""

from __future__ import annotations

import pytest

from engine.api.prompt_cache import OUTPUT_PRICE, READ_PRICE, WRITE_PRICE
from engine.profiles import profile_for
from engine.replay.compaction_cost import compaction_call, summary_text
from engine.replay.recorded import simulate_recorded
from engine.replay.session import simulate
from engine.tokens import count_text
from engine.transcript import build_transcript
from usage.money import replay_usage

from .conftest import PUBLIC, need_shared

SUMMARY = "s" * 4_000  # 1,000 tokens of summary


@pytest.mark.parametrize(
    ("version", "shared"),
    [("2.0.76", False), ("2.1.7", False), ("2.1.29", False), ("2.1.78", False), ("2.1.90", True)],
)
def test_which_versions_share_the_main_prompts_cache(version, shared):
    assert profile_for(version).compact_reads_cache is shared


def test_its_own_system_prompt_writes_the_conversation_and_pays_the_summary_as_output():
    call = compaction_call(profile_for("2.1.25"), 383, 167_000, 165_000, 40_000, SUMMARY)
    assert (call.input_tokens, call.cache_read, call.cache_write) == (127_000, 0, 127_000)
    assert call.output_tokens == 1_000
    assert call.cost == pytest.approx(WRITE_PRICE * 127_000 + OUTPUT_PRICE * 1_000)


def test_sharing_the_prefix_reads_the_previous_prompt():
    call = compaction_call(profile_for("2.1.90"), 9, 167_000, 165_000, 40_000, SUMMARY)
    assert (call.cache_read, call.cache_write) == (165_000, 2_000)
    assert call.cost == pytest.approx(
        READ_PRICE * 165_000 + WRITE_PRICE * 2_000 + OUTPUT_PRICE * 1_000
    )
    # a previous prompt larger than the conversation (a clearing dropped it) reads no more
    assert compaction_call(profile_for("2.1.90"), 9, 1_000, 5_000, 0, "").cache_read == 1_000


def test_the_summary_is_found_among_records_and_blocks():
    recs = [
        None,
        {"type": "system", "subtype": "compact_boundary"},
        {"isCompactSummary": True, "message": {"content": [{"type": "text", "text": "ab"}]}},
    ]
    assert summary_text(recs) == "ab"
    assert summary_text([{"message": {"content": "x"}}]) == ""


def _session(tool_rounds: int, result_chars: int = 24_000) -> list[dict]:
    """A 2.1.39 session whose tool results grow the prompt past the auto-compact threshold."""
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
        msg = {
            "id": f"m{k}",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [use],
            "usage": usage,
        }
        add({"type": "assistant", "message": msg})
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "x" * result_chars}
        add({"type": "user", "message": {"role": "user", "content": [res]}})
        prompt += result_chars // 4 + 30
    return recs


def test_a_replay_that_compacts_pays_the_summary_request_and_one_that_does_not_pays_none():
    tr = build_transcript(_session(40))
    prof = profile_for("2.1.39")
    un = simulate(tr, prof, "unpatched", microcompact_on=False)
    cleared = simulate(tr, prof, "server_clearing", microcompact_on=False)
    compacted = [e for e in un.events if e.kind == "auto_compact"]
    assert compacted and [c.line for c in un.compactions] == [e.line for e in compacted]
    call = un.compactions[0]
    assert call.cache_read == 0 and call.cache_write > 100_000  # 2.1.39: its own system prompt
    assert call.output_tokens > 0
    s = un.summary
    assert s["compaction_calls_cost"] == round(sum(c.cost for c in un.compactions)) > 0
    assert s["cost"] == round(
        sum(r.cost for r in un.requests) + sum(c.cost for c in un.compactions)
    )
    assert cleared.summary["auto_compactions"] == 0 and cleared.compactions == ()
    assert cleared.summary["compaction_calls_cost"] == 0
    assert un.as_dict()["compaction_calls"][0]["cost"] == round(call.cost)
    # the dollars bill it too: its writes and its output on top of the requests'
    usage = replay_usage(un)
    assert usage.output_tokens == sum(r.output_tokens for r in un.requests) + sum(
        c.output_tokens for c in un.compactions
    )
    assert usage.cache_write_5m == sum(r.cache_write for r in un.requests) + call.cache_write


def test_the_recorded_scenario_prices_the_files_compactions_with_their_real_summaries():
    from engine.transcript import load_transcript

    name = "entireio__cli__9d7a9d52-7eb4-427d-847d-ee5451884f3d.jsonl.xz"
    tr = load_transcript(need_shared(PUBLIC / name))
    rec = simulate(tr, profile_for(tr.version), "recorded")
    assert [c.line for c in rec.compactions] == [b.line for b in tr.boundaries]
    # without the calibration's fixed prefix, the whole count is the input
    bare = simulate_recorded(tr, profile_for(tr.version))
    assert [c.input_tokens for c in bare.compactions] == [b.pre_tokens for b in tr.boundaries]
    for call, b in zip(rec.compactions, tr.boundaries, strict=True):
        text = summary_text(tr.records[b.line : b.line + 5])
        assert text and call.output_tokens == count_text(text)
        assert call.cache_read == 0 and 100_000 < call.input_tokens < b.pre_tokens
