"""The twin of the API's server-side context editing: one test per rule, plus properties."""

from __future__ import annotations

import copy
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.api.context_editing import (
    PLACEHOLDER,
    apply_edits,
    assistant_turns,
    default_thinking_clearing,
    tool_uses,
)
from engine.api.context_management import (
    THINKING_REQUIRED,
    ClearThinking,
    ClearToolUses,
    EditError,
    parse_edits,
    to_json,
    unsupported_model_message,
)
from engine.twins.context_clear import (
    DEFAULT_AT_LEAST,
    DEFAULT_EXCLUDE,
    DEFAULT_KEEP,
    DEFAULT_PAID_KEEP,
    DEFAULT_PAID_TRIGGER,
    DEFAULT_STEP,
    DEFAULT_TOOL_INPUTS,
    DEFAULT_TRIGGER,
    edit_for_request,
    knob_errors,
    knobs_from_env,
    step_from_env,
    trailing_results,
)

SETTINGS = settings(
    derandomize=True,
    max_examples=int(os.environ.get("CTXPATCH_MAX_EXAMPLES", "100")),
    deadline=None,
)


def count(messages) -> int:
    """A deterministic stand-in for the server's counter: JSON characters / 4."""
    return len(json.dumps(list(messages))) // 4


def human(t: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": t}]}


def call(tid: str, name: str = "Read", size: int = 10, thinking: bool = False) -> dict:
    blocks: list[dict] = []
    if thinking:
        blocks.append({"type": "thinking", "thinking": "hm " * 50, "signature": "sig" + tid})
    blocks.append({"type": "tool_use", "id": tid, "name": name, "input": {"arg": "x" * size}})
    return {"role": "assistant", "content": blocks}


def result(tid: str, size: int = 4000) -> dict:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": tid, "content": "r" * size}],
    }


def session(n: int, names=("Read",), size: int = 4000, thinking: bool = False) -> list[dict]:
    msgs = [human("go")]
    for k in range(n):
        tid = f"t{k}"
        msgs += [call(tid, names[k % len(names)], thinking=thinking), result(tid, size)]
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    return msgs


def results_of(messages) -> dict[str, object]:
    return {
        b["tool_use_id"]: b["content"]
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }


def inputs_of(messages) -> dict[str, object]:
    return {
        b["id"]: b["input"]
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use"
    }


# --- clear_tool_uses ---------------------------------------------------------------------------


def test_below_the_trigger_nothing_is_cleared():
    msgs = session(5)
    edit = ClearToolUses(trigger_value=count(msgs) + 1)
    out = apply_edits(msgs, [edit], count)
    assert out.messages == msgs and out.applied_edits == []


def test_at_the_trigger_all_but_the_last_keep_are_cleared_oldest_first():
    msgs = session(6)
    out = apply_edits(msgs, [ClearToolUses(trigger_value=count(msgs), keep=2)], count)
    res = results_of(out.messages)
    assert [res[f"t{k}"] == PLACEHOLDER for k in range(6)] == [True] * 4 + [False] * 2
    (applied,) = out.applied_edits
    assert applied == {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": 4,
        "cleared_input_tokens": count(msgs) - count(out.messages),
    }
    assert applied["cleared_input_tokens"] > 4 * 900


def test_tool_uses_trigger_counts_tool_use_blocks():
    msgs = session(4)
    assert apply_edits(msgs, [ClearToolUses("tool_uses", 5, keep=1)], count).applied_edits == []
    out = apply_edits(msgs, [ClearToolUses("tool_uses", 4, keep=1)], count)
    assert out.applied_edits[0]["cleared_tool_uses"] == 3


def test_keep_larger_than_the_tool_uses_clears_nothing():
    msgs = session(3)
    out = apply_edits(msgs, [ClearToolUses(trigger_value=1, keep=3)], count)
    assert out.messages == msgs and out.applied_edits == []


def test_keep_zero_clears_every_result():
    msgs = session(3)
    out = apply_edits(msgs, [ClearToolUses(trigger_value=1, keep=0)], count)
    assert set(results_of(out.messages).values()) == {PLACEHOLDER}


def test_clear_at_least_not_reached_clears_nothing():
    msgs = session(4, size=400)
    full = apply_edits(msgs, [ClearToolUses(trigger_value=1, keep=1)], count)
    freed = full.applied_edits[0]["cleared_input_tokens"]
    too_much = ClearToolUses(trigger_value=1, keep=1, clear_at_least=freed + 1)
    out = apply_edits(msgs, [too_much], count)
    assert out.messages == msgs and out.applied_edits == []
    enough = ClearToolUses(trigger_value=1, keep=1, clear_at_least=freed)
    assert apply_edits(msgs, [enough], count).messages == full.messages


def test_excluded_tools_are_never_cleared_but_count_toward_keep():
    msgs = session(6, names=("Read", "Bash"))  # t0 Read, t1 Bash, ...
    out = apply_edits(
        msgs, [ClearToolUses(trigger_value=1, keep=2, exclude_tools=("Bash",))], count
    )
    res = results_of(out.messages)
    assert [k for k in range(6) if res[f"t{k}"] == PLACEHOLDER] == [0, 2]
    assert out.applied_edits[0]["cleared_tool_uses"] == 2


def test_clear_tool_inputs_true_empties_the_cleared_inputs_only():
    msgs = session(4)
    out = apply_edits(msgs, [ClearToolUses(trigger_value=1, keep=1, clear_tool_inputs=True)], count)
    inputs = inputs_of(out.messages)
    assert [inputs[f"t{k}"] for k in range(4)] == [{}, {}, {}, {"arg": "x" * 10}]


def test_clear_tool_inputs_names_only_those_tools():
    msgs = session(4, names=("Read", "Edit"))
    edit = ClearToolUses(trigger_value=1, keep=1, clear_tool_inputs=("Edit",))
    inputs = inputs_of(apply_edits(msgs, [edit], count).messages)
    assert inputs["t1"] == {} and inputs["t0"] == inputs["t2"] == {"arg": "x" * 10}


def test_clearing_keeps_the_other_keys_of_a_result():
    msgs = session(2)
    msgs[2]["content"][0] |= {"is_error": True, "cache_control": {"type": "ephemeral"}}
    out = apply_edits(msgs, [ClearToolUses(trigger_value=1, keep=1)], count)
    assert out.messages[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t0",
        "content": PLACEHOLDER,
        "is_error": True,
        "cache_control": {"type": "ephemeral"},
    }


def test_a_tool_use_without_result_is_counted_but_only_its_input_is_cleared():
    msgs = [human("go"), call("a"), result("a"), call("b"), result("b"), call("c")]
    out = apply_edits(msgs, [ClearToolUses(trigger_value=1, keep=1, clear_tool_inputs=True)], count)
    assert results_of(out.messages) == {"a": PLACEHOLDER, "b": PLACEHOLDER}
    assert inputs_of(out.messages)["c"] == {"arg": "x" * 10}


# --- clear_thinking ----------------------------------------------------------------------------


def thinking_session() -> list[dict]:
    msgs: list[dict] = []
    for turn in range(3):
        msgs.append(human(f"q{turn}"))
        for k in range(2):
            tid = f"t{turn}{k}"
            msgs += [call(tid, thinking=True), result(tid, 100)]
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    return msgs


def thinking_turns_left(messages) -> list[int]:
    turns = assistant_turns(messages)
    return [
        n
        for n, t in enumerate(turns)
        if any(b.get("type") == "thinking" for i in t for b in messages[i]["content"])
    ]


def test_clear_thinking_keeps_the_last_n_turns_a_tool_loop_is_one_turn():
    msgs = thinking_session()
    assert len(assistant_turns(msgs)) == 3
    out = apply_edits(msgs, [ClearThinking(2)], count)
    assert thinking_turns_left(out.messages) == [1, 2]
    assert out.applied_edits == [
        {
            "type": "clear_thinking_20251015",
            "cleared_thinking_turns": 1,
            "cleared_input_tokens": count(msgs) - count(out.messages),
        }
    ]


def test_clear_thinking_all_changes_nothing():
    msgs = thinking_session()
    out = apply_edits(msgs, [ClearThinking("all")], count)
    assert out.messages == msgs and out.applied_edits == []


def test_thinking_on_without_the_edit_keeps_only_the_last_turns_thinking():
    msgs = thinking_session()
    assert thinking_turns_left(default_thinking_clearing(msgs)) == [2]
    out = apply_edits(msgs, [], count, thinking_enabled=True)
    assert thinking_turns_left(out.messages) == [2] and out.applied_edits == []
    assert apply_edits(msgs, [], count).messages == msgs


def test_thinking_is_cleared_before_tool_uses_and_each_reports_its_own_tokens():
    msgs = thinking_session()
    out = apply_edits(msgs, [ClearThinking(1), ClearToolUses(trigger_value=1, keep=1)], count)
    kinds = [a["type"] for a in out.applied_edits]
    assert kinds == ["clear_thinking_20251015", "clear_tool_uses_20250919"]
    total = sum(a["cleared_input_tokens"] for a in out.applied_edits)
    assert total == count(msgs) - count(out.messages)


# --- parsing -----------------------------------------------------------------------------------


def test_parse_defaults_are_the_apis():
    (edit,) = parse_edits({"edits": [{"type": "clear_tool_uses_20250919"}]})
    assert edit == ClearToolUses("input_tokens", 100_000, 3, None, (), False)
    (th,) = parse_edits({"edits": [{"type": "clear_thinking_20251015"}]})
    assert th == ClearThinking(1)


def test_parse_round_trips_to_json():
    edits = [
        ClearThinking("all"),
        ClearToolUses("tool_uses", 30, 5, 20_000, ("Bash",), ("Edit", "Write")),
    ]
    assert parse_edits({"edits": [to_json(e) for e in edits]}) == edits
    assert parse_edits({"edits": [to_json(ClearThinking(4))]}) == [ClearThinking(4)]


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ([{"type": "clear_everything"}], "does not match any of the expected tags"),
        ([{"type": "clear_tool_uses_20250919", "bogus": 1}], "edits.0.bogus: Extra inputs"),
        (
            [{"type": "clear_tool_uses_20250919", "trigger": {"type": "turns", "value": 3}}],
            "edits.0.trigger.type",
        ),
        (
            [{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 0}}],
            "edits.0.trigger.value: Input should be greater than or equal to 1",
        ),
        (
            [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": "3"}}],
            "edits.0.keep.value: Input should be a valid integer",
        ),
        (
            [{"type": "clear_tool_uses_20250919", "keep": {"type": "input_tokens", "value": 3}}],
            "edits.0.keep.type: Input should be 'tool_uses'",
        ),
        (
            [{"type": "clear_tool_uses_20250919", "exclude_tools": "Bash"}],
            "edits.0.exclude_tools: Input should be a valid list of strings",
        ),
        (
            [{"type": "clear_tool_uses_20250919", "clear_tool_inputs": "yes"}],
            "edits.0.clear_tool_inputs",
        ),
        ([{"type": "clear_thinking_20251015", "keep": "some"}], "edits.0.keep"),
        (
            [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 0}}],
            "greater than or equal to 1",
        ),
        (
            [{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}],
            "edits.1: `clear_thinking_20251015` must be the first strategy",
        ),
        (
            [{"type": "clear_tool_uses_20250919"}, {"type": "clear_tool_uses_20250919"}],
            "edits.1: duplicate strategy",
        ),
    ],
)
def test_parse_rejects_malformed_edits_with_the_path(edits, message):
    with pytest.raises(EditError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_edits({"edits": edits})


def test_parse_rejects_clear_thinking_without_thinking():
    cm = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    with pytest.raises(EditError) as err:
        parse_edits(cm, thinking_enabled=False)
    assert str(err.value) == THINKING_REQUIRED
    assert parse_edits(cm, thinking_enabled=True) == [ClearThinking("all")]


def test_unsupported_model_message_is_the_one_claude_code_recognises():
    assert unsupported_model_message("claude-x") == (
        "claude-x does not support the clear_tool_uses_20250919 context management strategy"
    )


# --- knobs -------------------------------------------------------------------------------------


def test_knobs_defaults():
    assert knobs_from_env({}) == ClearToolUses(
        trigger_value=DEFAULT_PAID_TRIGGER,
        keep=DEFAULT_PAID_KEEP,
        clear_at_least=DEFAULT_AT_LEAST,
        exclude_tools=DEFAULT_EXCLUDE,
        clear_tool_inputs=DEFAULT_TOOL_INPUTS,
    )


@pytest.mark.parametrize(
    ("policy", "keep"),
    [(None, 1), ("paid", 1), (" Fixed ", 3), ("fixed", 3), ("other", 1), ("", 1)],
)
def test_the_default_keep_follows_the_policy(policy, keep):
    """The paid policy keeps 1 by default, the fixed STEP rule the API's 3; KEEP set wins."""
    env = {} if policy is None else {"CLAUDE_CTX_CLEAR_POLICY": policy}
    assert (DEFAULT_PAID_KEEP, DEFAULT_KEEP) == (1, 3)
    assert knobs_from_env(env).keep == keep
    assert knobs_from_env({**env, "CLAUDE_CTX_CLEAR_KEEP": "5"}).keep == 5


@pytest.mark.parametrize(
    ("policy", "trigger"),
    [(None, 30_000), ("paid", 30_000), (" Fixed ", 50_000), ("fixed", 50_000), ("other", 30_000)],
)
def test_the_default_trigger_follows_the_policy(policy, trigger):
    """The paid policy's moves apply where they are made from 30,000 input tokens (under a
    higher trigger a move made at a pause was held and applied later, at a request that read
    the cache); the fixed STEP rule keeps its 50,000; TRIGGER set wins."""
    env = {} if policy is None else {"CLAUDE_CTX_CLEAR_POLICY": policy}
    assert (DEFAULT_PAID_TRIGGER, DEFAULT_TRIGGER) == (30_000, 50_000)
    assert knobs_from_env(env).trigger_value == trigger
    assert knobs_from_env({**env, "CLAUDE_CTX_CLEAR_TRIGGER": "70_000"}).trigger_value == 70_000


def test_knobs_parse_every_variable():
    env = {
        "CLAUDE_CTX_CLEAR_TRIGGER": "120_000",
        "CLAUDE_CTX_CLEAR_KEEP": "0",
        "CLAUDE_CTX_CLEAR_AT_LEAST": "25000",
        "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS": " Bash, ,TodoWrite",
        "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "Edit,Write",
    }
    assert knobs_from_env(env) == ClearToolUses(
        "input_tokens", 120_000, 0, 25_000, ("Bash", "TodoWrite"), ("Edit", "Write")
    )
    assert knobs_from_env({"CLAUDE_CTX_CLEAR_TOOL_INPUTS": "1"}).clear_tool_inputs is True
    assert knobs_from_env({"CLAUDE_CTX_CLEAR_TOOL_INPUTS": "0"}).clear_tool_inputs is False
    assert knobs_from_env({"CLAUDE_CTX_CLEAR_AT_LEAST": "0"}).clear_at_least is None


def test_knobs_disable():
    assert knobs_from_env({"CLAUDE_CTX_CLEAR_DISABLE": "1", "CLAUDE_CTX_CLEAR_KEEP": "5"}) is None
    assert knobs_from_env({"CLAUDE_CTX_CLEAR_DISABLE": "0"}) is not None


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("CLAUDE_CTX_CLEAR_TRIGGER", "0"),
        ("CLAUDE_CTX_CLEAR_TRIGGER", "-5"),
        ("CLAUDE_CTX_CLEAR_TRIGGER", "lots"),
        ("CLAUDE_CTX_CLEAR_KEEP", "1.5"),
        ("CLAUDE_CTX_CLEAR_AT_LEAST", "1e4"),
        ("CLAUDE_CTX_CLEAR_TRIGGER", "\u00b2"),  # a digit to str.isdigit, not to int()
        ("CLAUDE_CTX_CLEAR_KEEP", "1234567890"),  # more than 9 digits, as in the JavaScript
    ],
)
def test_invalid_knobs_fall_back_to_the_default_and_are_reported(name, raw):
    assert knobs_from_env({name: raw}) == knobs_from_env({})
    (error,) = knob_errors({name: raw})
    assert name in error and repr(raw) in error


def test_every_knob_edit_is_one_the_api_accepts():
    edit = knobs_from_env({"CLAUDE_CTX_CLEAR_AT_LEAST": "7", "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "1"})
    assert parse_edits({"edits": [to_json(edit)]}) == [edit]


# --- properties --------------------------------------------------------------------------------

names = st.sampled_from(["Read", "Bash", "Edit", "Grep"])
step = st.tuples(names, st.integers(0, 3000), st.booleans(), st.booleans())
edit_st = st.builds(
    ClearToolUses,
    trigger_type=st.sampled_from(["input_tokens", "tool_uses"]),
    trigger_value=st.integers(1, 8000),
    keep=st.integers(0, 6),
    clear_at_least=st.none() | st.integers(0, 3000),
    exclude_tools=st.lists(names, max_size=2).map(tuple),
    clear_tool_inputs=st.booleans() | st.lists(names, max_size=2).map(tuple),
)
thinking_st = st.builds(ClearThinking, keep=st.sampled_from(["all", 1, 2, 3]))


@st.composite
def conversations(draw) -> list[dict]:
    msgs = [human("start")]
    for k, (name, size, thinking, new_turn) in enumerate(draw(st.lists(step, max_size=12))):
        if new_turn:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
            msgs.append(human(f"q{k}"))
        msgs += [call(f"t{k}", name, size % 50, thinking), result(f"t{k}", size)]
    return msgs


@st.composite
def edit_lists(draw) -> list:
    edits = [draw(thinking_st)] if draw(st.booleans()) else []
    return edits + ([draw(edit_st)] if draw(st.booleans()) else [])


def pairs(messages) -> list[tuple[int, str]]:
    return [(i, b["id"]) for i, _, b in tool_uses(messages)]


@SETTINGS
@given(conversations(), edit_lists(), st.booleans())
def test_properties(msgs, edits, thinking):
    before = copy.deepcopy(msgs)
    out = apply_edits(msgs, edits, count, thinking_enabled=thinking)
    assert msgs == before  # never mutates its input
    # the same messages, in the same roles; every tool_use keeps its result
    assert [m["role"] for m in out.messages] == [m["role"] for m in msgs]
    assert pairs(out.messages) == pairs(msgs)
    assert results_of(out.messages).keys() == results_of(msgs).keys()
    # cleared results are the placeholder, the others are untouched
    for tid, content in results_of(out.messages).items():
        assert content in (PLACEHOLDER, results_of(msgs)[tid])
    # the reported tokens add up to what the edits freed
    freed = sum(a["cleared_input_tokens"] for a in out.applied_edits)
    if not thinking:
        assert freed == count(msgs) - count(out.messages)
    # idempotent: the edits change nothing on their own output
    again = apply_edits(out.messages, edits, count, thinking_enabled=thinking)
    assert again.messages == out.messages
    # the most recent `keep` tool uses are never cleared
    kept = results_of(out.messages)
    for edit in edits:
        if isinstance(edit, ClearToolUses) and edit.keep:
            recent = [b["id"] for _, _, b in tool_uses(msgs)][-edit.keep :]
            assert all(kept[t] != PLACEHOLDER for t in recent)


def test_the_round_in_progress_is_never_cleared():
    msgs = [human("go"), call("a"), result("a")]
    parallel = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": f"p{k}", "name": "Read", "input": {}} for k in range(4)
        ],
    }
    results = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": f"p{k}", "content": "r" * 100} for k in range(4)
        ],
    }
    msgs += [parallel, results]
    assert trailing_results(msgs) == 4
    edit = edit_for_request(ClearToolUses(trigger_value=1, keep=1), msgs)
    assert edit.keep == 4
    res = results_of(apply_edits(msgs, [edit], count).messages)
    assert res == {"a": PLACEHOLDER, **{f"p{k}": "r" * 100 for k in range(4)}}
    # a round smaller than keep leaves the edit as it is
    small = ClearToolUses(keep=5)
    assert edit_for_request(small, msgs) is small
    assert trailing_results([*msgs, {"role": "assistant", "content": []}]) == 0


def test_step_moves_the_cleared_boundary_every_step_uses():
    edit = ClearToolUses(trigger_value=1, keep=3)
    kept = [edit_for_request(edit, [*session(n)[:-1], human("x")], 4).keep for n in range(12)]
    assert kept == [3, 3, 3, 3, 4, 5, 6, 3, 4, 5, 6, 3]
    cleared = [n - k for n, k in enumerate(kept) if n > k]
    assert cleared == [4, 4, 4, 4, 8]  # only multiples of STEP are ever cleared
    assert edit_for_request(edit, session(9), 1) is edit


def test_step_knob():
    assert step_from_env({}) == DEFAULT_STEP
    assert step_from_env({"CLAUDE_CTX_CLEAR_STEP": "20"}) == 20
    assert step_from_env({"CLAUDE_CTX_CLEAR_STEP": "0"}) == DEFAULT_STEP
    assert knob_errors({"CLAUDE_CTX_CLEAR_STEP": "0"})
