"""What the ledger adds to a gateway request. Bar (issue #14): the gateway's added latency with
the ledger on stays within 0.1 ms of it off.

Default mode, in-process (steadier than wall-clock latency on a loaded machine): ``begin`` (the
session id: the header, or a regex over the body's last 16 KB), the SSE holder over a streamed
reply (it holds the chunks as they pass; past 64 KB held it reads them, as the tap read every
chunk before), ``finish`` and ``record`` (an append: the line is made and written on the
ledger's own thread); then, apart, what making the line costs there (the held chunks read for
the two lines that hold the numbers, those parsed, the line encoded).

``--paired``: two real gateways, each in its own process, in front of the same loopback upstream,
the ledger writing into a scratch ``XDG_STATE_HOME``, and the same request straight to the
upstream, interleaved request by request (every gateway in every place in turn, so none
always goes first): ``--rounds`` rounds of ``--per`` requests of each kind, through
``bench_gateway.py``'s growing ~600 KB Claude Code conversation, with Claude Code's session
header. In each round one gateway has its ledger on and the other off, in turn (switched
between rounds, the ledger flushed first): two processes on 2 cores are not alike (measured: up
to 0.3 ms of CPU and 0.45 ms of p50 apart with the ledger off in both, ``--control``), so each
has the ledger on in half the rounds. The upstream answers as the API does: an SSE stream
(``message_start`` with the usage, text deltas, ``message_delta`` with the output usage and
``context_management.applied_edits``) or, ``--reply json``, the same message as one JSON body.
What the load does to one gateway it does to the other in the same round, so their difference
holds on a noisy machine: per round, the p50 difference (on - off; the same as the difference
of the added p50, the direct path being shared) and the difference of CPU time per request (the
whole process, and of it the event loop's thread and the ledger's writer thread); printed: the
median over the rounds with its 95% confidence interval (order statistics) and the quartiles,
plus the median of the per-pair differences. ``--phases``: the gateways run with
``CTXPATCH_GATEWAY_PHASES=1`` and each phase's loop CPU is printed, on and off; ``--profile
DIR``: cProfile of both loop threads (the first gateway always on), the functions it spends
more own time in; ``--control``: the ledger off in both (what the bench reads of nothing).

    python3 bench/bench_ledger.py [--n 2000] [--reply-kb 200]
    python3 bench/bench_ledger.py --paired [--rounds 30] [--per 20] [--kb 600] [--grow 20]
                                  [--reply sse|json] [--policy env|plain] [--phases]
                                  [--profile DIR] [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_gateway as B  # noqa: E402 (after the sys.path insert)

from usage import ledger as L  # noqa: E402

SID = "0b5e0f43-1a2b-4c3d-8e9f-0123456789ab"


def stream(kb: int) -> list[bytes]:
    """A streamed reply of about ``kb`` KB in 1-4 KB chunks, usage in the first and last events."""
    start = {
        "type": "message_start",
        "message": {
            "usage": {
                "input_tokens": 3,
                "cache_creation_input_tokens": 500,
                "cache_read_input_tokens": 150_000,
                "output_tokens": 1,
            }
        },
    }
    events = [f"event: message_start\ndata: {json.dumps(start)}\n\n"]
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "word " * 40},
    }
    line = f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n"
    events += [line] * (kb * 1024 // len(line))
    end = {
        "type": "message_delta",
        "usage": {"output_tokens": 900},
        "context_management": {
            "applied_edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "cleared_tool_uses": 12,
                    "cleared_input_tokens": 40_000,
                }
            ]
        },
    }
    events.append(f"event: message_delta\ndata: {json.dumps(end)}\n\n")
    raw = "".join(events).encode()
    sizes = [1024, 4096, 2048, 3072]
    out, i, k = [], 0, 0
    while i < len(raw):
        out.append(raw[i : i + sizes[k % 4]])
        i += sizes[k % 4]
        k += 1
    return out


# --- --paired: two gateways, ledger on and off, interleaved -------------------------------------


def reply_message(content: list[Any], stop_reason: str | None, output: int) -> dict[str, Any]:
    """The message of one API reply (its usage: a 148K-token cached prompt, ``output`` out)."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 3,
            "cache_creation_input_tokens": 812,
            "cache_read_input_tokens": 148_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 812, "ephemeral_1h_input_tokens": 0},
            "output_tokens": output,
            "service_tier": "standard",
        },
    }


APPLIED = {
    "applied_edits": [
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 9, "cleared_input_tokens": 31_000}
    ]
}


def reply_events(text_events: int = 30) -> list[bytes]:
    """The SSE events of one API reply, as the API sends them (usage in ``message_start`` and
    ``message_delta``, the applied edit in the latter)."""
    events = [
        {"type": "message_start", "message": reply_message([], None, 1)},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": f"word {i} of the answer, "},
            }
            for i in range(text_events)
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 412},
            "context_management": APPLIED,
        },
        {"type": "message_stop"},
    ]
    return [
        f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode()
        for e in events
    ]


def reply_json(text_events: int = 30) -> bytes:
    """The same reply as one JSON message."""
    text = "".join(f"word {i} of the answer, " for i in range(text_events))
    message = reply_message([{"type": "text", "text": text}], "end_turn", 412)
    return json.dumps({**message, "context_management": APPLIED}, separators=(",", ":")).encode()


def run_api_upstream(port_q: mp.Queue, kind: str) -> None:
    """POST /v1/messages answered as the API answers (``kind``: sse | json); the stream's
    events are written as they come (a few writes, as a real reply arrives in several reads)."""
    events, whole = reply_events(), reply_json()

    async def messages(request: web.Request) -> web.StreamResponse:
        await request.read()
        headers = {"request-id": "req_011CVbenchLedger0000000000"}
        if kind == "json":
            return web.Response(body=whole, content_type="application/json", headers=headers)
        resp = web.StreamResponse(headers={"content-type": "text/event-stream", **headers})
        await resp.prepare(request)
        for i in range(0, len(events), 8):
            await resp.write(b"".join(events[i : i + 8]))
        await resp.write_eof()
        return resp

    asyncio.run(B.serve(messages, port_q, "/v1/messages"))


def run_gateway_ledger(
    upstream: str, port_q: mp.Queue, ctl: mp.Queue, answers: mp.Queue, how: str
) -> None:
    """The real gateway (``how``: ``<policy>:<CTXPATCH_LEDGER>:<source tree, or empty for
    this one>``). On ``ctl``: ``"cpu"`` is answered with the CPU time of the process, its event
    loop's thread and the ledger's writer thread; ``"ledger on"`` / ``"ledger off"`` switch
    its ledger (flushed first); ``"phases"`` / ``"clear"`` as ``bench_gateway``'s gateway
    does; ``"profile"``, then ``("profile", FILE)``: cProfile of the loop thread; None stops."""
    import logging
    import threading

    policy, os.environ[L.ENV], tree = how.split(":", 2)
    if tree:  # the project's modules from that tree: none of this tree's stay imported
        mine = str(ROOT) + os.sep
        for name, module in list(sys.modules.items()):
            where = str(getattr(module, "__file__", None) or "")
            if where.startswith(mine) and not where.startswith(str(ROOT / "bench")):
                del sys.modules[name]
        sys.path.insert(0, tree)

    from engine.api.context_management import ClearToolUses
    from gateway.server import Gateway

    logging.getLogger("ctxpatch.gateway").setLevel(logging.ERROR)

    def thread_cpu(t: threading.Thread | None) -> float:
        if t is None or t.ident is None or not t.is_alive():
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(t.ident))

    async def main() -> None:
        gw = Gateway(
            upstream=upstream, edit=ClearToolUses(), policy="env" if policy == "env" else None
        )
        loop_thread = threading.current_thread()
        loop = asyncio.get_running_loop()
        prof = cProfile.Profile()

        ledger = gw.ledger

        def answer() -> None:
            while (msg := ctl.get()) is not None:
                if msg in ("ledger on", "ledger off"):  # between rounds: no request in flight
                    if gw.ledger is not None:
                        gw.ledger.flush()
                    gw.ledger = ledger if msg == "ledger on" else None
                    answers.put(None)
                elif msg == "cpu":
                    writer = getattr(ledger, "_thread", None)
                    answers.put((time.process_time(), thread_cpu(loop_thread), thread_cpu(writer)))
                elif msg == "phases":
                    answers.put(gw.phases.summary() if gw.phases is not None else {})
                elif msg == "clear":
                    if gw.phases is not None:
                        gw.phases.clear()
                    answers.put(None)
                elif msg == "profile":  # the loop thread's calls from now on (cProfile)
                    loop.call_soon_threadsafe(prof.enable)
                    answers.put(None)
                elif isinstance(msg, tuple) and msg[0] == "profile":  # stop, dump to msg[1]
                    done = threading.Event()

                    def stop(done: threading.Event = done) -> None:
                        prof.disable()
                        done.set()

                    loop.call_soon_threadsafe(stop)
                    done.wait(10)
                    prof.dump_stats(msg[1])
                    answers.put(None)

        threading.Thread(target=answer, daemon=True).start()
        await gw.start()
        port_q.put(gw.port)
        await asyncio.Event().wait()

    B._run_on_gateway_loop(main())


async def paired_rounds(
    direct: str,
    sides: dict[str, tuple[B.Relay, B.Relay]],
    bodies: list[bytes],
    args: argparse.Namespace,
) -> dict[str, list[float]]:
    """``args.rounds`` rounds of ``args.per`` steps: each step sends one body straight to the
    upstream, then through every gateway (the order turned each step). Per side (a source
    tree: two gateways), per round one gateway has the ledger on and the other off, in turn
    (with ``args.profile``: always the first; ``args.control``: neither). Per round and side:
    the p50s and the CPU times per request (``<side> <key>``)."""
    out: dict[str, list[float]] = {"d50": [], "load": []}
    headers = {**B.HEADERS, L.SESSION_HEADER: SID}
    per = args.per
    relays = [g for pair in sides.values() for g in pair]
    async with aiohttp.ClientSession() as s:

        async def once(base: str, body: bytes) -> float:
            t0 = time.perf_counter()
            async with s.post(base + "/v1/messages", data=body, headers=headers) as r:
                await r.read()
            return time.perf_counter() - t0

        for k in range(20):  # warm-up: connections, caches, the ledger's thread
            for base in (direct, *(g.url for g in relays)):
                await once(base, bodies[k % len(bodies)])
        if args.profile is not None:
            for g in relays:
                g.ask("profile")
        turn = 0
        for rnd in range(args.rounds):
            roles: list[tuple[str, B.Relay]] = []  # ("<side> on" | "<side> off", gateway)
            for side, pair in sides.items():
                on, off = pair if args.profile is not None or rnd % 2 == 0 else pair[::-1]
                on.ask("ledger off" if args.control else "ledger on")
                off.ask("ledger off")
                roles += [(f"{side} on", on), (f"{side} off", off)]
            for _, g in roles:
                if args.phases:
                    g.ask("clear")
            lat: dict[str, list[float]] = {name: [] for name, _ in roles}
            direct_lat: list[float] = []
            cpu0 = {name: g.ask("cpu") for name, g in roles}
            for _ in range(per):
                body = bodies[turn % len(bodies)]
                direct_lat.append(await once(direct, body))
                # every gateway in every place in turn: turned by one every other step, and
                # backwards every other step (each one before another as often as after it)
                k = turn // 2 % len(roles)
                order = roles[k:] + roles[:k]
                turn += 1
                for name, g in order if turn % 2 else order[::-1]:
                    lat[name].append(await once(g.url, body))
            for name, g in roles:
                cpu1 = g.ask("cpu")
                for key, a, b in zip(("cpu", "loop", "writer"), cpu0[name], cpu1, strict=True):  # type: ignore[call-overload]
                    out.setdefault(f"{name} {key}", []).append((b - a) / per)
                out.setdefault(f"{name} p50", []).append(statistics.median(lat[name]))
                if args.phases:  # each phase's median loop CPU in this round
                    summary: dict[str, dict[str, float]] = g.ask("phases")  # type: ignore[assignment]
                    for phase, v in summary.items():
                        if "cpu_us" in v:
                            out.setdefault(f"{name} phase {phase}", []).append(v["cpu_us"])
            for side in sides:
                out.setdefault(f"{side} pairs", []).extend(
                    a - b for a, b in zip(lat[f"{side} on"], lat[f"{side} off"], strict=True)
                )
            out["d50"].append(statistics.median(direct_lat))
            out["load"].append(os.getloadavg()[0])
    if args.profile is not None:
        first = next(iter(sides.values()))
        first[0].ask(("profile", str(args.profile / "on.prof")))
        first[1].ask(("profile", str(args.profile / "off.prof")))
    return out


def profile_diff(profile: Path, requests: int, top: int = 25) -> None:
    """The functions whose own time (cProfile's tottime) the ledger's gateway spent more of."""
    import pstats

    own = {}
    for side in ("on", "off"):
        st = pstats.Stats(str(profile / f"{side}.prof")).stats  # type: ignore[attr-defined]
        own[side] = {f"{Path(k[0]).name}:{k[1]}:{k[2]}": v[2] for k, v in st.items()}
    keys = set(own["on"]) | set(own["off"])
    diff = {k: own["on"].get(k, 0.0) - own["off"].get(k, 0.0) for k in keys}
    print(f"\n{'on - off, own time per request (cProfile, loop thread)':<60}{'us':>8}")
    for k in sorted(keys, key=lambda k: -diff[k])[:top]:
        print(f"{k[:60]:<60}{diff[k] / requests * 1e6:>+8.1f}")
    print(f"{'total':<60}{sum(diff.values()) / requests * 1e6:>+8.1f}")


def median_ci(values: list[float]) -> tuple[float, float, float]:
    """The median and its ~95% confidence interval (order statistics, distribution-free)."""
    s = sorted(values)
    n = len(s)
    half = 1.96 * math.sqrt(n) / 2
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    return statistics.median(s), s[lo], s[hi]


def quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return q[0], q[2]


def show(name: str, values: list[float]) -> str:
    med, lo, hi = median_ci(values)
    q1, q3 = quartiles(values)
    return (
        f"{name:<42} median {med:+.3f} ms  95% CI [{lo:+.3f}, {hi:+.3f}]  "
        f"quartiles [{q1:+.3f}, {q3:+.3f}]"
    )


def paired(args: argparse.Namespace) -> int:
    if args.phases:
        os.environ["CTXPATCH_GATEWAY_PHASES"] = "1"  # the gateway processes inherit it
    bodies = B.make_bodies(args.kb, args.grow)
    q: mp.Queue = mp.Queue()
    up = mp.Process(target=run_api_upstream, args=(q, args.reply), daemon=True)
    up.start()
    direct = f"http://127.0.0.1:{q.get(timeout=30)}"
    trees = {"this": ""}
    if args.versus is not None:
        trees["versus"] = str(args.versus.resolve())
    sides = {
        side: (
            B.Relay(run_gateway_ledger, direct, f"{args.policy}:1:{tree}"),
            B.Relay(run_gateway_ledger, direct, f"{args.policy}:1:{tree}"),
        )
        for side, tree in trees.items()
    }
    load = os.getloadavg()
    print(
        f"request body {len(bodies[-1]) / 1024:.0f} KB, {len(bodies)} requests of a growing "
        f"conversation in turn; reply {args.reply}; policy {args.policy}; {args.rounds} rounds x "
        f"{args.per} requests each way, interleaved; per source tree two gateways, the ledger "
        f"on in one of them per round, in turn{' (CONTROL: off in both)' if args.control else ''}"
        f"; trees: this ({ROOT})"
        + (f", versus ({trees['versus']})" if args.versus is not None else "")
        + f"; on {B.loop_kind()}'s loop; {os.cpu_count()} CPUs, load "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    try:
        r = asyncio.run(paired_rounds(direct, sides, bodies, args))
        state = Path(os.environ["XDG_STATE_HOME"]) / "ctxpatch" / "ledger"
        lines = sum(p.read_bytes().count(b"\n") for p in state.glob("*.jsonl"))
    finally:
        for p in (*(g.proc for pair in sides.values() for g in pair), up):
            p.terminate()
            p.join(10)
    ms = 1000.0

    def minus(a: str, b: str) -> list[float]:
        return [(x - y) * ms for x, y in zip(r[a], r[b], strict=True)]

    diffs: dict[str, list[float]] = {}
    for side in sides:
        print(f"\n{side} tree, per round ({args.rounds}), ms:")
        print(show("added p50, ledger off", minus(f"{side} off p50", "d50")))
        print(show("added p50, ledger on", minus(f"{side} on p50", "d50")))
        diffs[side] = minus(f"{side} on p50", f"{side} off p50")
        diffs[f"{side} cpu"] = minus(f"{side} on cpu", f"{side} off cpu")
        print(show("on - off: added p50", diffs[side]))
        print(show("on - off: gateway CPU per request", diffs[f"{side} cpu"]))
        print(
            show("  of which the event loop's thread", minus(f"{side} on loop", f"{side} off loop"))
        )
        print(
            show("  of which the ledger's writer thread", [x * ms for x in r[f"{side} on writer"]])
        )
        print(show("on - off: per pair (all requests)", [x * ms for x in r[f"{side} pairs"]]))
        print(
            f"gateway CPU per request: off {statistics.median(r[f'{side} off cpu']) * ms:.3f} ms,"
            f" on {statistics.median(r[f'{side} on cpu']) * ms:.3f} ms"
        )
        if args.phases:
            print(
                f"{'phase: loop CPU, us':<20}{'off':>8}{'on':>8}{'on - off (median of rounds)':>30}"
            )
            for name in ("guard", "body", "decide", "prepare", "upstream", "reply", "total"):
                a, b = r.get(f"{side} off phase {name}"), r.get(f"{side} on phase {name}")
                if a and b:
                    d = statistics.median(x - y for x, y in zip(b, a, strict=True))
                    print(
                        f"{name:<20}{statistics.median(a):>8.0f}{statistics.median(b):>8.0f}"
                        f"{d:>+30.0f}"
                    )
    print(
        f"\nload during the rounds {min(r['load']):.2f}-{max(r['load']):.2f}; ledger lines "
        f"written {lines}"
    )
    if "versus" in sides:
        print("\nthis - versus, the same rounds (what this tree's ledger costs less), ms:")
        print(
            show("on - off added p50: this - versus", minus_lists(diffs["this"], diffs["versus"]))
        )
        print(
            show(
                "on - off CPU/request: this - versus",
                minus_lists(diffs["this cpu"], diffs["versus cpu"]),
            )
        )
    if args.profile is not None:
        profile_diff(args.profile, args.rounds * args.per)
    for side in sides:
        med, lo, hi = median_ci(diffs[side])
        print(
            f"\n[{'PASS' if med <= 0.1 else 'MISS'}] {side}: ledger on within 0.1 ms of off (added "
            f"p50, median of the rounds): {med:+.3f} ms (95% CI {lo:+.3f} to {hi:+.3f}); CPU "
            f"{statistics.median(diffs[f'{side} cpu']):+.3f} ms per request"
        )
    return 0


def minus_lists(a: list[float], b: list[float]) -> list[float]:
    return [x - y for x, y in zip(a, b, strict=True)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--reply-kb", type=int, default=200)
    ap.add_argument("--paired", action="store_true", help="two gateways, ledger on and off")
    ap.add_argument("--rounds", type=int, default=30, help="--paired: rounds")
    ap.add_argument("--per", type=int, default=20, help="--paired: requests each way per round")
    ap.add_argument("--kb", type=int, default=600, help="--paired: request body size in KB")
    ap.add_argument("--grow", type=int, default=20, help="--paired: requests of a conversation")
    ap.add_argument("--reply", choices=("sse", "json"), default="sse", help="--paired: reply")
    ap.add_argument("--policy", choices=("env", "plain"), default="env", help="--paired")
    ap.add_argument("--phases", action="store_true", help="--paired: each phase's CPU")
    ap.add_argument(
        "--versus",
        type=Path,
        metavar="TREE",
        help="--paired: two more gateways from another source tree (e.g. a checkout of main "
        "before a change) in the same rounds, and the difference",
    )
    ap.add_argument(
        "--control",
        action="store_true",
        help="--paired: the ledger off in both gateways (what the bench reads of nothing)",
    )
    ap.add_argument(
        "--profile",
        type=Path,
        help="--paired: cProfile both gateways' loop threads over the rounds, write DIR/on.prof "
        "and DIR/off.prof, print the functions the ledger's gateway spent more own time in",
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ctxpatch-bench-state-") as state:
        os.environ["XDG_STATE_HOME"] = state  # never the user's own ledger, whatever runs here
        return paired(args) if args.paired else _bench(args)


def _bench(args: argparse.Namespace) -> int:
    body = (
        b'{"model":"claude-opus-4-6","messages":['
        + b'{"role":"user","content":"x"},' * 20000
        + b'{"role":"user","content":"y"}],"metadata":{"user_id":"{\\"session_id\\":\\"'
        + SID.encode()
        + b'\\"}"}}'
    )
    chunks = stream(args.reply_kb)
    with tempfile.TemporaryDirectory() as d:
        led = L.Ledger(Path(d))
        for headers, what in (
            ({L.SESSION_HEADER: SID}, "session id from the header"),
            ({}, "session id from metadata.user_id"),
        ):
            per, first, chunk, made = [], [], [], []
            for _ in range(args.n):
                t0 = time.perf_counter()
                rec = L.begin(headers, body, "claude-opus-4-6", True, "")
                tap = rec.tap({"Content-Type": "text/event-stream"})
                assert tap is not None
                tap.feed(chunks[0])
                t1 = time.perf_counter()
                for c in chunks[1:]:
                    tap.feed(c)
                t2 = time.perf_counter()
                L.finish(rec, 200, True, "", {"request-id": "req_1"})
                led.record(rec)
                t3 = time.perf_counter()
                L._dumps(rec.line())  # what the ledger does later, off the request's path
                made.append(time.perf_counter() - t3)
                per.append(t3 - t0)
                first.append(t1 - t0)
                chunk.append((t2 - t1) / (len(chunks) - 1))
            assert rec.reply.usage["cache_read"] == 150_000 and rec.session == SID
            per.sort()
            print(
                f"{what}: before the first byte (begin + first chunk) p50 "
                f"{statistics.median(first) * 1e3:.3f} ms, per later chunk p50 "
                f"{statistics.median(chunk) * 1e6:.1f} us (bar: added latency <= 0.1 ms: "
                f"{'ok' if statistics.median(first) <= 1e-4 else 'OVER'})"
            )
            print(
                f"{what}: body {len(body) / 1e3:.0f} KB, reply {sum(map(len, chunks)) / 1e3:.0f} KB in {len(chunks)} chunks: "
                f"p50 {statistics.median(per) * 1e3:.3f} ms, p99 {per[int(len(per) * 0.99)] * 1e3:.3f} ms per request "
                "CPU in total, spread over the stream; then, off the path, the line made (the "
                f"chunks held read, the two lines parsed, the line encoded) p50 {statistics.median(made) * 1e6:.1f} us"
            )
        assert led.flush(30)
        print(
            f"written {led.written} lines, errors {led.errors}, {sum(p.stat().st_size for p in Path(d).iterdir())} bytes"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
