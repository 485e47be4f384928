"""What a second loopback hop costs by itself: the floor under the gateway's added latency.

``bench_gateway.py``'s latency series (a ~734 KB Claude Code request, direct vs through a relay,
interleaved, ``--grow`` requests of a growing conversation in turn) with four relays in front
of the same upstream, each in its own process, in turn, ``--rounds`` times:

* ``asyncio``: a minimal relay on asyncio streams (no aiohttp): the request head and its
  ``Content-Length`` body read, forwarded in one write over a kept connection, the reply
  relayed (a ``Content-Length`` one whole, a chunked one chunk by chunk); nothing decided;
* ``aiohttp``: a minimal aiohttp server and client doing the same (the body read and sent as
  the gateway reads and sends it, ``session.request``, the reply read and sent back): what
  aiohttp itself costs (``bench_gateway.run_aiohttp_relay``, which ``bench_gateway.py`` runs
  beside the gateway in the same run);
* ``gateway plain``: the real gateway, the plain edit on every request;
* ``gateway policy``: the real gateway, the clearing policy (``CLAUDE_CTX_CLEAR_POLICY``).

For each: the median over the rounds of the added latency p50 (gateway percentile - direct
percentile), of the per-pair differences p50, and of the relay's CPU time per request (steadier
than wall time on a loaded machine). The machine's load average is printed with them.

    python3 bench/gateway_floor.py [--rounds 3] [--n 200] [--kb 600] [--grow 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_gateway as B  # noqa: E402 (after the sys.path insert)


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            return int(line[15:])
    return 0


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
                reply = await ur.readuntil(b"\r\n\r\n")
                m = _length(reply)
                if m:
                    w.write(reply + await ur.readexactly(m))
                    continue
                w.write(reply)  # chunked (the SSE series): chunk by chunk as it comes
                while True:
                    size_line = await ur.readuntil(b"\r\n")
                    size = int(size_line.strip(), 16)
                    w.write(size_line + await ur.readexactly(size + 2))
                    if size == 0:
                        break
        except (asyncio.IncompleteReadError, ConnectionError):
            w.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_q.put(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(main())


RELAYS: dict[str, tuple[Callable[..., None], str]] = {
    "asyncio": (run_asyncio_relay, ""),
    "aiohttp": (B.run_aiohttp_relay, ""),
    "gateway plain": (B.run_gateway, "plain"),
    "gateway policy": (B.run_gateway, "env"),
}


def one(name: str, bodies: list[bytes], n: int) -> dict[str, float]:
    target, policy = RELAYS[name]
    saved = B.run_gateway
    B.run_gateway = target  # type: ignore[assignment] # Procs starts B.run_gateway
    try:
        procs = B.Procs(policy or "plain")
    finally:
        B.run_gateway = saved
    try:
        return asyncio.run(B.latency_run(procs, bodies, n))
    finally:
        procs.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="runs of each relay, in turn")
    ap.add_argument("--n", type=int, default=200, help="requests per series per run")
    ap.add_argument("--kb", type=int, default=600, help="request body size in KB")
    ap.add_argument("--grow", type=int, default=20, help="requests of a growing conversation")
    args = ap.parse_args(argv)
    with B.scratch_state():  # the gateways' ledger: a scratch directory, not the user's
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    bodies = B.make_bodies(args.kb, args.grow)
    load0 = os.getloadavg()
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in RELAYS}
    for _ in range(args.rounds):
        for name in RELAYS:
            runs[name].append(one(name, bodies, args.n))
    load1 = os.getloadavg()
    print(
        f"request body: {len(bodies[-1]) / 1024:.0f} KB, {args.rounds} rounds x {args.n} requests "
        f"per series; {os.cpu_count()} CPUs, load average {load0[0]:.2f} before, "
        f"{load1[0]:.2f} after"
    )
    print(f"\n{'relay':<16}{'added p50':>11}{'paired p50':>12}{'CPU/req':>9}  (ms, median of runs)")
    for name, rs in runs.items():
        med = {
            k: statistics.median(r[k] for r in rs) for k in ("added_p50", "paired_p50", "cpu_ms")
        }
        each = ", ".join(f"{r['added_p50']:.2f}" for r in rs)
        print(
            f"{name:<16}{med['added_p50']:>11.2f}{med['paired_p50']:>12.2f}{med['cpu_ms']:>9.2f}"
            f"  (added p50 per run: {each})"
        )
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
