"""What a second loopback hop costs by itself: the floor under the gateway's added latency.

``bench_gateway.py``'s request (a ~734 KB Claude Code request, ``--grow`` requests of a growing
conversation in turn) straight to a loopback upstream and through four relays in front of it,
each in its own process, the requests interleaved in one series (each round: the same body
direct, then through each relay), ``--rounds`` runs: what the load does to one relay it does to
all of them, so their differences hold on a noisy machine:

* ``asyncio streams``: a minimal relay on asyncio's streams and loop (no aiohttp): the request
  head and its ``Content-Length`` body read, forwarded in one write over a kept connection,
  the reply relayed (a ``Content-Length`` one whole, a chunked one chunk by chunk); nothing
  decided;
* ``aiohttp``: a minimal aiohttp server and client doing the same (the body read and sent as
  the gateway reads and sends it, ``session.request``, the reply read and sent back): what
  aiohttp itself costs (``bench_gateway.run_aiohttp_relay``, which ``bench_gateway.py`` runs
  beside the gateway in the same run);
* ``gateway plain``: the real gateway, the plain edit on every request;
* ``gateway policy``: the real gateway, the clearing policy (``CLAUDE_CTX_CLEAR_POLICY``);
* ``pipelined streams`` and ``pipelined aiohttp``: the first two, but cut-through instead of
  store-and-forward: the upstream request starts as soon as the client's head arrives (the same
  ``Content-Length``) and the body's bytes are sent on as they arrive, so the second hop
  overlaps the first. Against the store-and-forward relay on the same stack in the same rounds
  this says how much of the floor is the waiting for the whole body (the gateway itself is
  store-and-forward: its edit, its ``anthropic-beta`` header and the resend of a refused
  request depend on the whole body).

``--versus TREE`` adds ``gateway policy`` run from another source tree (e.g. a checkout of main
before a change) to the same rounds: what a change saves, on a noisy machine. ``--relays``
picks the relays by name (comma-separated).

For each: the median over the runs of the added latency p50 (relay percentile - direct
percentile) and of the relay's CPU time per request (steadier than wall time on a loaded
machine; each run's is printed). ``--loops both`` adds the aiohttp relay and the gateway with
its policy on asyncio's own loop, when the gateway's is uvloop (the ``fast`` extra).

    python3 bench/gateway_floor.py [--rounds 5] [--n 200] [--kb 600] [--grow 20] [--loops both]
                                   [--versus TREE] [--relays NAME,NAME,...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_gateway as B  # noqa: E402 (after the sys.path insert)


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            return int(line[15:])
    return 0


async def _relay_reply(ur: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    """The upstream's reply to the client: a ``Content-Length`` one in one write, a chunked one
    (the SSE series) chunk by chunk as it comes."""
    reply = await ur.readuntil(b"\r\n\r\n")
    m = _length(reply)
    if m:
        w.write(reply + await ur.readexactly(m))
        return
    w.write(reply)
    while True:
        size_line = await ur.readuntil(b"\r\n")
        size = int(size_line.strip(), 16)
        w.write(size_line + await ur.readexactly(size + 2))
        if size == 0:
            return


async def _serve_streams(handle: Callable[..., Any], port_q: mp.Queue) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port_q.put(server.sockets[0].getsockname()[1])
    await asyncio.Event().wait()


def run_asyncio_relay(
    upstream: str, port_q: mp.Queue, ctl: mp.Queue, cpu_q: mp.Queue, policy: str = ""
) -> None:
    """The aiohttp-free relay (HTTP/1.1 with Content-Length requests, as the bench sends)."""
    B._answer(ctl, cpu_q)
    port = int(upstream.rsplit(":", 1)[1])

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        up: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                n = _length(head)
                body = await r.readexactly(n) if n else b""
                if up is None:
                    up = await asyncio.open_connection("127.0.0.1", port)
                ur, uw = up
                uw.write(head)
                uw.write(body)
                await _relay_reply(ur, w)
        except (asyncio.IncompleteReadError, ConnectionError):
            w.close()

    asyncio.run(_serve_streams(handle, port_q))


def run_pipelined_relay(
    upstream: str, port_q: mp.Queue, ctl: mp.Queue, cpu_q: mp.Queue, policy: str = ""
) -> None:
    """:func:`run_asyncio_relay` cut-through: the head goes to the upstream as soon as it is
    read, then the body's bytes as they arrive (``Content-Length`` unchanged), the upstream's
    writes flow-controlled (``drain``) as a relay must be."""
    B._answer(ctl, cpu_q)
    port = int(upstream.rsplit(":", 1)[1])

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        up: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                left = _length(head)
                if up is None:
                    up = await asyncio.open_connection("127.0.0.1", port)
                ur, uw = up
                uw.write(head)
                while left > 0:
                    piece = await r.read(min(left, PIECE))
                    if not piece:
                        raise asyncio.IncompleteReadError(b"", left)
                    left -= len(piece)
                    uw.write(piece)
                    await uw.drain()
                await _relay_reply(ur, w)
        except (asyncio.IncompleteReadError, ConnectionError):
            w.close()

    asyncio.run(_serve_streams(handle, port_q))


PIECE = 256 * 1024  # the most a pipelined relay reads of the body before sending it on


class _Streamed(aiohttp.payload.Payload):
    """The client's body sent on as it arrives (its length known from ``Content-Length``)."""

    def __init__(self, content: aiohttp.StreamReader, size: int) -> None:
        super().__init__(content, content_type=None)
        self._content = content
        self._size = self._length = size

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        raise NotImplementedError("a streamed body is read once, as it is sent")

    async def write(self, writer: aiohttp.abc.AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: aiohttp.abc.AbstractStreamWriter, content_length: int | None
    ) -> None:
        writer.send_headers()  # the head now, not with the first piece of the body
        left = self._length if content_length is None else content_length
        while left > 0:
            piece = await self._content.readany()
            if not piece:
                break
            await writer.write(piece[:left])
            left -= len(piece)


def run_aiohttp_pipelined(
    upstream: str, port_q: mp.Queue, ctl: mp.Queue, cpu_q: mp.Queue, policy: str = ""
) -> None:
    """``bench_gateway.run_aiohttp_relay`` cut-through: aiohttp calls the handler once the head
    is parsed; the upstream request starts then, its body the client's as it arrives."""
    from aiohttp import web

    B._answer(ctl, cpu_q)

    async def main() -> None:
        session = aiohttp.ClientSession(auto_decompress=False)

        async def handle(request: web.Request) -> web.StreamResponse:
            size = request.content_length or 0
            headers = {"content-type": "application/json", "content-length": str(size)}
            url = upstream + request.path_qs
            data = _Streamed(request.content, size)
            async with session.request(request.method, url, data=data, headers=headers) as up:
                return await B.relay_reply(request, up)

        await B.serve(handle, port_q)

    B._run_on_gateway_loop(main())


def run_gateway_from(
    upstream: str, port_q: mp.Queue, ctl: mp.Queue, cpu_q: mp.Queue, how: str = ""
) -> None:
    """``bench_gateway.run_gateway`` with the project's modules from another source tree
    (``how``: ``<policy>:<tree>``): none of this tree's stay imported in this process."""
    policy, tree = how.split(":", 1)
    mine = str(ROOT) + os.sep
    for name, module in list(sys.modules.items()):
        where = str(getattr(module, "__file__", None) or "")
        if where.startswith(mine) and not where.startswith(str(ROOT / "bench")):
            del sys.modules[name]
    sys.path.insert(0, tree)
    B.run_gateway(upstream, port_q, ctl, cpu_q, policy)


def _asyncio_loop(target: Callable[..., None]) -> Callable[..., None]:
    def run(*args: object) -> None:
        os.environ["CTXPATCH_GATEWAY_UVLOOP"] = "0"  # this process only (forked)
        target(*args)

    return run


def _on_asyncio_aiohttp(*args: object) -> None:
    _asyncio_loop(B.run_aiohttp_relay)(*args)


def _on_asyncio_gateway(*args: object) -> None:
    _asyncio_loop(B.run_gateway)(*args)


RELAYS: dict[str, tuple[Callable[..., None], str]] = {
    "asyncio streams": (run_asyncio_relay, ""),
    "pipelined streams": (run_pipelined_relay, ""),
    "aiohttp": (B.run_aiohttp_relay, ""),
    "pipelined aiohttp": (run_aiohttp_pipelined, ""),
    "gateway plain": (B.run_gateway, "plain"),
    "gateway policy": (B.run_gateway, "env"),
}
# --loops both: the same on asyncio's own loop (when the gateway's is uvloop)
ASYNCIO_LOOP: dict[str, tuple[Callable[..., None], str]] = {
    "aiohttp, asyncio loop": (_on_asyncio_aiohttp, ""),
    "gateway policy, asyncio loop": (_on_asyncio_gateway, "env"),
}


async def series(
    direct: str, relays: dict[str, B.Relay], bodies: list[bytes], n: int
) -> dict[str, dict[str, float]]:
    """One run: n rounds of one request straight to the upstream and one through each relay,
    the same body in each round (the bodies in turn); per relay its added p50 and CPU/request."""
    urls = {"direct": direct, **{k: r.url for k, r in relays.items()}}
    times: dict[str, list[float]] = {k: [] for k in urls}
    async with aiohttp.ClientSession() as s:

        async def once(url: str, body: bytes) -> float:
            t0 = time.perf_counter()
            async with s.post(url + "/v1/messages", data=body, headers=B.HEADERS) as r:
                await r.read()
            return time.perf_counter() - t0

        for i in range(10):  # warm-up: connections, caches, the policy's kept conversation
            for url in urls.values():
                await once(url, bodies[i % len(bodies)])
        cpu0 = {k: r.cpu() for k, r in relays.items()}
        for i in range(n):
            body = bodies[i % len(bodies)]
            for k, url in urls.items():
                times[k].append(await once(url, body))
        cpu = {k: (r.cpu() - cpu0[k]) / n for k, r in relays.items()}
    d50 = B.pct(times["direct"], 50)
    return {
        k: {"added_p50": (B.pct(times[k], 50) - d50) * 1000, "cpu_ms": cpu[k] * 1000}
        for k in relays
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs of the interleaved series")
    ap.add_argument("--n", type=int, default=200, help="requests per relay per run")
    ap.add_argument("--kb", type=int, default=600, help="request body size in KB")
    ap.add_argument("--grow", type=int, default=20, help="requests of a growing conversation")
    ap.add_argument(
        "--loops",
        choices=("gateway", "both"),
        default="gateway",
        help="gateway: the relays on the gateway's loop (uvloop when installed); both: also "
        "the aiohttp relay and the gateway with its policy on asyncio's own loop",
    )
    ap.add_argument(
        "--versus",
        type=Path,
        metavar="TREE",
        help="also the gateway with its policy from another source tree, in the same rounds",
    )
    ap.add_argument(
        "--relays",
        metavar="NAMES",
        help=f"comma-separated, of: {', '.join(RELAYS)} (default: all)",
    )
    args = ap.parse_args(argv)
    if args.relays is not None:
        unknown = [n for n in args.relays.split(",") if n not in RELAYS]
        if unknown:
            ap.error(f"unknown relay {', '.join(unknown)}; known: {', '.join(RELAYS)}")
    with B.scratch_state():  # the gateways' ledger: a scratch directory, not the user's
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    bodies = B.make_bodies(args.kb, args.grow)
    chosen = dict(RELAYS)
    if args.relays is not None:
        chosen = {n: RELAYS[n] for n in args.relays.split(",")}
    if args.loops == "both":
        chosen.update(ASYNCIO_LOOP)
    if args.versus is not None:
        chosen[VERSUS] = (run_gateway_from, f"env:{args.versus.resolve()}")
    load0 = os.getloadavg()
    closed: mp.Queue = mp.Queue()
    q: mp.Queue = mp.Queue()
    up = mp.Process(target=B.run_upstream, args=(q, closed), daemon=True)
    up.start()
    direct = f"http://127.0.0.1:{q.get(timeout=30)}"
    relays = {k: B.Relay(target, direct, policy) for k, (target, policy) in chosen.items()}
    runs: list[dict[str, dict[str, float]]] = []
    loads: list[float] = []
    try:
        for _ in range(args.rounds):
            runs.append(asyncio.run(series(direct, relays, bodies, args.n)))
            loads.append(os.getloadavg()[0])
    finally:
        for p in [r.proc for r in relays.values()] + [up]:
            if p.is_alive():
                p.terminate()
            p.join(10)
    load1 = os.getloadavg()
    print(
        f"request body: {len(bodies[-1]) / 1024:.0f} KB, {args.rounds} runs x {args.n} requests "
        f"per relay, interleaved in one series; relays on {B.loop_kind()}'s loop unless named "
        f"(the streams relays: asyncio's); {os.cpu_count()} CPUs, load average "
        f"{load0[0]:.2f} before, {load1[0]:.2f} after"
        + (f"; versus: the gateway of {args.versus}" if args.versus is not None else "")
    )
    print(f"\n{'relay':<30}{'added p50':>11}{'CPU/req':>9}  (ms, median of runs; CPU per run)")
    for name in chosen:
        added = statistics.median(r[name]["added_p50"] for r in runs)
        cpu = statistics.median(r[name]["cpu_ms"] for r in runs)
        each = ", ".join(f"{r[name]['cpu_ms']:.2f}" for r in runs)
        print(f"{name:<30}{added:>11.2f}{cpu:>9.2f}  ({each})")
    print("\nadded p50 per run (ms); load average (1 min) after each run:")
    print(f"{'relay':<30}" + "".join(f"{i + 1:>8}" for i in range(len(runs))))
    for name in chosen:
        print(f"{name:<30}" + "".join(f"{r[name]['added_p50']:>8.2f}" for r in runs))
    print(f"{'load':<30}" + "".join(f"{x:>8.2f}" for x in loads))
    pairs = [(a, b) for a, b in COMPARED if a in chosen and b in chosen]
    if pairs:
        print("\nthe same rounds, differences of the added p50 (ms): median (per run)")
    for a, b in pairs:
        diffs = [r[a]["added_p50"] - r[b]["added_p50"] for r in runs]
        each = ", ".join(f"{d:+.2f}" for d in diffs)
        print(f"{a + ' - ' + b:<44}{statistics.median(diffs):>+8.2f}  ({each})")
    return 0


VERSUS = "gateway policy, versus tree"
# the differences printed (each pair present in the run): the cut-through relays against the
# store-and-forward ones on the same stack; the gateway against its floor and its other tree
COMPARED = (
    ("pipelined streams", "asyncio streams"),
    ("pipelined aiohttp", "aiohttp"),
    ("pipelined aiohttp", "asyncio streams"),
    ("gateway plain", "aiohttp"),
    ("gateway policy", "aiohttp"),
    ("gateway policy", VERSUS),
)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
