"""Gateway overhead: added latency per request and time to first streamed byte, vs direct.

A ~150K-token request (≈600 KB of JSON: tool uses and results, as a long Claude Code session
sends) goes N times straight to a loopback upstream and N times through ``ctxpatch gateway``
(which parses it, adds the clearing edit and re-serialises it), interleaved, in the same run.
The upstream (a tiny aiohttp app that reads the body and answers) and the gateway each run in
their own process, so the client, the gateway and the upstream do not share a GIL.

Targets (issue #9): added latency p50 <= 2 ms, p99 <= 10 ms; the first streamed byte not delayed.

    python3 bench/bench_gateway.py [--n 200] [--kb 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SSE_EVENTS = 20


def make_body(kb: int) -> bytes:
    """A Messages API request of about ``kb`` KB (≈4 bytes per token)."""
    messages: list[dict] = [{"role": "user", "content": "Fix the failing tests."}]
    i = 0
    while len(json.dumps(messages)) < kb * 1024:
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
                        "content": "\n".join(
                            f"{n:>5}  line {n} of module {i} = value" for n in range(120)
                        ),
                    }
                ],
            }
        )
        i += 1
    body = {
        "model": "claude-opus-4-6",
        "max_tokens": 32000,
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": messages,
        "stream": True,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def run_upstream(q: mp.Queue) -> None:
    async def messages(request: web.Request) -> web.StreamResponse:
        await request.read()
        if request.query.get("sse"):
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            for i in range(SSE_EVENTS):
                await resp.write(f'event: ping\ndata: {{"i": {i}}}\n\n'.encode())
                await asyncio.sleep(0.001)
            await resp.write_eof()
            return resp
        return web.json_response({"type": "message", "content": [], "usage": {}})

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", messages)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        q.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


def run_gateway(upstream: str, q: mp.Queue) -> None:
    from engine.context_editing import ClearToolUses
    from gateway.server import Gateway

    async def main() -> None:
        gw = Gateway(upstream=upstream, edit=ClearToolUses())
        await gw.start()
        q.put(gw.port)
        await asyncio.Event().wait()

    asyncio.run(main())


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def measure(direct: str, via: str, body: bytes, n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {
        "direct": [],
        "gateway": [],
        "ttfb_direct": [],
        "ttfb_gateway": [],
    }
    headers = {
        "content-type": "application/json",
        "x-api-key": "bench",
        "anthropic-version": "2023-06-01",
    }
    async with aiohttp.ClientSession() as s:

        async def once(base: str, sse: bool) -> float:
            t0 = time.perf_counter()
            async with s.post(
                f"{base}/v1/messages" + ("?sse=1" if sse else ""), data=body, headers=headers
            ) as r:
                if sse:
                    await r.content.readany()
                    t = time.perf_counter() - t0
                    await r.read()
                    return t
                await r.read()
                return time.perf_counter() - t0

        for _ in range(10):  # warm-up: connections, caches
            await once(direct, False)
            await once(via, False)
        for _ in range(n):
            out["direct"].append(await once(direct, False))
            out["gateway"].append(await once(via, False))
            out["ttfb_direct"].append(await once(direct, True))
            out["ttfb_gateway"].append(await once(via, True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="requests per series")
    ap.add_argument("--kb", type=int, default=600, help="request body size in KB")
    args = ap.parse_args()
    body = make_body(args.kb)
    q: mp.Queue = mp.Queue()
    up = mp.Process(target=run_upstream, args=(q,), daemon=True)
    up.start()
    up_port = q.get(timeout=30)
    gw = mp.Process(target=run_gateway, args=(f"http://127.0.0.1:{up_port}", q), daemon=True)
    gw.start()
    gw_port = q.get(timeout=30)
    try:
        r = asyncio.run(
            measure(f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{gw_port}", body, args.n)
        )
    finally:
        gw.terminate()
        up.terminate()
        gw.join()
        up.join()
    ms = 1000.0
    print(
        f"request body: {len(body) / 1024:.0f} KB (~{len(body) // 4 // 1000}K tokens), "
        f"{args.n} requests per series, interleaved"
    )
    print(f"{'':24}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    for name in ("direct", "gateway", "ttfb_direct", "ttfb_gateway"):
        v = r[name]
        print(
            f"{name:24}{pct(v, 50) * ms:9.2f}{pct(v, 99) * ms:9.2f}{statistics.fmean(v) * ms:9.2f}"
        )
    added = [g - d for g, d in zip(r["gateway"], r["direct"], strict=True)]
    p50 = (pct(r["gateway"], 50) - pct(r["direct"], 50)) * ms
    p99 = (pct(r["gateway"], 99) - pct(r["direct"], 99)) * ms
    print(
        f"added latency (gateway - direct): p50 {p50:.2f} ms (target <= 2), "
        f"p99 {p99:.2f} ms (target <= 10); paired p50 {pct(added, 50) * ms:.2f} ms, "
        f"paired p99 {pct(added, 99) * ms:.2f} ms"
    )
    t50 = (pct(r["ttfb_gateway"], 50) - pct(r["ttfb_direct"], 50)) * ms
    print(
        f"first streamed byte: +{t50:.2f} ms at p50 through the gateway "
        f"(the body rewrite included; no buffering: the rest of the stream follows as sent)"
    )


if __name__ == "__main__":
    main()
