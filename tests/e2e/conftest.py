"""Fixtures of the e2e suite: one loopback mock per session, one sandbox per (version, patched).

Every sandbox lives in one temporary folder that is deleted at the end of the session; the mock
is closed (and every node process the harness started is killed by its process group) even when
a test fails. Node missing: skip locally, fail in CI (``conftest.need``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import native_builds
import pytest
from conftest import IN_CI, need
from scratch_dirs import scratch_dir

from ctxpatch.errors import CtxpatchError
from lab.mock import MockServer
from lab.sandbox import Sandbox
from patcher import npmcache, ops


@pytest.fixture(scope="session")
def e2e_node() -> str:
    return need("node", "the e2e tests run the real cli.js")


@pytest.fixture(scope="session")
def mock() -> Iterator[MockServer]:
    with MockServer() as server:
        yield server


@pytest.fixture(scope="session")
def e2e_root() -> Iterator[Path]:
    root = scratch_dir("ctxpatch-e2e-", at_exit=False)  # swept by the next run if killed
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fetch_cli(version: str) -> Path:
    """The published ``@anthropic-ai/claude-code@version`` cli.js from the npm-pack cache."""
    try:
        return npmcache.package_dir("cc", version) / "cli.js"
    except CtxpatchError as e:
        if IN_CI:
            raise
        pytest.skip(f"cannot fetch claude-code@{version}: {e.what} ({e.why})")


@pytest.fixture(scope="session")
def sandbox_for(e2e_root: Path, e2e_node: str):
    """``sandbox_for(version, patched)``: a cached sandbox around a copy of that cli.js."""
    cache: dict[tuple[str, bool], Sandbox] = {}

    def make(version: str, patched: bool = False) -> Sandbox:
        key = (version, patched)
        if key not in cache:
            cli = fetch_cli(version)
            sb = Sandbox(e2e_root / f"{version}-{'patched' if patched else 'plain'}", cli, e2e_node)
            if patched:
                result = ops.apply_file(sb.cli)
                assert result.state == "PATCHED", result
            cache[key] = sb
        return cache[key]

    return make


NATIVE_VERSIONS = ("2.1.113", "2.1.330")


@pytest.fixture(scope="session")
def native_exe():
    """``native_exe(version)``: the real linux-x64 ``claude`` of 2.1.113 or 2.1.330 from the
    npm-pack cache's tarball, unpacked for this session (tests/native_builds.py). Fetched when the fixture is made (before a test moves ``HOME``, where the
    cache lives); needs a network namespace (``unshare -rn``). Either missing: skip locally,
    fail in CI."""
    from lab.netns import netns_available

    why = netns_available()
    if why is not None:
        if IN_CI:
            pytest.fail(f"the native e2e tests need a network namespace: {why}")
        pytest.skip(why)
    found: dict[str, Path | str] = {}
    for version in NATIVE_VERSIONS:
        try:
            found[version] = native_builds.native(version)
        except CtxpatchError as e:
            if IN_CI:
                raise
            found[version] = f"cannot fetch claude-code-linux-x64@{version}: {e.what} ({e.why})"

    def get(version: str) -> Path:
        exe = found[version]
        if isinstance(exe, str):
            pytest.skip(exe)
        return exe

    return get


def assert_proofs_pass(proofs: dict) -> None:
    """The three proofs of a ``verify --json`` PASS (cli.js and native alike): every main-loop
    request carried the clearing, the usage recorded is the edited prompt's (the next
    auto-compact count lower by exactly what the server cleared), 0 HTTP 400 and 0 thinking
    blocks dropped."""
    p = proofs
    assert set(p) == {"clearing_sent", "clearing_counted", "thinking_check"}, p
    assert p["clearing_sent"]["carrying"] == p["clearing_sent"]["main_requests"] == 6, p
    c = p["clearing_counted"]
    assert 0 < c["input_tokens"] < c["unedited_tokens"], c
    assert c["next_count_unedited"] - c["next_count"] == c["unedited_tokens"] - c["input_tokens"]
    assert (p["thinking_check"]["http_400"], p["thinking_check"]["dropped"]) == (0, 0), p
    assert all(x["ok"] for x in p.values()), p


RECALL_GET, RECALL_SEARCH = "mcp__ctxpatch__get", "mcp__ctxpatch__search"


def recall_tools_form(body: dict) -> str:
    """How a request body carries recall's two tools: ``definitions`` (both in ``tools``),
    ``names`` (neither in ``tools``, ``ToolSearch`` there, the two names one line each in the
    deferred tools' list: tool search), else a description of what it holds instead."""
    names = {t.get("name") for t in body.get("tools", [])}
    ours = {RECALL_GET, RECALL_SEARCH}
    if ours <= names:
        return "definitions"
    listed = f"{RECALL_GET}\\n{RECALL_SEARCH}\\n" in json.dumps(body)
    if not ours & names and "ToolSearch" in names and listed:
        return "names"
    return f"neither: tools {sorted(n for n in names if n)}, names listed: {listed}"


def recall_instructions_place(body: dict) -> str:
    """Where a request body carries recall's instructions as ``instructions_as_sent`` renders
    them (Claude Code's heading, the ``ctxpatch`` section): ``system`` (a system prompt block),
    ``reminder`` (a ``<system-reminder>`` text block of the first message), else ``absent``."""
    from recall.mcp_server import instructions_as_sent
    from recall.registered import SERVER

    shown = instructions_as_sent(SERVER)
    system = body.get("system")
    blocks = system if isinstance(system, list) else [{"text": system or ""}]
    if any(shown in str(b.get("text", "")) for b in blocks if isinstance(b, dict)):
        return "system"
    first = (body.get("messages") or [{}])[0].get("content")
    for b in first if isinstance(first, list) else []:
        text = str(b.get("text", "")) if isinstance(b, dict) else ""
        if text.startswith("<system-reminder>") and shown in text:
            return "reminder"
    return "absent"
