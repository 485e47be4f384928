"""engine.claude_code.count: the add-back of server-cleared tokens on 2.1.284+ (``YG``/``eCt`` in 2.1.330)."""

from __future__ import annotations

from engine.claude_code.count import autocompact_tokens, server_cleared_tokens
from engine.profiles import profile_for


def _reply(usage_input: int, context_management: object = None) -> dict:
    msg = {
        "id": "msg_1",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "ok"}],
        "usage": {"input_tokens": usage_input, "output_tokens": 10},
        "context_management": context_management,
    }
    return {"type": "assistant", "uuid": "a1", "message": msg}


APPLIED = {
    "applied_edits": [
        {"type": "clear_thinking_20251015", "cleared_input_tokens": 7},
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 1200},
        {"type": "clear_tool_uses_20250919", "cleared_input_tokens": True},  # not a number
    ]
}


def test_server_cleared_tokens_sums_the_tool_clearing_entries_only():
    assert server_cleared_tokens(_reply(100, APPLIED)) == 1200
    assert server_cleared_tokens(_reply(100, None)) == 0
    assert server_cleared_tokens(_reply(100, {"applied_edits": "x"})) == 0
    assert server_cleared_tokens({"type": "user", "message": {"content": "hi"}}) == 0


def test_2_1_330_adds_back_what_its_record_says_the_server_cleared():
    new, old = profile_for("2.1.330"), profile_for("2.1.112")
    with_edits, without = [_reply(5000, APPLIED)], [_reply(5000, None)]
    assert autocompact_tokens(with_edits, new) == autocompact_tokens(without, new) + 1200
    # before 2.1.284 the record's applied_edits change nothing
    assert autocompact_tokens(with_edits, old) == autocompact_tokens(without, old)
    # an edit Claude Code did not build itself (the gateway's) leaves context_management null
    assert autocompact_tokens(without, new) == autocompact_tokens(without, old) == 5010
