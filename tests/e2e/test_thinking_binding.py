"""The preserved-thinking check (lab.thinking_binding): one test per rule.

Each ignored difference must pass, each counted difference must fail (and name where the prefix
first differs), and thinking blocks may be removed only as a front or a trailing run.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest

from lab.thinking_binding import (
    BINDING_BETA,
    BindingError,
    apply_binding,
    check,
    effective_mode,
    sign,
)

ON = {"type": "adaptive"}
IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo"},
}


def _think(body: dict, i: int, text: str) -> dict:
    """A thinking block made as the reply to ``body`` (its messages[:i])."""
    head = {**body, "messages": body["messages"][:i]}
    return {"type": "thinking", "thinking": text, "signature": sign(head, i, 0, text)}


def conversation() -> dict:
    """prompt, [thinking, text, tool_use], [tool_result + image], [thinking, text], prompt 2,
    [thinking, text], prompt 3: three thinking blocks, each signed when it was produced."""
    body: dict = {
        "model": "claude-opus-4-6",
        "thinking": dict(ON),
        "system": [
            {"type": "text", "text": "You are a test agent."},
            {"type": "text", "text": "Be brief."},
        ],
        "tools": [
            {"name": "Read", "description": "read a file", "input_schema": {"type": "object"}},
            {"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}},
        ],
        "messages": [{"role": "user", "content": "Please  look at a.py"}],
    }
    msgs = body["messages"]
    msgs.append(
        {
            "role": "assistant",
            "content": [
                _think(body, 1, "t0"),
                {"type": "text", "text": "Reading it."},
                {
                    "type": "tool_use",
                    "id": "tu1",
                    "name": "Read",
                    "input": {"file_path": "a.py", "limit": 10},
                },
            ],
        }
    )
    msgs.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu1", "content": "print('hello world')"},
                IMAGE,
            ],
        }
    )
    msgs.append(
        {
            "role": "assistant",
            "content": [_think(body, 3, "t1"), {"type": "text", "text": "It prints."}],
        }
    )
    msgs.append({"role": "user", "content": [{"type": "text", "text": "And b.py?"}]})
    msgs.append(
        {"role": "assistant", "content": [_think(body, 5, "t2"), {"type": "text", "text": "Same."}]}
    )
    msgs.append({"role": "user", "content": "thanks"})
    return body


def edited(fn: Callable[[dict], None]) -> dict:
    body = conversation()
    fn(body)
    return body


def test_the_untouched_conversation_passes() -> None:
    assert check(conversation()) == []


# --- ignored differences: each one passes -------------------------------------------------------

IGNORED: dict[str, Callable[[dict], None]] = {
    "cache_control on a block": lambda b: b["messages"][2]["content"][0].update(
        cache_control={"type": "ephemeral"}
    ),
    "cache_control on system and tools": lambda b: (
        b["system"][1].update(cache_control={"type": "ephemeral"}),
        b["tools"][1].update(cache_control={"type": "ephemeral"}),
    ),
    "string content as one text block": lambda b: b["messages"][0].update(
        content=[{"type": "text", "text": "Please  look at a.py"}]
    ),
    "one text block as string content": lambda b: b["messages"][4].update(content="And b.py?"),
    "system as a string of one block": lambda b: b.update(
        system=[
            {"type": "text", "text": "You are a test agent."},
            {"type": "text", "text": " Be brief.\n"},
        ]
    ),
    "leading and trailing whitespace": lambda b: b["messages"][1]["content"][1].update(
        text="\n  Reading it. \n"
    ),
    "whitespace-only text block": lambda b: b["messages"][2]["content"].append(
        {"type": "text", "text": " \n\t"}
    ),
    "key order": lambda b: b["messages"][1]["content"].__setitem__(
        2,
        {
            "input": {"limit": 10, "file_path": "a.py"},
            "name": "Read",
            "id": "tu1",
            "type": "tool_use",
        },
    ),
    "tool order": lambda b: b["tools"].reverse(),
    "thinking removed from the front": lambda b: b["messages"][1]["content"].pop(0),
    "a trailing run removed": lambda b: b["messages"][5]["content"].pop(0),
    "front and trailing runs removed": lambda b: (
        b["messages"][1]["content"].pop(0),
        b["messages"][5]["content"].pop(0),
    ),
}


@pytest.mark.parametrize("name", IGNORED)
def test_ignored_difference_passes(name: str) -> None:
    body = edited(IGNORED[name])
    assert json.dumps(body) != json.dumps(conversation())  # a real difference, key order too
    assert check(body) == [], name


def test_everything_before_the_last_compaction_block_is_ignored() -> None:
    body = conversation()
    body["messages"] = body["messages"][:3]
    body["messages"].append(
        {
            "role": "assistant",
            "content": [{"type": "compaction", "content": "summary of the above"}],
        }
    )
    body["messages"].append({"role": "user", "content": "go on"})
    body["messages"].append(
        {"role": "assistant", "content": [_think(body, 5, "after"), {"type": "text", "text": "ok"}]}
    )
    body["messages"].append({"role": "user", "content": "more"})
    later = body["messages"][5]["content"][0]
    # before the compaction block: edited, and the older thinking block dropped mid-way
    body["messages"][0]["content"] = "something else entirely"
    del body["messages"][1]["content"][0]
    found = check(body)
    assert [(m.message, m.block) for m in found] == []
    assert later in body["messages"][5]["content"]
    # after it: counted
    body["messages"][4]["content"] = "go  on"
    assert [(m.message, m.reason, m.missing_from) for m in check(body)] == [
        (5, "prefix", "messages.4")
    ]


# --- counted differences: each one fails ---------------------------------------------------------

COUNTED: dict[str, tuple[Callable[[dict], None], str]] = {
    "interior whitespace": (
        lambda b: b["messages"][0].update(content="Please look at a.py"),
        "messages.0",
    ),
    "tool_use input bytes": (
        lambda b: b["messages"][1]["content"][2]["input"].update(limit=11),
        "messages.1",
    ),
    "tool_use input key added": (
        lambda b: b["messages"][1]["content"][2]["input"].update(offset=0),
        "messages.1",
    ),
    "tool-result text (micro-compaction)": (
        lambda b: b["messages"][2]["content"][0].update(
            content="[Old tool result content cleared]"
        ),
        "messages.2",
    ),
    "image bytes": (
        lambda b: b["messages"][2]["content"].__setitem__(
            1, {**IMAGE, "source": {**IMAGE["source"], "data": "iVBORw0KGgp"}}
        ),
        "messages.2",
    ),
    "older assistant text shortened (text prune)": (
        lambda b: b["messages"][1]["content"][1].update(text="Read\n[earlier context pruned]"),
        "messages.1",
    ),
    "system text": (lambda b: b["system"][1].update(text="Be very brief."), "system"),
    "a system block dropped": (lambda b: b["system"].pop(), "system"),
    "tool set": (lambda b: b["tools"].pop(), "tools"),
    "tool description": (lambda b: b["tools"][0].update(description="read"), "tools"),
    "a message removed": (lambda b: b["messages"].__delitem__(slice(0, 2)), "messages.0"),
    "a block inserted": (
        lambda b: b["messages"][2]["content"].append(
            {"type": "text", "text": "<system-reminder>x"}
        ),
        "messages.2",
    ),
}


@pytest.mark.parametrize("name", COUNTED)
def test_counted_difference_fails(name: str) -> None:
    fn, where = COUNTED[name]
    found = check(edited(fn))
    assert found, name
    first = found[0]
    assert first.reason == "prefix", (name, found)
    assert first.missing_from == where, (name, found)


def test_the_text_of_the_block_itself_is_bound() -> None:
    body = edited(lambda b: b["messages"][3]["content"][0].update(thinking="t1 changed"))
    assert [(m.message, m.block, m.reason) for m in check(body)] == [(3, 0, "signature")]


def test_other_thinking_blocks_are_not_part_of_a_prefix() -> None:
    body = edited(lambda b: b["messages"][1]["content"][0].update(thinking="other"))
    assert [(m.message, m.reason) for m in check(body)] == [(1, "signature")]


def test_a_foreign_signature_fails() -> None:
    body = edited(lambda b: b["messages"][3]["content"][0].update(signature="c2lnbmF0dXJl"))
    assert [(m.message, m.reason) for m in check(body)] == [(3, "signature")]
    body = conversation()
    sig = body["messages"][3]["content"][0]["signature"]
    body["messages"][3]["content"][0]["signature"] = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    assert [(m.message, m.reason) for m in check(body)] == [(3, "signature")]


def test_an_edit_breaks_only_the_blocks_after_it() -> None:
    body = edited(lambda b: b["messages"][4].update(content="And c.py?"))
    assert [(m.message, m.missing_from) for m in check(body)] == [(5, "messages.4")]


# --- removal of thinking blocks ------------------------------------------------------------------


def test_removal_from_the_middle_fails() -> None:
    body = edited(lambda b: b["messages"][3]["content"].pop(0))
    found = check(body)
    assert [(m.message, m.block, m.reason) for m in found] == [(5, 0, "removed")]
    assert "contiguous run" in found[0].error_message()


def test_removal_of_the_first_two_passes() -> None:
    def drop(b: dict) -> None:
        b["messages"][1]["content"].pop(0)
        b["messages"][3]["content"].pop(0)

    assert check(edited(drop)) == []


# --- modes ----------------------------------------------------------------------------------------


def test_error_mode_answers_the_documented_message() -> None:
    body = edited(
        lambda b: b["messages"][2]["content"][0].update(content="[Old tool result content cleared]")
    )
    out = apply_binding(body, "error")
    assert out.error == (
        "messages.3.content.0: Invalid `signature` in `thinking` block. The block is bound to a "
        "different conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block". Content that '
        "preceded this block when it was created is missing from this request, starting at "
        "`messages.2`."
    )
    assert [m.location for m in out.mismatches] == ["messages.3.content.0", "messages.5.content.0"]


def test_drop_block_mode_drops_and_lists_the_blocks() -> None:
    body = edited(lambda b: b["messages"][2]["content"][0].update(content="cleared"))
    before = copy.deepcopy(body)
    out = apply_binding(body, "drop_block")
    assert out.error is None and body == before  # pure
    assert [b["type"] for b in out.body["messages"][3]["content"]] == ["text"]
    assert [b["type"] for b in out.body["messages"][5]["content"]] == ["text"]
    assert out.body["messages"][1]["content"][0]["type"] == "thinking"  # before the edit: kept
    assert out.dropped == [
        {
            "type": "thinking_block_dropped",
            "location": "messages.3.content.0",
            "reason": "prefix",
            "missing_from": "messages.2",
        },
        {
            "type": "thinking_block_dropped",
            "location": "messages.5.content.0",
            "reason": "prefix",
            "missing_from": "messages.2",
        },
    ]


def test_off_mode_and_thinking_off_check_nothing() -> None:
    body = edited(lambda b: b["messages"][0].update(content="x"))
    assert apply_binding(body, "off").mismatches == ()
    no_thinking = {**body, "thinking": {"type": "disabled"}}
    assert apply_binding(no_thinking, "error").error is None
    assert apply_binding({k: v for k, v in body.items() if k != "thinking"}, "error").error is None
    assert apply_binding(body, "error").error is not None


def test_the_request_opts_in_with_the_beta() -> None:
    body = edited(lambda b: b["messages"][0].update(content="x"))
    body["thinking"] = {
        "type": "enabled",
        "budget_tokens": 2000,
        "block_binding": {"prefix_mismatch_behavior": "drop_block"},
    }
    assert effective_mode(body, "off", [BINDING_BETA]) == "drop_block"
    assert effective_mode(body, "error", [BINDING_BETA]) == "drop_block"
    body["thinking"]["block_binding"]["prefix_mismatch_behavior"] = "error"
    assert apply_binding(body, "off", [BINDING_BETA]).error is not None
    with pytest.raises(BindingError, match=BINDING_BETA):
        effective_mode(body, "off", [])
    body["thinking"]["block_binding"]["prefix_mismatch_behavior"] = "ignore"
    with pytest.raises(BindingError, match="'error' or 'drop_block'"):
        effective_mode(body, "off", [BINDING_BETA])
    with pytest.raises(ValueError, match="binding mode"):
        effective_mode(body, "strict", [])  # type: ignore[arg-type]
