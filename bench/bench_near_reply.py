"""In-process cost of the gateway's near move (issue #15): what it adds to a request's path.

1. the reply path (:mod:`gateway.reply_prompt`): microseconds per reply to read the prompt off
   a streamed reply's first chunk (the ``message_start`` event as the API sends it, followed by
   the first content events, one chunk), off the same cut in two inside the ``data:`` line,
   and off a whole JSON reply (~2 KB);
2. :meth:`gateway.policy.Fitter.fit` on a growing conversation (``--rounds`` tool rounds of
   ~3 KB results, Claude Code's body: ~``--rounds`` x 3 KB; each request a round more than the
   previous, so every fit after the first resumes the kept walk): microseconds per fit with the
   near move's knob at its default and at ``CLAUDE_CTX_CLEAR_MARGIN=0`` (no handle, no level),
   interleaved, the median of ``--runs``. Each fit is given the request's time (a second after
   the previous: no expiry move; the server reads its clock once per request) where the tree's
   ``Fitter.fit`` takes one (the expiry move, issue #15). Run it with another tree first on
   ``PYTHONPATH`` to compare its ``Fitter.fit`` (a tree before the near move returns the edit
   alone).

    python3 bench/bench_near_reply.py [--runs 7] [--rounds 200] [--n 20000]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.api.context_management import ClearToolUses
from gateway.policy import Fitter, Knobs
from gateway.toplevel import scan

EDIT = ClearToolUses(trigger_value=50_000, keep=3, clear_tool_inputs=True)
MODEL = "claude-opus-4-6"
USAGE = {
    "input_tokens": 3,
    "cache_creation_input_tokens": 2_400,
    "cache_read_input_tokens": 150_000,
    "output_tokens": 1,
    "service_tier": "standard",
}


class _Sink:
    __slots__ = ("prompt",)

    def __init__(self) -> None:
        self.prompt = 0

    def observe(self, prompt: int) -> None:
        self.prompt = prompt


def first_chunk() -> bytes:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": USAGE,
        },
    }
    events = [
        ("message_start", start),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Let me look"}}),
    ]  # fmt: skip
    return "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events).encode()


def json_reply() -> bytes:
    text = "The file holds the configuration. " * 50
    return json.dumps(
        {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
         "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
         "stop_sequence": None, "usage": USAGE}
    ).encode()  # fmt: skip


def per_call_us(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def reply_path(n: int, runs: int) -> None:
    from multidict import CIMultiDict, CIMultiDictProxy

    from gateway import reply_prompt

    sink = _Sink()
    chunk = first_chunk()
    cut = chunk.index(b"usage")
    head, rest = chunk[:cut], chunk[cut:]
    payload = json_reply()
    # the upstream's headers as aiohttp gives them (case-insensitive lookups)
    sse_headers = CIMultiDictProxy(
        CIMultiDict({"Content-Type": "text/event-stream; charset=utf-8"})
    )
    json_headers = CIMultiDictProxy(
        CIMultiDict({"Content-Type": "application/json", "Content-Length": str(len(payload))})
    )

    def one_chunk() -> None:
        r = reply_prompt.reader(sink, 200, sse_headers)
        assert r is not None and r.feed(chunk)

    def two_chunks() -> None:
        r = reply_prompt.reader(sink, 200, sse_headers)
        assert r is not None and not r.feed(head) and r.feed(rest)

    def whole_json() -> None:
        reply_prompt.observe_whole(sink, 200, json_headers, payload)

    tiny = b'{"type":"message","content":[],"usage":{}}'

    def tiny_json() -> None:
        reply_prompt.observe_whole(sink, 200, json_headers, tiny)

    for name, fn, size in (
        ("SSE, message_start in the first chunk", one_chunk, len(chunk)),
        ("SSE, the data: line cut across two chunks", two_chunks, len(chunk)),
        ("JSON reply read whole", whole_json, len(payload)),
        ("the bench upstream's JSON reply (usage {})", tiny_json, len(tiny)),
    ):
        sink.prompt = 0
        fn()
        assert sink.prompt == (0 if fn is tiny_json else 152_403), sink.prompt
        got = [per_call_us(fn, n) for _ in range(runs)]
        print(
            f"  {name:44s} ({size:5d} B): {statistics.median(got):6.2f} us per reply "
            f"(runs {min(got):.2f}..{max(got):.2f})"
        )


def bodies(rounds: int) -> list[bytes]:
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    system = [{"type": "text", "text": "You are Claude Code. " * 300}]
    tools = [{"name": f"T{i}", "description": "d" * 300, "input_schema": {"type": "object"}}
             for i in range(40)]  # fmt: skip
    out = []
    for k in range(rounds):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"p": k}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * 3_000}
        msgs += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [res]}]
        marked = [
            *msgs[:-1],
            {**msgs[-1], "content": [{**res, "cache_control": {"type": "ephemeral"}}]},
        ]
        body = {"model": MODEL, "messages": marked, "system": system, "tools": tools,
                "max_tokens": 32000, "stream": True}  # fmt: skip
        out.append(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    return out


def fit_cost(rounds: int, runs: int) -> None:
    seq = bodies(rounds)
    tops = [scan(b) for b in seq]
    last = seq[-20:]
    timed = "now" in inspect.signature(Fitter.fit).parameters  # the expiry move's clock
    print(
        f"  the last 20 requests of {rounds} rounds ({len(seq[-1]) // 1024} KB each)"
        + ("; each fit told its time" if timed else "; this tree's fit takes no time")
    )

    def series(margin: int) -> list[float]:
        near = True
        try:
            knobs = Knobs(margin=margin)  # type: ignore[call-arg]
        except TypeError:  # a tree without the near move
            knobs, near = Knobs(), False
        fitter = Fitter(knobs)
        for b, top in zip(seq[:-20], tops[:-20], strict=True):
            fitter.fit(EDIT, b, top)  # type: ignore[arg-type]
        out = []
        betas = ["context-management-2025-06-27"]
        for i, (b, top) in enumerate(zip(last, tops[-20:], strict=True)):
            t = time.perf_counter()
            if near:
                args = (EDIT, b, top, None, MODEL, betas)
                _, kept = fitter.fit(*args, 1_000 * i) if timed else fitter.fit(*args)  # type: ignore[call-arg]
                if kept is not None:
                    kept.observe(100_000)
            else:
                fitter.fit(EDIT, b, top)  # type: ignore[arg-type]
            out.append((time.perf_counter() - t) * 1e6)
        return out

    on: list[float] = []
    off: list[float] = []
    for _ in range(runs):
        on += series(10_000)
        off += series(0)
    for name, got in (("margin 10000 (near move on)", on), ("margin 0 (off)", off)):
        q = statistics.quantiles(got, n=4)
        print(
            f"  Fitter.fit, {name:28s}: p50 {statistics.median(got):7.1f} us per request "
            f"(quartiles {q[0]:.1f}..{q[2]:.1f}, {len(got)} requests)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--n", type=int, default=20_000)
    args = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.2f} (2 cores shared: figures are noisy)")
    print("1. the reply path (gateway.reply_prompt)")
    try:
        reply_path(args.n, args.runs)
    except ImportError:
        print("  this tree has no gateway.reply_prompt")
    print("2. the fit")
    fit_cost(args.rounds, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
