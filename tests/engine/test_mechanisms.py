"""Unit tests per mechanism, naming the version and constant they check."""

from engine.claude_code.compact import files_to_restore, full_compact, offline_summary
from engine.claude_code.count import autocompact_tokens, last_usage_tokens
from engine.claude_code.flatten import flatten, validate_tool_pairs
from engine.claude_code.microcompact import microcompact, persisted_pointer
from engine.claude_code.session_memory import keep_start, session_memory_compact, sm_enabled
from engine.claude_code.thresholds import compute_thresholds
from engine.profiles import CLEARED_TEXT, profile_for

P39 = profile_for("2.1.39")
P76 = profile_for("2.0.76")
OPUS = "claude-opus-4-6"


def use(i, name="Read"):
    return {
        "type": "assistant",
        "message": {
            "id": f"m{i}",
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": f"t{i}", "name": name, "input": {"file_path": f"/f{i}"}}
            ],
        },
    }


def result(i, chars):
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * chars}],
        },
    }


def usage_msg(total, mid="u"):
    return {
        "type": "assistant",
        "message": {
            "id": mid,
            "role": "assistant",
            "model": OPUS,
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": total, "output_tokens": 0},
        },
    }


def session(n, chars, last_usage):
    msgs = []
    for i in range(n):
        msgs += [use(i), result(i, chars)]
    msgs.append(usage_msg(last_usage))
    return msgs


# --- count ---------------------------------------------------------------------------------


def test_count_2_1_39_is_usage_plus_newer_estimate():
    msgs = [usage_msg(1000), result(1, 400)]
    assert autocompact_tokens(msgs, P39) == 1100


def test_count_2_0_76_is_usage_only():
    msgs = [usage_msg(1000), result(1, 400)]
    assert autocompact_tokens(msgs, P76) == 1000 and last_usage_tokens(msgs) == 1000


def test_count_skips_synthetic_replies():
    syn = usage_msg(5)
    syn["message"]["model"] = "<synthetic>"
    assert autocompact_tokens([usage_msg(1000), syn], P39) == 1000 + 1  # "ok" text = 1


def test_count_2_1_112_starts_newer_at_first_block_of_reply():
    p = profile_for("2.1.112")
    first = {
        "type": "assistant",
        "message": {
            "id": "R",
            "content": [{"type": "tool_use", "id": "a", "name": "Read", "input": {}}],
        },
    }
    last = usage_msg(1000, "R")
    msgs = [first, result(9, 400), last]
    assert autocompact_tokens(msgs, p) == 1000 + 100 + 1
    # 2.1.39: the result, newer than the usage in the query loop's order, not the reply's "ok"
    assert autocompact_tokens(msgs, P39) == 1000 + 100


def test_count_starts_at_first_record_of_reply_in_2_1_64_and_2_1_69_on():
    """PN (2.1.64) and XV (2.1.69) .. wJ (2.1.104) walk back over the records of the last
    usage's message.id like vJ (2.1.112); 2.1.63 and 2.1.67/2.1.68 count from the usage record
    (profile field newer_from_message_start): the reply's own later records are not newer there,
    its tool results are (the query loop's order, engine.claude_code.count.newer_messages)."""
    first = {
        "type": "assistant",
        "message": {
            "id": "R",
            "content": [{"type": "tool_use", "id": "a", "name": "Read", "input": {}}],
        },
    }
    msgs = [first, result(9, 400), usage_msg(1000, "R")]
    for v in ("2.1.64", "2.1.69", "2.1.73", "2.1.74", "2.1.75", "2.1.85", "2.1.90", "2.1.104"):
        p = profile_for(v)
        assert p.newer_from_message_start, v
        assert autocompact_tokens(msgs, p) == 1000 + 100 + 1, v  # result + the reply's "ok"
    for v in ("2.1.39", "2.1.63", "2.1.65", "2.1.66", "2.1.67", "2.1.68"):
        assert not profile_for(v).newer_from_message_start, v
        assert autocompact_tokens(msgs, profile_for(v)) == 1000 + 100, v


def test_count_walk_back_skips_synthetic_replies_2_1_112():
    """KZ4 (2.1.112): a <synthetic> reply has no id for the walk back, so it does not stop it;
    another real reply's id does."""
    p = profile_for("2.1.112")
    first = {
        "type": "assistant",
        "message": {"id": "R", "content": [{"type": "text", "text": "x" * 40}]},
    }
    synth = {
        "type": "assistant",
        "message": {
            "id": "S",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": "y" * 400}],
        },
    }
    other = {"type": "assistant", "message": {"id": "Q", "content": []}}
    last = usage_msg(1000, "R")
    assert autocompact_tokens([first, synth, last], p) == 1000 + 100 + 1  # synth + "ok"
    assert autocompact_tokens([first, other, last], p) == 1000


# --- micro-compaction ----------------------------------------------------------------------


def test_mc_keeps_last_3_and_clears_to_40000_2_1_39():
    """2.1.39 pm: MFY=3 kept, clear while total-saved > jFY=40000, DFY=20000 minimum."""
    th = compute_thresholds(P39, OPUS)
    msgs = session(10, 40000, 150000)  # 10 results × 10000 tokens
    res = microcompact(msgs, P39, th)
    assert res.fired and res.cleared == tuple(f"t{i}" for i in range(6))
    assert res.saved_tokens == 60000
    texts = [m["message"]["content"][0]["content"] for m in res.messages[1:20:2]]
    assert all(t.startswith("<persisted-output>") for t in texts[:6])
    assert all(t == "x" * 40000 for t in texts[6:])


def test_mc_result_size_counts_documents_from_2_1_47():
    """Legacy MC sizes a tool result with the estimator's helper (JmY -> gt4 in 2.1.47): a
    document in the result counts 2000 from 2.1.47 (estimate_counts_documents), 0 in 2.1.45."""
    from engine.claude_code.microcompact import compactable_results

    doc = {"type": "document", "source": {"type": "text", "data": "d" * 400}}
    msgs = [
        use(1),
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [doc]}],
            },
        },
    ]
    assert compactable_results(msgs, profile_for("2.1.45"))[1] == {"t1": 0}
    assert compactable_results(msgs, profile_for("2.1.47"))[1] == {"t1": 2000}
    assert compactable_results(msgs, profile_for("2.1.68"))[1] == {"t1": 2000}


def test_mc_only_above_warning_threshold():
    th = compute_thresholds(P39, OPUS)
    res = microcompact(session(10, 40000, th.warning - 1), P39, th)
    assert not res.fired and "below warning" in res.reason
    assert microcompact(session(10, 40000, th.warning), P39, th).fired


def test_mc_minimum_saving_20000():
    th = compute_thresholds(P39, OPUS)
    res = microcompact(session(5, 50000, 150000), P39, th)  # 5×12500: t0,t1 cleared → 25000
    assert res.fired and res.saved_tokens == 25000
    small = microcompact(session(4, 56000, 150000), P39, th)  # only t0 clearable → 14000
    assert not small.fired and "saving" in small.reason


def test_mc_replacement_text_per_era():
    th = compute_thresholds(P76, OPUS)
    res = microcompact(session(10, 40000, 150000), P76, th)
    assert res.messages[1]["message"]["content"][0]["content"] == CLEARED_TEXT
    assert persisted_pointer("t1").endswith("</persisted-output>")


def test_mc_disabled_by_env_and_absent_in_stub_eras():
    th = compute_thresholds(P39, OPUS, {"DISABLE_MICROCOMPACT": "1"})
    assert not microcompact(session(10, 40000, 150000), P39, th).fired
    p = profile_for("2.1.112")
    assert not microcompact(session(10, 40000, 150000), p, compute_thresholds(p, OPUS)).fired


def test_mc_manual_target_ignores_warning():
    th = compute_thresholds(P39, OPUS)
    assert microcompact(session(10, 40000, 10), P39, th, manual_target=0).fired


def test_mc_clears_answered_images_2_1_39():
    th = compute_thresholds(P39, OPUS)
    img = {"type": "user", "message": {"role": "user", "content": [{"type": "image"}]}}
    res = microcompact([img, usage_msg(10)], P39, th)
    assert res.images_cleared == 1
    assert res.messages[0]["message"]["content"] == [{"type": "text", "text": "[image]"}]


# --- session memory ------------------------------------------------------------------------


def test_sm_gate():
    assert sm_enabled({"ENABLE_CLAUDE_CODE_SM_COMPACT": "1"})
    assert not sm_enabled({}, remote_flags=False)
    assert not sm_enabled({"DISABLE_CLAUDE_CODE_SM_COMPACT": "1"}, remote_flags=True)


def test_sm_keep_expands_to_10000_tokens_and_never_splits_pairs_2_1_39():
    """TFY: minTokens 1e4, minTextBlockMessages 5, maxTokens 40000; _SA keeps tool pairs."""
    msgs = []
    for i in range(20):
        msgs += [use(i), result(i, 4000)]  # ≈1334 tokens each result (×4/3)
    k = keep_start(msgs, len(msgs) - 1, P39)
    assert msgs[k]["type"] == "assistant"  # starts at a tool_use, not an orphaned result
    kept = msgs[k:]
    ids = {b["id"] for m in kept for b in m["message"]["content"] if b["type"] == "tool_use"}
    assert all(
        b["tool_use_id"] in ids
        for m in kept
        for b in m["message"]["content"]
        if b["type"] == "tool_result"
    )


def test_sm_gives_up_at_threshold():
    msgs = session(5, 400, 100)
    assert session_memory_compact(msgs, "summary", 3, P39, threshold=1) is None
    res = session_memory_compact(msgs, "summary", 3, P39, threshold=10**6)
    assert res is not None and res.messages[1]["isCompactSummary"]


# --- full compaction, flattening -----------------------------------------------------------


def test_full_compact_shape_and_deterministic_summary():
    msgs = [{"type": "user", "message": {"role": "user", "content": "build X"}}, *session(2, 40, 5)]
    a = full_compact(msgs, P39, 170000, todos=[{"content": "t", "status": "pending"}])
    b = full_compact(msgs, P39, 170000)
    assert a.messages[0]["compactMetadata"] == {"trigger": "auto", "preTokens": 170000}
    assert a.messages[1]["isCompactSummary"] and a.summary == b.summary
    assert "build X" in offline_summary(msgs)
    assert a.messages[-1]["attachment"]["type"] == "todo"


def test_restore_files_5_files_5000_each_50000_total_2_1_7():
    files = [(f"/p/f{i}", "x" * 40000, i) for i in range(8)] + [("/p/CLAUDE.md", "x", 99)]
    chosen = files_to_restore(files, P39)
    assert len(chosen) == 5 and all(t == 5000 for _, t in chosen)
    assert "/p/CLAUDE.md" not in [p for p, _ in chosen]


def test_flatten_merges_roles_and_validates_pairs():
    msgs = [
        {"type": "user", "message": {"role": "user", "content": "hi"}},
        {"type": "progress"},
        use(1),
        result(1, 4),
        {"type": "user", "message": {"role": "user", "content": "more"}},
    ]
    api = flatten(msgs)
    assert [m["role"] for m in api] == ["user", "assistant", "user"]
    assert api[2]["content"][-1] == {"type": "text", "text": "more"}
    assert validate_tool_pairs(api) == []
    assert validate_tool_pairs(flatten([result(2, 4)]))
