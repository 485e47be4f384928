"""The gateway itself: an aiohttp server on 127.0.0.1 and an aiohttp client to the upstream.

Every request is forwarded with its method, path, query string, headers and body; only the
hop-by-hop headers (``Connection``, ``Transfer-Encoding``, ``Host``, ...) are the two
connections' own. The one change is :func:`gateway.rewrite.decide`'s, on ``POST /v1/messages``.
Replies come back as they arrive: status and headers first, then each chunk of the body as the
upstream sends it (SSE included; nothing is buffered, nothing decompressed). A client that goes
away cancels its handler, which closes the upstream connection. An upstream that cannot be
reached, or fails before its reply starts, gives the client a 502 with an API-style JSON error.

Refusal fallback: when the upstream answers 400 "<model> does not support the
clear_tool_uses_20250919 context management strategy" to a request we changed, the model is
remembered for the life of the process (the edit is no longer added for it; both the id the
refusal names and the one the request sent, which differ when the client sends an alias and
the API answers with the dated id), the log says so, and the client's original request is sent
once more, unchanged, so the client never sees a refusal it did not cause.

Before anything is forwarded (:mod:`gateway.guard`, :mod:`gateway.limits`): a browser's request
gets 403, a request that already went through this very gateway 508, a body over the API's own
32 MB limit 413 (refused by its ``Content-Length`` before it is read). ``Expect: 100-continue``
is answered here and not forwarded; a request to an upstream on this machine carries
``x-ctxpatch-hop`` (the loop check; the API itself never sees it). An
upstream that cannot be reached, or answers something that is not HTTP, gives the client 502
JSON naming the upstream's host, never its credentials; when the request never left this
machine (DNS, connection refused, TLS, proxy; tried twice, 1 s apart) the 502 carries
``x-should-retry: false``, which Claude Code honours: the user sees why at once instead of after
ten retries. The network settings Claude Code
honours (proxy, extra CAs, client certificate) are :mod:`gateway.network`'s. Near the model's
window, for Claude Code builds that do not recover from "prompt is too long", the edit is no
longer added (:mod:`gateway.window`).

Logging (logger ``ctxpatch.gateway``): one line per request at INFO, headers at DEBUG through
:func:`gateway.redact.redacted`; credentials are never logged (:mod:`gateway.logs` scrubs
aiohttp's own lines too).

The clock (:func:`monotonic_ms`): read once per request and handed to the clearing policy, whose
expiry move (:mod:`gateway.policy`) tells a request that comes after the prompt cache's lifetime.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_writer import StreamWriter
from multidict import CIMultiDict
from yarl import URL

from ctxpatch.errors import GatewayFailure, UsageError
from engine.api.context_management import ClearToolUses
from engine.twins.context_clear import knobs_from_env
from gateway import guard, limits, phases, reply_prompt, window
from gateway.network import Route, route, shown, upstream_url
from gateway.policy import Fitter, Knobs
from gateway.redact import redacted
from gateway.rewrite import Decision, decide, refused_model
from usage import ledger as usage_ledger

log = logging.getLogger("ctxpatch.gateway")

HOST = "127.0.0.1"
# the request's phases (gateway.phases), only when CTXPATCH_GATEWAY_PHASES=1
_LAPS = web.RequestKey("ctxpatch.laps", phases.Laps)
DEFAULT_UPSTREAM = "https://api.anthropic.com"
UPSTREAM_ENV = "CTXPATCH_UPSTREAM"
MAX_BODY = limits.MAX_BODY
CONNECT_ATTEMPTS, CONNECT_PAUSE = 2, 1.0  # an upstream that cannot be connected to
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "expect",  # answered here (aiohttp sends the 100 Continue): the upstream gets the body
    }
)


def upstream_from_env(env: Mapping[str, str]) -> str:
    """Where requests go: ``CTXPATCH_UPSTREAM`` (set by ``ctxpatch run`` to the user's own
    ``ANTHROPIC_BASE_URL``), else ``ANTHROPIC_BASE_URL``, else the Anthropic API."""
    return _upstream_and_source(env)[0]


def _upstream_and_source(env: Mapping[str, str]) -> tuple[str, str]:
    for name in (UPSTREAM_ENV, "ANTHROPIC_BASE_URL"):
        value = (env.get(name) or "").strip()
        if value:
            # ctxpatch run hands the user's ANTHROPIC_BASE_URL over as CTXPATCH_UPSTREAM
            return value.rstrip("/"), "ANTHROPIC_BASE_URL"
    return DEFAULT_UPSTREAM, "the default upstream"


def error_json(message: str, kind: str = "api_error") -> bytes:
    """An API-style error body (what the Anthropic SDKs parse)."""
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def error_response(
    status: int, message: str, kind: str = "api_error", close: bool = False
) -> web.Response:
    resp = web.Response(
        status=status, body=error_json(message, kind), content_type="application/json"
    )
    if close:
        resp.force_close()
    return resp


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        import ctypes

        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def release_memory() -> None:
    """Give the pages a large body used back to the system (glibc keeps freed heap pages
    otherwise: 32 MB of 64 KB pieces stayed resident after one refused body)."""
    if _TRIM is not None:
        _TRIM(0)


class _BodyRefused(Exception):
    """The client's body was not read whole (too large, or it stopped arriving)."""

    def __init__(self, response: web.Response | None) -> None:
        self.response = response


def _too_large() -> _BodyRefused:
    """The API's own 413 (built only when a body is refused, not for every request)."""
    return _BodyRefused(
        error_response(
            413,
            f"ctxpatch gateway: the request body is over {MAX_BODY // (1024 * 1024)} MiB, the "
            "API's own limit for a request (it would answer 413 too)",
            "request_too_large",
            close=True,
        )
    )


async def read_body(request: web.Request) -> bytes:
    """The client's body, within :data:`gateway.limits.MAX_BODY` and the body timeout: refused
    by its ``Content-Length`` before a byte is read; a chunked one read in pieces and dropped at
    the limit (never one buffer grown to the limit and kept)."""
    length = request.content_length
    if length is not None and length > MAX_BODY:
        raise _too_large()
    if length == 0 or not request.body_exists:
        return b""
    pieces: list[bytes] = []
    size = 0
    while True:
        try:
            async with asyncio.timeout(limits.BODY_TIMEOUT):
                piece = await request.content.readany()
        except TimeoutError:
            raise _BodyRefused(None) from None
        if not piece:
            break
        size += len(piece)
        if size > MAX_BODY:
            pieces.clear()
            release_memory()
            raise _too_large()
        pieces.append(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)  # Linux: counts the machine's sleep too


def monotonic_ms() -> int:
    """The gateway's clock, in milliseconds: monotonic (a change of the wall clock never fakes
    an expiry of the prompt cache), and on Linux counting the time the machine slept
    (``CLOCK_BOOTTIME``: a laptop closed for an hour finds the cache expired). Where a sleep
    does not count, the expiry move is only missed, never made wrongly."""
    if _BOOTTIME is not None:
        return time.clock_gettime_ns(_BOOTTIME) // 1_000_000
    return time.monotonic_ns() // 1_000_000


@dataclass
class GatewayState:
    """What the gateway knows across requests."""

    upstream: str
    edit: ClearToolUses | None
    fitter: Fitter | None = None  # the clearing policy (gateway.policy); None: the plain edit
    refused: set[str] = field(default_factory=set)
    added: int = 0
    forwarded: int = 0
    refused_requests: int = 0  # browser, loop, too large
    id: str = field(default_factory=lambda: secrets.token_hex(6))


def _forward_headers(headers: Mapping[str, str] | CIMultiDict[str]) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name.lower() not in HOP_BY_HOP:
            out.add(name, value)
    return out


URLS_KEPT = 64  # upstream URLs kept by path and query (cleared when full: bounded)

# a body part at least this large is sent on its own, not joined with the request's headers
SEPARATE_HEADERS = 64 * 1024


class Pieces(aiohttp.payload.Payload):
    """A request body sent as consecutive pieces (views of the client's body and the new value)
    without first joining them: no copy of 600 KB into a fresh buffer per request.

    aiohttp joins the request's headers with the first piece written into one new buffer
    (``transport.writelines`` is not used before Python 3.12.9): before a first piece of
    :data:`SEPARATE_HEADERS` or more the headers are sent alone, so the body is never copied
    in user space on its way out (measured: ~50 µs per 730 KB body saved, one more ``send``).
    The pieces are handed to the transport one after the other and drained once, after the
    last: the small ones after the first queue behind its unsent rest and leave with it, not
    each in its own ``send`` (and TCP segment) once the first has drained."""

    def __init__(self, parts: tuple[bytes | memoryview, ...]) -> None:
        super().__init__(parts, content_type=None)
        self._parts = parts
        self._total = self._size = sum(len(p) for p in parts)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return b"".join(self._parts).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        left = self._total if content_length is None else content_length
        if self._parts and len(self._parts[0]) >= SEPARATE_HEADERS:
            writer.send_headers()
        queue = isinstance(writer, StreamWriter)  # aiohttp's own: write(drain=False) queues
        last = len(self._parts) - 1
        for i, part in enumerate(self._parts):
            if left <= 0:
                break
            if queue and i < last and left > len(part):
                await writer.write(part, drain=False)  # type: ignore[call-arg]
            else:
                await writer.write(part[:left])
            left -= len(part)


class Gateway:
    """The aiohttp application; ``await start()`` binds 127.0.0.1:port (0 = a free port)."""

    def __init__(
        self,
        upstream: str | None = None,
        edit: ClearToolUses | str | None = "env",
        port: int = 0,
        env: Mapping[str, str] | None = None,
        ledger: usage_ledger.Ledger | str | None = "env",
        policy: Knobs | str | None = "env",
        clock: Callable[[], int] | None = None,
    ) -> None:
        """``policy``: the clearing policy's knobs (``"env"``: ``CLAUDE_CTX_CLEAR_POLICY`` and
        its knobs, as the injected JavaScript reads them; None: the plain edit on every
        request). ``clock``: milliseconds, read once per request for the policy's expiry move
        (None: :func:`monotonic_ms`; tests give their own)."""
        env = os.environ if env is None else env
        # usage.ledger: one line of numbers per /v1/messages request (CTXPATCH_LEDGER=0: none)
        self.ledger = usage_ledger.default_ledger() if isinstance(ledger, str) else ledger
        source = "--upstream"
        if not upstream:
            upstream, source = _upstream_and_source(env)
        self.state = GatewayState(
            upstream=upstream.rstrip("/"),
            edit=knobs_from_env(env) if edit == "env" else edit,  # type: ignore[arg-type]
        )
        knobs = Knobs.from_env(env) if policy == "env" else policy
        if isinstance(knobs, Knobs):
            self.state.fitter = Fitter(knobs)
        self.source = source  # what named the upstream (the loop refusal says which to change)
        parsed = URL(self.state.upstream)
        self._base = str(parsed.with_user(None)).rstrip("/")  # credentials go in a header
        self._basic: str | None = None
        if parsed.user is not None:
            if ":" in parsed.user:  # Basic auth cannot carry it (RFC 7617)
                raise UsageError(
                    "the upstream URL's user name holds a ':' (written %3A)",
                    why="HTTP Basic authentication cannot carry one in the user name (RFC 7617)",
                    hint="put the user name without ':' in the URL, or leave the credentials out"
                    " and let the client send its own Authorization header",
                )
            self._basic = aiohttp.encode_basic_auth(parsed.user, parsed.password or "")
        self._env = env
        self._claude_env = window.claude_env(env)  # what Claude Code's thresholds read of it
        self.clock = monotonic_ms if clock is None else clock
        # where the time goes, per request (gateway.phases): off unless CTXPATCH_GATEWAY_PHASES=1
        self.phases = phases.Phases() if phases.enabled(env) else None
        self._route: Route | None = None
        self._urls: dict[str, URL] = {}  # raw path and query -> upstream URL (_upstream_url)
        self._mark_hops = False
        self._port = port
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    async def start(self) -> None:
        self._route = route(self.state.upstream, self._env)  # a refused proxy stops us here
        self._mark_hops = guard.on_this_machine(self.state.upstream, self._route.proxy)
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._session = aiohttp.ClientSession(
            auto_decompress=False,  # bytes pass through with their Content-Encoding
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            connector=aiohttp.TCPConnector(limit=0, ssl=self._route.tls),
            trust_env=False,  # gateway.network reads the proxy variables as Claude Code does
            # a gateway keeps no cookies: the client's own Cookie header passes as sent, and a
            # Set-Cookie from the upstream goes back to the client, never into later requests
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        )
        self._runner = web.AppRunner(
            app,
            handler_cancellation=True,
            auto_decompress=False,
            access_log=None,
            keepalive_timeout=limits.IDLE_TIMEOUT,
            max_headers=limits.MAX_HEADERS,
            max_field_size=limits.MAX_FIELD_SIZE,
            max_line_size=limits.MAX_LINE_SIZE,
            lingering_time=limits.LINGER,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, self._port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await self.stop()
            raise GatewayFailure(
                f"cannot listen on {HOST}:{self._port}",
                why=exc.strerror or str(exc),
                hint="pick another --port (or 0 for a free one)",
            ) from exc
        self.port = int(self._runner.addresses[0][1])  # the real port when 0 was asked
        targets = [("upstream", self.state.upstream)]
        if self._route.proxy:
            targets.append(("proxy", self._route.proxy))
        for what, url in targets:
            looped: bool = await asyncio.to_thread(guard.loop_at_start, url, self.port)
            if looped:
                await self.stop()
                raise GatewayFailure(
                    f"the {what} {shown(url)} is this gateway's own address ({self.url})",
                    why=f"every request would be forwarded to the gateway itself (the {what} "
                    f"comes from {self.source if what == 'upstream' else 'HTTPS_PROXY'})",
                    hint="unset ANTHROPIC_BASE_URL (or point it at the real API) before "
                    "starting the gateway, or give --upstream https://api.anthropic.com",
                )
        log.info(
            "listening on %s, upstream %s%s",
            self.url,
            shown(self.state.upstream),
            f" through the proxy {shown(self._route.proxy)}" if self._route.proxy else "",
        )
        if self.state.edit is None:
            log.info("CLAUDE_CTX_CLEAR_DISABLE is set: every request is forwarded untouched")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self.ledger is not None:
            self.ledger.flush()

    # --- one request -------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.phases is not None:
            request[_LAPS] = self.phases.start()
        why = guard.browser_refusal(request.headers, self.port)
        if why is not None:
            self.state.refused_requests += 1
            log.warning("%s %s -> 403, %s", request.method, request.path, why)
            return error_response(403, why, "permission_error", close=True)
        if self.state.id in guard.hops(request.headers):
            self.state.refused_requests += 1
            why = guard.loop_message(self.source, shown(self.state.upstream))
            log.warning("%s %s -> 508, %s", request.method, request.path, why)
            return error_response(508, why, close=True)
        self._lap(request, "guard")
        try:
            body = await read_body(request)
        except _BodyRefused as refused:
            self.state.refused_requests += 1
            log.warning(
                "%s %s: body refused (over the limit, or stalled)", request.method, request.path
            )
            if refused.response is None and request.transport is not None:
                request.transport.close()
            return refused.response or error_response(408, "request body timeout", close=True)
        size = len(body)
        self._lap(request, "body")
        try:
            return await self._relay(request, body)
        finally:
            del body
            if size > limits.TRIM_AFTER:
                release_memory()

    async def _relay(self, request: web.Request, body: bytes) -> web.StreamResponse:
        headers = _forward_headers(request.headers)
        if self._mark_hops:
            hop = headers.pop(guard.HOP_HEADER, None)
            headers[guard.HOP_HEADER] = guard.with_hop(hop, self.state.id)
        betas = request.headers.getall("anthropic-beta", [])
        decision = decide(
            request.method,
            request.path,
            betas,
            body,
            self.state.edit,
            self.state.refused,
            self.state.fitter,
            self.clock(),
            self._near_threshold(request.headers.get("User-Agent", "")),
        )
        if decision.added and window.stop_clearing(
            request.headers.get("User-Agent", ""), decision.model, betas, len(body), self._env
        ):
            decision = Decision(model=decision.model, reason=window.STOPPED)
        self._lap(request, "decide")
        if log.isEnabledFor(logging.DEBUG):  # redacted() walks every header: only when shown
            log.debug("%s %s headers %s", request.method, request.path, redacted(headers.items()))
        rec = None  # the request's ledger record (usage.ledger), handed down
        if self.ledger is not None and decision.reason != "not POST /v1/messages":
            rec = usage_ledger.begin(
                request.headers, body, decision.model, decision.added, decision.reason
            )
        url = self._upstream_url(request.rel_url.raw_path_qs)
        if self._basic is not None and "Authorization" not in headers:
            headers["Authorization"] = self._basic  # user:pass@ in the upstream URL
        self._lap(request, "prepare")
        if not decision.added:
            return await self._forward(request, url, headers, body, decision, rec=rec)
        sent_headers = headers
        if decision.beta is not None:
            sent_headers = CIMultiDict(headers)
            sent_headers.popall("anthropic-beta", None)
            sent_headers["anthropic-beta"] = decision.beta
        assert decision.parts is not None
        return await self._forward(
            request,
            url,
            sent_headers,
            Pieces(decision.parts),
            decision,
            original=(headers, body),
            rec=rec,
        )

    async def _forward(
        self,
        request: web.Request,
        url: URL,
        headers: CIMultiDict[str],
        body: bytes | Pieces,
        decision: Decision,
        original: tuple[CIMultiDict[str], bytes] | None = None,
        rec: usage_ledger.RequestRecord | None = None,
    ) -> web.StreamResponse:
        assert self._session is not None and self._route is not None
        self.state.forwarded += 1
        if isinstance(body, bytes) and len(body) >= SEPARATE_HEADERS:
            body = Pieces((body,))  # not copied into one buffer with the headers
        for attempt in range(CONNECT_ATTEMPTS):
            try:
                up = await self._session.request(
                    request.method,
                    url,
                    headers=headers,
                    data=body if body or request.body_exists else None,  # GET stays bodiless
                    allow_redirects=False,
                    proxy=self._route.proxy,
                )
                self._lap(request, "upstream")
                break
            except aiohttp.ClientConnectorError as exc:
                # nothing was sent: one more try after a pause rides out a blip
                if attempt + 1 == CONNECT_ATTEMPTS:
                    return self._unreachable(request, exc, decision, rec)
                await asyncio.sleep(CONNECT_PAUSE)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                return self._unreachable(request, exc, decision, rec)
        try:
            if original is not None and up.status == 400:
                payload = await up.read()
                model = refused_model(up.status, payload)
                if model is None:
                    return self._buffered(up, payload, decision, request, rec=rec)
                self.state.refused.add(model)
                if decision.model:
                    self.state.refused.add(decision.model)  # the alias the client sends
                log.warning(
                    "the API refused clear_tool_uses_20250919 for %s: no longer added for it "
                    "(until the gateway restarts); the request is sent again unchanged",
                    model,
                )
                again = Decision(model=model, reason="refused by the API, sent again unchanged")
                return await self._forward(request, url, original[0], original[1], again, rec=rec)
            if original is not None:
                self.state.added += 1
            return await self._stream(request, up, decision, rec)
        finally:
            up.close()  # a reply read to its end was already released; otherwise: disconnect

    def _unreachable(
        self,
        request: web.Request,
        exc: BaseException,
        decision: Decision,
        rec: usage_ledger.RequestRecord | None = None,
    ) -> web.Response:
        """The 502 for an upstream that could not be reached or did not answer HTTP."""
        self._record(rec, 502, decision, why="upstream unreachable", lost=True)
        what = _failure(exc)
        where = shown(self.state.upstream)
        if self._route is not None and self._route.proxy:
            where += f" (through the proxy {shown(self._route.proxy)})"
        log.warning("%s %s -> 502, upstream %s: %s", request.method, request.path, where, what)
        message = f"ctxpatch gateway: the upstream {where} is unreachable: {what}"
        resp = error_response(502, message)
        if isinstance(exc, aiohttp.ClientConnectorError):
            # the request never left this machine (DNS, refused, TLS, proxy): Claude Code's ten
            # retries would only turn it into three minutes of silence (measured on 2.1.330:
            # 11 requests, 184 s; with this header, 1 request, 2 s, the same message shown)
            resp.headers["x-should-retry"] = "false"
        return resp

    def _line(self, request: web.Request, status: int, decision: Decision) -> None:
        what = "clearing added" if decision.added else f"unchanged ({decision.reason})"
        log.info("%s %s -> %d, %s", request.method, request.path, status, what)

    def _buffered(
        self,
        up: aiohttp.ClientResponse,
        payload: bytes,
        decision: Decision,
        request: web.Request,
        log: bool = True,
        rec: usage_ledger.RequestRecord | None = None,
    ) -> web.Response:
        if log:
            self._line(request, up.status, decision)
        if rec is not None:
            reader = rec.tap(up.headers)
            if reader is not None:
                reader.feed(payload)
                rec.close_tap()
            self._record(rec, up.status, decision, up.headers)
        if decision.kept is not None:  # the near move: the prompt this reply reports
            reply_prompt.observe_whole(decision.kept, up.status, up.headers, payload)
        resp = web.Response(status=up.status, reason=up.reason, body=payload)
        for name, value in up.headers.items():
            if name.lower() not in HOP_BY_HOP:
                resp.headers.add(name, value)
        self._lap(request, "reply")  # built; aiohttp sends it once the handler returns
        return resp

    async def _stream(
        self,
        request: web.Request,
        up: aiohttp.ClientResponse,
        decision: Decision,
        rec: usage_ledger.RequestRecord | None = None,
    ) -> web.StreamResponse:
        self._line(request, up.status, decision)
        length = up.headers.get("Content-Length")
        sized = length is not None and "chunked" not in up.headers.get("Transfer-Encoding", "")
        if sized and up.content.total_bytes == int(length or 0):
            # the whole reply came with its headers (a JSON answer): one write, not two
            payload = up.content.read_nowait()
            return self._buffered(up, payload, decision, request, log=False, rec=rec)
        resp = web.StreamResponse(status=up.status, reason=up.reason)
        for name, value in up.headers.items():
            if name.lower() not in HOP_BY_HOP:
                resp.headers.add(name, value)
        if sized:
            resp.content_length = int(length or 0)
        else:
            resp.enable_chunked_encoding()
        await resp.prepare(request)
        reader = rec.tap(up.headers) if rec is not None else None
        tap = reader.feed if reader is not None else None
        # the near move: the prompt this reply reports, read off its first bytes as they pass
        # (before each is sent on: it is the conversation's before the client has the reply)
        told = reply_prompt.reader(decision.kept, up.status, up.headers)
        try:
            async for chunk in up.content.iter_any():
                if tap is not None:
                    tap(chunk)
                if told is not None and told.feed(chunk):
                    told = None
                await resp.write(chunk)
        except (aiohttp.ClientError, OSError) as exc:
            # the upstream broke off mid-reply: the status is sent, so the client sees the
            # connection end early (a truncated stream), never a hang
            log.warning(
                "%s %s: upstream broke off mid-reply (%s)", request.method, request.path, exc
            )
            if request.transport is not None:
                request.transport.close()
            self._record(rec, up.status, decision, up.headers, cut=True)
            return resp
        if told is not None:
            told.close()
        await resp.write_eof()
        if rec is not None:
            rec.close_tap()
            self._record(rec, up.status, decision, up.headers)
        self._lap(request, "reply")
        return resp

    def _near_threshold(self, user_agent: str) -> Callable[[str, Collection[str]], int | None]:
        """This client's auto-compact threshold for a model and betas, the near move's
        (:func:`gateway.window.near_threshold`, under the gateway's environment)."""
        env = self._claude_env
        return lambda model, betas: window.near_threshold(user_agent, model, betas, env)

    def _upstream_url(self, raw_path_qs: str) -> URL:
        """Where the request goes (:func:`gateway.network.upstream_url`), kept per path and
        query: a client sends the same few (``/v1/messages?beta=true``) again and again."""
        url = self._urls.get(raw_path_qs)
        if url is None:
            # encoded: the path as sent, no second normalisation of it
            url = URL(upstream_url(self._base, raw_path_qs), encoded=True)
            if len(self._urls) >= URLS_KEPT:
                self._urls.clear()
            self._urls[raw_path_qs] = url
        return url

    def _lap(self, request: web.Request, name: str) -> None:
        """End the request's phase ``name`` (gateway.phases); nothing but a test when off."""
        if self.phases is not None:
            request[_LAPS].lap(name)

    def _record(
        self,
        rec: usage_ledger.RequestRecord | None,
        status: int,
        decision: Decision,
        headers: Mapping[str, str] | None = None,
        why: str = "",
        cut: bool = False,
        lost: bool = False,
    ) -> None:
        """The request's ledger line (usage.ledger): kept, never blocking nor raising."""
        if rec is None or self.ledger is None:
            return
        try:
            reason = why or decision.reason
            usage_ledger.finish(rec, status, decision.added and not lost, reason, headers, cut)
            self.ledger.record(rec)
        except Exception:  # the ledger never fails a request
            self.ledger.errors += 1


def _failure(exc: BaseException) -> str:
    """What went wrong reaching the upstream, in words (never the URL's credentials)."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"DNS lookup of {exc.host} failed ({exc.os_error.strerror or exc.os_error})"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return (
            f"TLS certificate not trusted ({exc.certificate_error}); a corporate CA goes in "
            "NODE_EXTRA_CA_CERTS"
        )
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return f"cannot connect to the proxy {exc.host}:{exc.port} ({exc.os_error.strerror})"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {exc.host}:{exc.port} ({exc.os_error.strerror or exc.os_error})"
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return f"the proxy answered {exc.status} {exc.message}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the connection closed before a reply"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"the reply is not valid HTTP ({exc.message})"
    if isinstance(exc, TimeoutError):
        return "no connection within 30 s"
    from gateway.logs import scrub

    return scrub(f"{type(exc).__name__}: {exc}")


UVLOOP_ENV = "CTXPATCH_GATEWAY_UVLOOP"


def new_event_loop(env: Mapping[str, str] | None = None) -> asyncio.AbstractEventLoop:
    """The event loop a gateway runs on (``ctxpatch gateway``, :class:`ThreadedGateway`):
    uvloop's when it is installed (the ``fast`` extra) and ``CTXPATCH_GATEWAY_UVLOOP`` is not
    ``0``, else asyncio's own. Measured with bench/bench_gateway.py's series (4 rounds x 200
    requests, both in turn, load 14-15 on 2 cores): the gateway's CPU time per request 2.43 ->
    1.95 ms, the floor relay's 1.58 -> 1.32 ms; its transports and loop are C (libuv), where
    asyncio's selector loop runs Python for every read, write and wake-up."""
    env = os.environ if env is None else env
    if env.get(UVLOOP_ENV, "").strip() != "0":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class ThreadedGateway:
    """A :class:`Gateway` on its own event loop in a daemon thread (``ctxpatch run``, tests).

    ``with ThreadedGateway(upstream=...) as gw: ... gw.url ...``; stopped on exit."""

    def __init__(self, **kwargs: object) -> None:
        self.gateway = Gateway(**kwargs)  # type: ignore[arg-type]
        self._loop = new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="ctxpatch-gateway"
        )

    @property
    def url(self) -> str:
        return self.gateway.url

    def start(self) -> ThreadedGateway:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.gateway.start(), self._loop).result(timeout=30)
        except BaseException:
            self.stop()  # no loop thread left behind by a gateway that did not start
            raise
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.gateway.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> ThreadedGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def serve_until_signal(gateway: Gateway, started: Callable[[str], None]) -> int:
    """``ctxpatch gateway``: serve until SIGINT or SIGTERM, then stop cleanly; exit code 0."""
    import signal

    await gateway.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started(gateway.url)  # after the handlers: a Ctrl-C as soon as the URL shows stops cleanly
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await gateway.stop()
    log.info("stopped after %d requests", gateway.state.forwarded)
    return 0


def validate_upstream(url: str) -> str:
    """``url`` without its trailing ``/`` if it is an http(s) URL with a host, else a usage error."""
    from yarl import URL

    try:
        parsed = URL(url.strip())
    except ValueError:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise UsageError(
            f"not an upstream URL: {url!r}",
            why="the upstream must be an http:// or https:// URL with a host",
            hint="e.g. --upstream https://api.anthropic.com",
        )
    return url.strip().rstrip("/")
