"""Recall's tools as a ``cli.js`` build sends them to Anthropic's own API, offline.

``ctxpatch apply`` leaves a ``cli.js`` build talking to Anthropic (no base URL). Whether its
tool search defers recall's two tools there decides what the replays count for its sessions
(``Profile.tool_search_defers_mcp``, ``engine.replay.recall_tools.recall_tools_for``): both
definitions up to 2.1.68, only their names from 2.1.69 (bisected over the cached builds). The
build runs with no ``ANTHROPIC_BASE_URL`` in a loopback-only network namespace where
``api.anthropic.com`` is the mock behind TLS from a throwaway CA (``lab.firstparty``, node
trusting it through ``NODE_EXTRA_CA_CERTS``), recall registered as ``apply`` registers it; the
first request says which.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import IN_CI

from engine.profiles import profile_for
from engine.replay.recall_tools import RECALL_TOOLS_DEFERRED_ESTIMATE, recall_tools_for
from lab.chain import drive
from lab.firstparty import API_HOST, FirstPartySandbox, openssl_missing
from lab.harness import MODEL
from lab.mock import MockConfig, MockServer, Step
from lab.netns import netns_available
from recall import register

from .conftest import fetch_cli, recall_instructions_place, recall_tools_form

pytestmark = [pytest.mark.e2e, pytest.mark.real]

ROOT = Path(__file__).resolve().parents[2]
STREAM = ("-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")


@pytest.fixture(scope="module")
def first_party_ready() -> None:
    for why in (netns_available(), openssl_missing()):
        if why is not None:
            if IN_CI:
                pytest.fail(f"the first-party e2e test needs it: {why}")
            pytest.skip(why)


@pytest.mark.parametrize("version", ["2.1.68", "2.1.69", "2.1.112"])
def test_a_cli_js_build_talking_to_anthropic_sends_recalls_tools_as_the_replay_counts_them(
    first_party_ready, e2e_node: str, mock: MockServer, tmp_path: Path, version: str
) -> None:
    cli = fetch_cli(version)
    launcher = tmp_path / "claude"  # the build as a program the namespace runs
    launcher.write_text(f'#!/bin/sh\nexec "{e2e_node}" "{cli}" "$@"\n')
    launcher.chmod(0o755)
    sb = FirstPartySandbox(tmp_path / "sb", launcher, first_party=True)
    assert register.register({"HOME": str(sb.home)}).registered
    env = {"PYTHONPATH": str(ROOT), "CTXPATCH_STATE_DIR": str(tmp_path / "state")}
    mock.reset(MockConfig(script=[Step.text("ok")]))
    run = drive(sb, [*STREAM, "--model", MODEL], mock.base_url, env, ["hello"], 300)
    assert run.returncode == 0, run.describe()
    first = next(r for r in mock.requests() if r.kind == "main")
    # it believed it talked to Anthropic: no base URL, the request to Anthropic's own host
    assert "ANTHROPIC_BASE_URL" not in sb.env(mock.base_url)
    assert {k.lower(): v for k, v in first.headers.items()}.get("host") == API_HOST
    deferred = recall_tools_for(profile_for(version)) == RECALL_TOOLS_DEFERRED_ESTIMATE
    assert recall_tools_form(first.body) == ("names" if deferred else "definitions")
    # the server's instructions, with the names only (the definitions say it): in the system
    # prompt in 2.1.69, in a system reminder of the first message by 2.1.112 (what the replays
    # count with the names)
    place = {"2.1.68": "absent", "2.1.69": "system", "2.1.112": "reminder"}[version]
    assert recall_instructions_place(first.body) == place
