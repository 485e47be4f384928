"""``ctxpatch gateway``: what it changes in a request (only the edit and the beta) and how
exactly: the pure rewrite and the splice (every byte but the new value is the client's).

The property tests of the splice are in ``test_gateway_splice.py``; the HTTP side (streaming,
disconnects, the mock) in ``test_gateway_http.py``.
"""

from __future__ import annotations

import json

import pytest
from gateway_bodies import EDIT, MODEL, THINKING_EDIT, body_of, compact, messages

from engine.api.context_management import (
    BETA,
    CLEAR_TOOL_USES,
    to_json,
    unsupported_model_message,
)
from engine.twins.context_clear import knobs_from_env
from gateway.redact import REDACTED, redacted
from gateway.rewrite import decide, refused_model, with_edit
from gateway.server import upstream_from_env

# --- the pure rewrite ----------------------------------------------------------------------------


def test_adds_edit_and_beta_to_a_plain_request() -> None:
    raw = compact(body_of())
    d = decide("POST", "/v1/messages", [], raw, EDIT)
    assert d.added and d.model == MODEL and d.beta == BETA
    sent = json.loads(d.body or b"")
    assert sent["context_management"] == {"edits": [to_json(EDIT)]}
    assert {k: v for k, v in sent.items() if k != "context_management"} == json.loads(raw)


def test_merges_with_client_edits_thinking_first_and_other_keys_kept() -> None:
    other = {"type": "some_future_edit"}
    cm = {"edits": [other, THINKING_EDIT], "note": 1}
    raw = compact(body_of(context_management=cm))
    d = decide("POST", "/v1/messages?beta=true", ["a-1, b-2", "c-3"], raw, EDIT)
    sent = json.loads(d.body or b"")
    assert sent["context_management"] == {
        "edits": [THINKING_EDIT, other, to_json(EDIT)],
        "note": 1,
    }
    assert list(sent) == list(json.loads(raw))  # key order kept
    assert d.beta == f"a-1,b-2,c-3,{BETA}"


def test_beta_already_sent_is_not_duplicated() -> None:
    d = decide("POST", "/v1/messages", [f"x-1,{BETA}"], compact(body_of()), EDIT)
    assert d.added and d.beta is None  # the header is left as the client sent it


def test_client_own_clear_tool_uses_is_left_alone() -> None:
    mine = {"type": CLEAR_TOOL_USES, "keep": {"type": "tool_uses", "value": 7}}
    raw = compact(body_of(context_management={"edits": [THINKING_EDIT, mine]}))
    d = decide("POST", "/v1/messages", [BETA], raw, EDIT)
    assert not d.added and "own" in d.reason
    assert with_edit(json.loads(raw), to_json(EDIT)) is None


def test_messages_are_byte_identical_in_the_rewritten_body() -> None:
    raw = compact(body_of(context_management={"edits": [THINKING_EDIT]}))
    d = decide("POST", "/v1/messages", [], raw, EDIT)
    assert d.body is not None
    assert compact(messages()) in d.body and compact(messages()) in raw
    assert json.loads(d.body)["messages"] == messages()


@pytest.mark.parametrize(
    ("method", "path", "body", "env", "reason"),
    [
        ("POST", "/v1/messages/count_tokens", None, {}, "not POST /v1/messages"),
        ("GET", "/v1/messages", None, {}, "not POST /v1/messages"),
        ("POST", "/v1/models", None, {}, "not POST /v1/messages"),
        ("POST", "/v1/messages", b"not json {", {}, "not JSON"),
        ("POST", "/v1/messages", b"[1, 2]", {}, "not a JSON object"),
        ("POST", "/v1/messages", b'{"messages": []}', {}, "names no model"),
        ("POST", "/v1/messages", compact(body_of(model="claude-3-5-haiku")), {}, "Claude 3"),
        ("POST", "/v1/messages", compact(body_of(context_management=[])), {}, "form"),
        ("POST", "/v1/messages", None, {"CLAUDE_CTX_CLEAR_DISABLE": "1"}, "DISABLE"),
    ],
)
def test_left_unchanged(
    method: str, path: str, body: bytes | None, env: dict[str, str], reason: str
) -> None:
    d = decide(method, path, [], body or compact(body_of()), knobs_from_env(env))
    assert not d.added and d.body is None and d.beta is None
    assert reason in d.reason


def test_refused_model_remembered() -> None:
    raw = compact(body_of())
    assert "refused" in decide("POST", "/v1/messages", [], raw, EDIT, {MODEL}).reason
    err = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": unsupported_model_message(MODEL)},
    }
    assert refused_model(400, compact(err)) == MODEL
    assert refused_model(200, compact(err)) is None
    assert refused_model(400, b"<html>") is None
    assert refused_model(400, compact({"error": {"message": "prompt is too long"}})) is None


def test_upstream_from_env() -> None:
    assert upstream_from_env({}) == "https://api.anthropic.com"
    assert upstream_from_env({"ANTHROPIC_BASE_URL": "http://corp:8/"}) == "http://corp:8"
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "CTXPATCH_UPSTREAM": "http://corp:8"}
    assert upstream_from_env(env) == "http://corp:8"


def test_redaction() -> None:
    shown = redacted(
        [
            ("x-api-key", "sk-1"),
            ("Authorization", "Bearer t"),
            ("Cookie", "c"),
            ("anthropic-beta", "b1"),
            ("anthropic-beta", "b2"),
        ]
    )
    assert shown == {
        "x-api-key": REDACTED,
        "Authorization": REDACTED,
        "Cookie": REDACTED,
        "anthropic-beta": "b1, b2",
    }


# --- the splice: every byte but the new value is the client's -----------------------------------


def test_splice_keeps_the_client_bytes_when_appending() -> None:
    raw = b'{"model": "claude-opus-4-6", "messages": [{"role": "user", "content": "a \\u00e9 1.0e2"}],\n "n": 1.50 \n}\n'
    d = decide("POST", "/v1/messages", [], raw, EDIT)
    cm = compact({"edits": [to_json(EDIT)]})
    # a new last member right after the last value: the whitespace around it stays
    assert d.body == raw.replace(b"1.50 ", b'1.50,"context_management":' + cm + b" ")


def test_splice_replaces_only_the_old_value() -> None:
    raw = b'{"model":"claude-opus-4-6","context_management" : {"edits":[{"type":"clear_thinking_20251015","keep":"all"}]} ,"messages":[{"role":"user","content":"1.0e2 \xc3\xa9"}]}'
    d = decide("POST", "/v1/messages", [], raw, EDIT)
    new = compact({"edits": [THINKING_EDIT, to_json(EDIT)]})
    assert d.body == raw.replace(
        b'{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}', new
    )


def _common_prefix(a: bytes, b: bytes) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _big_messages(extra: dict | None = None) -> list[dict]:
    """Messages well over the fast walk's budget, so that they lie in its unread middle."""
    out = messages(20)
    if extra is not None:
        out.append(
            {
                "role": "user",
                "content": [{"type": "tool_use", "id": "x", "name": "T", "input": extra}],
            }
        )
    return out


def _claude_code_body(msgs: list[dict], cm: object = None, **extra: object) -> dict:
    """Claude Code's key order: model, messages, system, tools, ..., context_management, ..."""
    body: dict = {
        "model": MODEL,
        "messages": msgs,
        "system": [{"type": "text", "text": "s" * 5000}],
    }
    body.update(tools=[{"name": f"T{i}", "input_schema": {"type": "object"}} for i in range(200)])
    body.update(metadata={"user_id": "u"}, max_tokens=100, thinking={"type": "adaptive"})
    if cm is not None:
        body["context_management"] = cm
    body.update(extra)
    body["stream"] = True
    return body


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        # the key also inside a message (a tool's input), in the unread middle of a large body
        (
            compact(
                _claude_code_body(
                    _big_messages({"context_management": {"edits": [THINKING_EDIT]}}),
                    {"edits": [THINKING_EDIT]},
                )
            ),
            "full",
        ),
        # a nested key of that name in a small body (walked whole)
        (
            compact(
                body_of(
                    context_management={"edits": [THINKING_EDIT]},
                    messages=[
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_use",
                                    "id": "x",
                                    "name": "T",
                                    "input": {"context_management": {"edits": [THINKING_EDIT]}},
                                }
                            ],
                        }
                    ],
                )
            ),
            "fast",
        ),
        # the top-level key spelt with an escape
        (
            b'{"model":"claude-opus-4-6","context\\u005fmanagement":{"edits":[]},"messages":[{"role":"user","content":"context_management"}]}',
            "fast",
        ),
        # an escaped ASCII letter in the unread middle of a large body: the full walk settles it
        (
            compact(_claude_code_body(_big_messages({"k": "\\u0061 is an a"}), {"edits": []})),
            "full",
        ),
        # \u escapes everywhere (control characters, lone surrogates): still the fast walk
        (
            json.dumps(
                _claude_code_body(
                    _big_messages({"k": "\x1b[0m \ud800"}), {"edits": [THINKING_EDIT]}
                )
            ).encode(),
            "fast",
        ),
        # a lone surrogate (orjson refuses it, the standard library takes it)
        (b'{"model":"claude-opus-4-6","messages":[{"role":"user","content":"\\ud800"}]}', "fast"),
    ],
)
def test_bodies_with_escapes_and_nested_keys_are_spliced_exactly(raw: bytes, where: str) -> None:
    from gateway.toplevel import scan

    top = scan(raw)
    assert (
        top is not None and (top.gap is None or not top.gap_may_hold(raw, "context_management"))
    ) == (where == "fast")
    d = decide("POST", "/v1/messages", [], raw, EDIT)
    assert d.body is not None
    before, after = json.loads(raw), json.loads(d.body)
    assert after["messages"] == before["messages"]
    assert after["context_management"]["edits"][-1] == to_json(EDIT)
    assert list(after) == list(before) + (
        [] if "context_management" in before else ["context_management"]
    )
    # every byte outside the one value is the client's: what differs is at most the old value
    prefix = _common_prefix(raw, d.body)
    suffix = _common_prefix(raw[::-1], d.body[::-1])
    old = before.get("context_management")
    assert prefix + suffix >= len(raw) - (len(compact(old)) if old is not None else 0)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model":"claude-opus-4-6","model":"claude-opus-4-6","messages":[]}',
        b'{"model":"claude-opus-4-6","context_management":{"edits":[]},"messages":[],"context_management":{"edits":[]}}',
        b'{"model":"claude-opus-4-6","messages":[],"context\\u005fmanagement":{"edits":[]},"context_management":{"edits":[]}}',
    ],
)
def test_a_key_spelt_twice_at_the_top_leaves_the_body_unchanged(raw: bytes) -> None:
    json.loads(raw)  # valid JSON (duplicate keys are legal, their meaning is not)
    d = decide("POST", "/v1/messages", [], raw, EDIT)
    assert d.body is None and "twice" in d.reason


def test_a_second_context_management_hidden_in_the_unread_middle_is_safe() -> None:
    # one context_management among the large members (not read), one at the end (read): the
    # read one is spliced, the other is left as sent; whichever the API takes is either ours
    # (merged from the one it would have used) or the client's own, never a doubled edit
    raw = compact(_claude_code_body(_big_messages(), {"edits": [THINKING_EDIT]})).replace(
        b'"system":', b'"context_management":{"edits":[{"type":"x"}]},"system":'
    )
    d = decide("POST", "/v1/messages", [], raw, EDIT)
    assert d.body is not None
    last = compact({"edits": [THINKING_EDIT]})
    at = raw.rindex(last)
    assert (
        d.body
        == raw[:at] + compact({"edits": [THINKING_EDIT, to_json(EDIT)]}) + raw[at + len(last) :]
    )
