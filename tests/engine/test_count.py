"""engine.claude_code.count: the add-back of server-cleared tokens on 2.1.284+ (``YG``/``eCt`` in 2.1.330)."""

from __future__ import annotations

from engine.claude_code.count import autocompact_tokens, server_cleared_tokens
from engine.profiles import profile_for
from engine.tokens import estimate_newer


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


def _use(n: int, out: int) -> dict:
    """Record ``n`` of one reply with three parallel tool calls (same ``message.id``)."""
    msg = {
        "id": "msg_p",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "z" * 400}}
        ],
        "usage": {"input_tokens": 100_000, "output_tokens": out},
    }
    return {"type": "assistant", "uuid": f"u{n}", "message": msg}


def _result(n: int, chars: int) -> dict:
    block = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * chars}
    return {"type": "user", "uuid": f"r{n}", "message": {"role": "user", "content": [block]}}


PROMPT = {"type": "user", "uuid": "p", "message": {"role": "user", "content": "y" * 400}}


def _transcript_order() -> list[dict]:
    """A reply with three parallel tool calls as the transcript writes it: each call's result
    after the call (1,000, 2,000 and 100 tokens at chars/4)."""
    return [
        _use(1, 20),
        _result(1, 4000),
        _use(2, 20),
        _result(2, 8000),
        _use(3, 50),
        _result(3, 400),
    ]


def test_a_rounds_results_written_between_the_replys_records_are_newer_than_its_usage():
    # The transcript writes each result after its own call; the query loop sends the next request
    # on [...messages, ...assistantMessages, ...toolResults]: every result after the last record.
    repl = _transcript_order()
    loop = [repl[0], repl[2], repl[4], repl[1], repl[3], repl[5]]  # the query loop's
    p = profile_for("2.1.32")
    assert not p.newer_from_message_start
    assert autocompact_tokens(repl, p) == autocompact_tokens(loop, p) == 100_050 + 1000 + 2000 + 100


def test_after_a_new_prompt_the_transcripts_order_holds():
    # a new query starts on the REPL's list: the results before the usage's record are older
    repl = _transcript_order()
    p = profile_for("2.1.32")
    assert autocompact_tokens([*repl, PROMPT], p) == 100_050 + 100 + 100


def test_from_2_1_64_the_count_starts_after_the_replys_first_record_in_either_order():
    repl = _transcript_order()
    p = profile_for("2.1.64")
    assert p.newer_from_message_start
    loop = [repl[0], repl[2], repl[4], repl[1], repl[3], repl[5]]
    records = estimate_newer(repl[2:3] + repl[4:5], p)  # the reply's own later records
    assert autocompact_tokens(repl, p) == autocompact_tokens(loop, p)
    assert autocompact_tokens(repl, p) == 100_050 + 1000 + 2000 + 100 + records
    assert autocompact_tokens([*repl, PROMPT], p) == autocompact_tokens(repl, p) + 100
