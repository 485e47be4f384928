"""``ctxpatch run`` as a process: silent on the terminal, its log file private and scrubbed,
signals the command decides on, and no command left behind pointing at a dead port."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from test_gateway_cli import CTXPATCH, env_without_base_url

PROBE = r"""
import json, os, socket, sys, urllib.error, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"]
req = urllib.request.Request(base + "/v1/messages", data=b'{"model":"claude-opus-4-6"}',
                             headers={"content-type": "application/json",
                                      "x-api-key": "sk-ant-TOPSECRET-1"})
try:
    urllib.request.urlopen(req, timeout=30)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode(), flush=True)
host, port = base.removeprefix("http://").split(":")
s = socket.create_connection((host, int(port)))  # a malformed header line, key included
s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: sk-ant-TOPSECRET-2\x01\r\n\r\n")
s.recv(4096)
s.close()
"""


def dead_url(userinfo: str = "") -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://{userinfo}127.0.0.1:{s.getsockname()[1]}"


def test_run_says_nothing_on_the_terminal_without_log() -> None:
    r = subprocess.run(
        [*CTXPATCH, "run", "--upstream", dead_url(), "--", sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env=env_without_base_url(),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("502 ")  # the gateway answered, and logged a warning...
    assert r.stderr == ""  # ...that the terminal never shows


def test_run_log_is_private_and_holds_no_credential(tmp_path: Path) -> None:
    log = tmp_path / "gateway.log"
    upstream = dead_url("user:SECRETPW@")
    r = subprocess.run(
        [
            *CTXPATCH,
            "run",
            "--upstream",
            upstream,
            "--log",
            str(log),
            "--",
            sys.executable,
            "-c",
            PROBE,
        ],
        capture_output=True,
        text=True,
        env=env_without_base_url(),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    code, _, body = r.stdout.partition(" ")
    assert code == "502" and "127.0.0.1" in body  # the 502 names the host...
    assert "SECRETPW" not in body and "user" not in body  # ...never its credentials
    text = log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "-> 502" in text and "Error handling request" in text  # aiohttp's own line, kept
    for secret in ("SECRETPW", "TOPSECRET"):
        assert secret not in text
    assert "<redacted>" in text


def test_a_sigint_sent_to_ctxpatch_alone_reaches_the_command() -> None:
    child = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *a: sys.exit(42))\n"
        "print('ready', flush=True)\ntime.sleep(60)"
    )
    proc = subprocess.Popen(
        [*CTXPATCH, "run", "--", sys.executable, "-c", child],
        stdout=subprocess.PIPE,
        text=True,
        env=env_without_base_url(),
        start_new_session=True,  # no controlling terminal: nobody else delivers it
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 42  # the command decided (it exits 42 on SIGINT)


def test_a_sigkilled_run_leaves_no_command_pointing_at_a_dead_port() -> None:
    child = "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)"
    proc = subprocess.Popen(
        [*CTXPATCH, "run", "--", sys.executable, "-c", child],
        stdout=subprocess.PIPE,
        text=True,
        env=env_without_base_url(),
    )
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not alive(pid):
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the command outlived a SIGKILLed ctxpatch run")


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it has ended)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rpartition(")")[2].split()[0] != "Z"


def test_a_sigint_to_ctxpatchs_group_reaches_the_command_once() -> None:
    child = (
        "import signal, sys, time\n"
        "got = []\n"
        "signal.signal(signal.SIGINT, lambda *a: got.append(1))\n"
        "print('ready', flush=True)\n"
        "deadline = time.monotonic() + 30\n"
        "while not got and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "time.sleep(1)\n"
        "sys.exit(len(got))"
    )
    proc = subprocess.Popen(
        [*CTXPATCH, "run", "--", sys.executable, "-c", child],
        stdout=subprocess.PIPE,
        text=True,
        env=env_without_base_url(),
        start_new_session=True,  # ctxpatch leads its own group, with no terminal
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    os.killpg(proc.pid, signal.SIGINT)  # what a harness or an IDE sends to the whole group
    assert proc.wait(timeout=30) == 1  # one SIGINT, not two
