"""The clearing policy the gateway runs (gateway.policy): on every body the keep of the twin
(engine.twins.policy.paid_edit, edit_for_request for ``fixed``) whatever the serialisation and
key order, resumed from the kept conversation where the list only grew, within its bounds, and
never failing a request (decide sends the plain edit and logs one line)."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_conversations import conversations

from engine.api.context_management import ClearToolUses
from engine.twins.context_clear import edit_for_request
from engine.twins.policy import paid_edit, uncached_system
from gateway.policy import Fitter, Knobs
from gateway.rewrite import decide
from gateway.toplevel import scan

EDIT = ClearToolUses(trigger_value=50_000, keep=3, clear_tool_inputs=True)
MODEL = "claude-opus-4-6"
SYSTEM = [{"type": "text", "text": "You are Claude Code. " * 300}]
# no block of it is marked for the cache: a move writes all of it again (6,300 characters)
REST = uncached_system(SYSTEM)
TOOLS = [
    {"name": f"T{i}", "description": "d" * 300, "input_schema": {"type": "object"}}
    for i in range(40)
]


def claude_code(msgs: list[dict], **extra: object) -> dict:
    """Claude Code's key order: model, messages, system, tools, ..., stream."""
    return {
        "model": MODEL,
        "messages": msgs,
        "system": SYSTEM,
        "tools": TOOLS,
        "max_tokens": 100,
        **extra,
        "stream": True,
    }


def marked(msgs: list[dict]) -> list[dict]:
    """The last message's last block carries cache_control, as Claude Code sends it."""
    if not msgs or not isinstance(msgs[-1].get("content"), list) or not msgs[-1]["content"]:
        return msgs
    last = {**msgs[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}
    return [*msgs[:-1], {**msgs[-1], "content": [*msgs[-1]["content"][:-1], last]}]


SERIALISE = {
    "javascript": lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":")).encode(),
    "python": lambda o: json.dumps(o).encode(),  # the Python SDK's: spaces, \\u escapes
    "indented": lambda o: json.dumps(o, indent=1, ensure_ascii=False).encode(),
}


def fit(fitter: Fitter, raw: bytes) -> ClearToolUses:
    top = scan(raw)
    assert top is not None
    return fitter.fit(EDIT, raw, top)[0]


def growing(msgs: list[dict]) -> list[list[dict]]:
    """The lists a conversation sends: each request point (the end, and every user message
    followed by an assistant one), marked for the cache."""
    out = []
    for i in range(1, len(msgs) + 1):
        if i == len(msgs) or (msgs[i - 1]["role"] == "user" and msgs[i]["role"] == "assistant"):
            out.append(marked(msgs[:i]))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=conversations(),
    style=st.sampled_from(sorted(SERIALISE)),
    ceiling=st.sampled_from([3_000, 20_000, 90_000]),
    patience=st.sampled_from([0, 100]),
)
def test_a_growing_conversation_gets_the_twins_keep_resumed(msgs, style, ceiling, patience) -> None:
    fitter = Fitter(Knobs("paid", 1, ceiling, patience))
    lists = growing(msgs)
    for i, m in enumerate(lists):
        got = fit(fitter, SERIALISE[style](claude_code(m)))
        assert got == paid_edit(EDIT, m, ceiling, patience, rest=REST), i
    # all but the first request resumed from the kept conversation (messages bytes shared)
    assert fitter.walked == 1 and fitter.resumed == len(lists) - 1
    assert len(fitter) == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=conversations(odd=True), step=st.sampled_from([1, 20]), data=st.data())
def test_any_order_of_bodies_gets_the_twins_keep(msgs, step, data) -> None:
    """Retries, forks, rewritten histories, two conversations interleaved, odd messages: each
    body the stateless twin's keep, for both policies (the free move off: its memory of the
    conversation is tests/test_gateway_free_moves.py's)."""
    other = [{"role": "user", "content": "another conversation"}, *msgs[1:5]]
    lists = [msgs[:n] for n in range(len(msgs) + 1)] + [other, other[:3]]
    order = data.draw(st.lists(st.sampled_from(lists), max_size=12))
    paid, fixed = Fitter(Knobs("paid", step, free=False)), Fitter(Knobs("fixed", step))
    for m in order:
        raw = SERIALISE["javascript"](claude_code(m))
        assert fit(paid, raw) == paid_edit(EDIT, m, rest=REST)
        assert fit(fixed, raw) == edit_for_request(EDIT, m, step)


def _rounds(n: int, size: int = 2_000) -> list[dict]:
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    for k in range(n):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"p": k}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "é" * size}
        msgs += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [res]}]
    return msgs


ROUNDS = 25  # the policy keeps 7 there (13 with SYSTEM), not KEEP's 3: the tests tell them apart


@pytest.mark.parametrize(
    "body",
    [
        # the Python SDK's order: messages after the others; model last
        {
            "max_tokens": 1,
            "system": SYSTEM,
            "tools": TOOLS,
            "messages": _rounds(ROUNDS),
            "model": MODEL,
        },
        # the key spelt again, nested, in the stretch after messages: the walk still places the
        # top-level one
        claude_code(_rounds(ROUNDS), metadata={"messages": 1}),
        # small enough to be walked: placed by the walk
        {"model": MODEL, "messages": _rounds(1, 10), "system": SYSTEM, "tools": TOOLS},
    ],
)
def test_messages_wherever_they_are_get_the_twins_keep(body: dict) -> None:
    raw = SERIALISE["javascript"](body)
    want = paid_edit(EDIT, body["messages"], rest=REST)
    assert fit(Fitter(Knobs()), raw) == want
    # the system prompt's 6,300 uncached characters make every move dearer: 13 kept, not 7
    assert paid_edit(EDIT, _rounds(ROUNDS)).keep == 7
    assert paid_edit(EDIT, _rounds(ROUNDS), rest=REST).keep == 13


def test_a_key_spelt_twice_is_read_as_json_reads_it() -> None:
    raw = (
        b'{"model":"'
        + MODEL.encode()
        + b'","messages":[],"system":"'
        + b"s" * 5000
        + b'","messages":'
        + json.dumps(_rounds(ROUNDS)).encode()
        + b',"max_tokens":1}'
    )
    assert json.loads(raw)["messages"] == _rounds(ROUNDS)
    # the system member (a 5,000-character string, no breakpoint) is read from the bytes too
    assert fit(Fitter(Knobs()), raw) == paid_edit(EDIT, _rounds(ROUNDS), rest=5_000)


@pytest.mark.parametrize(
    "messages",
    [b'"a string"', b"null", b"[1, 2", b'[{"role":"user"} {"role":"user"}]', b"[]"],
)
def test_messages_that_are_no_list_get_the_plain_edit(messages: bytes) -> None:
    raw = (
        b'{"model":"'
        + MODEL.encode()
        + b'","messages":'
        + messages
        + b',"system":"'
        + b"s" * 3000
        + b'"}'
    )
    top = scan(raw)
    assert top is not None
    assert Fitter(Knobs()).fit(EDIT, raw, top)[0] == EDIT


def test_the_kept_conversations_stay_within_their_bounds() -> None:
    body = SERIALISE["javascript"](claude_code(_rounds(40)))
    fitter = Fitter(Knobs(), conversations=2, max_bytes=3 * len(body))
    for k in range(4):  # four conversations: the oldest are dropped
        raw = body.replace(b'"go"', f'"go {k}"'.encode())
        fit(fitter, raw)
        assert len(fitter) <= 2 and fitter.kept_bytes <= 3 * len(body)
    small = Fitter(Knobs(), max_bytes=len(body))  # a body over half the budget is not kept
    fit(small, body)
    assert len(small) == 0 and small.kept_bytes == 0
    fit(small, body)
    assert small.resumed == 0 and small.walked == 2


class _Broken(Fitter):
    def fit(self, *args: object, **kwargs: object) -> tuple[ClearToolUses, None]:
        raise KeyError("secret-ish content from the body")  # decide calls fit


def test_a_failing_policy_sends_the_plain_edit_and_logs_one_line(caplog) -> None:
    raw = SERIALISE["javascript"](claude_code(_rounds(ROUNDS)))
    with caplog.at_level(logging.WARNING, logger="ctxpatch.gateway"):
        d = decide("POST", "/v1/messages", [], raw, EDIT, (), _Broken(Knobs()))
    assert d.added
    sent = json.loads(d.body or b"")
    assert sent["context_management"]["edits"][-1]["keep"]["value"] == EDIT.keep
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "KeyError" in lines[0] and "secret" not in lines[0]


def test_decide_sends_the_policys_keep_and_leaves_the_messages_bytes() -> None:
    raw = SERIALISE["javascript"](claude_code(_rounds(ROUNDS)))
    d = decide("POST", "/v1/messages", [], raw, EDIT, (), Fitter(Knobs()))
    sent = json.loads(d.body or b"")
    assert sent["context_management"]["edits"][-1]["keep"]["value"] == 13  # SYSTEM uncached
    cut = raw.index(b'"stream"')  # every byte before the appended member is the client's
    assert (d.body or b"")[:cut] == raw[:cut]


@pytest.mark.parametrize(
    ("env", "keep"),
    # the defaults: paid, KEEP 1 (EDIT's KEEP 3 keeps 13 here); fixed: KEEP 3, STEP 20
    [({}, 5), ({"CLAUDE_CTX_CLEAR_POLICY": "fixed", "CLAUDE_CTX_CLEAR_STEP": "20"}, 5)],
)
def test_the_gateway_sends_the_policy_its_environment_names(env: dict, keep: int) -> None:
    """Through HTTP and the mock: the policy and knobs come from the gateway's environment, as
    the injected JavaScript reads them (paid by default; fixed: every STEP tool uses)."""
    from test_gateway_http import HEADERS, post

    from engine.twins.context_clear import knobs_from_env, step_from_env
    from gateway.server import ThreadedGateway
    from lab.mock import MockConfig, MockServer

    msgs = _rounds(ROUNDS)
    edit = knobs_from_env(env)
    assert edit is not None
    want = (
        paid_edit(edit, msgs, rest=REST)
        if not env
        else edit_for_request(edit, msgs, step_from_env(env))
    )
    assert want.keep == keep
    raw = SERIALISE["javascript"](claude_code(msgs))
    with MockServer(MockConfig()) as mock, ThreadedGateway(upstream=mock.base_url, env=env) as gw:
        for _ in range(2):  # the second one resumed from the kept conversation
            status, _, reply = post(gw.url, "/v1/messages", raw, HEADERS)
            assert status == 200, reply
        sent = [r.body["context_management"]["edits"][-1]["keep"]["value"] for r in mock.requests()]
        assert sent == [keep, keep]
        fitter = gw.gateway.state.fitter
        assert fitter is not None and (fitter.walked, fitter.resumed) == (1, 1)


def test_a_list_of_many_tiny_messages_counts_by_its_messages_not_its_bytes() -> None:
    """50,000 messages in 150 KB: what their walk's state holds (~565 bytes a message with its
    ids and the free move's fingerprint entry, measured with tracemalloc) counts against the bound, so such a list is not kept."""
    raw = SERIALISE["javascript"](claude_code([{}] * 50_000))
    fitter = Fitter(Knobs())
    assert fit(fitter, raw) == EDIT  # no role anywhere: nothing cleared, the plain keep
    assert len(raw) < fitter.max_bytes // 200 and len(fitter) == 0 and fitter.kept_bytes == 0
    assert fit(fitter, SERIALISE["javascript"](claude_code(_rounds(3)))) == EDIT
    assert len(fitter) == 1 and fitter.kept_bytes > 7 * 640


@pytest.mark.parametrize("style", sorted(SERIALISE))
def test_the_new_messages_parsed_at_once_when_written_as_javascript_writes_them(style) -> None:
    """Claude Code's bodies (JSON.stringify: compact, non-ASCII as is): the messages after the
    shared ones are parsed in one piece; other writings (spaces, \\u escapes) are walked
    message by message. The same keep either way."""
    fitter = Fitter(Knobs("paid"))
    msgs = _rounds(12)
    msgs[3]["content"][0]["input"] = {"ctl": "\x1b[0m \u2028 ✓", "n": [1, -2, True, None]}
    for m in growing(msgs):
        assert fit(fitter, SERIALISE[style](claude_code(m))) == paid_edit(EDIT, m, rest=REST)
    assert fitter.resumed == len(growing(msgs)) - 1
    expected = fitter.resumed if style == "javascript" else 0
    assert fitter.tails_parsed_whole == expected


def test_a_number_written_otherwise_is_walked_with_the_same_keep() -> None:
    """A message whose bytes orjson would write otherwise (here 1e-07, as Python's json writes
    it; orjson writes 1e-7) is not taken from the one parse: the requests whose new messages
    hold it are walked message by message, the others parsed at once; the same keep."""
    fitter = Fitter(Knobs("paid"))
    msgs = _rounds(8)
    msgs[5]["content"][0]["input"] = {"x": 1.0, "y": 1e-07}
    for m in growing(msgs):
        raw = SERIALISE["javascript"](claude_code(m))
        assert fit(fitter, raw) == paid_edit(EDIT, m, rest=REST)
    assert 0 < fitter.tails_parsed_whole < fitter.resumed


@pytest.mark.parametrize("style", sorted(SERIALISE))
def test_the_message_that_lost_its_cache_mark_is_resumed_after(style) -> None:
    """Claude Code marks the newest message for the cache and takes the mark off on the next
    request: when its new bytes are the kept value's writing without the mark, the walk
    resumes after it (only the new messages parsed and walked); other writings walk it
    again. The twin's keep either way."""
    fitter = Fitter(Knobs("paid"))
    lists = growing(_rounds(12))
    for m in lists:
        assert fit(fitter, SERIALISE[style](claude_code(m))) == paid_edit(EDIT, m, rest=REST)
    assert fitter.resumed == len(lists) - 1
    # all but the second request (the first one's only message is a string: no mark)
    assert fitter.remarked == (fitter.resumed - 1 if style == "javascript" else 0)


def test_a_message_changed_besides_its_mark_is_walked_again() -> None:
    """The kept last message's bytes changed otherwise too (here its result grew): not the
    kept value without its mark, so it is parsed and walked again, with the twin's keep."""
    fitter = Fitter(Knobs("paid"))
    msgs = _rounds(6)
    first = marked(msgs[:9])
    assert fit(fitter, SERIALISE["javascript"](claude_code(first))) == paid_edit(
        EDIT, first, rest=REST
    )
    msgs[8] = {**msgs[8], "content": [{**msgs[8]["content"][0], "content": "é" * 30_000}]}
    for m in (marked(msgs[:11]), marked(msgs)):
        assert fit(fitter, SERIALISE["javascript"](claude_code(m))) == paid_edit(EDIT, m, rest=REST)
    assert fitter.resumed == 2 and fitter.remarked == 1  # the second one only


def test_a_blank_before_the_arrays_end_is_walked_message_by_message() -> None:
    """The newest message is taken from the one parse up to the array's end without being
    written again: a blank there (or after its comma) is not JSON.stringify's writing, so
    that body's messages are walked one by one; the twin's keep either way."""
    fitter = Fitter(Knobs("paid"))
    lists = growing(_rounds(8))
    for i, m in enumerate(lists):
        raw = SERIALISE["javascript"](claude_code(m))
        if i == len(lists) - 1:
            assert raw.count(b'}]}],"system"') == 1
            raw = raw.replace(b'}]}],"system"', b'}]}\n],"system"')
        assert fit(fitter, raw) == paid_edit(EDIT, m, rest=REST)
    assert fitter.resumed == len(lists) - 1
    assert fitter.tails_parsed_whole == fitter.resumed - 1  # all but the last
