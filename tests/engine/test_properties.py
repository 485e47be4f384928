"""Hypothesis properties: micro-compaction invariants and monotone estimates."""

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.claude_code.flatten import flatten, validate_tool_pairs
from engine.claude_code.microcompact import compactable_results, microcompact
from engine.claude_code.thresholds import compute_thresholds
from engine.profiles import profile_for
from engine.tokens import count_text, estimate_messages, estimate_newer

SETTINGS = settings(
    derandomize=True,
    max_examples=int(os.environ.get("CTXPATCH_MAX_EXAMPLES", "100")),
    deadline=None,
)
P = profile_for("2.1.39")
TH = compute_thresholds(P, "claude-opus-4-6")
TOOLS = ["Read", "Bash", "Grep", "Task", "Edit", "TodoWrite"]

turn = st.tuples(st.sampled_from(TOOLS), st.integers(0, 60000))


def build(turns, last_usage):
    msgs = []
    for i, (name, chars) in enumerate(turns):
        msgs.append(
            {
                "type": "assistant",
                "message": {
                    "id": f"m{i}",
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"t{i}", "name": name, "input": {}}],
                },
            }
        )
        msgs.append(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{i}", "content": "y" * chars}
                    ],
                },
            }
        )
    msgs.append(
        {
            "type": "assistant",
            "message": {
                "id": "last",
                "role": "assistant",
                "model": "claude-opus-4-6",
                "content": [{"type": "text", "text": "k"}],
                "usage": {"input_tokens": last_usage, "output_tokens": 0},
            },
        }
    )
    return msgs


@SETTINGS
@given(st.lists(turn, max_size=25), st.integers(0, 200000))
def test_mc_never_touches_last_3_compactable(turns, last_usage):
    msgs = build(turns, last_usage)
    ids, _ = compactable_results(msgs, P)
    res = microcompact(msgs, P, TH)
    assert not set(ids[-3:]) & set(res.cleared)
    for a, b in zip(msgs, res.messages, strict=False):
        for x, y in zip(a["message"]["content"], b["message"]["content"], strict=False):
            if x.get("type") == "tool_result" and x["tool_use_id"] in ids[-3:]:
                assert x == y


@SETTINGS
@given(st.lists(turn, max_size=25), st.integers(0, 200000))
def test_mc_never_breaks_a_tool_pair_nor_mutates(turns, last_usage):
    msgs = build(turns, last_usage)
    snapshot = repr(msgs)
    res = microcompact(msgs, P, TH)
    assert repr(msgs) == snapshot
    assert len(res.messages) == len(msgs)
    assert validate_tool_pairs(flatten(res.messages)) == validate_tool_pairs(flatten(msgs))
    assert estimate_messages(res.messages, P) <= estimate_messages(msgs, P)
    if res.fired:
        assert res.saved_tokens >= P.mc_min_saving


@SETTINGS
@given(st.text(), st.text())
def test_count_text_monotone_in_appending(a, b):
    assert count_text(a + b) >= count_text(a)
    assert abs(count_text(a + b) - count_text(a) - count_text(b)) <= 1


@SETTINGS
@given(st.lists(turn, max_size=10), st.lists(turn, max_size=5))
def test_estimates_monotone_in_messages(a, b):
    x, y = build(a, 0)[:-1], build(b, 0)[:-1]
    assert estimate_messages(x + y, P) >= estimate_messages(x, P)
    assert estimate_newer(x + y, P) >= estimate_newer(x, P)
