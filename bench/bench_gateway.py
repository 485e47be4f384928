"""Gateway bench: every bar of issue #9's "Done when" for ``ctxpatch gateway``, with a verdict each.

1. added latency per request, p50 <= 1 ms (issue #15; #9 asked 2) and p99 <= 10 ms, on a
   ~150K-token request (≈600 KB of JSON, Claude Code's key order: model, messages, system,
   tools, ..., context_management): the requests of a growing conversation (``--grow`` of them,
   each a tool round more than the previous, the last block marked for the cache; ``--grow 1``:
   the same body every time) in turn, N times straight to a loopback upstream, N times through
   the gateway (which adds the clearing edit its policy fits to the messages, ``--policy``) and
   N times through the floor relay (a minimal aiohttp server + client relay, no decision:
   what a second loopback hop through aiohttp costs by itself, ``bench/gateway_floor.py``),
   interleaved, in the same run; ``--runs`` repeats it and the verdict is on the median of the
   runs (the spread is printed). On a loaded machine every path slows: the gateway's added
   time is also printed against the floor relay's measured in the same run (added - floor) and
   against the direct path's time (added / direct);
2. first streamed byte not delayed: time to the first SSE byte, direct vs through the gateway
   (same bar as 1), and the stream is not buffered (the first byte arrives long before the
   upstream sends its last event);
3. 100 concurrent streams without loss: every byte of every stream arrives (sha256 of each);
4. a client disconnect mid-stream closes the upstream: the upstream sees its connection closed
   within 500 ms of the client hanging up;
5. a killed upstream gives the client a clean error: SIGKILL mid-stream ends the client's
   stream (a truncated reply, not a hang), and the next request gets a 502 API-style JSON error.

The upstream (a small aiohttp app), the gateway and the floor relay each run in their own
process, so none shares a GIL; the gateway and the relay run on the event loop ``ctxpatch
gateway`` runs on (``gateway.server.new_event_loop``: uvloop when the ``fast`` extra is
installed; ``CTXPATCH_GATEWAY_UVLOOP=0``: asyncio's). The gateway's and the relay's CPU time
per request are printed too: on a loaded machine they are steadier than wall-clock latency.
``--phases``: the gateway runs with ``CTXPATCH_GATEWAY_PHASES=1`` (:mod:`gateway.phases`) and
the median wall and CPU time of each phase of its requests is printed. The gateway's ledger
goes to a scratch ``XDG_STATE_HOME``, removed at the end (never the user's own).

    python3 bench/bench_gateway.py [--runs 5] [--n 200] [--kb 600] [--streams 100] [--grow 20]
                                   [--policy env|plain] [--phases]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

P50_BAR, P99_BAR = 2.0, 10.0  # ms, issue #9
ADDED_BAR = 1.0  # ms, issue #15: the added latency's p50
CLOSE_BAR = 500.0  # ms: the upstream must see a client's hang-up this fast
SSE_EVENTS, SSE_GAP = 20, 0.001  # the first-byte stream: 20 events 1 ms apart


def make_body(kb: int) -> bytes:
    """A Messages API request of about ``kb`` KB (≈4 bytes per token) in Claude Code's key order."""
    return make_bodies(kb, 1)[0]


def make_bodies(kb: int, grow: int) -> list[bytes]:
    """``grow`` requests of one conversation, the first of about ``kb`` KB: each the previous
    one and a tool round more, the last block marked for the cache as Claude Code marks it
    (so the clearing policy's walk resumes from the previous request's, as in a session)."""
    messages: list[dict] = [{"role": "user", "content": "Fix the failing tests."}]
    i = 0
    base = None  # messages of the first request (about kb KB)
    while base is None or len(messages) < base + 2 * (grow - 1):
        if base is None and len(json.dumps(messages)) >= kb * 1024:
            base = len(messages)
            continue
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Look at the file.", "signature": "s" * 200},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i:04d}",
                        "name": "Read",
                        "input": {"file_path": f"/repo/src/module_{i}.py"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i:04d}",
                        # control characters (ANSI colours) and non-ASCII text, as real tool
                        # output has: JSON.stringify writes them as \u001b escapes
                        "content": "\n".join(
                            f"{n:>5}  line {n} of module {i} = value \x1b[32m✓\x1b[0m"
                            for n in range(120)
                        ),
                    }
                ],
            }
        )
        i += 1
    body = {
        "model": "claude-opus-4-6",
        "messages": messages,
        "system": [{"type": "text", "text": "You are Claude Code. " * 200}],
        "tools": [
            {
                "name": f"Tool{t}",
                "description": "does things " * 20,
                "input_schema": {"type": "object"},
            }
            for t in range(30)
        ],
        "metadata": {"user_id": "user_0123456789abcdef"},
        "max_tokens": 32000,
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "stream": True,
    }
    out = []
    assert base is not None
    for cut in range(base, len(messages) + 1, 2):
        last = messages[cut - 1]
        marked = {
            **last,
            "content": [
                *last["content"][:-1],
                {**last["content"][-1], "cache_control": {"type": "ephemeral"}},
            ],
        }
        body["messages"] = [*messages[: cut - 1], marked]
        out.append(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())
    return out


def event(stream: int, i: int, size: int) -> bytes:
    """Event ``i`` of stream ``stream``: deterministic, so the client knows what must arrive."""
    seed = hashlib.sha256(f"{stream}:{i}".encode()).hexdigest()
    data = (seed * (size // 64 + 1))[:size]
    return f'event: content_block_delta\ndata: {{"s":{stream},"i":{i},"d":"{data}"}}\n\n'.encode()


def expected_digest(stream: int, events: int, size: int) -> str:
    return hashlib.sha256(b"".join(event(stream, i, size) for i in range(events))).hexdigest()


# --- the processes ----------------------------------------------------------------------------


def run_upstream(port_q: mp.Queue, closed_q: mp.Queue) -> None:
    """POST /v1/messages: a JSON reply, or (``?events=E``) an SSE stream of E events ``gap`` ms
    apart; when its client goes away mid-stream it reports (stream, time) on ``closed_q``."""

    async def messages(request: web.Request) -> web.StreamResponse:
        await request.read()
        q = request.query
        if "events" not in q:
            return web.json_response({"type": "message", "content": [], "usage": {}})
        stream, events = int(q.get("id", 0)), int(q["events"])
        size, gap = int(q.get("size", 16)), float(q.get("gap", 0)) / 1000
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        done = False
        try:
            for i in range(events):
                await resp.write(event(stream, i, size))
                if gap:
                    await asyncio.sleep(gap)
            await resp.write_eof()
            done = True
        finally:
            if not done:
                closed_q.put((stream, time.perf_counter()))
        return resp

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", messages)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_q.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


@contextlib.contextmanager
def scratch_state() -> Iterator[str]:
    """``XDG_STATE_HOME`` set to a scratch directory while a bench runs (the ledger of the
    gateways it starts goes there, never into the user's own), removed afterwards."""
    saved = os.environ.get("XDG_STATE_HOME")
    with tempfile.TemporaryDirectory(prefix="ctxpatch-bench-state-") as d:
        os.environ["XDG_STATE_HOME"] = d
        try:
            yield d
        finally:
            if saved is None:
                os.environ.pop("XDG_STATE_HOME", None)
            else:
                os.environ["XDG_STATE_HOME"] = saved


def _answer(ctl: mp.Queue, cpu_q: mp.Queue, phases: object = None) -> None:
    """Answer each message on ``ctl``: ``"phases"`` with the gateway's phase summary, anything
    else with this process's CPU time (None stops)."""

    def loop() -> None:
        while (msg := ctl.get()) is not None:
            if msg == "phases":
                summary = {} if phases is None else phases.summary()  # type: ignore[attr-defined]
                cpu_q.put(summary)
            elif msg == "clear":
                if phases is not None:
                    phases.clear()  # type: ignore[attr-defined]
                cpu_q.put(None)
            else:
                cpu_q.put(time.process_time())

    threading.Thread(target=loop, daemon=True).start()


def run_gateway(
    upstream: str, port_q: mp.Queue, ctl: mp.Queue, cpu_q: mp.Queue, policy: str = "env"
) -> None:
    """The real gateway; each message on ``ctl`` is answered with this process's CPU time (or
    its phases, :func:`_answer`)."""
    import logging

    from engine.api.context_management import ClearToolUses
    from gateway.server import Gateway

    logging.getLogger("ctxpatch.gateway").setLevel(logging.ERROR)  # the kill's warnings: expected

    async def main() -> None:
        # policy "env": the clearing policy of CLAUDE_CTX_CLEAR_POLICY (paid by default);
        # "plain": the edit as it is on every request (the gateway before the policy)
        gw = Gateway(
            upstream=upstream, edit=ClearToolUses(), policy="env" if policy == "env" else None
        )
        _answer(ctl, cpu_q, getattr(gw, "phases", None))  # None: a gateway before them
        await gw.start()
        port_q.put(gw.port)
        await asyncio.Event().wait()

    _run_on_gateway_loop(main())


def run_aiohttp_relay(
    upstream: str, port_q: mp.Queue, ctl: mp.Queue, cpu_q: mp.Queue, policy: str = ""
) -> None:
    """The floor relay: a minimal aiohttp server + client relay (no guard, no decision, no
    ledger, no header filtering): what a second loopback hop through aiohttp costs by itself.
    It reads and sends the body as the gateway does (``gateway.server.read_body``: the pieces
    joined once; ``gateway.server.Pieces``: the headers sent apart from a large body), which
    costs less than ``request.read()`` (a bytearray grown, then copied) and a bytes payload
    (joined with the headers): the floor is the least an aiohttp relay does, so the gateway's
    time over it is what its own decisions and bookkeeping add."""
    from gateway.server import Pieces, read_body

    _answer(ctl, cpu_q)

    async def main() -> None:
        session = aiohttp.ClientSession(auto_decompress=False)

        async def handle(request: web.Request) -> web.StreamResponse:
            body = await read_body(request)
            headers = {"content-type": "application/json"}
            url = upstream + request.path_qs
            data = Pieces((body,))
            async with session.request(request.method, url, data=data, headers=headers) as up:
                return await relay_reply(request, up)

        await serve(handle, port_q)

    _run_on_gateway_loop(main())


async def relay_reply(request: web.Request, up: aiohttp.ClientResponse) -> web.StreamResponse:
    """An aiohttp relay's reply: a ``Content-Length`` one read whole, any other streamed on."""
    if up.headers.get("Content-Length"):
        return web.Response(status=up.status, body=await up.read())
    resp = web.StreamResponse(status=up.status)
    await resp.prepare(request)
    async for chunk in up.content.iter_any():
        await resp.write(chunk)
    await resp.write_eof()
    return resp


async def serve(handle: Any, port_q: mp.Queue, path: str = "") -> None:
    """Serve ``handle`` on a loopback port (every method and path, or POST ``path``), put the
    port on ``port_q``, and run until the process ends."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    if path:
        app.router.add_post(path, handle)
    else:
        app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port_q.put(runner.addresses[0][1])
    await asyncio.Event().wait()


def loop_kind() -> str:
    """The event loop the gateway and the floor relay run on (gateway.server.new_event_loop)."""
    try:
        from gateway.server import new_event_loop
    except ImportError:  # a gateway before it: asyncio's
        return "asyncio"
    loop = new_event_loop()
    loop.close()
    return type(loop).__module__.split(".")[0]


def _run_on_gateway_loop(coro: Any) -> None:
    """``coro`` on the loop ``ctxpatch gateway`` runs on (uvloop when installed, unless
    CTXPATCH_GATEWAY_UVLOOP=0): the gateway and the floor relay alike."""
    try:
        from gateway.server import new_event_loop
    except ImportError:  # a gateway before it: asyncio's
        asyncio.run(coro)
        return
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(coro)


class Relay:
    """A relay process (the gateway, or the floor relay) in front of ``upstream``."""

    def __init__(self, target: object, upstream: str, policy: str) -> None:
        q: mp.Queue = mp.Queue()
        self.ctl: mp.Queue = mp.Queue()
        self.answers: mp.Queue = mp.Queue()
        self.proc = mp.Process(
            target=target, args=(upstream, q, self.ctl, self.answers, policy), daemon=True
        )
        self.proc.start()
        self.url = f"http://127.0.0.1:{q.get(timeout=30)}"

    def ask(self, what: object = 1) -> object:
        self.ctl.put(what)
        return self.answers.get(timeout=30)

    def cpu(self) -> float:
        return float(self.ask())  # type: ignore[arg-type]


class Procs:
    """An upstream and a gateway in front of it (and, with ``floor``, the floor relay beside
    it), each in its own process."""

    def __init__(self, policy: str = "env", floor: bool = False) -> None:
        self.closed: mp.Queue = mp.Queue()
        q: mp.Queue = mp.Queue()
        self.up = mp.Process(target=run_upstream, args=(q, self.closed), daemon=True)
        self.up.start()
        self.direct = f"http://127.0.0.1:{q.get(timeout=30)}"
        self.gateway = Relay(run_gateway, self.direct, policy)
        self.gw, self.via = self.gateway.proc, self.gateway.url
        self.floor = Relay(run_aiohttp_relay, self.direct, "") if floor else None
        self.phases: list[dict[str, dict[str, float]]] = []  # per latency run (--phases)

    def gateway_cpu(self) -> float:
        return self.gateway.cpu()

    def stop(self) -> None:
        procs = [self.gw, self.up] if self.floor is None else [self.gw, self.floor.proc, self.up]
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join(10)


# --- 1 + 2: latency and first byte ------------------------------------------------------------

HEADERS = {
    "content-type": "application/json",
    "x-api-key": "bench",
    "anthropic-version": "2023-06-01",
}


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def latency_run(procs: Procs, bodies: list[bytes], n: int) -> dict[str, float]:
    """One run: n requests of each kind, interleaved, through the bodies in turn; ms. With the
    floor relay (``procs.floor``) its requests are interleaved too, and its added time and
    CPU are in the result (``floor_*``)."""
    keys = ("direct", "gateway", "floor", "ttfb_d", "ttfb_g")
    out: dict[str, list[float]] = {k: [] for k in keys}
    sse = f"/v1/messages?events={SSE_EVENTS}&gap={SSE_GAP * 1000}"
    floor = procs.floor
    ways = 2 if floor is None else 3  # requests per body: direct, gateway (, floor)
    async with aiohttp.ClientSession() as s:
        turn = [0]

        async def once(base: str, path: str, first_byte: bool, per: int = ways) -> float:
            body = bodies[turn[0] // per % len(bodies)]  # each way: the same body in turn
            turn[0] += 1
            t0 = time.perf_counter()
            async with s.post(base + path, data=body, headers=HEADERS) as r:
                if first_byte:
                    await r.content.readany()
                    t = time.perf_counter() - t0
                    await r.read()
                    return t
                await r.read()
                return time.perf_counter() - t0

        for _ in range(10):  # warm-up: connections, caches
            await once(procs.direct, "/v1/messages", False)
            await once(procs.via, "/v1/messages", False)
            if floor is not None:
                await once(floor.url, "/v1/messages", False)
        if procs.gateway.ask("clear") is not None:  # the phases of this run's requests only
            raise RuntimeError("the gateway process did not answer")
        cpu0 = procs.gateway_cpu()
        fcpu0 = floor.cpu() if floor is not None else 0.0
        for _ in range(n):
            out["direct"].append(await once(procs.direct, "/v1/messages", False))
            out["gateway"].append(await once(procs.via, "/v1/messages", False))
            if floor is not None:
                out["floor"].append(await once(floor.url, "/v1/messages", False))
        cpu = (procs.gateway_cpu() - cpu0) / n
        fcpu = (floor.cpu() - fcpu0) / n if floor is not None else float("nan")
        procs.phases.append(procs.gateway.ask("phases"))  # type: ignore[arg-type]
        turn[0] = 0
        for _ in range(n):
            out["ttfb_d"].append(await once(procs.direct, sse, True, 2))
            out["ttfb_g"].append(await once(procs.via, sse, True, 2))
    ms = 1000.0
    paired = [g - d for g, d in zip(out["gateway"], out["direct"], strict=True)]
    d50, g50 = pct(out["direct"], 50), pct(out["gateway"], 50)
    f50 = pct(out["floor"], 50) if out["floor"] else float("nan")
    return {
        "floor_added_p50": (f50 - d50) * ms,
        "over_floor_p50": (g50 - f50) * ms,  # the gateway's p50 less the floor relay's
        "added_ratio": (g50 - d50) / d50,
        "floor_cpu_ms": fcpu * ms,
        "direct_p50": pct(out["direct"], 50) * ms,
        "gateway_p50": pct(out["gateway"], 50) * ms,
        "added_p50": (pct(out["gateway"], 50) - pct(out["direct"], 50)) * ms,
        "added_p99": (pct(out["gateway"], 99) - pct(out["direct"], 99)) * ms,
        "paired_p50": pct(paired, 50) * ms,
        "paired_p99": pct(paired, 99) * ms,
        "ttfb_added_p50": (pct(out["ttfb_g"], 50) - pct(out["ttfb_d"], 50)) * ms,
        "ttfb_gateway_p50": pct(out["ttfb_g"], 50) * ms,
        "cpu_ms": cpu * ms,
    }


# --- 3: concurrent streams --------------------------------------------------------------------


async def concurrent_streams(procs: Procs, streams: int, events: int, size: int) -> int:
    """How many of ``streams`` simultaneous SSE replies arrived byte for byte."""

    async def one(s: aiohttp.ClientSession, k: int) -> bool:
        path = f"/v1/messages?id={k}&events={events}&size={size}&gap=1"
        async with s.post(procs.via + path, data=b"{}", headers=HEADERS) as r:
            got = hashlib.sha256(await r.read()).hexdigest()
        return r.status == 200 and got == expected_digest(k, events, size)

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as s:
        results = await asyncio.gather(*(one(s, k) for k in range(streams)), return_exceptions=True)
    return sum(r is True for r in results)


# --- 4: client disconnect ---------------------------------------------------------------------


async def disconnect_once(procs: Procs, stream: int) -> float | None:
    """ms from the client's hang-up to the upstream seeing its connection closed (None: never)."""
    path = f"/v1/messages?id={stream}&events=100000&size=16&gap=10"  # 1000 s if never stopped
    async with aiohttp.ClientSession() as s:
        r = await s.post(procs.via + path, data=b"{}", headers=HEADERS)
        await r.content.readuntil(b"\n\n")
        t_close = time.perf_counter()
        r.close()  # the client goes away mid-stream
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            k, t = await asyncio.to_thread(procs.closed.get, True, 0.5)
        except Exception:  # queue.Empty
            continue
        if k == stream:
            return (t - t_close) * 1000
    return None


# --- 5: killed upstream -----------------------------------------------------------------------


async def killed_upstream() -> tuple[str, float, int, dict | None, float]:
    """SIGKILL an upstream mid-stream: (how the client's stream ended, ms after the kill; then
    the status and JSON error of the next request, ms it took)."""
    victim = Procs()
    try:
        async with aiohttp.ClientSession() as s:
            path = "/v1/messages?id=7&events=100000&size=16&gap=10"
            r = await s.post(victim.via + path, data=b"{}", headers=HEADERS)
            await r.content.readuntil(b"\n\n")
            os.kill(victim.up.pid or 0, signal.SIGKILL)
            t_kill = time.perf_counter()
            try:
                await asyncio.wait_for(r.read(), 10)
                ending = "the stream ended as if complete"
            except aiohttp.ClientPayloadError:
                ending = "truncated reply (ClientPayloadError)"
            except TimeoutError:
                ending = "HANG: no end after 10 s"
            ended_ms = (time.perf_counter() - t_kill) * 1000
            r.close()
            t0 = time.perf_counter()
            async with s.post(victim.via + "/v1/messages", data=b"{}", headers=HEADERS) as r2:
                status, text = r2.status, await r2.read()
            next_ms = (time.perf_counter() - t0) * 1000
        try:
            err = json.loads(text)
        except ValueError:
            err = None
        return ending, ended_ms, status, err, next_ms
    finally:
        victim.stop()


# --- main -------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_phases(runs: list[dict[str, dict[str, float]]]) -> None:
    """The gateway's phases (gateway.phases): the median over the runs of each run's median."""
    names = [k for k in (runs[0] if runs else {}) if k != "requests"]
    if not names:
        print("\nno phases recorded (is CTXPATCH_GATEWAY_PHASES read by this gateway?)")
        return
    print(f"\n{'gateway phase':<14}{'wall us':>10}{'CPU us':>10}  (median of the runs' medians)")
    for name in names:
        wall = statistics.median(r[name]["wall_us"] for r in runs if name in r)
        cpu = statistics.median(r[name]["cpu_us"] for r in runs if name in r)
        print(f"{name:<14}{wall:>10.0f}{cpu:>10.0f}")


def spread(runs: list[dict[str, float]], key: str) -> tuple[float, str]:
    values = [r[key] for r in runs]
    med = statistics.median(values)
    return med, f"median {med:.2f} ms (runs: {', '.join(f'{v:.2f}' for v in values)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--runs", type=int, default=5, help="latency runs (the verdict is on the median)"
    )
    ap.add_argument("--n", type=int, default=200, help="requests per series per run")
    ap.add_argument("--kb", type=int, default=600, help="request body size in KB")
    ap.add_argument("--streams", type=int, default=100, help="concurrent streams")
    ap.add_argument(
        "--grow",
        type=int,
        default=20,
        help="requests of one growing conversation sent in turn (1: the same body every time)",
    )
    ap.add_argument(
        "--policy",
        choices=("env", "plain"),
        default="env",
        help="env: the clearing policy (CLAUDE_CTX_CLEAR_POLICY, paid by default); plain: the "
        "edit as it is (the gateway before the policy)",
    )
    ap.add_argument(
        "--phases",
        action="store_true",
        help="print the median wall and CPU time of each phase of the gateway's requests "
        "(CTXPATCH_GATEWAY_PHASES=1, gateway.phases)",
    )
    ap.add_argument(
        "--latency-only", action="store_true", help="bar 1 only (no streams, hang-ups, kill)"
    )
    args = ap.parse_args(argv)
    if args.phases:
        os.environ["CTXPATCH_GATEWAY_PHASES"] = "1"  # the gateway process inherits it
    with scratch_state():
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    bodies = make_bodies(args.kb, args.grow)
    body = bodies[-1]
    load = os.getloadavg()
    print(
        f"request body: {len(body) / 1024:.0f} KB (~{len(body) // 4 // 1000}K tokens), "
        f"{args.runs} runs x {args.n} requests per series, interleaved, through {len(bodies)} "
        f"requests of a growing conversation; policy {args.policy}; gateway and floor relay "
        f"on {loop_kind()}'s loop; {os.cpu_count()} CPUs, load average {load[0]:.2f} "
        f"{load[1]:.2f} {load[2]:.2f}"
    )
    procs = Procs(args.policy, floor=True)
    ok_all = True

    def report(label: str, ok: bool, detail: str) -> None:
        nonlocal ok_all
        ok_all &= ok
        print(f"  [{verdict(ok)}] {label}: {detail}")

    try:
        runs = [asyncio.run(latency_run(procs, bodies, args.n)) for _ in range(args.runs)]
        print(
            f"\n{'run':>4}{'direct p50':>12}{'gw p50':>9}{'added p50':>11}{'added p99':>11}"
            f"{'paired p50':>12}{'paired p99':>12}{'ttfb +p50':>11}{'gw CPU/req':>12}"
        )
        for i, r in enumerate(runs, 1):
            print(
                f"{i:>4}{r['direct_p50']:>12.2f}{r['gateway_p50']:>9.2f}{r['added_p50']:>11.2f}"
                f"{r['added_p99']:>11.2f}{r['paired_p50']:>12.2f}{r['paired_p99']:>12.2f}"
                f"{r['ttfb_added_p50']:>11.2f}{r['cpu_ms']:>12.2f}"
            )
        print(
            "(added = gateway percentile - direct percentile; paired = percentile of the "
            "per-pair differences; ms)"
        )
        print(
            f"\n{'run':>4}{'floor +p50':>12}{'gw - floor':>12}{'added/direct':>14}"
            f"{'floor CPU':>11}{'gw - floor CPU':>16}"
        )
        for i, r in enumerate(runs, 1):
            print(
                f"{i:>4}{r['floor_added_p50']:>12.2f}{r['over_floor_p50']:>12.2f}"
                f"{r['added_ratio']:>14.2f}{r['floor_cpu_ms']:>11.2f}"
                f"{r['cpu_ms'] - r['floor_cpu_ms']:>16.2f}"
            )
        print(
            "(the floor relay, in the same run: a minimal aiohttp server + client relay; "
            "floor +p50 = its p50 - direct p50; gw - floor = the gateway's p50 - the relay's; "
            "added/direct = the gateway's added p50 / the direct p50; CPU per request, ms)"
        )
        if args.phases:
            print_phases(procs.phases)
        print("\nverdicts (issues #9 and #15, gateway bench):")
        p50, p50_text = spread(runs, "added_p50")
        p99, p99_text = spread(runs, "added_p99")
        report(f"added latency p50 <= {ADDED_BAR:g} ms (#15)", p50 <= ADDED_BAR, p50_text)
        report(f"added latency p99 <= {P99_BAR:g} ms", p99 <= P99_BAR, p99_text)
        ttfb, ttfb_text = spread(runs, "ttfb_added_p50")
        stream_ms = SSE_EVENTS * SSE_GAP * 1000
        first = statistics.median(r["ttfb_gateway_p50"] for r in runs)
        report(
            f"first streamed byte not delayed (added p50 <= {P50_BAR:g} ms, not buffered)",
            ttfb <= P50_BAR and first < stream_ms,
            f"{ttfb_text}; through the gateway it arrives after {first:.2f} ms of a "
            f"{stream_ms:.0f} ms stream",
        )
        _, cpu_text = spread(runs, "cpu_ms")
        print(f"  [info] gateway CPU time per 600 KB request: {cpu_text}")
        _, over_text = spread(runs, "over_floor_p50")
        print(f"  [info] the gateway's p50 less the floor relay's (same runs): {over_text}")
        ratio = statistics.median(r["added_ratio"] for r in runs)
        print(f"  [info] added p50 / direct p50: median {ratio:.2f}")
        if args.latency_only:
            print(f"\nbar 1: {verdict(ok_all)} (--latency-only: bars 2-5 not run)")
            return 0

        events, size = 50, 512
        t0 = time.perf_counter()
        good = asyncio.run(concurrent_streams(procs, args.streams, events, size))
        report(
            f"{args.streams} concurrent streams without loss",
            good == args.streams,
            f"{good}/{args.streams} streams arrived byte for byte (sha256 of {events} events "
            f"each, {events * (size + 60) // 1024} KB), {time.perf_counter() - t0:.2f} s",
        )

        closes = [asyncio.run(disconnect_once(procs, 1000 + k)) for k in range(5)]
        seen = [c for c in closes if c is not None]
        report(
            f"client disconnect mid-stream closes the upstream (within {CLOSE_BAR:g} ms)",
            len(seen) == len(closes) and max(seen) <= CLOSE_BAR,
            f"the upstream saw {len(seen)}/{len(closes)} hang-ups, after "
            + (f"median {statistics.median(seen):.1f} ms, max {max(seen):.1f} ms" if seen else "-"),
        )
    finally:
        procs.stop()

    ending, ended_ms, status, err, next_ms = asyncio.run(killed_upstream())
    clean = (
        status == 502
        and isinstance(err, dict)
        and err.get("type") == "error"
        and isinstance(err.get("error"), dict)
        and err["error"].get("type") == "api_error"
    )
    report(
        "killed upstream gives the client a clean error",
        ending.startswith("truncated") and clean,
        f"mid-stream SIGKILL: {ending} {ended_ms:.1f} ms after the kill; next request: "
        f"{status} {json.dumps(err)[:90]} in {next_ms:.1f} ms",
    )
    print(f"\nall bars: {verdict(ok_all)}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
