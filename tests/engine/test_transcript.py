"""Transcript reader on real and synthetic JSONL."""

import json

import pytest

from engine.transcript import TranscriptError, build_transcript, load_transcript, parse_records

from .conftest import CCLOG, SPOTTER


def test_reply_split_over_lines_shares_message_id(need_spotter):
    tr = load_transcript(SPOTTER / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    r = tr.replies[tr.reply_of_line[708]]
    assert r.lines == (708, 709, 713, 717) and r.output_tokens == 272
    assert tr.version == "2.1.39" and tr.model == "claude-opus-4-6"
    assert [(b.line, b.trigger, b.pre_tokens) for b in tr.boundaries] == [(754, "auto", 170251)]


def test_streaming_placeholder_output_is_estimated(need_spotter):
    """Line 743 recorded output_tokens 1 although cli.js held the final count in memory."""
    tr = load_transcript(SPOTTER / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    r = tr.replies[tr.reply_of_line[743]]
    assert r.recorded_output == 1 and r.output_estimated and r.output_tokens > 1000


def test_unknown_types_counted_sidechains_and_synthetic_skipped():
    recs = [
        {"type": "user", "message": {"role": "user", "content": "hi"}},
        {"type": "mystery"},
        {"type": "progress"},
        {"type": "assistant", "isSidechain": True, "message": {"id": "s", "usage": {}}},
        {"type": "assistant", "message": {"id": "x", "model": "<synthetic>", "usage": {}}},
        {
            "type": "assistant",
            "message": {
                "id": "a",
                "model": "m",
                "content": [],
                "usage": {"input_tokens": 5, "output_tokens": 3},
            },
        },
    ]
    tr = build_transcript(recs)
    assert tr.unknown_types == {"mystery": 1} and tr.sidechain_lines == 1
    assert [r.message_id for r in tr.replies] == ["a"]


def test_malformed_line_number():
    with pytest.raises(TranscriptError) as e:
        parse_records(['{"type":"user"}', "", "{oops"])
    assert e.value.line == 3 and "JSON" in e.value.why


def test_claude_code_log_edge_cases_malformed_line_13():
    p = CCLOG / "edge_cases.jsonl"
    if not p.exists():
        pytest.skip("claude-code-log fixtures not found")
    with pytest.raises(TranscriptError) as e:
        load_transcript(p)
    assert e.value.line == 13


@pytest.mark.parametrize(
    "name", ["representative_messages.jsonl", "session_b.jsonl", "todowrite_examples.jsonl"]
)
def test_claude_code_log_fixtures_load(name):
    p = CCLOG / name
    if not p.exists():
        pytest.skip("claude-code-log fixtures not found")
    tr = load_transcript(p)
    assert sum(tr.type_counts.values()) >= 1


def test_all_spotter_sessions_load(need_spotter):
    for p in SPOTTER.glob("*.jsonl"):
        tr = load_transcript(p)
        assert tr.replies and json.dumps(tr.type_counts)
