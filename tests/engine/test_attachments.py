"""Attachments in the newer-messages estimate: JSON at chars/4 in 2.1.33-2.1.44, rendered to the
``<system-reminder>`` message(s) cli.js sends from 2.1.45 on (engine/claude_code/attachments.py)."""

import pytest

from engine.claude_code.attachments import (
    MODELLED,
    SENT_AS_NOTHING,
    render_attachment,
    system_reminder,
)
from engine.claude_code.count import autocompact_tokens
from engine.javascript import js_json_stringify
from engine.profiles import profile_for
from engine.tokens import attachment_tokens, count_text, estimate_newer

SKILL_HEAD = "The following skills are available for use with the Skill tool:\n\n"


def _att(**a):
    return {"type": "attachment", "attachment": a, "uuid": "u"}


def _skills(content: str, n: int = 1):
    return {"type": "skill_listing", "content": content, "skillCount": n, "isInitial": True}


def test_skill_listing_rendered_2_1_45_json_2_1_44():
    """The listing's JSON escapes newlines and quotes; the rendered text adds the head line and
    the wrapper. 2.1.44 counts the former, 2.1.45 and 2.1.112 the latter."""
    content = '- zz-demo: A demo skill that says "hi"\n twice, with quotes and a newline'
    att = _skills(content)
    text = "<system-reminder>\n" + SKILL_HEAD + content + "\n</system-reminder>"
    assert render_attachment(att) == [text]
    json_t, text_t = count_text(js_json_stringify(att)), count_text(text)
    assert json_t != text_t
    assert attachment_tokens(att, profile_for("2.1.44")) == json_t
    for v in ("2.1.45", "2.1.68", "2.1.112"):
        assert attachment_tokens(att, profile_for(v)) == text_t, v
        assert estimate_newer([_att(**att)], profile_for(v)) == text_t, v


def test_skill_listing_2_1_112_e2e_numbers():
    """The e2e run's sizes (2.1.112, 12 skills): JSON 2612 chars = 653 tokens, rendered 2597
    chars = 649, so the real auto-compact boundary is 4 tokens above the JSON rule's."""
    content = "\n".join(["- s" + "x" * 48] * 48)  # 2495 chars, 47 newlines (escaped in JSON)
    att = {"type": "skill_listing", "content": content, "skillCount": 12, "isInitial": True}
    (text,) = render_attachment(att)
    assert (len(js_json_stringify(att)), len(text)) == (2612, 2597)
    assert attachment_tokens(att, profile_for("2.1.44")) == 653
    assert attachment_tokens(att, profile_for("2.1.112")) == 649


def test_empty_skill_listing_is_sent_as_nothing():
    assert render_attachment(_skills("")) == []
    assert attachment_tokens(_skills(""), profile_for("2.1.112")) == 0
    assert attachment_tokens(_skills(""), profile_for("2.1.44")) > 0  # JSON still counted


@pytest.mark.parametrize("t", sorted(SENT_AS_NOTHING))
def test_types_sent_as_nothing_count_zero_from_2_1_45(t):
    att = {"type": t, "content": "x" * 400}
    assert attachment_tokens(att, profile_for("2.1.45")) == 0
    assert attachment_tokens(att, profile_for("2.1.39")) == count_text(js_json_stringify(att))


def test_hook_and_reminder_renderings():
    w = system_reminder
    assert render_attachment({"type": "critical_system_reminder", "content": "Be brief."}) == [
        w("Be brief.")
    ]
    assert render_attachment({"type": "date_change", "newDate": "2026-01-02"}) == [
        w(
            "The date has changed. Today's date is now 2026-01-02. DO NOT mention this to the user "
            "explicitly because they are already aware."
        )
    ]
    ok = {
        "type": "hook_success",
        "hookName": "SessionStart:startup",
        "hookEvent": "SessionStart",
        "content": "hello",
    }
    assert render_attachment(ok) == [w("SessionStart:startup hook success: hello")]
    assert render_attachment({**ok, "hookEvent": "PostToolUse"}) == []
    assert render_attachment({**ok, "content": ""}) == []
    ctx = {"type": "hook_additional_context", "hookName": "UserPromptSubmit", "content": ["a", "b"]}
    assert render_attachment(ctx) == [w("UserPromptSubmit hook additional context: a\nb")]
    assert render_attachment({**ctx, "content": []}) == []
    stop = {"type": "hook_stopped_continuation", "hookName": "Stop", "message": "no"}
    assert render_attachment(stop) == [w("Stop hook stopped continuation: no")]


def test_unmodelled_or_odd_attachments_keep_the_json_count():
    """Types not modelled (and modelled ones with fields of an unexpected type) fall back to
    the 2.1.33-2.1.44 rule: the attachment's JSON at chars/4."""
    p = profile_for("2.1.112")
    for att in (
        {"type": "todo_reminder", "content": [], "itemCount": 0},
        {"type": "deferred_tools_delta", "addedLines": ["x"], "removedNames": []},
        {"type": "file", "filename": "/a", "content": {"type": "text"}},
        {"type": "skill_listing", "content": ["not", "a", "string"]},
        {"type": "hook_success", "hookEvent": "SessionStart", "content": 3},
        {"type": "critical_system_reminder", "content": ""},
    ):
        assert render_attachment(att) is None, att
        assert attachment_tokens(att, p) == count_text(js_json_stringify(att)), att
    assert "todo_reminder" not in MODELLED and "skill_listing" in MODELLED


def test_autocompact_count_adds_the_rendered_attachment_2_1_112():
    p = profile_for("2.1.112")
    reply = {
        "type": "assistant",
        "message": {
            "id": "m1",
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": 5000, "output_tokens": 0},
        },
    }
    prompt = {"type": "user", "message": {"role": "user", "content": "continue"}}
    att = _skills("- a: b\n" * 50)
    text = render_attachment(att)[0]
    got = autocompact_tokens([reply, prompt, _att(**att)], p)
    assert got == 5000 + count_text("continue") + count_text(text)
    assert autocompact_tokens([reply, prompt, _att(**att)], profile_for("2.1.44")) == (
        5000 + count_text("continue") + count_text(js_json_stringify(att))
    )
