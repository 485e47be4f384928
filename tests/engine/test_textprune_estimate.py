"""engine.twins.textprune_estimate: the token estimate the prune compares with its threshold."""

from __future__ import annotations

from typing import Any

import pytest
from msgs import (
    assistant,
    text,
    tool_result,
    user,
)

from engine.javascript import js_json_stringify
from engine.twins.textprune_estimate import estimate_tokens, message_tokens

# --------------------------------------------------------------------------- estimate


@pytest.mark.parametrize(
    ("content", "rough"),
    [
        ("", 0),
        ("a", 0),  # round(0.25)
        ("ab", 1),  # round(0.5) rounds up
        ("abcdef", 2),  # round(1.5)
        ("abcdefghij", 3),  # round(2.5)
        ("😀😀😀", 2),  # 6 UTF-16 units
        ([text("ab"), text("ab")], 2),  # rounded per block
        ([text("abcdef"), {"type": "text"}, {"type": "text", "text": 7}], 2),
        ([{"type": "image", "source": {"data": "x" * 9999}}], 2000),
        ([{"type": "document", "source": {}}], 2000),
        ([{"type": "thinking", "thinking": "abcdefgh", "signature": "s" * 400}], 2),
        ([{"type": "thinking"}], 0),
        ([tool_result("abcdefgh")], 2),
        (
            [
                tool_result(
                    [text("abcdefgh"), {"type": "image"}, {"type": "mystery", "x": "y" * 99}]
                )
            ],
            2002,
        ),
        ([tool_result(None)], 0),
        ([tool_result({"text": "abcdefgh"})], 0),
        ([{"type": "tool_result"}], 0),
        # anything else: its JSON.stringify length
        ([{"type": "tool_use", "id": "t", "name": "B", "input": {}}], 13),  # 50 chars
        ([{"type": "redacted_thinking", "data": "abc"}], 10),  # 41 chars
        ([{"type": "mystery"}], 5),  # 18 chars
        ([None], 1),  # "null"
        (["abcdef"], 2),  # '"abcdef"'
        ([{"type": "tool_use", "input": {"k": "\ud800"}}], 11),  # 42: lone surrogate -> \ud800
        (None, 0),
        (7, 0),
    ],
)
def test_message_tokens(content: Any, rough: int) -> None:
    assert message_tokens(user(content)) == rough
    assert message_tokens(assistant(content)) == rough


def test_json_length_of_blocks() -> None:
    block = {"type": "tool_use", "id": "t", "name": "B", "input": {}}
    assert len(js_json_stringify(block)) == 50
    assert len(js_json_stringify({"type": "redacted_thinking", "data": "abc"})) == 41
    assert len(js_json_stringify({"type": "tool_use", "input": {"k": "\ud800"}})) == 42


@pytest.mark.parametrize(
    "msg",
    [
        {"type": "system", "message": {"content": "x" * 400}},
        {"type": "attachment", "message": {"content": [text("x" * 400)]}},
        {"type": "user", "message": None},
        {"type": "user"},
        {"type": "assistant", "message": "x" * 400},
        None,
        "x" * 400,
    ],
)
def test_messages_that_count_nothing(msg: Any) -> None:
    assert message_tokens(msg) == 0


@pytest.mark.parametrize(("rough", "total"), [(0, 0), (1, 2), (3, 4), (6, 8), (4, 6)])
def test_estimate_scaling(rough: int, total: int) -> None:
    # 3 * 1.3333333333333333 == 3.9999999999999996 -> 4; 6 * ... == 8.0 exactly
    assert estimate_tokens([user("x" * (4 * rough))]) == total


def test_estimate_counts_meta_and_summaries() -> None:
    msgs = [user("x" * 40, isMeta=True), user("x" * 40, isCompactSummary=True)]
    assert estimate_tokens(msgs) == 27  # ceil(20 * 4/3)
