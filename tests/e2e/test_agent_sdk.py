"""The Agent SDK one-liner with the real ``claude-agent-sdk`` from PyPI and its bundled binary.

A Python program, run inside a loopback-only network namespace (as the native e2e tests run
the binary: :mod:`lab.netns`), does ``import ctxpatch.agent_sdk;
ctxpatch.agent_sdk.enable()`` and runs three one-turn ``query()`` sessions of the SDK's own
bundled Claude Code against the mock (reached through the bridge):

* A: ``ANTHROPIC_BASE_URL`` exported (the mock): the gateway's upstream is that URL;
* B: the exported URL points nowhere and ``ClaudeAgentOptions(env={"ANTHROPIC_BASE_URL":
  mock})``: the option wins and is the upstream (same upstream as A: the same gateway);
* C: after ``disable()``: straight to the mock, no gateway left running.

The mock must see A's and B's requests carry Claude Code's own ``clear_thinking`` edit then
``clear_tool_uses_20250919`` (with its beta), and C's only Claude Code's own. The SDK's files
are byte-identical afterwards. The SDK (pinned, with its dependencies) is installed with
``pip install --target`` into a scratch folder from its wheels, which the ctxpatch cache keeps
(tests/native_builds.py: ``pip download`` once); no network namespace or no SDK: skip locally,
fail in CI.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import native_builds
import pytest
from conftest import IN_CI
from scratch_dirs import scratch_dir

from engine.api.context_management import BETA, CLEAR_THINKING, CLEAR_TOOL_USES
from lab import netns
from lab.mock import MockServer
from lab.sandbox import SANDBOX_ENV

pytestmark = [pytest.mark.e2e, pytest.mark.real]

SDK_VERSION = native_builds.SDK_VERSION  # bundles Claude Code 2.1.332
ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    import json, os, sys, time
    t0 = time.perf_counter()
    import ctxpatch.agent_sdk; ctxpatch.agent_sdk.enable()
    enable_s = time.perf_counter() - t0
    import anyio
    from claude_agent_sdk import ClaudeAgentOptions, query

    MOCK = sys.argv[1]

    async def session(tag, env):
        t = time.perf_counter()
        kinds = []
        opts = ClaudeAgentOptions(env=env, max_turns=1)
        async for m in query(prompt=f"say hi, session {tag}", options=opts):
            kinds.append(type(m).__name__)
        return {"messages": kinds, "seconds": time.perf_counter() - t}

    async def main():
        out = {"enable_seconds": enable_s}
        out["A"] = await session("A", {})
        out["gateways_A"] = ctxpatch.agent_sdk.gateway_urls()
        os.environ["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"  # nothing listens there
        out["B"] = await session("B", {"ANTHROPIC_BASE_URL": MOCK})
        out["gateways_B"] = ctxpatch.agent_sdk.gateway_urls()
        ctxpatch.agent_sdk.disable()
        os.environ["ANTHROPIC_BASE_URL"] = MOCK
        out["C"] = await session("C", {})
        out["gateways_C"] = ctxpatch.agent_sdk.gateway_urls()
        print(json.dumps(out))

    anyio.run(main)
    """
)


def _unavailable(why: str) -> None:
    if IN_CI:
        pytest.fail(why)
    pytest.skip(why)


def _install(dest: Path) -> None:
    """``pip install --target`` the pinned SDK from its cached wheels (offline)."""
    try:
        wheels = native_builds.sdk_wheels(SDK_VERSION)
    except RuntimeError as e:
        _unavailable(str(e))
    r = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-cache-dir", "--no-index", "--find-links", str(wheels), "--target", str(dest),
            f"claude-agent-sdk=={SDK_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    if r.returncode != 0:
        _unavailable(f"cannot install claude-agent-sdk=={SDK_VERSION}: {r.stderr[-500:]}")


@pytest.fixture(scope="module")
def sdk_site() -> Iterator[Path]:
    """The folder holding the pinned SDK and its dependencies (for PYTHONPATH): installed for
    this module from the cached wheels, deleted after it (430 MB installed, 178 MB of wheels
    kept)."""
    why = netns.netns_available()
    if why is not None:
        _unavailable(f"the Agent SDK e2e test runs the binary offline in a namespace: {why}")
    site = scratch_dir("ctxpatch-agent-sdk-", at_exit=False)  # swept by the next run if killed
    try:
        _install(site)
        assert (site / "claude_agent_sdk" / "_bundled" / "claude").is_file()
        yield site
    finally:
        shutil.rmtree(site, ignore_errors=True)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(folder)).encode())
            with p.open("rb") as f:
                h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()


def _session_of(body: dict) -> str | None:
    text = json.dumps(body.get("messages", []))
    for tag in "ABC":
        if f"say hi, session {tag}" in text:
            return tag
    return None


def test_enable_routes_every_sdk_session_through_the_gateway(
    sdk_site: Path, tmp_path: Path
) -> None:
    sdk_files = sdk_site / "claude_agent_sdk"
    before = _digest(sdk_files)
    home = tmp_path / "home"
    home.mkdir()
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    with MockServer() as mock:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "TMPDIR": str(tmp_path),
            "PYTHONPATH": f"{sdk_site}{os.pathsep}{ROOT}",
            "ANTHROPIC_BASE_URL": mock.base_url,
            **{k: v for k, v in SANDBOX_ENV.items() if v},
        }
        sock = tmp_path / "mock.sock"
        cmd = netns.wrap([sys.executable, str(program), mock.base_url], mock.port, sock)
        with netns.UnixBridge(sock, mock.port):
            r = subprocess.run(
                cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
            )
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        seen: dict[str, list] = {"A": [], "B": [], "C": []}
        for q in mock.requests("main"):
            tag = _session_of(q.body)
            assert tag is not None, q.body.get("messages")
            seen[tag].append(q)

    for tag in "ABC":
        assert out[tag]["messages"][-1] == "ResultMessage", out
        assert seen[tag], f"session {tag} sent nothing to the mock"
    for tag in "AB":  # through the gateway, the mock its upstream
        for q in seen[tag]:
            edits = [e["type"] for e in q.body["context_management"]["edits"]]
            assert edits == [CLEAR_THINKING, CLEAR_TOOL_USES], (tag, edits)
            assert BETA in q.headers.get("anthropic-beta", "")
            assert q.status == 200
    for q in seen["C"]:  # after disable(): Claude Code's own edit only
        edits = [e["type"] for e in (q.body.get("context_management") or {}).get("edits", [])]
        assert CLEAR_TOOL_USES not in edits
    (upstream_a,) = out["gateways_A"]
    assert upstream_a == mock.base_url  # the exported URL chained as the upstream
    assert out["gateways_B"] == out["gateways_A"]  # the env option's URL: the same upstream
    assert out["gateways_C"] == {}  # disable() stopped it
    assert _digest(sdk_files) == before  # the SDK's files untouched
    print(
        f"enable() {out['enable_seconds']:.2f} s; sessions A {out['A']['seconds']:.2f} s, "
        f"B {out['B']['seconds']:.2f} s, C (direct) {out['C']['seconds']:.2f} s"
    )
