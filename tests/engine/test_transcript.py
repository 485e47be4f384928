"""Transcript reader on real and synthetic JSONL."""

import json
import lzma

import pytest

from engine.transcript import (
    TranscriptError,
    build_transcript,
    load_transcript,
    orjson_reads_exactly,
    parse_records,
)

from .conftest import CCLOG, PUBLIC, SPOTTER, need_shared


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


# lines orjson reads differently or refuses (json decides them), and ordinary ones
EDGE_LINES = [
    '{"type":"user","n":NaN,"i":Infinity}',
    '{"s":"\\ud800 lone"}',
    '{"x":1e400}',
    '{"x":-0.0,"y":0.1,"z":5e-324,"w":1E2}',
    '{"a":1,"a":2}',
    '{"t":"a\tb"}',
    "[1,2]",
    "{oops",
    '{"ok":"\u00e9 \u2028"}',
]


def test_orjson_parses_as_json_does():
    """``fast`` (orjson, json where it refuses) gives the records and warnings json gives."""
    slow_skips: list[str] = []
    fast_skips: list[str] = []
    slow = parse_records(EDGE_LINES, "x", slow_skips)
    fast = parse_records(EDGE_LINES, "x", fast_skips, fast=True)
    assert json.dumps(fast) == json.dumps(slow) and fast_skips == slow_skips
    assert len(slow_skips) == 3  # the array, the cut line, the raw tab
    assert fast[0]["n"] != fast[0]["n"] and fast[1]["s"] == "\ud800 lone"


def test_long_integers_keep_json_parsing(tmp_path):
    """orjson reads an integer beyond 64 bits as a float: a file with a run of 19 digits is
    parsed by json throughout, so the integer stays exact."""
    big = 123456789012345678901234567890
    line = json.dumps({"type": "system", "n": big, "m": -9223372036854775809})
    assert not orjson_reads_exactly(line.encode())
    assert orjson_reads_exactly(b'{"n": 922337203685477580}')  # 18 digits
    f = tmp_path / "s.jsonl"
    f.write_text(line + "\n")
    rec = load_transcript(f).records[0]
    assert rec["n"] == big and isinstance(rec["m"], int)


def test_orjson_parses_the_shared_sessions_as_json_does():
    files = sorted(need_shared(SPOTTER).glob("*.jsonl")) + sorted(PUBLIC.glob("*.jsonl.xz"))[:6]
    for f in files:
        data = f.read_bytes()
        text = (lzma.decompress(data) if f.suffix == ".xz" else data).decode()
        lines = text.splitlines()
        slow_skips: list[str] = []
        fast_skips: list[str] = []
        slow = parse_records(lines, f.name, slow_skips)
        fast = parse_records(lines, f.name, fast_skips, fast=True)
        assert json.dumps(fast) == json.dumps(slow) and fast_skips == slow_skips, f.name


def test_claude_code_log_edge_cases_malformed_line_13_is_skipped():
    p = need_shared(CCLOG / "edge_cases.jsonl")
    tr = load_transcript(p)
    assert [w.split(" skipped")[0] for w in tr.warnings] == ["line 13", "line 15", "line 16"]
    assert tr.records[12] == {} and any(tr.records[11]) and any(tr.records[13])


def _reply(mid, prompt, out=5):
    return {
        "type": "assistant",
        "message": {
            "id": mid,
            "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": prompt, "output_tokens": out},
        },
    }


def test_malformed_lines_are_skipped_with_a_warning_naming_each(tmp_path):
    good = [{"type": "user", "message": {"content": "hi"}}, _reply("a", 100)]
    lines = [json.dumps(good[0]), '{"type": "assistant", "message": {"id": "b"', "[1, 2]"]
    lines.append(json.dumps(good[1]))
    p = tmp_path / "cut.jsonl"
    p.write_text("\n".join(lines) + "\n")
    tr = load_transcript(p)
    assert len(tr.warnings) == 2
    assert tr.warnings[0].startswith("line 2 skipped: invalid JSON")
    assert tr.warnings[1].startswith("line 3 skipped: a line holds a JSON list")
    assert [r.line for r in tr.replies] == [4]  # line numbers keep their place


def test_a_file_with_no_usable_record_is_still_an_error(tmp_path):
    p = tmp_path / "junk.jsonl"
    p.write_text("not json\n[1]\n\n")
    with pytest.raises(TranscriptError) as e:
        load_transcript(p)
    assert "line 1 skipped" in e.value.why and e.value.hint


def test_xz_transcripts_are_read(tmp_path):
    rec = [{"type": "user", "message": {"content": "hi"}}, _reply("a", 100)]
    p = tmp_path / "s.jsonl.xz"
    p.write_bytes(lzma.compress("\n".join(json.dumps(r) for r in rec).encode()))
    assert [r.prompt_tokens for r in load_transcript(p).replies] == [100]
    (tmp_path / "bad.jsonl.xz").write_bytes(b"not xz")
    with pytest.raises(TranscriptError, match="xz"):
        load_transcript(tmp_path / "bad.jsonl.xz")


def test_placeholder_output_below_the_content_estimate_is_replaced():
    """The largest recorded output_tokens is the message_start placeholder (here 25, not <= 2)
    when it is below the chars/4 of what the model wrote; a larger one is kept as final."""
    text = "x" * 4000  # 1000 tokens at chars/4
    rec = _reply("a", 100, out=25)
    rec["message"]["content"] = [{"type": "text", "text": text}]
    r = build_transcript([rec]).replies[0]
    assert (r.output_tokens, r.output_estimated, r.start_output) == (1000, True, 25)
    rec["message"]["usage"]["output_tokens"] = 1500
    r = build_transcript([rec]).replies[0]
    assert (r.output_tokens, r.output_estimated) == (1500, False)


def _final(mid, out, content):
    rec = _reply(mid, 100, out=out)
    rec["message"]["content"] = content
    return rec


def test_placeholders_with_thinking_scale_by_the_ratio_of_replies_with_thinking():
    """A reply with thinking is scaled by the ratio of the session's replies with thinking (here
    1.2, five final ones), one without by the ratio of all (median of 1.2 x5 and 3.0 x5: 2.1);
    thinking counts at 3/4 of its signature."""
    think = [{"type": "thinking", "thinking": "t" * 100, "signature": "s" * 800}]  # 600 chars
    tool = [{"type": "tool_use", "name": "Read", "input": {"p": "x" * 390}}]  # ~100 tokens
    recs = [_final(f"t{i}", round(1.2 * 150), think) for i in range(5)]
    recs += [_final(f"u{i}", 3 * 101, tool) for i in range(5)]
    recs += [_final("T", 8, think), _final("U", 4, tool)]  # placeholders (8 < 25, 4 < 101)
    tr = build_transcript(recs)
    last_think, last_tool = tr.replies[-2], tr.replies[-1]
    assert (last_think.output_estimated, last_think.signed_estimate) == (True, 150)
    assert last_think.output_tokens == 180  # 150 x 1.2, not x the pooled median
    assert (last_tool.output_estimated, last_tool.output_tokens) == (True, 212)  # 101 x 2.1
    # with fewer than 5 final replies of its kind, a reply takes the pooled ratio
    tr = build_transcript(recs[:3] + recs[5:])
    assert tr.replies[-2].output_tokens == round(150 * 3.0)


@pytest.mark.parametrize(
    "name", ["representative_messages.jsonl", "session_b.jsonl", "todowrite_examples.jsonl"]
)
def test_claude_code_log_fixtures_load(name):
    p = need_shared(CCLOG / name)
    tr = load_transcript(p)
    assert sum(tr.type_counts.values()) >= 1


def test_all_spotter_sessions_load(need_spotter):
    for p in SPOTTER.glob("*.jsonl"):
        tr = load_transcript(p)
        assert tr.replies and json.dumps(tr.type_counts)


def _chain(*recs):
    return build_transcript([dict(r) for r in recs])


def test_carried_over_boundary_is_not_checkable_not_mispredicted():
    """A file that starts with a compact_boundary has no usage before it: reported, not missed."""
    from engine.profiles import profile_for
    from engine.replay.recorded import simulate_recorded

    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "compactMetadata": {"trigger": "auto", "preTokens": 160_000},
    }
    summary = {"type": "user", "isCompactSummary": True, "message": {"content": "summary"}}
    tr = _chain(boundary, summary, _reply("a", 20_000))
    ev = simulate_recorded(tr, profile_for("2.1.39")).events
    assert [(e.kind, e.line, e.recorded, e.predicted) for e in ev] == [
        ("auto_compact", 1, True, None)
    ]
    assert "not checkable" in ev[0].note
    assert simulate_recorded(tr, profile_for("2.1.39")).summary["auto_compactions"] == 0


def test_count_uses_the_message_start_output_in_2_1_8_to_2_1_29():
    """2.1.8-2.1.29 keep the placeholder in memory; 2.1.7 and 2.1.30+ the final count."""
    from engine.claude_code.count import autocompact_tokens
    from engine.profiles import profile_for
    from engine.replay.recorded import memory_records

    rec = _reply("a", 150_000, out=3)
    rec["message"]["content"] = [{"type": "text", "text": "y" * 8000}]  # 2000 at chars/4
    tr = _chain({"type": "user", "message": {"content": "hi"}}, rec)
    for version, want in (("2.1.7", 152_000), ("2.1.8", 150_003), ("2.1.29", 150_003)):
        prof = profile_for(version)
        assert autocompact_tokens(memory_records(tr, prof), prof) == want, version
    prof = profile_for("2.1.30")
    assert autocompact_tokens(memory_records(tr, prof), prof) == 152_000


def _boundary_after(parent: str):
    return {
        "type": "system",
        "subtype": "compact_boundary",
        "logicalParentUuid": parent,
        "compactMetadata": {"trigger": "auto", "preTokens": 170_000},
    }


def test_a_boundary_whose_parent_is_not_in_the_file_says_the_count_lacks_it():
    """logicalParentUuid names the last message cli.js compacted; not in the file = a message
    it did not write (an attachment), counted from 2.1.33 on, not before."""
    from engine.profiles import profile_for
    from engine.replay.recorded import simulate_recorded

    user = {"type": "user", "uuid": "u1", "message": {"content": "hi"}}
    reply = {**_reply("a", 168_000), "uuid": "a1"}
    for parent, version, said in (
        ("gone", "2.1.33", True),
        ("gone", "2.1.29", False),  # attachments count 0 in 2.1.2-2.1.32
        ("a1", "2.1.33", False),
    ):
        tr = _chain(user, reply, _boundary_after(parent))
        (e,) = [e for e in simulate_recorded(tr, profile_for(version)).events]
        assert ("logicalParentUuid gone" in e.note) is said, (parent, version, e.note)


def test_counterfactual_replay_keeps_the_message_start_output_on_2_1_8_to_2_1_29():
    """The unpatched replay counts like the recorded one in every era: 2.1.8-2.1.29 keep the
    placeholder in memory (Profile.usage_final_in_memory), the others the final count."""
    from engine.profiles import profile_for
    from engine.replay.session import simulate

    first = _reply("a", 150_000, out=3)
    first["message"]["content"] = [{"type": "text", "text": "y" * 8000}]  # 2000 at chars/4
    result = {"type": "user", "message": {"content": [{"type": "tool_result", "content": "ok"}]}}
    tr = _chain({"type": "user", "message": {"content": "hi"}}, first, result, _reply("b", 152_100))
    counts = {}
    for version in ("2.1.7", "2.1.17", "2.1.30"):
        prof = profile_for(version)
        rec = simulate(tr, prof, "recorded").requests[1].tokens
        assert simulate(tr, prof, "unpatched").requests[1].tokens == rec, version
        counts[version] = rec
    assert counts == {"2.1.7": 152_001, "2.1.17": 150_004, "2.1.30": 152_001}


def test_queued_prompt_evidence():
    """Which queued prompt was attached before a boundary: a non-string one (no content in its
    enqueue), one whose enqueue is missing, or none (a string prompt, or nothing queued)."""
    from engine.replay.recorded import queued_prompt_evidence

    usage = {"type": "assistant", "message": {"usage": {"input_tokens": 1}}}

    def q(op, content=None):
        rec = {"type": "queue-operation", "operation": op}
        if content is not None:
            rec["content"] = content
        return rec

    recs = [usage, q("enqueue"), {"type": "user"}, q("remove"), {"type": "system"}]
    assert "its enqueue at line 2 holds no content" in queued_prompt_evidence(recs, 5)
    assert "attached at line 4" in queued_prompt_evidence(recs, 5)
    recs = [usage, q("enqueue", "typed text"), q("remove"), {"type": "system"}]
    assert queued_prompt_evidence(recs, 4) == ""
    recs = [q("dequeue"), usage, q("remove"), {"type": "system"}]
    assert "its enqueue is not in the file" in queued_prompt_evidence(recs, 4)
    recs = [q("enqueue"), q("remove"), usage, {"type": "system"}]
    assert queued_prompt_evidence(recs, 4) == ""


def test_unanswered_tool_calls_and_the_note_they_give():
    """The tool calls of the newest reply before a boundary whose result is no line of the file
    (a result anywhere in the file answers a call); the boundary's note names them, in every
    version, while an unwritten last message with all results written is an attachment, named
    only where the count adds attachments (2.1.33+)."""
    from engine.profiles import profile_for
    from engine.replay.recorded import unanswered_tool_calls, unwritten_tail

    def reply(mid, *blocks, usage=True):
        inner = {"id": mid, "content": list(blocks)}
        if usage:
            inner["usage"] = {"input_tokens": 1}
        return {"type": "assistant", "message": inner}

    def use(tid, name="Grep"):
        return {"type": "tool_use", "id": tid, "name": name, "input": {}}

    def result(tid):
        return {
            "type": "user",
            "message": {"content": [{"type": "tool_result", "tool_use_id": tid}]},
        }

    side = {**reply("m9", use("t9")), "isSidechain": True}
    recs = [
        reply("m1", use("t1")),
        result("t1"),
        reply("m2", {"type": "thinking", "thinking": "x"}),
        reply("m2", use("t2", "Read"), use("t3", "Bash")),
        {"type": "progress"},
        side,
        {"type": "system", "subtype": "compact_boundary"},
        result("t3"),
    ]
    assert unanswered_tool_calls(recs, 7) == ((4, "t2", "Read"),)
    assert unanswered_tool_calls([*recs[:2], {"type": "system"}], 3) == ()
    assert unanswered_tool_calls(recs, 2) == ()  # its result is line 2
    assert unanswered_tool_calls([recs[0], {"type": "system"}], 2) == ((1, "t1", "Grep"),)

    boundary = {"logicalParentUuid": "gone"}
    old, new = profile_for("2.1.25"), profile_for("2.1.37")
    note = unwritten_tail(boundary, {"x"}, old, ((4, "t2", "Read"),))
    assert "(logicalParentUuid gone) is not in the file" in note
    assert "the result of the Read call at line 4 (t2)" in note
    assert unwritten_tail(boundary, {"gone"}, old, ((4, "t2", "Read"),)) == ""
    assert unwritten_tail(boundary, {"x"}, old) == ""
    assert "(an attachment, up to 2.1.96)" in unwritten_tail(boundary, {"x"}, new)


def _said(mid, blocks, prompt, out=1):
    return {
        "type": "assistant",
        "message": {
            "id": mid,
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": blocks,
            "usage": {
                "input_tokens": 1,
                "cache_read_input_tokens": prompt - 1,
                "output_tokens": out,
            },
        },
    }


def _user(content):
    return {"type": "user", "message": {"role": "user", "content": content}}


def _write(n):
    return [{"type": "tool_use", "id": "t1", "name": "Write", "input": {"content": "x" * n}}]


def _result(n):
    return [{"type": "tool_result", "tool_use_id": "t1", "content": "y" * n}]


def test_a_placeholder_output_is_bounded_by_the_next_requests_prompt():
    """A reply recorded with the streaming placeholder (output 1) gets the session ratio's
    estimate; the next request's prompt holds the reply as input, so the count takes at most its
    growth less the user lines between (chars/4), never below chars/4 of what the model wrote."""
    from engine.transcript import build_transcript

    # five replies with final counts at 1.5x chars/4: the session ratio the estimate scales by
    prose = [
        _said(f"p{k}", [{"type": "text", "text": "w" * 400}], 90_000 + k, out=150) for k in range(5)
    ]
    records = [
        *prose,
        _user("write it"),
        _said("m1", _write(8000), 100_000),
        _user(_result(400)),  # 100 tokens at chars/4
        _said("m2", [{"type": "text", "text": "done"}], 102_600, out=12),
    ]
    tr = build_transcript(records)
    r = tr.replies[5]
    assert r.output_estimated and r.output_tokens > 1.4 * r.content_estimate
    assert r.output_bound == 2_600 - 100
    assert r.content_estimate < r.count_output == r.output_bound < r.output_tokens
    assert r.count_usage["output_tokens"] == r.count_output
    assert r.usage["output_tokens"] == r.output_tokens  # costs keep the estimate
    assert tr.replies[6].output_bound is None  # the last reply: nothing after it bounds it


def test_no_bound_across_a_new_turn_after_thinking_or_a_boundary():
    """Not bounded where the next prompt may not hold the reply: a reply with thinking followed
    by a typed prompt (earlier turns' thinking may be left out), or anything but user lines
    between (here a compaction boundary)."""
    from engine.transcript import build_transcript

    thinking = [{"type": "thinking", "thinking": "z" * 4000, "signature": "s"}, *_write(8000)]
    new_turn = [
        _said("m1", thinking, 100_000),
        _user(_result(400)),
        _user("now something else"),
        _said("m2", [{"type": "text", "text": "ok"}], 101_000, out=9),
    ]
    assert build_transcript(new_turn).replies[0].output_bound is None
    same_turn = [new_turn[0], new_turn[1], new_turn[3]]
    assert build_transcript(same_turn).replies[0].output_bound is not None
    boundary = {"type": "system", "subtype": "compact_boundary", "compactMetadata": {}}
    after = [new_turn[0], new_turn[1], boundary, new_turn[3]]
    assert build_transcript(after).replies[0].output_bound is None
