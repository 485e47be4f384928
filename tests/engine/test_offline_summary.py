"""engine.claude_code.compact.offline_summary against its former implementation (kept here as
the specification): the same text for any list of records. The implementation takes a
prompt's first line from its first 200 characters and the last assistant text from the end,
rather than splitting every prompt and joining every assistant message's texts (a compaction of
a long history did that for thousands of records)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.claude_code.compact import _texts, offline_summary, summary_text


def spec_offline_summary(messages: Sequence[Mapping[str, Any]], max_chars: int = 16000) -> str:
    prompts: list[str] = []
    tools: dict[str, int] = {}
    last_text = ""
    for m in messages:
        if m.get("type") == "user" and not m.get("isMeta") and not m.get("isCompactSummary"):
            prompts.extend(t.splitlines()[0][:200] for t in _texts(m) if t.strip())
        elif m.get("type") == "assistant":
            c = (m.get("message") or {}).get("content")
            for b in c if isinstance(c, list) else []:
                if isinstance(b, Mapping) and b.get("type") == "tool_use":
                    tools[str(b.get("name"))] = tools.get(str(b.get("name")), 0) + 1
            t = "\n".join(_texts(m)).strip()
            if t:
                last_text = t
    return summary_text(prompts, tools, last_text, max_chars)  # the text itself is shared


# texts with line breaks of every kind splitlines knows, near and past the 200th character
_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", " ", "\t"]
_piece = st.one_of(
    st.sampled_from(_BREAKS),
    st.text(alphabet="ab c", min_size=0, max_size=5),
    st.integers(190, 210).map(lambda n: "x" * n),
)
_texts_st = st.lists(_piece, max_size=6).map("".join)
_block = st.one_of(
    _texts_st.map(lambda t: {"type": "text", "text": t}),
    st.sampled_from(["Read", "Bash", None, 3]).map(
        lambda name: {"type": "tool_use", "id": "t", "name": name, "input": {}}
    ),
    st.just({"type": "thinking", "thinking": "hm"}),
    st.just("a string block"),
)
_content = st.one_of(_texts_st, st.lists(_block, max_size=4), st.none())
_record = st.builds(
    lambda kind, content, meta: {
        "type": kind,
        "message": {"role": kind, "content": content},
        **({"isMeta": True} if meta == 1 else {"isCompactSummary": True} if meta == 2 else {}),
    },
    st.sampled_from(["user", "assistant", "system"]),
    _content,
    st.integers(0, 5),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_record, max_size=12), st.sampled_from([16000, 300, 40]))
def test_offline_summary_is_the_former_one(messages, max_chars):
    assert offline_summary(messages, max_chars) == spec_offline_summary(messages, max_chars)


def test_first_lines_and_the_last_text():
    long = "y" * 250
    msgs = [
        {"type": "user", "message": {"content": "a\r\nb"}},
        {"type": "user", "message": {"content": long + "\nz"}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": " first "}]}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "  "}]}},
    ]
    got = offline_summary(msgs)
    assert got == spec_offline_summary(msgs)
    assert "   - a\n" in got and f"   - {'y' * 200}\n" in got and got.endswith("first\n")
