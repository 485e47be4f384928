"""Gateway soak: 20,000 requests with random faults, then the gateway's RSS, fds and tasks.

The gateway runs in its own process (its limits shortened: idle timeout 2 s), in front of an
upstream in another process that answers by the fault each request asks for: a JSON reply, an
SSE stream, a stream cut off mid-way, a malformed (non-HTTP) reply, a reset before any reply, a
500. The client side adds its own faults: hanging up mid-stream, a browser's ``Origin``, a
body announced over the limit, half-open connections left for the idle timeout, paths other
than ``/v1/messages``. Every request the upstream receives is checked byte for byte against
what :func:`gateway.rewrite.decide` says the gateway sends (the client's body with the
documented splice, or untouched): a body changed beyond that counts as a failure.

At the start (after a warm-up) and at the end (after the idle timeout has passed), it prints the
gateway's RSS, open fds and asyncio task count. Targets (issue 16): RSS within 20 MB and fds
within 5 of the start, 0 bodies changed. Loopback only; bounded by --n and --minutes.

    python3 bench/soak_gateway.py [--n 20000] [--concurrency 16] [--minutes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IDLE = 2.0  # the gateway's idle timeout here (60 s in production)
RSS_BAR, FD_BAR = 20.0, 5

# fault name -> weight
FAULTS = {
    "json": 55,
    "sse": 12,
    "hangup": 5,  # the client goes away after the first chunk
    "cut": 4,  # the upstream stops mid-stream
    "malformed": 4,  # the upstream answers garbage
    "reset": 3,  # the upstream closes before answering
    "error500": 3,
    "browser": 3,  # Origin header: 403 from the gateway
    "count_tokens": 4,
    "oversized": 1,  # Content-Length over 32 MiB: 413
    "halfopen": 2,  # a raw connection with half a request line, left open
    "lenient": 4,  # a BOM body: forwarded untouched
}


# --- the upstream (its own process) ------------------------------------------------------------


async def upstream_handler(request: web.Request) -> web.StreamResponse:
    fault = request.headers.get("x-soak-fault", "json")
    body = await request.read()
    digest = hashlib.sha256(body).hexdigest()
    if fault == "malformed":
        assert request.transport is not None
        request.transport.write(b"NOT HTTP AT ALL\r\n\r\n")
        request.transport.close()
        return web.Response()
    if fault == "reset":
        assert request.transport is not None
        request.transport.abort()
        return web.Response()
    if fault == "error500":
        return web.json_response({"type": "error", "error": {"type": "api_error"}}, status=500)
    if fault in ("sse", "hangup", "cut"):
        resp = web.StreamResponse(headers={"content-type": "text/event-stream", "x-sha": digest})
        await resp.prepare(request)
        for i in range(20):
            await resp.write(f'event: e\ndata: {{"i": {i}}}\n\n'.encode())
            if fault == "cut" and i == 5:
                assert request.transport is not None
                request.transport.abort()
                return resp
            await asyncio.sleep(0.001)
        await resp.write_eof()
        return resp
    return web.json_response({"sha": digest, "n": len(body)})


def run_upstream(port_out: Connection) -> None:
    import logging

    logging.getLogger("aiohttp").setLevel(logging.CRITICAL)  # its writes to hung-up clients

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", upstream_handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_out.send(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(main())


# --- the gateway (its own process), with a stats channel ----------------------------------------


def run_gateway(upstream: str, conn: Connection) -> None:
    import logging

    from gateway import limits
    from gateway.server import ClearToolUses, Gateway

    limits.IDLE_TIMEOUT = IDLE
    limits.BODY_TIMEOUT = IDLE
    logging.getLogger("ctxpatch.gateway").setLevel(logging.ERROR)
    logging.getLogger("aiohttp").setLevel(logging.CRITICAL)

    async def main() -> None:
        gw = Gateway(upstream=upstream, edit=ClearToolUses(trigger_value=50, keep=1), port=0)
        await gw.start()
        conn.send(gw.port)
        loop = asyncio.get_running_loop()
        while True:
            cmd = await loop.run_in_executor(None, conn.recv)
            if cmd == "stop":
                await gw.stop()
                conn.send("stopped")
                return
            # the executor's own waiting task is not the gateway's: count the others
            conn.send(len(asyncio.all_tasks()) - 1)

    asyncio.run(main())


def stats(pid: int, conn: Connection) -> dict[str, float]:
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    conn.send("stats")
    tasks = conn.recv()
    return {"rss_mb": rss, "fds": len(os.listdir(f"/proc/{pid}/fd")), "tasks": tasks}


# --- the client -------------------------------------------------------------------------------


def make_body(rng: random.Random, size: int) -> bytes:
    msgs: list[dict] = [{"role": "user", "content": "soak"}]
    i = 0
    while len(json.dumps(msgs)) < size:
        msgs.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"i": i}}],
            }
        )
        text = "".join(rng.choice('abcdefgh éü✓\n"\\') for _ in range(200))
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": text}],
            }
        )
        i += 1
    body = {"model": "claude-opus-4-6", "max_tokens": 10, "messages": msgs, "stream": False}
    if rng.random() < 0.3:
        body["context_management"] = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    return json.dumps(body, ensure_ascii=rng.random() < 0.5).encode()


def expected_sha(raw: bytes) -> str:
    from gateway.rewrite import decide
    from gateway.server import ClearToolUses

    d = decide("POST", "/v1/messages", [], raw, ClearToolUses(trigger_value=50, keep=1))
    return hashlib.sha256(d.body if d.body is not None else raw).hexdigest()


async def one(
    session: aiohttp.ClientSession, base: str, port: int, fault: str, body: bytes, sha: str
) -> str:
    """One request with its fault; the outcome's name ('ok', 'changed', 'unexpected ...')."""
    headers = {
        "content-type": "application/json",
        "x-api-key": "sk-ant-soak",
        "x-soak-fault": fault,
    }
    url = base + "/v1/messages"
    if fault == "halfopen":
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        return "ok"  # left open: the gateway closes it after its idle timeout
    if fault == "oversized":
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Length: {33 * 1024 * 1024}\r\n\r\n{{".encode()
        )
        line = await reader.readline()
        writer.close()
        return "ok" if b" 413 " in line else f"unexpected {line!r}"
    if fault == "browser":
        headers["Origin"] = "https://evil.example"
    if fault == "count_tokens":
        url += "/count_tokens?beta=true"
    async with session.post(url, data=body, headers=headers) as r:
        if fault == "browser":
            return "ok" if r.status == 403 else f"unexpected {r.status}"
        if fault in ("malformed", "reset"):
            return "ok" if r.status == 502 else f"unexpected {r.status}"
        if fault == "error500":
            return "ok" if r.status == 500 else f"unexpected {r.status}"
        if fault in ("sse", "hangup", "cut"):
            if r.headers.get("x-sha") != sha:
                return "changed"
            n = 0
            try:
                async for _ in r.content.iter_any():
                    n += 1
                    if fault == "hangup":
                        r.close()
                        return "ok"
            except aiohttp.ClientPayloadError:
                return "ok" if fault == "cut" else "unexpected truncated"
            return "ok"
        reply = await r.json()
        if fault == "count_tokens":  # forwarded byte for byte
            return "ok" if reply["sha"] == hashlib.sha256(body).hexdigest() else "changed"
        return "ok" if reply["sha"] == sha else "changed"


async def client(
    base: str, port: int, n: int, concurrency: int, deadline: float, seed: int
) -> collections.Counter[str]:
    rng = random.Random(seed)
    bodies = [make_body(rng, size) for size in (500, 5_000, 50_000, 200_000, 600_000)]
    bodies.append(b"\xef\xbb\xbf" + bodies[1])  # lenient: forwarded untouched
    shas = [expected_sha(b) for b in bodies]
    names, weights = list(FAULTS), list(FAULTS.values())
    outcomes: collections.Counter[str] = collections.Counter()
    left = [n]
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:

        async def worker() -> None:
            while left[0] > 0 and time.monotonic() < deadline:
                left[0] -= 1
                fault = rng.choices(names, weights)[0]
                i = len(bodies) - 1 if fault == "lenient" else rng.randrange(len(bodies) - 1)
                if fault == "lenient":
                    fault = "json"
                try:
                    outcome = await one(session, base, port, fault, bodies[i], shas[i])
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    outcome = f"unexpected {fault} {type(exc).__name__}"
                outcomes[outcome] += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outcomes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxpatch-bench-state-") as state:
        # the gateway's ledger (20,000 lines): a scratch directory, never the user's own
        os.environ["XDG_STATE_HOME"] = state
        return _soak(args)


def _soak(args: argparse.Namespace) -> int:
    ctx = mp.get_context("spawn")
    up_parent, up_child = ctx.Pipe()
    up = ctx.Process(target=run_upstream, args=(up_child,), daemon=True)
    up.start()
    upstream = f"http://127.0.0.1:{up_parent.recv()}"
    gw_parent, gw_child = ctx.Pipe()
    gw = ctx.Process(target=run_gateway, args=(upstream, gw_child), daemon=True)
    gw.start()
    port = gw_parent.recv()
    base = f"http://127.0.0.1:{port}"
    assert gw.pid is not None
    try:
        asyncio.run(client(base, port, 300, 8, time.monotonic() + 60, args.seed + 1))  # warm-up
        time.sleep(IDLE + 1)
        start = stats(gw.pid, gw_parent)
        print(f"start: RSS {start['rss_mb']:.1f} MB, fds {start['fds']}, tasks {start['tasks']}")
        t0 = time.monotonic()
        outcomes = asyncio.run(
            client(base, port, args.n, args.concurrency, t0 + args.minutes * 60, args.seed)
        )
        took = time.monotonic() - t0
        time.sleep(IDLE + 1)  # half-open connections closed by the idle timeout
        end = stats(gw.pid, gw_parent)
        print(f"end:   RSS {end['rss_mb']:.1f} MB, fds {end['fds']}, tasks {end['tasks']}")
        total = sum(outcomes.values())
        print(
            f"{total} requests in {took:.0f} s ({total / took:.0f}/s), outcomes: {dict(outcomes)}"
        )
        changed = outcomes.get("changed", 0)
        unexpected = sum(v for k, v in outcomes.items() if k.startswith("unexpected"))
        d_rss, d_fds = end["rss_mb"] - start["rss_mb"], end["fds"] - start["fds"]
        ok = (
            total >= args.n
            and d_rss <= RSS_BAR
            and d_fds <= FD_BAR
            and changed == 0
            and unexpected == 0
        )
        print(
            f"RSS {d_rss:+.1f} MB (bar {RSS_BAR:.0f}), fds {d_fds:+d} (bar {FD_BAR}), "
            f"tasks {end['tasks'] - start['tasks']:+d}, bodies changed {changed}, "
            f"unexpected {unexpected}: {'PASS' if ok else 'FAIL'}"
        )
        gw_parent.send("stop")
        gw_parent.recv()
        return 0 if ok else 1
    finally:
        gw.terminate()
        up.terminate()


if __name__ == "__main__":
    sys.exit(main())
