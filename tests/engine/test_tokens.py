"""Token estimators (chars/4 with JS rounding on UTF-16 length, x4/3 era, newer estimate)."""

from engine.profiles import profile_for
from engine.tokens import (
    count_text, estimate_messages, estimate_newer, js_round_div, usage_total, utf16_len)


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
    assert estimate_messages(msgs, profile_for("2.1.105")) == 2000


def test_newer_estimate_ignores_tool_use_and_thinking_2_1_39():
    """hOA/IOA/D99 in 2.1.39: text, tool_result, image 2000; tool_use and thinking count 0."""
    p = profile_for("2.1.39")
    a = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "x" * 400}},
        {"type": "thinking", "thinking": "y" * 400}]}}
    u = _user([{"type": "tool_result", "tool_use_id": "t", "content": "z" * 40}])
    assert estimate_newer([a, u, _user("s" * 8)], p) == 12


def test_newer_image_1334_before_2_1_39():
    p = profile_for("2.1.7")
    assert estimate_newer([_user([{"type": "image"}])], p) == 1334


def test_usage_total_is_input_cache_output():
    u = {"input_tokens": 1, "cache_creation_input_tokens": 955,
         "cache_read_input_tokens": 165803, "output_tokens": 301}
    assert usage_total(u) == 167060
