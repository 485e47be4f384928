"""Unit and property tests of engine.twins.textprune (the Python twin of the injected snippet): the
settings, the cut, pruning and the properties. Turns/cutoff/threshold are in
test_textprune_turns.py, the estimate in test_textprune_estimate.py, the JavaScript helpers in
test_javascript.py."""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import strategies as st
from msgs import (
    EAGER,
    MAX_EXAMPLES,
    assistant,
    changed_indices,
    conversation,
    env,
    properties,
    text,
    tool_result,
    user,
)

from engine.javascript import js_truthy, utf16_len
from engine.twins.textprune import PruneSettings, _prune, prune, prune_detailed
from engine.twins.textprune_shorten import MARKER, pruned_text

PROPERTY_SETTINGS = properties(health=(HealthCheck.too_slow, HealthCheck.data_too_large))


# --------------------------------------------------------------------------- settings


def test_settings_defaults() -> None:
    s = PruneSettings.from_env({})
    assert s == PruneSettings(keep=4, threshold=20000, max_chars=80, step=4, disabled=False)


def test_settings_valid_values() -> None:
    s = PruneSettings.from_env(
        {
            "CLAUDE_TEXT_PRUNE_KEEP": "000000007",
            "CLAUDE_TEXT_PRUNE_THRESHOLD": "0",
            "CLAUDE_TEXT_PRUNE_MAX_CHARS": "1",
            "CLAUDE_TEXT_PRUNE_STEP": "999999999",
            "CLAUDE_TEXT_PRUNE_DISABLE": "1",
        }
    )
    assert s == PruneSettings(keep=7, threshold=0, max_chars=1, step=999999999, disabled=True)


# no trimming, no sign, no decimals, ASCII digits only, at most 9 of them
INVALID_NUMBERS = [
    *("", " 5", "5 ", "5\n", "\n5", "+5", "-5", "5.0", "1e3", "0x5", "five"),
    *("1234567890", "٥", "５", "5\x00"),
]


@pytest.mark.parametrize("raw", INVALID_NUMBERS)
@pytest.mark.parametrize(
    ("name", "default"),
    [("KEEP", 4), ("THRESHOLD", 20000), ("MAX_CHARS", 80), ("STEP", 4)],
)
def test_invalid_settings_fall_back(raw: str, name: str, default: int) -> None:
    s = PruneSettings.from_env({"CLAUDE_TEXT_PRUNE_" + name: raw})
    assert getattr(s, name.lower()) == default


@pytest.mark.parametrize(("name", "default"), [("KEEP", 4), ("MAX_CHARS", 80), ("STEP", 4)])
def test_zero_is_below_the_minimum(name: str, default: int) -> None:
    s = PruneSettings.from_env({"CLAUDE_TEXT_PRUNE_" + name: "0"})
    assert getattr(s, name.lower()) == default


@pytest.mark.parametrize("raw", ["0", "true", "yes", " 1", "1 ", "01", ""])
def test_disable_needs_exactly_1(raw: str) -> None:
    assert not PruneSettings.from_env({"CLAUDE_TEXT_PRUNE_DISABLE": raw}).disabled
    msgs = conversation(3)
    assert prune(msgs, env(disable=raw)) is not msgs


def test_disable() -> None:
    msgs = conversation(5)
    assert prune(msgs, env(disable="1")) is msgs
    assert prune_detailed(msgs, env(disable="1")).reason == "disabled"


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("CLAUDE_TEXT_PRUNE_"):
            monkeypatch.delenv(key)
    msgs = conversation(3)
    assert prune(msgs) is msgs  # defaults: KEEP=4, threshold 20000
    for key, value in EAGER.items():
        monkeypatch.setenv(key, value)
    assert prune(msgs) is not msgs
    monkeypatch.setenv("CLAUDE_TEXT_PRUNE_DISABLE", "1")
    assert prune(msgs) is msgs


def test_debug_is_ignored(tmp_path: Any) -> None:
    msgs = conversation(3)
    log = tmp_path / "debug.jsonl"
    assert prune(msgs, {**EAGER, "CLAUDE_TEXT_PRUNE_DEBUG": str(log)}) == prune(msgs, EAGER)
    assert not log.exists()


# --------------------------------------------------------------------------- the cut


@pytest.mark.parametrize(
    ("original", "max_chars", "expected"),
    [
        ("short", 10, "short"),
        ("exactly10!", 10, "exactly10!"),
        ("0123456789" + "X" * 26, 10, "0123456789" + MARKER),
        ("first\nsecond line, long enough to be pruned", 10, "first" + MARKER),
        ("first\r\nsecond line, long enough to be pruned", 10, "first" + MARKER),
        ("first\rsecond line, long enough to be pruned", 10, "first" + MARKER),
        ("a\r\nb\n" + "c" * 30, 4, "a" + MARKER),
        ("\nleading newline, long enough to be pruned", 5, MARKER),
        ("0123456789\nthe rest, long enough to be pruned", 10, "0123456789" + MARKER),  # == MAX
        ("0123456789ABCDEF\nthe rest, long enough to be pruned", 10, "0123456789" + MARKER),
        # surrogate pairs: never split
        ("012345678😀" + "xyz" * 10, 10, "012345678" + MARKER),
        ("01234567😀" + "xyz" * 10, 10, "01234567😀" + MARKER),
        ("012345678\ud83d\ude00" + "xyz" * 10, 10, "012345678" + MARKER),  # two code points
        ("😀" * 20, 5, "😀😀" + MARKER),
        ("😀" * 13, 1, MARKER),
        # lone surrogates are single units
        ("012345678" + chr(0xD83D) + "xyz" * 10, 10, "012345678" + chr(0xD83D) + MARKER),
        ("012345678" + chr(0xDE00) + "xyz" * 10, 10, "012345678" + chr(0xDE00) + MARKER),
        ("0123456789" + chr(0xDE00) + "xyz" * 10, 10, "0123456789" + MARKER),
        # never made longer: the shortened form must be strictly shorter than the text
        ("0123456789X", 10, "0123456789X"),  # just over MAX_CHARS, no newline
        ("0123456789" + "X" * 25, 10, "0123456789" + "X" * 25),  # shortened form as long
        ("first\nsecond line that is long", 10, "first\nsecond line that is long"),  # as long
        ("first\nsecond line that is long!", 10, "first" + MARKER),  # one unit shorter
        ("first\nsecond", 10, "first\nsecond"),
        ("\nleading newline", 5, "\nleading newline"),
        ("012345678😀xyz", 10, "012345678😀xyz"),  # would cut before the pair, still longer
        ("😀😀", 1, "😀😀"),
        ("😀" * 12 + "x", 1, "😀" * 12 + "x"),  # 25 units: MARKER alone is as long
        ("😀" * 12 + "xy", 1, MARKER),  # 26 units: one shorter
    ],
)
def test_pruned_text(original: str, max_chars: int, expected: str) -> None:
    result = pruned_text(original, max_chars)
    assert result == expected
    if expected == original:
        assert result is original
    else:
        assert utf16_len(result) < utf16_len(original)
    again = pruned_text(expected, max_chars)
    assert again == expected


@pytest.mark.parametrize("max_chars", [1, 2, 5, 10, 80])
@pytest.mark.parametrize("newline", ["", "\n", "\r", "\r\n"])
def test_pruned_text_boundary(max_chars: int, newline: str) -> None:
    """Pruned only when first line (cut) + MARKER is strictly shorter than the text."""
    head = "h" * max_chars  # the kept first line
    shortened = head + MARKER
    size = utf16_len(shortened)
    filler = size - max_chars - len(newline)  # makes the text exactly as long as `shortened`
    equal = head + newline + "t" * filler
    assert utf16_len(equal) == size
    assert pruned_text(equal, max_chars) is equal
    one_more = equal + "t"
    assert pruned_text(one_more, max_chars) == shortened
    just_over = "h" * (max_chars + 1)  # no newline, a single unit over MAX_CHARS
    assert pruned_text(just_over, max_chars) is just_over


def test_pruned_text_returns_the_same_object_when_already_pruned() -> None:
    once = pruned_text("0123456789ABCDEF\nthe rest, long enough to be pruned", 10)
    assert once == "0123456789" + MARKER
    assert pruned_text(once, 10) is once


# --------------------------------------------------------------------------- pruning


def test_what_is_pruned_and_what_is_not() -> None:
    long = "L" * 40  # pruned at MAX_CHARS=10 (10 + MARKER = 35 units)
    old = [
        user(long + "\nmore", uuid="typed"),  # 0 string content of a typed user message
        assistant(long),  # 1 assistant string: untouched
        assistant(
            [
                text(long, citations=None),
                {"type": "thinking", "thinking": long, "signature": "sig"},
                {"type": "redacted_thinking", "data": long},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": long}},
                {"type": "text", "text": 12345678901234},  # not a string
                {"type": "text"},
                text("short"),
            ]
        ),  # 2
        user(
            [
                tool_result(long),
                tool_result([text(long)]),
                {"type": "image", "source": {"data": long}},
                {"type": "document", "source": {"data": long}},
                {"type": "mystery", "text": long},
                text(long),
            ]
        ),  # 3 (a turn: it has non-tool_result blocks)
        user(long, isMeta=True),  # 4
        user([text(long)], isMeta=True),  # 5
        user(long, isCompactSummary=True),  # 6
        assistant([text(long)], isCompactSummary=True),  # 7
        {"type": "system", "message": {"content": [text(long)]}, "content": long},  # 8
        {"type": "attachment", "message": {"content": long}},  # 9
        {"type": "user", "message": {"content": [text(long)]}, "isMeta": []},  # 10 [] is truthy
    ]
    recent = [user(long, uuid="recent"), assistant([text(long)])]
    msgs = old + recent
    snapshot = copy.deepcopy(msgs)
    out = prune(msgs, env(max_chars="10"))
    assert msgs == snapshot
    assert changed_indices(msgs, out) == [0, 2, 3]
    cut = "L" * 10 + MARKER
    assert out[0] == {**msgs[0], "message": {"role": "user", "content": cut}}
    assert out[2]["message"]["content"][0] == {"type": "text", "text": cut, "citations": None}
    assert out[2]["message"]["content"][1:] == msgs[2]["message"]["content"][1:]
    assert all(
        a is b
        for a, b in zip(
            out[2]["message"]["content"][1:], msgs[2]["message"]["content"][1:], strict=False
        )
    )
    assert out[3]["message"]["content"][-1] == text(cut)
    assert all(
        a is b
        for a, b in zip(
            out[3]["message"]["content"][:-1], msgs[3]["message"]["content"][:-1], strict=False
        )
    )
    # new objects all the way down for changed messages
    for i in (0, 2, 3):
        assert out[i] is not msgs[i]
        assert out[i]["message"] is not msgs[i]["message"]
        assert {k: v for k, v in out[i].items() if k != "message"} == {
            k: v for k, v in msgs[i].items() if k != "message"
        }


def test_key_order_of_new_objects_follows_the_input() -> None:
    msgs = [
        {
            "uuid": "1",
            "message": {"content": [{"text": "x" * 40, "type": "text", "z": 1}]},
            "type": "user",
        },
        user("next"),
    ]
    out = prune(msgs, env())
    assert out[0] is not msgs[0]
    assert list(out[0]) == ["uuid", "message", "type"]
    assert list(out[0]["message"]["content"][0]) == ["text", "type", "z"]


def test_nothing_qualifies_returns_the_input() -> None:
    msgs = conversation(6, body="")
    outcome = prune_detailed(msgs, env(max_chars="80"))
    assert outcome.reason == "nothing-to-prune"
    assert outcome.messages is msgs


def test_idempotent_with_first_line_exactly_max_chars() -> None:
    msgs = [
        user("A" * 10 + "\n" + "B" * 50),
        assistant([text("C" * 10 + "\r\n" + "D" * 30)]),
        user("go"),
    ]
    once = prune(msgs, env(max_chars="10"))
    assert once[0]["message"]["content"] == "A" * 10 + MARKER
    assert once[1]["message"]["content"][0]["text"] == "C" * 10 + MARKER
    assert prune(once, env(max_chars="10")) is once


def test_a_pass_that_leaves_thinking_out_is_settled() -> None:
    """One pass empties the thinking-only message that pinned the edit end (it is left out);
    the typed text after the tool result, left alone by that pass, is what a second pass
    shortens: the result is that second pass's, a fixed point (hypothesis's example)."""
    env = {
        "CLAUDE_TEXT_PRUNE_KEEP": "1",
        "CLAUDE_TEXT_PRUNE_STEP": "1",
        "CLAUDE_TEXT_PRUNE_MAX_CHARS": "1",
        "CLAUDE_TEXT_PRUNE_THRESHOLD": "0",
    }
    thinking = {"type": "thinking", "thinking": "", "signature": "s"}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": ""}
    msgs = [
        user("x" * 27),
        assistant([thinking]),
        user(""),
        user([result]),
        user("x" * 27),
        user(""),
    ]
    outcome = prune_detailed(msgs, env)
    contents = [m["message"]["content"] for m in outcome.messages]
    assert contents == ["x" + MARKER, "", [result], "x" + MARKER, ""]
    assert (outcome.thinking_dropped, outcome.messages_removed) == (1, 1)
    assert (outcome.blocks_pruned, outcome.messages_changed) == (2, 2)
    assert outcome.turns == 4 and outcome.cutoff == 4  # the second pass's, in its list
    assert prune(outcome.messages, env) is outcome.messages
    assert [outcome.messages[i] for i in (1, 2, 4)] == [msgs[i] for i in (2, 3, 5)]
    assert all(outcome.messages[i] is msgs[i + 1] for i in (1, 2, 4))  # shared, untouched


def test_never_throws() -> None:
    weird: list[Any] = [
        None,
        1,
        "x",
        [],
        {},
        {"type": "user", "message": {"content": [None, 1, []]}},
    ]
    assert prune(weird, env()) is weird
    not_a_list: Any = "messages"
    assert prune(not_a_list, env()) is not_a_list
    assert prune_detailed(not_a_list, env()).reason == "not-a-list"
    cyclic: dict[str, Any] = {"type": "tool_use"}
    cyclic["input"] = cyclic
    msgs = [user([text("x" * 50)]), assistant([cyclic]), user("b")]
    assert prune(msgs, env(threshold="5")) is msgs  # the estimate fails: input comes back
    assert prune_detailed(msgs, env(threshold="5")).reason == "error"


# --------------------------------------------------------------------------- properties

PIECES = ["\n", "\r", "\r\n", "😀", "\ud83d", "\ude00", "é", " ", "ab", "[earlier context pruned]"]
pieces = st.lists(
    st.one_of(
        st.sampled_from(PIECES), st.integers(1, 40).map(lambda k: "x" * k), st.text(max_size=3)
    ),
    max_size=6,
).map("".join)
# A text is only pruned when its first line (cut to MAX_CHARS) plus MARKER (25 units) is
# shorter than the text: half the texts get a long run in the middle so many qualify.
texts = st.one_of(
    pieces,
    st.tuples(pieces, st.integers(1, 120).map(lambda k: "x" * k), pieces).map("".join),
)
flags = st.one_of(
    st.just(None),
    st.just(None),
    st.just(None),
    st.sampled_from([True, False, 0, 1, "", "y", [], {}]),
)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), texts)
block = st.one_of(
    st.builds(text, texts),
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, texts),
    st.builds(lambda t: {"type": "redacted_thinking", "data": t}, texts),
    st.builds(lambda t: {"type": "tool_use", "id": "t", "name": "n", "input": {"c": t}}, texts),
    st.builds(tool_result, st.one_of(texts, st.lists(st.builds(text, texts), max_size=2))),
    st.just({"type": "image", "source": {"type": "base64", "data": "AAAA"}}),
    st.just({"type": "document", "source": {"type": "text", "data": "x"}}),
    st.builds(lambda t: {"type": "mystery", "text": t}, texts),
    json_leaf,
)


def _message(kind: str, content: Any, meta: Any, summary: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"type": kind, "message": {"role": kind, "content": content}}
    if meta is not None:
        msg["isMeta"] = meta
    if summary is not None:
        msg["isCompactSummary"] = summary
    return msg


any_message = st.builds(
    _message,
    st.sampled_from(["user", "user", "assistant", "assistant", "system"]),
    st.one_of(texts, st.lists(block, max_size=4), st.lists(block, max_size=4), st.none()),
    flags,
    flags,
)
# a message a person typed (flags, carriers and all the odd shapes come from any_message)
typed_user = st.builds(
    _message,
    st.just("user"),
    st.one_of(texts, texts, st.lists(block, min_size=1, max_size=3)),
    st.none(),
    st.none(),
)
# exchanges: a (usually) typed user message followed by a few arbitrary messages
messages_st = st.lists(
    st.tuples(typed_user, st.lists(any_message, max_size=2)), min_size=2, max_size=7
).map(lambda exchanges: [m for first, rest in exchanges for m in (first, *rest)])
env_st = st.fixed_dictionaries(
    {
        "CLAUDE_TEXT_PRUNE_KEEP": st.sampled_from(["1", "1", "2", "2", "3", "0", "x"]),
        "CLAUDE_TEXT_PRUNE_STEP": st.sampled_from(["1", "1", "2", "3", "0"]),
        "CLAUDE_TEXT_PRUNE_MAX_CHARS": st.sampled_from(["1", "2", "5", "5", "10", "0"]),
        "CLAUDE_TEXT_PRUNE_THRESHOLD": st.sampled_from(["0", "10", "100", "500"]),
        "CLAUDE_TEXT_PRUNE_THINKING": st.sampled_from(["ignore", "drop"]),
    }
)
# the 0.1.0 rule: thinking blocks stay where they are (tests/engine/test_textprune_thinking.py
# covers the thinking-safe rule)
env_ignore_st = env_st.map(lambda e: {**e, "CLAUDE_TEXT_PRUNE_THINKING": "ignore"})


def test_property_strategies_actually_prune() -> None:
    """Guard against vacuous properties: a good share of generated inputs must prune."""
    reasons: Counter[str] = Counter()

    @properties(max(MAX_EXAMPLES, 100))
    @given(messages_st, env_st)
    def run(msgs: list[Any], environ: dict[str, str]) -> None:
        reasons[prune_detailed(msgs, environ).reason] += 1

    run()
    total = sum(reasons.values())
    assert reasons["pruned"] >= 0.25 * total, reasons
    assert reasons["error"] == 0, reasons


def test_property_texts_reach_both_sides_of_the_boundary() -> None:
    """Guard: generated texts over MAX_CHARS are both shortened and kept (not shorter)."""
    kinds: Counter[str] = Counter()

    @properties(max(MAX_EXAMPLES, 100))
    @given(texts, st.sampled_from([1, 2, 5, 10, 80]))
    def run(original: str, max_chars: int) -> None:
        if utf16_len(original) <= max_chars:
            kinds["short"] += 1
        elif pruned_text(original, max_chars) is original:
            kinds["kept"] += 1
        else:
            kinds["pruned"] += 1

    run()
    total = sum(kinds.values())
    assert kinds["pruned"] >= 0.25 * total, kinds
    assert kinds["kept"] > 0, kinds


UNTOUCHED_TYPES = {"thinking", "redacted_thinking", "tool_use", "tool_result", "image", "document"}


@PROPERTY_SETTINGS
@given(messages_st, env_ignore_st)
def test_property_no_mutation_and_identity(msgs: list[Any], environ: dict[str, str]) -> None:
    snapshot = copy.deepcopy(msgs)
    outcome = prune_detailed(msgs, environ)
    out = outcome.messages
    assert msgs == snapshot
    assert outcome.reason != "error"
    assert len(out) == len(msgs)
    if out is msgs:
        return
    assert outcome.reason == "pruned"
    assert outcome.cutoff is not None
    for i, (a, b) in enumerate(zip(msgs, out, strict=True)):
        if i >= outcome.cutoff:
            assert a is b  # messages at or after the cutoff are shared untouched
        if a is b:
            continue
        assert a["type"] in ("user", "assistant")
        assert not js_truthy(a.get("isMeta")) and not js_truthy(a.get("isCompactSummary"))
        old, new = a["message"]["content"], b["message"]["content"]
        if isinstance(old, str):
            assert a["type"] == "user" and new.endswith(MARKER)
            assert utf16_len(new) < utf16_len(old)  # never made longer
            continue
        assert len(old) == len(new)
        for x, y in zip(old, new, strict=True):
            if x is not y:
                assert x["type"] == "text" and y["text"].endswith(MARKER)
                assert utf16_len(y["text"]) < utf16_len(x["text"])  # never made longer
                assert {k: v for k, v in x.items() if k != "text"} == {
                    k: v for k, v in y.items() if k != "text"
                }
    json.dumps(out)  # still plain JSON data


@PROPERTY_SETTINGS
@given(texts, st.integers(1, 90))
def test_property_pruned_text_never_grows(original: str, max_chars: int) -> None:
    result = pruned_text(original, max_chars)
    again = pruned_text(result, max_chars)
    assert again is result
    if result is original:
        return
    assert utf16_len(result) < utf16_len(original)
    assert utf16_len(original) > max_chars
    assert result.endswith(MARKER)
    head = result[: -len(MARKER)]
    assert original.startswith(head) and "\n" not in head and "\r" not in head
    assert utf16_len(head) <= max_chars


@PROPERTY_SETTINGS
@given(messages_st, env_st)
def test_property_idempotent(msgs: list[Any], environ: dict[str, str]) -> None:
    once = prune(msgs, environ)
    twice = prune(once, environ)
    assert twice == once
    assert twice is once


# a pass that leaves thinking out and is settled (the assistant turn, thinking and an image, is
# before the cutoff): the property's case made certain whatever examples hypothesis's version
# draws (6.155 drew none of its kind among the property's 200, 6.170 did)
SETTLED_EXAMPLE = (
    [
        user("x" * 100),
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
                ],
            },
        },
        user("y" * 70),
        user("z" * 100),
        user("w" * 53),
    ],
    {
        "CLAUDE_TEXT_PRUNE_THRESHOLD": "500",
        "CLAUDE_TEXT_PRUNE_KEEP": "1",
        "CLAUDE_TEXT_PRUNE_STEP": "3",
        "CLAUDE_TEXT_PRUNE_MAX_CHARS": "5",
    },
)


def test_property_a_pass_said_settled_is_a_fixed_point() -> None:
    """``unsettled`` False after a pass that left thinking out: a second pass changes nothing
    (the settle loop skips it on that word)."""
    seen: Counter[str] = Counter()

    @PROPERTY_SETTINGS
    @given(messages_st, env_st)
    @example(*SETTLED_EXAMPLE)
    def run(msgs: list[Any], environ: dict[str, str]) -> None:
        settings = PruneSettings.from_env(environ)
        one = _prune(msgs, settings)
        if not (one.changed and one.thinking_dropped):
            return
        again = _prune(one.messages, settings)
        seen["unsettled" if one.unsettled else "settled"] += 1
        if not one.unsettled:
            assert not again.changed

    run()
    assert seen["settled"] > 0, seen


@PROPERTY_SETTINGS
@given(messages_st, env_ignore_st)
def test_property_untouched_block_types(msgs: list[Any], environ: dict[str, str]) -> None:
    out = prune(msgs, environ)
    max_chars = PruneSettings.from_env(environ).max_chars
    for a, b in zip(msgs, out, strict=True):
        if a is b or not isinstance(a["message"]["content"], list):
            continue
        for x, y in zip(a["message"]["content"], b["message"]["content"], strict=True):
            kind = x.get("type") if isinstance(x, dict) else None
            if kind != "text":
                assert x is y
            if kind in UNTOUCHED_TYPES:
                assert x is y
            if x is not y:
                assert utf16_len(y["text"]) <= max_chars + len(MARKER)
