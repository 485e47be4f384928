"""What the ledger adds to one gateway request, in-process (steadier than wall-clock latency on
a loaded machine): ``begin`` (the session id: the header, or a regex over the body's last 16 KB),
the SSE tap over a streamed reply, ``finish`` and ``record`` (a queue put; the write happens on
the ledger's own thread). Bar: within 0.1 ms of the ledger off.

    python3 bench/bench_ledger.py [--n 2000] [--reply-kb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from usage import ledger as L  # noqa: E402 (after the sys.path insert)

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--reply-kb", type=int, default=200)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ctxpatch-bench-state-") as state:
        os.environ["XDG_STATE_HOME"] = state  # never the user's own ledger, whatever runs here
        return _bench(args)


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
            per, first, chunk = [], [], []
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
                "CPU in total, spread over the stream"
            )
        assert led.flush(30)
        print(
            f"written {led.written} lines, errors {led.errors}, {sum(p.stat().st_size for p in Path(d).iterdir())} bytes"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
