"""The gateway next to hostile neighbours and odd upstreams (loopback only).

Each test is a probe that broke the gateway before (issue 16): oversized bodies kept in memory,
web pages and DNS rebinding, the self-loop, ``Expect: 100-continue`` forwarded, a malformed
upstream reply, half-open connections kept forever, ``/../`` escaping the upstream's path
prefix, a refusal naming the dated model id making every request go upstream twice, a BOM or
UTF-16 body re-serialised.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from gateway_bodies import EDIT, body_of, compact
from test_gateway_http import HEADERS, AppThread, post

from ctxpatch.errors import UsageError
from gateway import limits
from gateway.rewrite import LENIENT, decide
from gateway.server import Gateway, GatewayFailure, ThreadedGateway

OK = {"type": "message", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}


def recorder() -> tuple[web.Application, list[tuple[str, bytes, dict[str, str]]]]:
    """An upstream that answers 200 and keeps (path, body, headers) of every request."""
    seen: list[tuple[str, bytes, dict[str, str]]] = []

    async def route(request: web.Request) -> web.Response:
        seen.append((request.raw_path, await request.read(), dict(request.headers)))
        return web.json_response(OK)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", route)
    return app, seen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raw_request(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Send ``data`` as is, return everything the gateway answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


# --- browsers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Host": "evil.example:{port}"},  # DNS rebinding: the page's name for 127.0.0.1
        {"Host": "127.0.0.1:1"},
    ],
)
def test_browser_originated_requests_get_an_api_style_403(extra: dict[str, str]) -> None:
    app, seen = recorder()
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        port = gw.gateway.port
        headers = {k: v.format(port=port) for k, v in extra.items()}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.putrequest("POST", "/v1/messages", skip_host="Host" in headers)
        for k, v in {**HEADERS, **headers}.items():
            conn.putheader(k, v)
        raw = compact(body_of())
        conn.putheader("Content-Length", str(len(raw)))
        conn.endheaders(raw)
        r = conn.getresponse()
        status, body = r.status, r.read()
        conn.close()
        # a program's request (Host 127.0.0.1:port or localhost:port) still goes through
        assert post(gw.url, "/v1/messages", raw, HEADERS)[0] == 200
        conn = http.client.HTTPConnection("localhost", port, timeout=10)
        conn.request("POST", "/v1/messages", raw, HEADERS)
        assert conn.getresponse().status == 200
        conn.close()
    assert status == 403
    err = json.loads(body)
    assert err["type"] == "error" and err["error"]["type"] == "permission_error"
    assert "refused" in err["error"]["message"]
    assert len(seen) == 2  # the refused request never reached the upstream


# --- the self-loop ----------------------------------------------------------------------------


def test_self_loop_is_refused_at_start_naming_the_variable() -> None:
    port = free_port()
    env = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}"}
    for base in (
        f"http://127.0.0.1:{port}",
        f"http://localhost:{port}/v1",
        f"http://0.0.0.0:{port}",
    ):
        env = {"ANTHROPIC_BASE_URL": base}
        gw = Gateway(port=port, env=env, edit=EDIT)
        start = time.monotonic()
        with pytest.raises(GatewayFailure) as info:
            asyncio.run(gw.start())
        assert time.monotonic() - start < 1.0
        assert "ANTHROPIC_BASE_URL" in info.value.why
        assert "this gateway's own address" in str(info.value)
    # another port on the same host is no loop
    gw = Gateway(port=port, env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{free_port()}"})

    async def up_and_down() -> None:
        await gw.start()
        await gw.stop()

    asyncio.run(up_and_down())


def test_a_loop_through_another_gateway_is_refused_at_run_time_in_under_a_second() -> None:
    port_a = free_port()
    b = ThreadedGateway(upstream=f"http://127.0.0.1:{port_a}", edit=EDIT)
    with b, ThreadedGateway(upstream=b.url, port=port_a, edit=EDIT) as a:
        start = time.monotonic()
        status, _, body = post(a.url, "/v1/messages", compact(body_of()), HEADERS)
        took = time.monotonic() - start
        assert a.gateway.state.refused_requests == 1
        assert a.gateway.state.forwarded == 1 and b.gateway.state.forwarded == 1
    assert status == 508 and took < 1.0
    err = json.loads(body)
    assert "this gateway itself" in err["error"]["message"]
    assert "ANTHROPIC_BASE_URL" in err["error"]["message"]


# --- memory and time bounds -------------------------------------------------------------------


def test_content_length_over_the_api_limit_is_refused_before_the_body_is_read() -> None:
    app, seen = recorder()
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        head = (
            "POST /v1/messages HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{gw.gateway.port}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {limits.MAX_BODY + 1}\r\n\r\n"
        ).encode()
        start = time.monotonic()
        reply = raw_request(gw.gateway.port, head + b"{")  # the rest never comes
        assert time.monotonic() - start < 5  # answered without waiting for the body
    status_line, _, rest = reply.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413")
    err = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert err["error"]["type"] == "request_too_large"
    assert "32 MiB" in err["error"]["message"]
    assert seen == []


def test_a_chunked_body_over_the_limit_is_dropped_at_the_limit() -> None:
    app, seen = recorder()
    piece = b"x" * (1024 * 1024)
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        conn = http.client.HTTPConnection("127.0.0.1", gw.gateway.port, timeout=30)

        def body() -> Iterator[bytes]:
            for _ in range(limits.MAX_BODY // len(piece) + 8):
                yield piece

        try:
            conn.request("POST", "/v1/messages", body(), {"content-type": "application/json"})
            r = conn.getresponse()
            status, reply = r.status, r.read()
        except (BrokenPipeError, ConnectionResetError):
            status, reply = 413, b'{"error": {"type": "request_too_large"}}'  # closed mid-send
        conn.close()
    assert status == 413
    assert json.loads(reply)["error"]["type"] == "request_too_large"
    assert seen == []


def test_half_open_connections_are_closed_after_the_idle_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "IDLE_TIMEOUT", 1.0)
    monkeypatch.setattr(limits, "BODY_TIMEOUT", 1.0)
    app, _ = recorder()
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        port = gw.gateway.port
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]
        for i, s in enumerate(socks):
            s.settimeout(5)
            if i % 3 == 1:  # headers begun, never finished
                s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-")
            elif i % 3 == 2:  # headers done, the body stops arriving
                s.sendall(
                    f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    "Content-Length: 100\r\n\r\n{".encode()
                )
        start = time.monotonic()
        for s in socks:
            try:
                while s.recv(4096):  # a stalled body may get a status line first
                    pass
            except TimeoutError:
                pytest.fail("a half-open connection was kept past the timeout")
            s.close()
        assert time.monotonic() - start < 4
        # the gateway still serves
        assert post(gw.url, "/v1/messages", compact(body_of()), HEADERS)[0] == 200


# --- odd upstreams ------------------------------------------------------------------------------


class RawUpstream:
    """A TCP server on 127.0.0.1 that reads a request's head and answers ``reply`` as is."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.heads: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                self.heads.append(data.partition(b"\r\n\r\n")[0])
                conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    "reply", [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n", b""]
)
def test_a_malformed_upstream_reply_gives_the_documented_502_json(reply: bytes) -> None:
    up = RawUpstream(reply)
    try:
        with ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
            status, headers, body = post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
    finally:
        up.close()
    assert status == 502
    assert headers["Content-Type"].startswith("application/json")
    err = json.loads(body)
    assert err["type"] == "error" and err["error"]["type"] == "api_error"
    assert "is unreachable" in err["error"]["message"]


def test_expect_100_continue_is_answered_once_and_not_forwarded() -> None:
    app, seen = recorder()
    raw = compact(body_of())
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        port = gw.gateway.port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n".encode()
            )
            interim = s.recv(4096)
            s.sendall(raw)
            rest = b""
            while chunk := s.recv(65536):
                rest += chunk
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert rest.startswith(b"HTTP/1.1 200") and b"100 Continue" not in rest
    ((_, body, headers),) = seen
    assert "Expect" not in headers and b'"messages"' in body


@pytest.mark.parametrize(
    ("path", "arrives"),
    [
        ("/../admin", "/prefix/admin"),
        ("/v1/../../admin?x=1", "/prefix/admin?x=1"),
        ("/%2e%2e/admin", "/prefix/admin"),
        ("/v1/./messages/..", "/prefix/v1/"),
        ("/v1/messages?beta=true", "/prefix/v1/messages?beta=true"),
    ],
)
def test_dot_segments_never_leave_the_upstream_path_prefix(path: str, arrives: str) -> None:
    app, seen = recorder()
    with AppThread(app) as up, ThreadedGateway(upstream=up.url + "/prefix", edit=EDIT) as gw:
        reply = raw_request(
            gw.gateway.port,
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{gw.gateway.port}\r\n"
            "Connection: close\r\n\r\n".encode(),
        )
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    ((got, _, _),) = seen
    assert got == arrives


def test_a_refusal_naming_the_dated_id_of_an_alias_is_not_paid_twice_per_request() -> None:
    hits: list[bool] = []

    async def route(request: web.Request) -> web.Response:
        body = await request.json()
        edited = "clear_tool_uses_20250919" in json.dumps(body.get("context_management"))
        hits.append(edited)
        if edited:  # the API names the dated id, the client sent the alias
            return web.json_response(
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "claude-haiku-4-5-20251001 does not support the "
                        "clear_tool_uses_20250919 context management strategy",
                    },
                },
                status=400,
            )
        return web.json_response(OK)

    app = web.Application()
    app.router.add_post("/v1/messages", route)
    raw = compact(body_of(model="claude-haiku-4-5"))
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        for _ in range(3):
            assert post(gw.url, "/v1/messages", raw, HEADERS)[0] == 200
    assert hits == [True, False, False, False]  # one refusal, then straight through


# --- bodies only a lenient parser reads ---------------------------------------------------------


LENIENT_BODIES = [
    b"\xef\xbb\xbf" + compact(body_of()),  # a UTF-8 byte order mark
    json.dumps(body_of()).encode("utf-16"),
    json.dumps(body_of()).encode("utf-16-le"),
    b'\xef\xbb\xbf{"temperature":NaN,' + compact(body_of())[1:],  # was NaN -> null
]


@pytest.mark.parametrize("raw", LENIENT_BODIES, ids=["bom", "utf-16", "utf-16-le", "bom-nan"])
def test_a_body_only_a_lenient_parser_reads_is_forwarded_untouched(raw: bytes) -> None:
    d = decide("POST", "/v1/messages", [], raw, EDIT)
    assert d.parts is None and d.reason == LENIENT
    app, seen = recorder()
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        post(gw.url, "/v1/messages", raw, HEADERS)
    ((_, body, headers),) = seen
    assert body == raw
    assert "context-management-2025-06-27" not in headers.get("anthropic-beta", "")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"temperature":NaN,' + compact(body_of())[1:],
        compact(body_of())[:-1] + b',"temperature":NaN}',
        compact(body_of())[:-1] + b',"top_p":Infinity,"metadata":{"x":-Infinity}}',
    ],
    ids=["first", "last", "infinity"],
)
def test_nan_and_infinity_never_become_null(raw: bytes) -> None:
    app, seen = recorder()
    with AppThread(app) as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        post(gw.url, "/v1/messages", raw, HEADERS)
    ((_, body, _),) = seen
    # forwarded as sent, or with the edit spliced in: every client byte in place either way
    if body != raw:
        cm = body.index(b',"context_management":')
        assert body[:cm] + body[-1:] == raw
    assert body.count(b"null") == raw.count(b"null")


# --- memory, measured on the gateway's own process ------------------------------------------------


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def oversized(port: int, chunked: bool) -> object:
    """One body of 48 MiB (over the limit): chunked, or announced by Content-Length."""
    piece = b"x" * (1024 * 1024)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        if chunked:
            conn.request("POST", "/v1/messages", (piece for _ in range(48)), {"x": "y"})
        else:
            conn.putrequest("POST", "/v1/messages")
            conn.putheader("Content-Length", str(48 * len(piece)))
            conn.endheaders()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                for _ in range(48):
                    conn.send(piece)
        return conn.getresponse().status
    except (BrokenPipeError, ConnectionResetError) as exc:
        return type(exc).__name__
    finally:
        conn.close()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_rss_returns_within_20_mb_after_10_oversized_bodies() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CTXPATCH_"))}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "patcher",
            "gateway",
            "--port",
            "0",
            "--upstream",
            "http://127.0.0.1:9",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().strip().rsplit(":", 1)[1])
        oversized(port, chunked=True)  # warm-up: every code path imported and run once
        start = rss_mb(proc.pid)
        answers = [oversized(port, chunked=i % 2 == 1) for i in range(10)]
        time.sleep(0.5)
        end = rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert end - start < 20, f"RSS {start:.0f} MB -> {end:.0f} MB after 10 oversized bodies"
    assert all(a in (413, "BrokenPipeError", "ConnectionResetError") for a in answers), answers
    assert answers.count(413) >= 5


def test_an_upstream_never_reached_says_so_once_and_asks_claude_code_not_to_retry() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://user:SECRETPW@127.0.0.1:{s.getsockname()[1]}"  # refused
        with ThreadedGateway(upstream=dead, edit=EDIT) as gw:
            start = time.monotonic()
            status, headers, body = post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
            took = time.monotonic() - start
    assert status == 502 and headers["x-should-retry"] == "false"
    assert 1.0 <= took < 5  # tried twice, a second apart
    message = json.loads(body)["error"]["message"]
    assert "unreachable: cannot connect to 127.0.0.1" in message and "SECRETPW" not in message


def test_an_upstream_that_hangs_up_leaves_the_retry_to_claude_code() -> None:
    up = RawUpstream(b"")  # reached, then closed before a reply: may be passing
    try:
        with ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
            status, headers, _ = post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
    finally:
        up.close()
    assert status == 502 and "x-should-retry" not in headers


def test_credentials_in_the_upstream_url_go_as_basic_auth_unless_the_client_sends_its_own() -> None:
    app, seen = recorder()
    with AppThread(app) as up:
        url = up.url.replace("http://", "http://user:SECRETPW@")
        with ThreadedGateway(upstream=url, edit=EDIT) as gw:
            post(gw.url, "/v1/messages", compact(body_of()), {"x-api-key": "k"})
            post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
    assert seen[0][2]["Authorization"] == "Basic dXNlcjpTRUNSRVRQVw=="
    assert seen[1][2]["Authorization"] == HEADERS["authorization"]


def test_credentials_in_the_upstream_url_are_sent_in_utf8_and_a_colon_in_the_user_is_refused() -> (
    None
):
    app, seen = recorder()
    with AppThread(app) as up:
        url = up.url.replace("http://", "http://%C3%BCser:p%C3%A4ss@")
        with ThreadedGateway(upstream=url, edit=EDIT) as gw:
            post(gw.url, "/v1/messages", compact(body_of()), {"x-api-key": "k"})
    sent = seen[0][2]["Authorization"]
    assert sent.startswith("Basic ")
    assert base64.b64decode(sent[6:]).decode("utf-8") == "\u00fcser:p\u00e4ss"
    with pytest.raises(UsageError, match="holds a ':'") as refused:
        Gateway(upstream="http://a%3Ab:pw@127.0.0.1:9", edit=EDIT)
    assert "pw" not in str(refused.value)
