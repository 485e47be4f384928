"""``ctxpatch gateway`` over HTTP: through the project's mock of the Messages API
(:mod:`lab.mock`) and a tiny aiohttp upstream defined here, all on loopback: auth passed,
other paths byte for byte, the refusal fallback, streaming as it arrives, 100 concurrent streams,
disconnects both ways, compressed replies, loopback-only binding, no cookie jar.
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
from gateway_bodies import EDIT, MODEL, THINKING_EDIT, body_of, compact, messages
from multidict import CIMultiDict

from engine.api.context_management import (
    BETA,
    CLEAR_TOOL_USES,
    to_json,
)
from gateway.redact import REDACTED
from gateway.rewrite import decide
from gateway.server import HOST, SEPARATE_HEADERS, URLS_KEPT, ThreadedGateway
from lab.mock import MockConfig, MockServer

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
    # the plain edit (no policy: test_gateway_policy sends the policy's through the mock)
    with (
        MockServer(cfg) as mock,
        ThreadedGateway(upstream=mock.base_url, edit=EDIT, policy=None) as gw,
    ):
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
    hop = {"x-ctxpatch-hop": gw.gateway.state.id}  # the one header the gateway adds
    for _, _, _, headers in seen[:3]:  # every header as sent, only Host and length are ours
        assert {
            k.lower(): v for k, v in headers.items() if k.lower() not in ("host", "content-length")
        } == HEADERS | {"accept-encoding": "identity"} | hop  # http.client's
    assert {k.lower() for k in seen[3][3]} == {"host", "x-api-key", "accept-encoding", *hop}


def test_each_request_goes_to_its_own_path_past_the_kept_urls() -> None:
    """The upstream URL is kept per path and query (at most URLS_KEPT, then cleared): past the
    bound, and after it, every request still reaches the upstream at its own path and query."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        await request.read()
        seen.append(request.path_qs)
        return web.Response(body=b'{"input_tokens": 5}', content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    paths = [f"/v1/messages/count_tokens?i={i}" for i in range(URLS_KEPT + 3)]
    paths += [paths[0], paths[-1], "/v1/x/../messages/count_tokens?i=0"]
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        conn = http.client.HTTPConnection(HOST, gw.gateway.port, timeout=10)
        for path in paths:
            conn.request("POST", path, body=b"{}", headers={"x-api-key": "k"})
            r = conn.getresponse()
            assert r.status == 200, r.read()
            r.read()
        conn.close()
    assert seen == [*paths[:-1], "/v1/messages/count_tokens?i=0"]  # dot segments resolved


def test_large_bodies_arrive_whole_unchanged_or_spliced_with_their_headers() -> None:
    """Bodies past SEPARATE_HEADERS leave with their headers in a write of their own (no copy
    of the body joined with them): the upstream still gets every byte, and the headers."""
    seen: list[tuple[str, bytes, CIMultiDict[str]]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.path_qs, await request.read(), CIMultiDict(request.headers)))
        return web.Response(body=b'{"input_tokens": 5}', content_type="application/json")

    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", record)
    big = [
        {"role": "user", "content": "x" * (SEPARATE_HEADERS + 1000)},
        {"role": "assistant", "content": "ok"},
        *messages(),
    ]
    edited = compact(body_of(messages=big))
    unchanged = b"\xff" + b"not json " * SEPARATE_HEADERS  # forwarded untouched, 576 KiB
    want = decide("POST", "/v1/messages", [], edited, EDIT, set()).body
    assert want is not None and want != edited  # the edit is spliced into the big body
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT, policy=None) as gw:
        assert post(gw.url, "/v1/messages", edited, HEADERS)[0] == 200
        assert post(gw.url, "/v1/messages/count_tokens", unchanged, HEADERS)[0] == 200
    assert [(p, b) for p, b, _ in seen] == [
        ("/v1/messages", want),
        ("/v1/messages/count_tokens", unchanged),
    ]
    betas = [f"{HEADERS['anthropic-beta']},{BETA}", HEADERS["anthropic-beta"]]
    for (_, body, headers), beta in zip(seen, betas, strict=True):
        assert headers["content-length"] == str(len(body))
        assert headers["x-api-key"] == HEADERS["x-api-key"]
        assert headers["anthropic-beta"] == beta


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
    assert "is unreachable: cannot connect to 127.0.0.1" in err["error"]["message"]


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
