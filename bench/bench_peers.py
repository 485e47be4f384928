"""The gateway side by side with the proxies a user would pick instead, on the same body and the
same upstream: added latency p50 / p99 and whether the preserved-thinking check survives.

Each proxy runs from a throwaway install under ``--root`` (default /tmp/ctxpatch-peers: a venv or
an npm prefix, and its own HOME), offline, in front of the repo's mock of the Messages API
(:mod:`lab.mock`) on loopback:

* ``ctxpatch``: ``python -m patcher gateway`` of this checkout;
* ``litellm``: ``pip install 'litellm[proxy]'`` in ``ROOT/litellm``, ``litellm --config``, the
  ``anthropic/`` provider with ``api_base`` = the upstream (the local model cost map; the
  master key it insists on is the clients' ``x-api-key``);
* ``headroom``: ``pip install 'headroom-ai[proxy]'`` in ``ROOT/headroom``, ``headroom proxy``
  with the upstream as ``ANTHROPIC_TARGET_API_URL``, cache, rate limit and subscription
  tracking off (its default mode, ``cache``);
* ``ccr``: ``npm install --prefix ROOT/ccr @musistudio/claude-code-router``, ``ccr start`` with
  one Anthropic provider pointing at the mock.

A proxy whose install is missing is reported as such, not run (``--install`` makes the
installs; they need the package registries, nothing else does).

Latency: the same ~600 KB request in Claude Code's key order (``bench_gateway.make_body``),
``--n`` times straight to a plain loopback upstream (``bench_gateway``'s, its own process: the
mock's own work on the edit would count against the proxies that add one) and through the
proxy, interleaved in pairs; the added time per pair, p50 / p99. Thinking check: a two-turn conversation through the proxy against the mock
in its enforced mode (every thinking block sent back must be bound to the conversation as the
client sent it): turn 2 sends turn 1's signed thinking back; a proxy that re-encodes or edits the
history makes the mock answer 400.

    python3 bench/bench_peers.py [--n 100] [--only ctxpatch,litellm] [--install]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_gateway import make_body, run_upstream  # noqa: E402

from lab.mock import MockConfig, MockServer  # noqa: E402

MODEL = "claude-opus-4-6"
KEY = "sk-ant-bench-not-a-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(base: str, body: bytes, timeout: float = 60) -> tuple[int, bytes, float]:
    req = urllib.request.Request(
        base + "/v1/messages",
        data=body,
        headers={
            "content-type": "application/json",
            "x-api-key": KEY,
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "interleaved-thinking-2025-05-14,context-management-2025-06-27",
        },
    )
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        data, status = e.read(), e.code
    return status, data, (time.perf_counter() - t0) * 1000


def wait_up(base: str, proc: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        try:
            with socket.create_connection(base.removeprefix("http://").split(":"), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"not listening after {seconds:.0f} s")


@dataclass
class Peer:
    name: str
    start: Callable[[str, Path], tuple[subprocess.Popen, str]]  # (upstream, home) -> proc, url
    installed: Callable[[Path], bool]


def _spawn(cmd: list[str], env: dict[str, str], home: Path) -> subprocess.Popen:
    log = open(home / "proxy.log", "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=home, start_new_session=True
    )


def _offline_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CTXPATCH_"))}
    env.update(
        HOME=str(home),
        NO_PROXY="*",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_TELEMETRY="False",
        ANONYMIZED_TELEMETRY="false",
        DO_NOT_TRACK="1",
        XDG_STATE_HOME=str(home / "state"),  # ctxpatch's ledger: here, never the user's own
    )
    return env


def start_ctxpatch(upstream: str, home: Path) -> tuple[subprocess.Popen, str]:
    env = _offline_env(home)
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-m", "patcher", "gateway", "--port", "0", "--upstream", upstream]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def start_litellm(upstream: str, home: Path, root: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cfg = home / "config.yaml"
    cfg.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: anthropic/{MODEL}\n"
        f"      api_base: {upstream}\n"
        f"      api_key: {KEY}\n"
        "litellm_settings:\n  telemetry: false\n"
    )
    exe = root / "litellm" / "bin" / "litellm"
    cmd = [str(exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)]
    env = _offline_env(home)
    env["LITELLM_MASTER_KEY"] = KEY  # it refuses to start without one; the clients send it
    return _spawn(cmd, env, home), f"http://127.0.0.1:{port}"


def start_headroom(upstream: str, home: Path, root: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = _offline_env(home)
    env["ANTHROPIC_TARGET_API_URL"] = upstream  # where headroom sends Anthropic traffic
    exe = root / "headroom" / "bin" / "headroom"
    cmd = [str(exe), "proxy", "--port", str(port), "--no-cache", "--no-rate-limit"]
    cmd.append("--no-subscription-tracking")  # it would poll Anthropic for the plan's usage
    return _spawn(cmd, env, home), f"http://127.0.0.1:{port}"


def start_ccr(upstream: str, home: Path, root: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    conf = home / ".claude-code-router"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "config.json").write_text(
        json.dumps(
            {
                "HOST": "127.0.0.1",
                "PORT": port,
                "LOG": False,
                "Providers": [
                    {
                        "name": "mock",
                        "api_base_url": upstream + "/v1/messages",
                        "api_key": KEY,
                        "models": [MODEL],
                        "transformer": {"use": ["Anthropic"]},
                    }
                ],
                "Router": {"default": f"mock,{MODEL}"},
            }
        )
    )
    exe = root / "ccr" / "node_modules" / ".bin" / "ccr"
    return _spawn([str(exe), "start"], _offline_env(home), home), f"http://127.0.0.1:{port}"


def peers(root: Path) -> list[Peer]:
    return [
        Peer("ctxpatch", start_ctxpatch, lambda _r: True),
        Peer(
            "litellm",
            lambda u, h: start_litellm(u, h, root),
            lambda r: (r / "litellm" / "bin" / "litellm").exists(),
        ),
        Peer(
            "headroom",
            lambda u, h: start_headroom(u, h, root),
            lambda r: (r / "headroom" / "bin" / "headroom").exists(),
        ),
        Peer(
            "ccr",
            lambda u, h: start_ccr(u, h, root),
            lambda r: (r / "ccr" / "node_modules" / ".bin" / "ccr").exists(),
        ),
    ]


def install(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, extra in (("litellm", "litellm[proxy]"), ("headroom", "headroom-ai[proxy]")):
        if not (root / name / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(root / name)], check=True)
        subprocess.run([str(root / name / "bin" / "pip"), "install", "-q", extra], check=True)
    npm = ["npm", "install", "--prefix", str(root / "ccr"), "--no-audit", "--no-fund"]
    subprocess.run([*npm, "@musistudio/claude-code-router"], check=True)


@contextlib.contextmanager
def running(peer: Peer, upstream: str) -> Iterator[str]:
    home = Path(tempfile.mkdtemp(prefix=f"peer-{peer.name}-"))
    proc, url = peer.start(upstream, home)
    try:
        wait_up(url, proc)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15) if peer.name != "ctxpatch" else proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def latency(url: str, upstream: str, body: bytes, n: int) -> tuple[float, float, str]:
    """(p50, p99) of the added milliseconds, and what the proxy answered."""
    added: list[float] = []
    statuses: set[int] = set()
    for _ in range(3):  # warm-up
        post(url, body)
    for _ in range(n):
        _, _, direct = post(upstream, body)
        status, _, via = post(url, body)
        statuses.add(status)
        added.append(via - direct)
    added.sort()
    p99 = added[min(len(added) - 1, round(0.99 * (len(added) - 1)))]
    return statistics.median(added), p99, ",".join(map(str, sorted(statuses)))


def thinking_check(url: str, mock: MockServer) -> str:
    """Two turns through the proxy with thinking on, the mock enforcing the binding check."""
    mock.reset(MockConfig(thinking=True, binding="error"))
    user = {"role": "user", "content": "Read the file and tell me what it does. " * 50}
    turn = {
        "model": MODEL,
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [user],
    }
    status, data, _ = post(url, json.dumps(turn).encode())
    if status != 200:
        return f"turn 1: HTTP {status}"
    reply = json.loads(data)
    turn["messages"] = [
        user,
        {"role": "assistant", "content": reply["content"]},
        {"role": "user", "content": "Go on."},
    ]
    status, data, _ = post(url, json.dumps(turn).encode())
    if status == 200:
        return "passes"
    return f"fails on turn 2 (HTTP {status}: {data[:80]!r})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "ctxpatch-peers")
    ap.add_argument("--only", default="")
    ap.add_argument("--install", action="store_true")
    args = ap.parse_args()
    if args.install:
        install(args.root)
    body = make_body(600)
    body = body.replace(b'"stream":true', b'"stream":false')
    rows = []
    ctx = mp.get_context("spawn")
    port_q, closed_q = ctx.Queue(), ctx.Queue()
    plain = ctx.Process(target=run_upstream, args=(port_q, closed_q), daemon=True)
    plain.start()
    fast = f"http://127.0.0.1:{port_q.get(timeout=30)}"
    try:
        for peer in peers(args.root):
            if args.only and peer.name not in args.only.split(","):
                continue
            if not peer.installed(args.root):
                rows.append((peer.name, "not installed (--install)", "", ""))
                continue
            try:
                with running(peer, fast) as url:
                    p50, p99, statuses = latency(url, fast, body, args.n)
                with MockServer() as mock, running(peer, mock.base_url) as url:
                    check = thinking_check(url, mock)
                rows.append((peer.name, f"{p50:.1f} / {p99:.1f}", statuses, check))
            except Exception as exc:  # a peer that will not start offline: say so
                rows.append((peer.name, f"did not run: {exc}", "", ""))
    finally:
        plain.terminate()
    print(f"same ~{len(body) // 1024} KB body, {args.n} pairs, plain loopback upstream")
    print("| proxy | added ms p50 / p99 | HTTP status through it | preserved-thinking check |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
