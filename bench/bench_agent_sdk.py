"""Where should ``ctxpatch.agent_sdk``'s gateway run? Three candidates, measured the same way.

* ``own-loop``: a :class:`gateway.server.Gateway` on the program's own asyncio loop;
* ``thread``: a :class:`gateway.server.ThreadedGateway` (its own loop in a daemon thread);
* ``child``: ``python -m patcher gateway --port 0`` as a child process.

For each, in a fresh Python process (imports included, as a program pays them):

1. start: from before the first gateway import to the gateway answering;
2. added latency: a client in another process (as Claude Code is) sends the same ``--kb`` KB
   ``/v1/messages`` body ``--n`` times over one keep-alive connection, straight to a loopback
   upstream and through the gateway, interleaved; p50 of (through - direct);
3. the same with the program busy: a thread of the program spinning pure Python (a tool, a
   parser) while the client runs: what the GIL (thread) or a blocked loop (own-loop: the spin
   runs on the loop, between two awaits, as a program's synchronous code does) costs.

    python3 bench/bench_agent_sdk.py [--runs 3] [--n 40] [--kb 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the loopback upstream: answers every POST with a small JSON message (stdlib, its own process)
UPSTREAM = textwrap.dedent(
    """
    import http.server, json, sys
    REPLY = json.dumps({"id": "m", "type": "message", "role": "assistant", "content": [],
                        "model": "x", "stop_reason": "end_turn",
                        "usage": {"input_tokens": 1, "output_tokens": 1}}).encode()
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(REPLY)))
            self.end_headers()
            self.wfile.write(REPLY)
        def log_message(self, *a):
            pass
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    print(s.server_address[1], flush=True)
    s.serve_forever()
    """
)

# the client (Claude Code's place): N interleaved requests direct / through, ms each
CLIENT = textwrap.dedent(
    """
    import http.client, json, socket, sys, time
    direct, through, n, kb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    msgs = [{"role": "user", "content": "x" * 1000} for _ in range(kb)]
    body = json.dumps({"model": "claude-opus-4-6", "max_tokens": 5, "messages": msgs}).encode()
    conns = {p: http.client.HTTPConnection("127.0.0.1", p) for p in (direct, through)}
    for c in conns.values():  # as Claude Code's client: no Nagle delay between header and body
        c.connect()
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = {"direct": [], "through": []}
    for i in range(n + 3):
        for name, port in (("direct", direct), ("through", through)):
            c = conns[port]
            t = time.perf_counter()
            c.request("POST", "/v1/messages", body, {"content-type": "application/json"})
            c.getresponse().read()
            if i >= 3:  # warm-up
                out[name].append((time.perf_counter() - t) * 1000)
    print(json.dumps(out))
    """
)

# one candidate in a fresh process: start time, then the client's latencies (idle, busy)
PROGRAM = textwrap.dedent(
    """
    import asyncio, json, subprocess, sys, threading, time
    kind, upstream_port, n, kb, client = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
    upstream = f"http://127.0.0.1:{upstream_port}"
    spin = threading.Event()

    def busy():
        while not spin.is_set():
            sum(i * i for i in range(2000))

    async def run_client(port, on_loop_busy=False):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", client, upstream_port, str(port), n, kb,
            stdout=subprocess.PIPE)
        if on_loop_busy:  # the program's synchronous code between awaits
            while proc.returncode is None:
                end = time.perf_counter() + 0.05
                while time.perf_counter() < end:
                    sum(i * i for i in range(2000))
                await asyncio.sleep(0)
                try:
                    await asyncio.wait_for(asyncio.shield(proc.wait()), 0.001)
                except asyncio.TimeoutError:
                    pass
        out, _ = await proc.communicate()
        return json.loads(out)

    async def measure(port, busy_loop):
        idle = await run_client(port)
        if busy_loop:
            loaded = await run_client(port, on_loop_busy=True)
        else:
            spin.clear()
            t = threading.Thread(target=busy, daemon=True)
            t.start()
            loaded = await run_client(port)
            spin.set()
            t.join()
        return idle, loaded

    async def main():
        t0 = time.perf_counter()
        if kind == "own-loop":
            from gateway.server import Gateway
            gw = Gateway(upstream=upstream, edit="env")
            await gw.start()
            port, stop = gw.port, gw.stop
        elif kind == "thread":
            from gateway.server import ThreadedGateway
            gw = await asyncio.to_thread(lambda: ThreadedGateway(upstream=upstream).start())
            port = gw.gateway.port
            async def stop():
                gw.stop()
        else:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "ctxpatch", "gateway", "--port", "0", "--upstream", upstream,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            line = await proc.stdout.readline()
            port = int(line.decode().rsplit(":", 1)[1])
            async def stop():
                proc.terminate()
                await proc.wait()
        start = time.perf_counter() - t0
        idle, loaded = await measure(port, busy_loop=(kind == "own-loop"))
        await stop()
        print(json.dumps({"start": start, "idle": idle, "busy": loaded}))

    asyncio.run(main())
    """
)


def added(sample: dict[str, list[float]]) -> tuple[float, float]:
    """p50 and p90 of through - direct, pairwise (interleaved requests), ms."""
    diffs = sorted(t - d for t, d in zip(sample["through"], sample["direct"], strict=True))
    return statistics.median(diffs), diffs[int(0.9 * (len(diffs) - 1))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--kb", type=int, default=100)
    args = ap.parse_args(argv)
    env = {"PYTHONPATH": str(ROOT)}
    import os

    env = {**os.environ, **env}
    with tempfile.TemporaryDirectory(prefix="ctxpatch-bench-state-") as state:
        env["XDG_STATE_HOME"] = state  # the gateways' ledger: a scratch directory, not the user's
        return _run(args, env)


def _run(args: argparse.Namespace, env: dict[str, str]) -> int:
    up = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
    try:
        assert up.stdout is not None
        port = up.stdout.readline().strip()
        rows: dict[str, dict[str, list[float]]] = {}
        for _ in range(args.runs):
            for kind in ("own-loop", "thread", "child"):
                r = subprocess.run(
                    [sys.executable, "-c", PROGRAM, kind, port, str(args.n), str(args.kb), CLIENT],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=ROOT,
                    check=True,
                )
                doc = json.loads(r.stdout)
                row = rows.setdefault(kind, {"start": [], "idle": [], "busy": []})
                row["start"].append(doc["start"] * 1000)
                row["idle"].append(added(doc["idle"])[0])
                row["busy"].append(added(doc["busy"])[0])
    finally:
        up.terminate()
        up.wait()
    print(
        f"{'gateway':<9} {'start ms (runs)':<28} {'added p50 ms idle':<22} added p50 ms, program busy"
    )
    for kind, row in rows.items():

        def fmt(values: list[float]) -> str:
            return f"{statistics.median(values):7.1f} ({min(values):.1f}-{max(values):.1f})"

        print(f"{kind:<9} {fmt(row['start']):<28} {fmt(row['idle']):<22} {fmt(row['busy'])}")
    print(f"runs {args.runs}, {args.n} requests of {args.kb} KB each way per run, interleaved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
