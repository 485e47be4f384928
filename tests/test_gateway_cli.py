"""``ctxpatch gateway`` and ``ctxpatch run`` as processes (loopback only)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from engine.api.context_management import BETA, CLEAR_TOOL_USES
from lab.mock import MockServer

CTXPATCH = [sys.executable, "-m", "ctxpatch"]
BODY = {
    "model": "claude-opus-4-6",
    "max_tokens": 5,
    "messages": [{"role": "user", "content": "hi"}],
}


def env_without_base_url() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_CTX_"))}
    env.pop("CTXPATCH_UPSTREAM", None)
    return env


def test_gateway_command_serves_logs_without_secrets_and_stops_on_sigterm() -> None:
    with MockServer() as mock:
        proc = subprocess.Popen(
            [*CTXPATCH, "gateway", "--port", "0", "--upstream", mock.base_url, "-v"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_without_base_url(),
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            req = urllib.request.Request(
                url + "/v1/messages",
                data=json.dumps(BODY).encode(),
                headers={"x-api-key": "sk-ant-TOPSECRET", "content-type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=30) as r:
                assert r.status == 200
            (seen,) = mock.requests()
            assert seen.body["context_management"]["edits"][0]["type"] == CLEAR_TOOL_USES
            assert seen.headers["anthropic-beta"] == BETA
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "POST /v1/messages -> 200, clearing added" in stderr
    assert "TOPSECRET" not in stderr and "<redacted>" in stderr


CHILD = f"""
import json, os, sys, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"]
BODY = {BODY!r}
req = urllib.request.Request(base + "/v1/messages", data=json.dumps(BODY).encode(),
                             headers={{"content-type": "application/json"}})
urllib.request.urlopen(req, timeout=30).read()
print(json.dumps({{"base": base, "upstream": os.environ["CTXPATCH_UPSTREAM"]}}))
sys.exit(7)
"""


def test_run_points_the_command_at_a_gateway_and_passes_its_exit_code() -> None:
    with MockServer() as mock:
        env = {**env_without_base_url(), "ANTHROPIC_BASE_URL": mock.base_url}
        r = subprocess.run(
            [*CTXPATCH, "run", "--", sys.executable, "-c", CHILD],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert r.returncode == 7, r.stderr
        seen = json.loads(r.stdout)
        assert seen["upstream"] == mock.base_url  # the user's own base URL stays the upstream
        assert seen["base"].startswith("http://127.0.0.1:") and seen["base"] != mock.base_url
        (req,) = mock.requests()
        assert req.body["context_management"]["edits"][0]["type"] == CLEAR_TOOL_USES
        assert r.stderr == ""  # no log on the command's terminal


def test_run_forwards_sigterm_to_the_command() -> None:
    child = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\nprint('ready', flush=True)\ntime.sleep(60)"
    proc = subprocess.Popen(
        [*CTXPATCH, "run", "--", sys.executable, "-c", child],
        stdout=subprocess.PIPE,
        text=True,
        env=env_without_base_url(),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 42  # the command's own answer to SIGTERM
    assert time.monotonic() - start < 20


def test_run_refuses_a_missing_command() -> None:
    r = subprocess.run(
        [*CTXPATCH, "run", "--", "no-such-command-ctxpatch"],
        capture_output=True,
        text=True,
        env=env_without_base_url(),
        timeout=60,
    )
    assert r.returncode == 2
    assert "command not found: no-such-command-ctxpatch" in r.stderr


def test_run_keeps_tool_search_on_only_in_front_of_anthropics_api() -> None:
    from gateway.run import command_env, is_first_party

    gw = "http://127.0.0.1:5555"
    # Anthropic's API upstream: tool search kept on (2.1.113-2.1.2xx turn it off for any other URL)
    env = command_env({"PATH": "/bin"}, gw, "https://api.anthropic.com")
    assert env["ENABLE_TOOL_SEARCH"] == "true"
    assert (
        env["ANTHROPIC_BASE_URL"] == gw and env["CTXPATCH_UPSTREAM"] == "https://api.anthropic.com"
    )
    # the user's own choice wins, whatever it is
    assert (
        command_env({"ENABLE_TOOL_SEARCH": "false"}, gw, "https://api.anthropic.com")[
            "ENABLE_TOOL_SEARCH"
        ]
        == "false"
    )
    # another upstream (a corporate gateway, Bedrock proxy, the test mock): nothing claimed
    for other in (
        "http://127.0.0.1:9999",
        "https://llm.example.com/anthropic",
        "https://api.anthropic.com.evil.io",
    ):
        assert "ENABLE_TOOL_SEARCH" not in command_env({}, gw, other), other
    assert is_first_party("HTTPS://API.ANTHROPIC.COM:443/") and not is_first_party("not a url[")
