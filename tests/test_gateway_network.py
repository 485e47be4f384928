"""The gateway on a corporate network: through an HTTP CONNECT proxy, trusting a private CA, the
way Claude Code reads the same variables (all on loopback: a small CONNECT proxy and a TLS
upstream with a throwaway CA made by ``trustme``)."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from aiohttp import web
from gateway_bodies import EDIT, body_of, compact
from test_gateway_http import HEADERS, post

from gateway.network import bypassed, proxy_for, shown, upstream_url
from gateway.server import Gateway, GatewayFailure, ThreadedGateway


class Loop:
    """An event loop in a daemon thread, for the proxy and the upstream."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def close(self) -> None:
        """Cancel what still runs (the proxy's pipes of a tunnel the client left open) and
        close the loop: a pipe left suspended was finalised later, by the garbage collector,
        and its ``writer.close()`` then hit the closed loop (an unraisable-exception warning
        in whichever test ran at that moment)."""

        async def cancel_the_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        self.run(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


class ConnectProxy:
    """An HTTP proxy that only tunnels (CONNECT), as corporate proxies do for https."""

    def __init__(self, loop: Loop) -> None:
        self.targets: list[str] = []
        self.server = loop.run(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        self.targets.append(f"{method} {target}")
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        host, _, port = target.rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_upstream(ca: trustme.CA) -> Iterator[tuple[str, list[str]]]:
    """An https upstream on localhost whose certificate only the throwaway CA signs."""
    loop = Loop()
    seen: list[str] = []

    async def route(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(json.dumps(body.get("context_management")))
        return web.json_response({"type": "message", "content": []})

    app = web.Application()
    app.router.add_post("/v1/messages", route)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(ctx)

    async def start() -> tuple[web.AppRunner, int]:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
        await site.start()
        return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    runner, port = loop.run(start())
    yield f"https://localhost:{port}", seen
    loop.run(runner.cleanup())
    loop.close()


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    loop = Loop()
    p = ConnectProxy(loop)
    yield p
    p.server.close()
    loop.close()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "corporate-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.mark.parametrize("ca_variable", ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"])
def test_through_a_connect_proxy_trusting_a_private_ca(
    tls_upstream: tuple[str, list[str]], proxy: ConnectProxy, ca_file: str, ca_variable: str
) -> None:
    upstream, seen = tls_upstream
    env = {"HTTPS_PROXY": proxy.url, ca_variable: ca_file}
    with ThreadedGateway(upstream=upstream, edit=EDIT, env=env) as gw:
        status, _, reply = post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
    assert status == 200, reply
    assert proxy.targets == [f"CONNECT {upstream.removeprefix('https://')}"]
    assert len(seen) == 1 and "clear_tool_uses_20250919" in seen[0]


def test_no_proxy_sends_the_upstream_direct(
    tls_upstream: tuple[str, list[str]], proxy: ConnectProxy, ca_file: str
) -> None:
    upstream, seen = tls_upstream
    env = {
        "https_proxy": proxy.url,
        "NO_PROXY": "example.com, localhost",
        "NODE_EXTRA_CA_CERTS": ca_file,
    }
    with ThreadedGateway(upstream=upstream, edit=EDIT, env=env) as gw:
        status, _, _ = post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
    assert status == 200 and proxy.targets == [] and len(seen) == 1


def test_an_untrusted_certificate_gives_a_502_that_names_the_ca_variable(
    tls_upstream: tuple[str, list[str]], proxy: ConnectProxy
) -> None:
    upstream, seen = tls_upstream
    with ThreadedGateway(upstream=upstream, edit=EDIT, env={"HTTPS_PROXY": proxy.url}) as gw:
        status, _, body = post(gw.url, "/v1/messages", compact(body_of()), HEADERS)
    assert status == 502 and seen == []
    message = json.loads(body)["error"]["message"]
    assert "certificate" in message and "NODE_EXTRA_CA_CERTS" in message
    assert f"through the proxy {proxy.url}" in message


def test_a_socks_proxy_is_refused_at_start_as_claude_code_does() -> None:
    gw = Gateway(
        upstream="https://api.anthropic.com", env={"HTTPS_PROXY": "socks5://127.0.0.1:1080"}
    )
    with pytest.raises(GatewayFailure) as info:
        asyncio.run(gw.start())
    assert "SOCKS" in str(info.value) and "Claude Code does not support" in info.value.why


def test_proxy_choice_follows_claude_codes_variables() -> None:
    api = "https://api.anthropic.com"
    assert proxy_for(api, {}) is None
    assert proxy_for(api, {"ALL_PROXY": "http://p:1"}) is None  # Claude Code ignores it too
    assert proxy_for(api, {"HTTP_PROXY": "http://p:1"}) == "http://p:1"  # https falls back
    assert proxy_for(api, {"HTTPS_PROXY": "http://s:2", "HTTP_PROXY": "http://p:1"}) == "http://s:2"
    assert (
        proxy_for(api, {"https_proxy": "http://l:3", "HTTPS_PROXY": "http://u:4"}) == "http://l:3"
    )
    assert proxy_for("http://h", {"HTTPS_PROXY": "http://s:2"}) is None
    assert proxy_for(api, {"HTTPS_PROXY": "proxy.corp:3128"}) == "http://proxy.corp:3128"
    assert proxy_for(api, {"HTTPS_PROXY": "http://s:2", "NO_PROXY": "*"}) is None
    assert bypassed("api.anthropic.com", 443, "localhost .anthropic.com")
    assert bypassed("api.anthropic.com", 443, "anthropic.com")
    assert not bypassed("notanthropic.com", 443, "anthropic.com")
    assert bypassed("10.1.2.3", 443, "10.0.0.0/8")
    assert not bypassed("api.anthropic.com", 443, "api.anthropic.com:8443")
    assert bypassed("api.anthropic.com", 443, "api.anthropic.com:443")


def test_credentials_in_urls_are_never_shown() -> None:
    assert shown("https://user:pw@proxy.corp:8080/x") == "https://<redacted>@proxy.corp:8080/x"
    assert shown("https://api.anthropic.com") == "https://api.anthropic.com"
    assert upstream_url("https://h/p", "/a/../../b?c=..") == "https://h/p/b?c=.."
