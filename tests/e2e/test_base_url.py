"""What a non-Anthropic base URL turns off, measured in the real native binaries, offline.

The same resumed session is run twice per version (``lab.firstparty``): once with
``ANTHROPIC_BASE_URL`` = the mock at ``127.0.0.1`` (what ``ctxpatch gateway`` is), once with no
base URL while ``api.anthropic.com`` resolves to ``127.0.0.1`` and serves TLS from a throwaway
CA the binary trusts (first-party, as a user talking to Anthropic sees it). In both runs
``api.anthropic.com`` is the mock, so a call that bypasses the base URL shows up too. The
differences are pinned here (the README's table, "What a non-Anthropic base URL changes"), so a
build that changes them is noticed. 2.1.217 is in the CI cache too, so it is measured as well.
"""

from __future__ import annotations

import re
from pathlib import Path

import native_builds
import pytest
from conftest import IN_CI

from ctxpatch.errors import CtxpatchError
from lab.firstparty import (
    API_HOST,
    FirstPartySandbox,
    Traits,
    difference,
    openssl_missing,
    tls_forwarded,
    traits,
)
from lab.harness import Case, run_case
from lab.netns import netns_available
from lab.scenarios import rounds_session

pytestmark = [pytest.mark.e2e, pytest.mark.real]

VERSIONS = ("2.1.113", "2.1.217", "2.1.330")
MODEL = "claude-sonnet-4-5-20250929"
BASE = ("cc_version", "cc_entrypoint")
SETTINGS = ("GET", API_HOST, "/api/claude_code/settings")
POLICY = ("GET", API_HOST, "/api/claude_code/policy_limits")
METRICS = ("GET", API_HOST, "/api/claude_code/organizations/metrics_enabled")

# what only the first-party run had (measured; the README's table)
EXPECTED = {
    "2.1.113": dict(
        betas_fp_only=("advanced-tool-use-2025-11-20",),
        headers_fp_only=("x-client-request-id",),
        body_keys_fp_only=(),
        billing_gw=(*BASE, "cch"),  # 2.1.113 signs whatever the base URL
        billing_fp=(*BASE, "cch"),
        tool_search_gw=False,
        side_gw={METRICS},  # the metrics check bypasses the base URL
        side_fp={SETTINGS, POLICY, METRICS},
    ),
    "2.1.217": dict(
        betas_fp_only=("advanced-tool-use-2025-11-20",),
        headers_fp_only=("x-client-request-id",),
        body_keys_fp_only=(),
        billing_gw=BASE,
        billing_fp=(*BASE, "cch", "cc_prev_req"),
        tool_search_gw=False,
        side_gw=set(),
        side_fp={SETTINGS, POLICY},
    ),
    "2.1.330": dict(
        betas_fp_only=(
            "prompt-caching-scope-2026-01-05",
            "thinking-binding-controls-2026-08-01",
            "cache-diagnosis-2026-04-07",
        ),
        headers_fp_only=(
            "x-claude-1p-request-class",
            "x-claude-code-prompt-id",
            "x-claude-code-request-class",
            "x-claude-code-sandy-plover",
            "x-client-request-id",
        ),
        body_keys_fp_only=("diagnostics",),
        billing_gw=BASE,
        billing_fp=(*BASE, "cch", "cc_prev_req", "cc_prompt_id", "cc_turn_origin"),
        tool_search_gw=True,
        side_gw=set(),
        side_fp={SETTINGS, POLICY},
    ),
}


@pytest.fixture(scope="module")
def measure(e2e_root: Path, mock):
    """``measure(version, first_party, model=..., usage=..., env=...)``: the run's Traits
    (cached per arguments) and the sandbox's network log."""
    for why in (netns_available(), openssl_missing()):
        if why is not None:
            if IN_CI:
                pytest.fail(f"the base-URL e2e tests need it: {why}")
            pytest.skip(why)
    sandboxes: dict[tuple[str, bool], FirstPartySandbox] = {}
    runs: dict[tuple, tuple[Traits, list[dict]]] = {}

    def run(
        version: str,
        first_party: bool,
        model: str = MODEL,
        usage: int = 5000,
        env: tuple[tuple[str, str], ...] = (),
    ) -> tuple[Traits, list[dict]]:
        key = (version, first_party, model, usage, env)
        if key in runs:
            return runs[key]
        if (version, first_party) not in sandboxes:
            try:
                exe = native_builds.native(version)
            except CtxpatchError as e:
                if IN_CI:
                    raise
                pytest.skip(f"cannot fetch claude-code-linux-x64@{version}: {e.what} ({e.why})")
            name = f"baseurl-{version}-{'fp' if first_party else 'gw'}"
            sandboxes[version, first_party] = FirstPartySandbox(
                e2e_root / name, exe, first_party=first_party
            )
        sb = sandboxes[version, first_party]
        sb.netlog.unlink(missing_ok=True)
        session = rounds_session(str(sb.proj), n=2, last_usage=usage, version=version)
        o = run_case(sb, mock, Case("baseurl", session, env=dict(env), model=model), version)
        assert o.run.returncode == 0, o.explain()
        runs[key] = (traits(o.requests), sb.net_events())
        return runs[key]

    return run


@pytest.mark.parametrize("version", VERSIONS)
def test_what_a_non_anthropic_base_url_turns_off(measure, version):
    gw, gw_net = measure(version, first_party=False)
    fp, fp_net = measure(version, first_party=True)
    exp = EXPECTED[version]
    # the runs are what they claim: loopback only; the first-party one spoke TLS to the name
    for net in (gw_net, fp_net):
        assert {"event": "netns", "interfaces": ["lo"]} in net, net
    assert gw.host.startswith("127.0.0.1:") and fp.host == API_HOST, (gw.host, fp.host)
    assert tls_forwarded(fp_net) >= 1, fp_net
    d = difference(gw, fp)
    # the gateway run has nothing first-party lacks; first-party has exactly what we recorded
    assert (d.betas_gw_only, d.headers_gw_only, d.billing_gw_only) == ((), (), ()), d
    assert d.betas_fp_only == exp["betas_fp_only"], d
    assert d.headers_fp_only == exp["headers_fp_only"], d
    assert d.body_keys_fp_only == exp["body_keys_fp_only"], d
    # the attestation text: which fields each run carries (a cch is 5 hex digits)
    assert gw.billing == exp["billing_gw"] and fp.billing == exp["billing_fp"], (gw, fp)
    for t in (gw, fp):
        assert (t.cch is not None) is ("cch" in t.billing), t
        assert t.cch is None or re.fullmatch(r"[0-9a-f]{5}", t.cch), t
    # the system prompt's globally scoped cache block: first-party only, in every build
    assert fp.global_cache_scope and not gw.global_cache_scope
    # on-demand tool search (ToolSearch, the other tools loaded on demand)
    assert fp.tool_search and gw.tool_search is exp["tool_search_gw"], (gw.tools, fp.tools)
    if exp["tool_search_gw"]:
        assert gw.tools == fp.tools and gw.tools_bytes == fp.tools_bytes
    else:  # every tool's definition up front: half the tools' bytes again, or more
        assert len(gw.tools) > 2 * len(fp.tools) and gw.tools_bytes > 1.5 * fp.tools_bytes
        # ENABLE_TOOL_SEARCH=true turns it back on through the gateway (which forwards the
        # tool_reference blocks it needs unchanged)
        on, _ = measure(version, first_party=False, env=(("ENABLE_TOOL_SEARCH", "true"),))
        assert on.tool_search and on.tools == fp.tools, (on.tools, fp.tools)
        assert "advanced-tool-use-2025-11-20" in on.betas
    # calls besides the model's: remote managed settings and policy limits only first-party
    assert set(gw.side_calls) == exp["side_gw"] and set(fp.side_calls) == exp["side_fp"], (
        gw.side_calls,
        fp.side_calls,
    )
    # unchanged by the base URL: the context management the client sends
    assert not gw.compacted and not fp.compacted


def test_assume_first_party_makes_the_gateway_run_first_party(measure):
    """2.1.330's ``_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL=1`` on the ``127.0.0.1`` URL: the
    requests carry everything first-party does (``cch=`` included), while settings and policy
    limits are fetched from ``api.anthropic.com`` directly, around the base URL."""
    version = "2.1.330"
    fp, _ = measure(version, first_party=True)
    assumed, _ = measure(
        version, first_party=False, env=(("_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL", "1"),)
    )
    assert assumed.host.startswith("127.0.0.1:"), assumed.host
    d = difference(assumed, fp)
    assert d == difference(fp, fp), d
    assert assumed.billing == fp.billing and assumed.cch is not None
    assert assumed.global_cache_scope and assumed.tools == fp.tools
    assert set(assumed.side_calls) == set(fp.side_calls) == {SETTINGS, POLICY}


@pytest.mark.parametrize("version", ["2.1.113", "2.1.330"])
def test_the_1m_window_is_not_turned_off(measure, version):
    """``MODEL[1m]`` gets the ``context-1m-2025-08-07`` beta and a 1M window through the gateway
    as first-party: at 250K tokens nothing compacts, while the 200K model compacts (2.1.330
    compacts proactively only with a configured window: set to 1M, clamped to the model's)."""
    env = (("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "1000000"),) if version >= "2.1.195" else ()
    control, _ = measure(version, first_party=False, usage=250_000, env=env)
    assert control.compacted and "context-1m-2025-08-07" not in control.betas, control
    for first_party in (False, True):
        t, _ = measure(version, first_party, model=f"{MODEL}[1m]", usage=250_000, env=env)
        assert "context-1m-2025-08-07" in t.betas and not t.compacted, (first_party, t)
