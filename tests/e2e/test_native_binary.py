"""The real native (Bun) Claude Code binaries, offline, against the loopback mock.

2.1.113 (the first native build, single module) and 2.1.330 (code-split, the newest profile)
from the linux-x64 platform package (``patcher.npmcache.native_binary``), each run where it lies
in a loopback-only network namespace (``lab.netns``: a Bun binary takes no node
preload, so the namespace is the guard). Checked here:

* offline by construction: the namespace has ``lo`` only and every connection the binary made
  went to the mock through the bridge;
* what the binary sends: beta headers, ``context_management``, the attestation text
  (``x-anthropic-billing-header`` system block, ``cch=``) -- recorded as assertions so a new
  build that changes them is noticed;
* the auto-compaction boundary, to the token: one below, no summarisation request; at it, one
  (2.1.330: with ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` configured, as its profile requires; without
  it the proactive compaction never fires, checked at the configured boundary).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.harness import Case, Outcome, run_case
from lab.sandbox import NativeSandbox
from lab.scenarios import rounds_session

pytestmark = [pytest.mark.e2e, pytest.mark.real]

VERSIONS = ("2.1.113", "2.1.330")
WINDOW = "150000"  # CLAUDE_CODE_AUTO_COMPACT_WINDOW for 2.1.195+ (clamped to 100k-1M)


@pytest.fixture(scope="module")
def native_for(e2e_root: Path, native_exe):
    cache: dict[str, NativeSandbox] = {}

    def make(version: str) -> NativeSandbox:
        if version not in cache:
            cache[version] = NativeSandbox(e2e_root / f"native-{version}", native_exe(version))
        return cache[version]

    return make


def env_for(version: str) -> dict[str, str]:
    return {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": WINDOW} if version >= "2.1.195" else {}


def run(sb: NativeSandbox, mock, version: str, case: Case) -> Outcome:
    return run_case(sb, mock, case, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_native_binary_runs_offline_and_sends_what_we_recorded(native_for, mock, version):
    sb = native_for(version)
    sb.netlog.unlink(missing_ok=True)
    o = run(
        sb,
        mock,
        version,
        Case("native-hello", rounds_session(str(sb.proj), n=2, last_usage=5000, version=version)),
    )
    assert o.run.returncode == 0, o.explain()
    assert f"claude-cli/{version} " in o.main.headers.get("user-agent", ""), o.explain()
    # offline: the namespace held loopback only; every connection was the mock's port
    events = sb.net_events()
    assert {"event": "netns", "interfaces": ["lo"]} in events, events
    conns = [e for e in events if e["event"] == "connect"]
    assert conns and all(e["port"] == mock.port for e in conns), events
    assert len(conns) <= len(o.requests) + 1, (events, [r.path for r in o.requests])
    # the requests: the betas, context_management and attestation as each build sends them
    main = o.main
    betas = main.headers["anthropic-beta"].split(",")
    assert betas[:3] == [
        "claude-code-20250219",
        "interleaved-thinking-2025-05-14",
        "context-management-2025-06-27",
    ], betas
    if version == "2.1.113":
        assert "prompt-caching-scope-2026-01-05" in betas, betas
    else:
        assert {"thinking-token-count-2026-05-13", "advanced-tool-use-2025-11-20"} <= set(betas)
    assert main.body["context_management"] == {
        "edits": [{"type": "clear_thinking_20251015", "keep": "all"}]
    }, main.body["context_management"]
    assert not any("clear_tool_uses" in str(r.body) for r in o.requests)
    billing = main.body["system"][0]["text"]
    m = re.fullmatch(
        r"x-anthropic-billing-header: cc_version=(\S+)\.([0-9a-f]{3}); "
        r"cc_entrypoint=sdk-cli;(?: cch=([0-9a-f]{5});)?",
        billing,
    )
    assert m is not None, billing
    assert m.group(1) == version, billing
    # 2.1.113 signs the body (cch=, 5 hex); 2.1.330 sends no cch against a non-Anthropic URL
    assert (m.group(3) is not None) is (version == "2.1.113"), billing


@pytest.mark.parametrize("version", VERSIONS)
def test_native_autocompaction_fires_exactly_at_the_engine_threshold(native_for, mock, version):
    """A probe run far below the threshold tells what the CLI adds after the last usage (the
    prompt and the attachments it writes with it: 2.1.330 writes environment, model, deferred
    tools, agent listing and token budget reminders, ~850 tokens, each with its ``rendered``
    text); the engine counts those records (``attachments_count_rendered``), and the real
    binary must fire exactly where that count meets the threshold."""
    sb = native_for(version)
    env = env_for(version)

    def case(name: str, usage: int) -> Case:
        return Case(
            name, rounds_session(str(sb.proj), n=6, last_usage=usage, version=version), env=env
        )

    probe = run(sb, mock, version, case("native-ac-probe", 5000))
    assert probe.run.returncode == 0 and not probe.ac_fired, probe.explain()
    th = probe.thresholds
    assert th.auto_compact_enabled and th.auto_compact == th.effective_window - 13000
    newer = probe.ac_tokens - 5000
    assert newer > 0, probe.explain()
    if version == "2.1.330":  # the prompt's attachments are counted as rendered, not as JSON
        assert 500 < newer < 2000, probe.explain()
    boundary = th.auto_compact - newer

    below = run(sb, mock, version, case("native-ac-below", boundary - 1))
    assert below.run.returncode == 0, below.explain()
    assert below.ac_tokens == th.auto_compact - 1, below.explain()
    assert not below.ac_expected and not below.ac_fired, below.explain()
    at = run(sb, mock, version, case("native-ac-at", boundary))
    assert at.run.returncode == 0, at.explain()
    assert at.ac_tokens == th.auto_compact, at.explain()
    assert at.ac_expected and at.ac_fired, at.explain()


def test_native_2_1_330_needs_the_configured_window(native_for, mock):
    """2.1.195+: without ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` the proactive compaction does not
    fire at eff - 13000 (the engine's profile: reactive only); with it, it does (above)."""
    version = "2.1.330"
    sb = native_for(version)
    usage = 200_000 - 20_000 - 13_000 + 100  # past the threshold an unconfigured window would have
    o = run(
        sb,
        mock,
        version,
        Case(
            "native-unconfigured",
            rounds_session(str(sb.proj), n=6, last_usage=usage, version=version),
        ),
    )
    assert o.run.returncode == 0, o.explain()
    assert not o.ac_expected and not o.ac_fired, o.explain()
