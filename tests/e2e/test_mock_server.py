"""The mock's 2026 server behaviours over HTTP: thinking replies, the binding check in each mode,
server-side context editing (its 400s, applied_edits, usage of the edited prompt).

Fast: no real cli.js, only the mock on 127.0.0.1.
"""

from __future__ import annotations

import json

import pytest
from mock_http import assemble, events, post

from engine.api.context_editing import PLACEHOLDER
from lab.mock import MockConfig, MockServer, Step
from lab.server_edits import CONTEXT_BETA, prompt_tokens
from lab.thinking_binding import check

TOOLS = [{"name": "Read", "input_schema": {}}, {"name": "Bash", "input_schema": {}}]
CLEAR = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 1},
            "keep": {"type": "tool_uses", "value": 1},
        }
    ]
}


def body(messages: list, **kw) -> dict:
    return {
        "model": "claude-opus-4-6",
        "stream": True,
        "system": [{"type": "text", "text": "sys"}],
        "tools": TOOLS,
        "thinking": {"type": "adaptive"},
        "messages": messages,
        **kw,
    }


def tool_conversation(n: int, size: int = 4000) -> list[dict]:
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    for k in range(n):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"tu{k}",
                        "name": "Read",
                        "input": {"file_path": f"f{k}"},
                    }
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"tu{k}", "content": "x" * size}
                ],
            }
        )
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    msgs.append({"role": "user", "content": "next"})
    return msgs


def test_thinking_replies_carry_a_signature_the_next_request_passes() -> None:
    with MockServer(MockConfig(thinking=True, binding="error")) as mock:
        msgs = [{"role": "user", "content": "hello"}]
        status, _, data = post(mock.port, "/v1/messages?beta=true", body(msgs))
        assert status == 200
        reply = assemble(data)
        assert [b["type"] for b in reply] == ["thinking", "text"]
        assert reply[0]["signature"].startswith("ctxm1.")
        msgs2 = [
            *msgs,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "more"},
        ]
        assert check(body(msgs2)) == []
        status, _, data = post(mock.port, "/v1/messages", body(msgs2))
        assert status == 200 and assemble(data)[0]["type"] == "thinking"
        # without thinking on in the request: no thinking block, no check
        status, _, data = post(mock.port, "/v1/messages", {**body(msgs2), "thinking": None})
        assert [b["type"] for b in assemble(data)] == ["text"]
        # an edit before the block: the documented 400, on count_tokens too
        bad = json.loads(json.dumps(msgs2))
        bad[0]["content"] = "hello  there"
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            status, ctype, data = post(mock.port, path, body(bad))
            err = json.loads(data)
            assert (status, ctype, err["type"], err["error"]["type"]) == (
                400,
                "application/json",
                "error",
                "invalid_request_error",
            )
            assert err["error"]["message"].startswith(
                "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation."
            )
            assert err["error"]["message"].endswith("starting at `messages.0`.")
        logged = mock.requests()
        assert [r.status for r in logged] == [200, 200, 200, 400, 400]
        assert logged[3].mismatches[0].missing_from == "messages.0"
        assert all("x-api-key" not in r.headers for r in logged)


def test_drop_block_mode_answers_200_and_lists_the_dropped_blocks() -> None:
    with MockServer(MockConfig(thinking=True, binding="drop_block")) as mock:
        msgs = [{"role": "user", "content": "hello"}]
        _, _, data = post(mock.port, "/v1/messages", body(msgs))
        msgs2 = [
            {"role": "user", "content": "hello!"},
            {"role": "assistant", "content": assemble(data)},
            {"role": "user", "content": "more"},
        ]
        status, _, data = post(mock.port, "/v1/messages", body(msgs2))
        assert status == 200
        start = events(data)[0][1]["message"]
        assert start["input_transformations"] == [
            {
                "type": "thinking_block_dropped",
                "location": "messages.1.content.0",
                "reason": "prefix",
                "missing_from": "messages.0",
            }
        ]
        _, _, data = post(mock.port, "/v1/messages", {**body(msgs2), "stream": False})
        assert json.loads(data)["input_transformations"][0]["location"] == "messages.1.content.0"
        assert [r.dropped for r in mock.requests()] == [0, 1, 1]


def test_binding_off_accepts_anything_and_the_request_can_opt_in() -> None:
    msgs = [
        {"role": "user", "content": "a"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "c2lnbmF0dXJl"},
                {"type": "text", "text": "b"},
            ],
        },
        {"role": "user", "content": "c"},
    ]
    with MockServer(MockConfig(thinking=True)) as mock:  # binding off: an older account
        assert post(mock.port, "/v1/messages", body(msgs))[0] == 200
        opt_in = body(
            msgs,
            thinking={"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}},
        )
        status, _, data = post(
            mock.port, "/v1/messages", opt_in, "thinking-binding-controls-2026-08-01"
        )
        assert (
            status == 400
            and json.loads(data)["error"]["message"]
            == "messages.1.content.0: Invalid `signature` in `thinking` block."
        )
        status, _, data = post(mock.port, "/v1/messages", opt_in)  # the field without its beta
        assert status == 400 and "thinking-binding-controls-2026-08-01" in data
    with pytest.raises(ValueError, match="binding"):
        MockConfig(binding="strict")  # type: ignore[arg-type]


def test_context_editing_clears_reports_and_lowers_the_count() -> None:
    msgs = tool_conversation(4)
    plain = prompt_tokens(body(msgs))
    with MockServer(MockConfig(count_prompt=True)) as mock:
        status, _, data = post(
            mock.port,
            "/v1/messages",
            body(msgs, context_management=CLEAR),
            f"claude-code-20250219,{CONTEXT_BETA}",
        )
        assert status == 200
        ev = events(data)
        delta = next(d for n, d in ev if n == "message_delta")
        edits = delta["context_management"]["applied_edits"]
        assert [(e["type"], e["cleared_tool_uses"]) for e in edits] == [
            ("clear_tool_uses_20250919", 3)
        ]
        counted = ev[0][1]["message"]["usage"]["input_tokens"]
        assert counted == plain - edits[0]["cleared_input_tokens"] and counted < plain - 2500
        # not streaming: the same field on the message; without edits the full count
        _, _, data = post(
            mock.port,
            "/v1/messages",
            {**body(msgs, context_management=CLEAR), "stream": False},
            CONTEXT_BETA,
        )
        assert json.loads(data)["context_management"]["applied_edits"] == edits
        _, _, data = post(mock.port, "/v1/messages", {**body(msgs), "stream": False})
        assert json.loads(data)["usage"]["input_tokens"] == plain
        _, _, data = post(
            mock.port,
            "/v1/messages/count_tokens",
            body(msgs, context_management=CLEAR),
            CONTEXT_BETA,
        )
        assert json.loads(data) == {
            "input_tokens": counted,
            "context_management": {"original_input_tokens": plain},
        }
        assert [r.input_tokens for r in mock.requests()] == [counted, counted, plain, counted]
        assert mock.requests()[0].applied_edits == tuple(edits)
        # the client's request is logged as sent (the edit is the server's copy only)
        assert PLACEHOLDER not in json.dumps(mock.requests()[0].body)


def test_context_editing_refusals() -> None:
    msgs = tool_conversation(2)
    with MockServer(MockConfig(unsupported_models=("claude-3-*",))) as mock:
        status, _, data = post(mock.port, "/v1/messages", body(msgs, context_management=CLEAR))
        assert status == 400 and CONTEXT_BETA in json.loads(data)["error"]["message"]
        bad = {
            "edits": [
                {"type": "clear_tool_uses_20250919", "keep": {"type": "input_tokens", "value": 3}}
            ]
        }
        status, _, data = post(
            mock.port, "/v1/messages", body(msgs, context_management=bad), CONTEXT_BETA
        )
        assert (
            status == 400
            and json.loads(data)["error"]["message"]
            == "context_management.edits.0.keep.type: Input should be 'tool_uses'"
        )
        old = body(msgs, context_management=CLEAR, model="claude-3-7-sonnet-20250219")
        status, _, data = post(mock.port, "/v1/messages", old, CONTEXT_BETA)
        assert status == 400 and json.loads(data)["error"]["message"] == (
            "claude-3-7-sonnet-20250219 does not support the clear_tool_uses_20250919 context management strategy"
        )
        thinking_only = body(
            msgs,
            context_management={"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            model="claude-3-7-sonnet-20250219",
        )
        assert post(mock.port, "/v1/messages", thinking_only, CONTEXT_BETA)[0] == 200
        assert [r.status for r in mock.requests()] == [400, 400, 400, 200]
        assert mock.requests()[0].error is not None


def test_the_check_sees_the_conversation_before_the_server_edit() -> None:
    """A thinking block after old tool results: the server clears them, the binding holds."""
    with MockServer(MockConfig(thinking=True, binding="error", count_prompt=True)) as mock:
        msgs = tool_conversation(4)
        _, _, data = post(
            mock.port, "/v1/messages", body(msgs, context_management=CLEAR), CONTEXT_BETA
        )
        reply = assemble(data)
        assert reply[0]["type"] == "thinking"
        msgs2 = [
            *msgs,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "again"},
        ]
        status, _, data = post(
            mock.port, "/v1/messages", body(msgs2, context_management=CLEAR), CONTEXT_BETA
        )
        assert status == 200, data
        assert (
            events(data)[-2][1]["context_management"]["applied_edits"][0]["cleared_tool_uses"] == 3
        )
        # the same clearing done by the client is a prefix edit
        cleared = json.loads(json.dumps(msgs2))
        cleared[2]["content"][0]["content"] = PLACEHOLDER
        status, _, data = post(
            mock.port, "/v1/messages", body(cleared, context_management=CLEAR), CONTEXT_BETA
        )
        assert status == 400 and "starting at `messages.2`" in data


def test_scripted_tool_use_after_thinking_streams_in_order() -> None:
    script = [
        Step(
            [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
            "tool_use",
        )
    ]
    with MockServer(MockConfig(script=script, thinking=True, binding="error")) as mock:
        _, _, data = post(mock.port, "/v1/messages", body([{"role": "user", "content": "x"}]))
        ev = events(data)
        assert [n for n, _ in ev] == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        assert [b["type"] for b in assemble(data)] == ["thinking", "tool_use"]
