"""``ctxpatch gateway``: what it changes (only the edit and the beta), and how it streams.

Everything runs on loopback: the project's mock of the Messages API
(:mod:`patcher.e2e.mock`) or a tiny aiohttp upstream defined here.
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Callable

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict

from engine.context_clear import knobs_from_env
from engine.context_management import (
    BETA,
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    ClearToolUses,
    to_json,
    unsupported_model_message,
)
from gateway.redact import REDACTED, redacted
from gateway.rewrite import decide, refused_model, with_edit
from gateway.server import HOST, ThreadedGateway, upstream_from_env
from patcher.e2e.mock import MockConfig, MockServer

EDIT = ClearToolUses(trigger_value=50, keep=1)
MODEL = "claude-opus-4-6"
THINKING_EDIT = {"type": CLEAR_THINKING, "keep": "all"}


def messages(n_tools: int = 4) -> list[dict]:
    """A user turn, then ``n_tools`` tool uses with long results (ASCII and not)."""
    out: list[dict] = [{"role": "user", "content": "start é ✓ \u2028"}]
    for i in range(n_tools):
        out.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"i": i}}],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x " * 400 + "ü"}
                ],
            }
        )
    return out


def body_of(**extra: object) -> dict:
    return {"model": MODEL, "max_tokens": 100, "messages": messages(), "stream": False, **extra}


def compact(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


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


# --- through the project's mock ------------------------------------------------------------------


def post(url: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict, bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


HEADERS = {
    "content-type": "application/json",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "interleaved-thinking-2025-05-14",
    "x-api-key": "sk-ant-SECRET-KEY-123",
    "authorization": "Bearer SECRET-TOKEN-456",
    "cookie": "session=SECRET-COOKIE-789",
    "x-app": "cli",
}


def test_through_the_mock_edit_applied_messages_untouched_auth_passed() -> None:
    cfg = MockConfig(count_prompt=True)
    raw = compact(
        body_of(context_management={"edits": [THINKING_EDIT]}, thinking={"type": "adaptive"})
    )
    with MockServer(cfg) as mock, ThreadedGateway(upstream=mock.base_url, edit=EDIT) as gw:
        status, _, reply = post(gw.url, "/v1/messages?beta=true", raw, HEADERS)
        assert status == 200, reply
        (req,) = mock.requests()
        assert req.path == "/v1/messages?beta=true"
        assert req.body["messages"] == messages()
        assert req.body["context_management"]["edits"] == [THINKING_EDIT, to_json(EDIT)]
        assert req.headers["anthropic-beta"] == f"interleaved-thinking-2025-05-14,{BETA}"
        assert req.headers["anthropic-version"] == "2023-06-01"
        assert req.headers["x-app"] == "cli"
        assert [e["type"] for e in req.applied_edits] == [CLEAR_TOOL_USES]
        assert json.loads(reply)["usage"]["input_tokens"] == req.input_tokens


def test_count_tokens_and_other_paths_forwarded_byte_for_byte() -> None:
    seen: list[tuple[str, str, bytes, CIMultiDict[str]]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(
            (request.method, request.path_qs, await request.read(), CIMultiDict(request.headers))
        )
        return web.Response(body=b'{"input_tokens": 5}', content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    raw = b'{"model":"claude-opus-4-6",  "messages" : [] }'  # odd spacing: kept as is
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        post(gw.url, "/v1/messages/count_tokens?beta=true", raw, HEADERS)
        post(gw.url, "/v1/messages", b"\xff not json", HEADERS)
        post(gw.url, "/v1/complete", raw, HEADERS)
        conn = http.client.HTTPConnection(HOST, gw.gateway.port, timeout=10)
        conn.request("GET", "/v1/models?limit=2", headers={"x-api-key": "k"})
        assert conn.getresponse().status == 200
        conn.close()
    assert [(m, p, b) for m, p, b, _ in seen] == [
        ("POST", "/v1/messages/count_tokens?beta=true", raw),
        ("POST", "/v1/messages", b"\xff not json"),
        ("POST", "/v1/complete", raw),
        ("GET", "/v1/models?limit=2", b""),
    ]
    for _, _, _, headers in seen[:3]:  # every header as sent, only Host and length are ours
        assert {
            k.lower(): v for k, v in headers.items() if k.lower() not in ("host", "content-length")
        } == HEADERS | {"accept-encoding": "identity"}  # http.client's
    assert {k.lower() for k in seen[3][3]} == {"host", "x-api-key", "accept-encoding"}


def test_refusal_fallback_remembers_the_model_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ctxpatch.gateway")
    cfg = MockConfig(unsupported_models=("claude-opus-4-*",))
    raw = compact(body_of())
    with MockServer(cfg) as mock, ThreadedGateway(upstream=mock.base_url, edit=EDIT) as gw:
        status, _, _ = post(gw.url, "/v1/messages", raw, HEADERS)
        assert status == 200  # the original request, sent again, was answered
        first, again = mock.requests()
        assert first.status == 400 and "does not support" in (first.error or "")
        assert again.status == 200 and again.body == json.loads(raw)
        assert "anthropic-beta" in again.headers and BETA not in again.headers["anthropic-beta"]
        assert gw.gateway.state.refused == {MODEL}
        post(gw.url, "/v1/messages", raw, HEADERS)
        third = mock.requests()[2]
        assert third.status == 200 and "context_management" not in third.body
        # another model still gets the edit
        post(gw.url, "/v1/messages", compact(body_of(model="claude-sonnet-5")), HEADERS)
        assert "context_management" in mock.requests()[3].body
    assert f"refused clear_tool_uses_20250919 for {MODEL}" in caplog.text
    for secret in ("SECRET-KEY", "SECRET-TOKEN", "SECRET-COOKIE"):
        assert secret not in caplog.text
    assert REDACTED in caplog.text


# --- a tiny aiohttp upstream ---------------------------------------------------------------------


class AppThread:
    """An aiohttp app on 127.0.0.1 in a daemon thread (its own event loop)."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> AppThread:
        self.thread.start()

        async def start() -> None:
            self.runner = web.AppRunner(self.app, handler_cancellation=True)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        return self

    def stop(self) -> None:
        if self.thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sse_app(handler: Callable[[web.Request, web.StreamResponse], object]) -> web.Application:
    async def route(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        await handler(request, resp)  # type: ignore[misc]
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/messages", route)
    return app


def event(i: int) -> bytes:
    return f'event: content_block_delta\ndata: {{"i": {i}}}\n\n'.encode()


def test_first_event_reaches_the_client_before_the_upstream_sends_the_last() -> None:
    client_saw_first = threading.Event()
    sent_last_after: list[bool] = []

    async def stream(_: web.Request, resp: web.StreamResponse) -> None:
        await resp.write(event(0))
        # the last event is only sent once the client has the first: a buffering gateway
        # would leave the client waiting and this wait would time out
        ok = await asyncio.get_running_loop().run_in_executor(None, client_saw_first.wait, 10)
        sent_last_after.append(ok)
        await resp.write(event(1))

    async def client(url: str) -> bytes:
        async with aiohttp.ClientSession() as s, s.post(url + "/v1/messages", data=b"{}") as r:
            first = await r.content.readuntil(b"\n\n")
            client_saw_first.set()
            return first + await r.read()

    with AppThread(sse_app(stream)) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        got = asyncio.run(client(gw.url))
    assert got == event(0) + event(1)
    assert sent_last_after == [True]


def test_100_concurrent_streams_without_loss() -> None:
    async def stream(request: web.Request, resp: web.StreamResponse) -> None:
        n = int(request.query["n"])
        for i in range(20):
            await resp.write(event(n * 1000 + i))
            await asyncio.sleep(0.002)

    async def one(s: aiohttp.ClientSession, url: str, n: int) -> bool:
        async with s.post(f"{url}/v1/messages?n={n}", data=b"{}") as r:
            return await r.read() == b"".join(event(n * 1000 + i) for i in range(20))

    async def all_of(url: str) -> list[bool]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
            return list(await asyncio.gather(*(one(s, url, n) for n in range(100))))

    with AppThread(sse_app(stream)) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        results = asyncio.run(all_of(gw.url))
    assert results == [True] * 100


def test_client_disconnect_mid_stream_closes_the_upstream() -> None:
    upstream_done = threading.Event()
    sent: list[int] = []

    async def stream(_: web.Request, resp: web.StreamResponse) -> None:
        try:
            for i in range(2000):  # 100 s if never stopped
                await resp.write(event(i))
                sent.append(i)
                await asyncio.sleep(0.05)
        finally:
            upstream_done.set()

    closed_at: list[float] = []

    async def client(url: str) -> None:
        async with aiohttp.ClientSession() as s:
            r = await s.post(url + "/v1/messages", data=b"{}")
            await r.content.readuntil(b"\n\n")
            closed_at.append(time.monotonic())
            r.close()  # the client goes away mid-stream

    with AppThread(sse_app(stream)) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        asyncio.run(client(gw.url))
        assert upstream_done.wait(10), "the upstream kept streaming to nobody"
        # within a second (the bench measures well under 1 ms on an idle loopback)
        assert time.monotonic() - closed_at[0] < 1.0
    assert len(sent) < 20


def test_unreachable_upstream_gives_a_502_json_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        with ThreadedGateway(upstream=dead, edit=EDIT) as gw:
            status, headers, body = post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
    assert status == 502
    assert headers["Content-Type"].startswith("application/json")
    err = json.loads(body)
    assert err["type"] == "error" and err["error"]["type"] == "api_error"
    assert "did not answer" in err["error"]["message"]


def test_an_upstream_gone_between_requests_gives_a_502_json_error() -> None:
    # the first request leaves a kept-alive connection in the gateway's pool; the upstream then
    # dies: the next request must not hang or fail obscurely, but get the API-style 502
    async def route(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"type": "message", "content": []})

    app = web.Application()
    app.router.add_post("/v1/messages", route)
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        assert post(gw.url, "/v1/messages", compact(body_of()), HEADERS)[0] == 200
        up.stop()  # its connections closed, its port no longer listening
        start = time.monotonic()
        status, headers, body = post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
        assert time.monotonic() - start < 10
    assert status == 502
    assert headers["Content-Type"].startswith("application/json")
    err = json.loads(body)
    assert err["type"] == "error" and err["error"]["type"] == "api_error"


def test_upstream_killed_mid_stream_ends_the_client_stream() -> None:
    async def stream(request: web.Request, resp: web.StreamResponse) -> None:
        await resp.write(event(0))
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.abort()  # the upstream dies

    async def client(url: str) -> tuple[bytes, str]:
        async with aiohttp.ClientSession() as s, s.post(url + "/v1/messages", data=b"{}") as r:
            first = await r.content.readuntil(b"\n\n")
            try:
                await asyncio.wait_for(r.read(), 10)
            except aiohttp.ClientPayloadError as exc:
                return first, type(exc).__name__
            return first, "complete"

    with AppThread(sse_app(stream)) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        first, outcome = asyncio.run(client(gw.url))
    assert first == event(0)
    assert outcome == "ClientPayloadError"  # a truncated chunked stream, not a hang


def test_compressed_replies_pass_through_compressed() -> None:
    payload = gzip.compress(b'{"ok": true}')

    async def route(request: web.Request) -> web.Response:
        return web.Response(
            body=payload, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    app = web.Application()
    app.router.add_get("/v1/x", route)
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        conn = http.client.HTTPConnection(HOST, gw.gateway.port, timeout=10)
        conn.request("GET", "/v1/x", headers={"Accept-Encoding": "gzip"})
        r = conn.getresponse()
        got, enc = r.read(), r.getheader("Content-Encoding")
        conn.close()
    assert (got, enc) == (payload, "gzip")


def test_binds_loopback_only() -> None:
    with MockServer() as mock, ThreadedGateway(upstream=mock.base_url, edit=EDIT) as gw:
        runner = gw.gateway._runner
        assert runner is not None
        assert [a[0] for a in runner.addresses] == ["127.0.0.1"]
        assert gw.url == f"http://127.0.0.1:{gw.gateway.port}"
        start = time.monotonic()
        status, _, _ = post(gw.url, "/v1/messages", compact(body_of()), {})
        assert status == 200 and time.monotonic() - start < 10


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


def test_the_gateway_keeps_no_cookies() -> None:
    seen: list[str | None] = []

    async def route(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie"))
        resp = web.json_response({"ok": True})
        resp.set_cookie("__cf_bm", "from-the-upstream")
        return resp

    app = web.Application()
    app.router.add_post("/v1/messages/count_tokens", route)
    with AppThread(app) as up:
        # a host name, as the API's: aiohttp's default cookie jar ignores IP addresses
        upstream = up.url.replace("127.0.0.1", "localhost")
        gw = ThreadedGateway(upstream=upstream, edit=EDIT).start()
        try:
            first = post(gw.url, "/v1/messages/count_tokens", b"{}", {})
            post(gw.url, "/v1/messages/count_tokens", b"{}", {})
            post(gw.url, "/v1/messages/count_tokens", b"{}", {"Cookie": "mine=1"})
        finally:
            gw.stop()
    assert "from-the-upstream" in first[1]["Set-Cookie"]  # the client gets it
    assert seen == [None, None, "mine=1"]  # later requests carry only what the client sends


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
