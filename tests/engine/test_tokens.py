"""Token estimators (chars/4 with JS rounding on UTF-16 length, x4/3 era, newer estimate)."""

from engine.profiles import profile_for
from engine.tokens import (
    count_text,
    estimate_messages,
    estimate_newer,
    js_round_div,
    usage_total,
    utf16_len,
)


def test_js_math_round_halves_up():
    # Math.round(2/4)=1 (0.5 rounds up), Math.round(6/4)=2, Math.round(1/4)=0
    assert [js_round_div(n) for n in (0, 1, 2, 3, 5, 6, 10)] == [0, 0, 1, 1, 1, 2, 3]


def test_utf16_length_counts_astral_twice():
    assert utf16_len("ab") == 2 and utf16_len("é") == 1 and utf16_len("😀") == 2
    assert count_text("😀😀") == 1  # length 4 → 1


def _user(content):
    return {"type": "user", "message": {"role": "user", "content": content}}


def test_message_estimate_x4_3_in_2_1_39_not_in_2_1_112():
    msgs = [_user([{"type": "text", "text": "x" * 400}])]
    assert estimate_messages(msgs, profile_for("2.1.39")) == 134  # ceil(100*4/3)
    assert estimate_messages(msgs, profile_for("2.1.112")) == 100


def test_message_estimate_skips_string_content_and_counts_images_2000():
    msgs = [_user("x" * 400), _user([{"type": "image", "source": {}}])]
    assert estimate_messages(msgs, profile_for("2.1.104")) == 2667  # ceil(2000*4/3)


def test_message_estimate_is_the_newer_estimate_from_2_1_105():
    """2.1.105-2.1.112 have no x4/3 estimator (removed with session memory); the post-compaction
    count uses the newer-messages estimate (qT in 2.1.112): strings and attachments counted."""
    att = {"type": "attachment", "attachment": {"type": "todo", "content": [], "itemCount": 0}}
    msgs = [_user("x" * 400), _user([{"type": "image", "source": {}}]), att]
    for v in ("2.1.105", "2.1.112"):
        p = profile_for(v)
        assert p.message_estimate_is_newer and not p.estimate_factor_4_3, v
        assert estimate_messages(msgs, p) == estimate_newer(msgs, p) >= 2100, v
    assert not profile_for("2.1.104").message_estimate_is_newer


def test_newer_estimate_ignores_tool_use_and_thinking_2_1_39():
    """hOA/IOA/D99 in 2.1.39: text, tool_result, image 2000; tool_use and thinking count 0."""
    p = profile_for("2.1.39")
    a = {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "x" * 400}},
                {"type": "thinking", "thinking": "y" * 400},
            ],
        },
    }
    u = _user([{"type": "tool_result", "tool_use_id": "t", "content": "z" * 40}])
    assert estimate_newer([a, u, _user("s" * 8)], p) == 12


def _assistant(content):
    return {"type": "assistant", "message": {"role": "assistant", "content": content}}


_BLOCKS = [
    {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "x" * 400}},
    {"type": "thinking", "thinking": "y" * 400, "signature": "s" * 100},
    {"type": "redacted_thinking", "data": "r" * 80},
]


def test_newer_estimate_ignores_tool_use_thinking_documents_up_to_2_1_73():
    """D99 (2.1.39) through 2.1.73: only text, tool_result content and images are counted."""
    for v in ("2.1.39", "2.1.69", "2.1.73"):
        p = profile_for(v)
        assert not p.newer_counts_all_blocks, v
        doc = _user([{"type": "document", "source": {"type": "text", "data": "d" * 400}}])
        other = _assistant(
            [
                {
                    "type": "server_tool_use",
                    "id": "s",
                    "name": "web_search",
                    "input": {"query": "q" * 40},
                }
            ]
        )
        assert estimate_newer([_assistant(_BLOCKS), doc, other], p) == 0, v


def test_newer_estimate_counts_every_block_from_2_1_74():
    """B4z (2.1.74) .. w4z (2.1.112): tool_use = chars/4 of name + JSON.stringify(input ?? {}),
    thinking = its text (not the signature), redacted_thinking = its data, document = 2000 like
    an image, any other block = chars/4 of its JSON; tool_result content goes through the same
    rules."""
    for v in ("2.1.74", "2.1.75", "2.1.90", "2.1.112"):
        p = profile_for(v)
        assert p.newer_counts_all_blocks, v
        tool_use = len('Bash{"command":""}') + 400  # 418 chars → 105 (Math.round(104.5))
        assert estimate_newer([_assistant(_BLOCKS[:1])], p) == 105, v
        assert estimate_newer([_assistant(_BLOCKS[1:2])], p) == 100, v
        assert estimate_newer([_assistant(_BLOCKS[2:])], p) == 20, v
        assert estimate_newer([_assistant(_BLOCKS)], p) == 225 == (tool_use + 2) // 4 + 120, v
        no_input = {"type": "tool_use", "id": "t", "name": "Glob"}  # input ?? {}
        assert estimate_newer([_assistant([no_input])], p) == 2, v  # "Glob{}": 6 → 2
        doc = {"type": "document", "source": {"type": "text", "data": "d" * 400}}
        assert estimate_newer([_user([doc])], p) == 2000, v
        other = {
            "type": "server_tool_use",
            "id": "s",
            "name": "web_search",
            "input": {"query": "q" * 40},
        }
        json_len = (
            len('{"type":"server_tool_use","id":"s","name":"web_search","input":{"query":""}}') + 40
        )
        assert estimate_newer([_assistant([other])], p) == (json_len * 2 + 4) // 8, v
        ref = {
            "type": "tool_result",
            "tool_use_id": "t",
            "content": [
                {"type": "tool_reference", "tool_name": "Read"},
                {"type": "text", "text": "z" * 40},
            ],
        }
        assert estimate_newer([_user([ref])], p) == 11 + 10, v  # the reference: 44 JSON chars


def test_newer_image_1334_before_2_1_39():
    p = profile_for("2.1.7")
    assert estimate_newer([_user([{"type": "image"}])], p) == 1334


def test_usage_total_is_input_cache_output():
    u = {
        "input_tokens": 1,
        "cache_creation_input_tokens": 955,
        "cache_read_input_tokens": 165803,
        "output_tokens": 301,
    }
    assert usage_total(u) == 167060


_DOC = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": "d" * 400},
}


def test_message_estimate_counts_documents_as_json_in_2_1_45():
    """Ep6/mo4 (2.1.45): a document block, in a message or in tool_result content, falls to the
    JSON branch of the message-level estimate (tool_result content: not counted at all)."""
    from engine.javascript import js_json_stringify
    from engine.tokens import count_text

    p = profile_for("2.1.45")
    assert not p.estimate_counts_documents
    assert estimate_messages([_user([_DOC])], p) == -(-count_text(js_json_stringify(_DOC)) * 4 // 3)
    tr = {"type": "tool_result", "tool_use_id": "t", "content": [_DOC]}
    assert estimate_messages([_user([tr])], p) == 0


def test_message_estimate_counts_documents_2000_from_2_1_47():
    """MU6/gt4 (2.1.47) through 2.1.104: ``type==="image"||type==="document"`` → 2000, in the
    message and inside tool_result content; then x4/3."""
    tr = {"type": "tool_result", "tool_use_id": "t", "content": [_DOC]}
    for v in ("2.1.47", "2.1.50", "2.1.63", "2.1.68", "2.1.73", "2.1.104"):
        p = profile_for(v)
        assert p.estimate_counts_documents, v
        assert estimate_messages([_user([_DOC])], p) == 2667, v  # ceil(2000*4/3)
        assert estimate_messages([_user([tr])], p) == 2667, v


_SIGNED = [
    {"type": "thinking", "thinking": "y" * 400, "signature": "s" * 400},
    {"type": "redacted_thinking", "data": "r" * 80},
    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "x" * 384}},
]


def test_message_estimate_counts_thinking_and_tool_use_as_json_up_to_2_1_74():
    """uW6 (2.1.74) and before: thinking, redacted_thinking and tool_use fall to the JSON branch
    (signature, id, type keys included), then x4/3."""
    from engine.javascript import js_json_stringify
    from engine.tokens import count_text

    raw = sum(count_text(js_json_stringify(b)) for b in _SIGNED)
    for v in ("2.1.39", "2.1.73", "2.1.74"):
        p = profile_for(v)
        assert not p.estimate_counts_block_text, v
        assert estimate_messages([_assistant(_SIGNED)], p) == -(-raw * 4 // 3), v


def test_message_estimate_counts_thinking_and_tool_use_by_text_2_1_75_to_2_1_104():
    """wG6 (2.1.75) through gt6 (2.1.104): thinking → its text (100), redacted_thinking → data
    (20), tool_use → name + JSON.stringify(input ?? {}) ("Bash" + 400 chars: 101); x4/3."""
    for v in ("2.1.75", "2.1.80", "2.1.81", "2.1.90", "2.1.104"):
        p = profile_for(v)
        assert p.estimate_counts_block_text and p.estimate_factor_4_3, v
        assert estimate_messages([_assistant(_SIGNED)], p) == 295, v  # ceil(221*4/3)
    no_input = {"type": "tool_use", "id": "t", "name": "Read"}
    # "Read{}": round(6/4)=2, ceil(2*4/3)=3
    assert estimate_messages([_assistant([no_input])], profile_for("2.1.75")) == 3


def test_thinking_length_is_three_quarters_of_the_signature():
    """The signature is the base64 of the encrypted thinking: 3 bytes per 4 characters. A
    summarized block (shown text shorter) counts what the signature says; a redacted signature
    shorter than the shown text keeps the text; redacted_thinking counts its data."""
    from engine.tokens import output_content_tokens, signed_output_tokens, thinking_chars

    summary = {"type": "thinking", "thinking": "t" * 400, "signature": "s" * 2000}
    assert thinking_chars(summary) == 1500
    shortened = {"type": "thinking", "thinking": "t" * 400, "signature": "s" * 20}
    assert thinking_chars(shortened) == 400
    assert thinking_chars({"type": "thinking", "thinking": "t" * 400}) == 400
    assert thinking_chars({"type": "redacted_thinking", "data": "d" * 800}) == 600
    blocks = [
        summary,
        {"type": "text", "text": "x" * 100},
        {"type": "redacted_thinking", "data": "d" * 800},
    ]
    assert output_content_tokens(blocks) == 125  # (400 + 100) / 4: the shown text only
    assert signed_output_tokens(blocks) == 550  # (1500 + 100 + 600) / 4


def test_output_estimates_is_both_estimates_in_one_pass():
    """What the transcript reader takes for a reply: the shown and the signed estimate, tool
    inputs (ExitPlanMode's plan left out) counted in both."""
    from engine.tokens import output_content_tokens, output_estimates, signed_output_tokens

    blocks = [
        {"type": "thinking", "thinking": "t" * 400, "signature": "s" * 2000},
        {"type": "text", "text": "é" * 10 + "😀"},
        {"type": "redacted_thinking", "data": "d" * 800},
        {"type": "tool_use", "name": "Bash", "input": {"command": "ls", "n": 1.5}},
        {"type": "tool_use", "name": "ExitPlanMode", "input": {"plan": "p" * 999, "x": 1}},
        "not a block",
    ]
    shown, signed = output_estimates(blocks)
    assert (shown, signed) == (output_content_tokens(blocks), signed_output_tokens(blocks))
    # 400 + 12 + len('Bash{"command":"ls","n":1.5}') 28 + len('ExitPlanMode{"x":1}') 19
    assert shown == round((400 + 12 + 28 + 19) / 4)
    assert signed == round((1500 + 12 + 600 + 28 + 19) / 4)
