"""The real native 2.1.330 through ``ctxpatch run`` with no network (issue 18 item 5): the user
sees why at once (the gateway's 502 names the DNS failure and asks Claude Code not to retry),
not "server-side issue" after three minutes of retries (measured before: 11 requests, 178 s)."""

from __future__ import annotations

import time

import pytest

from .lab_compat import lab

GatewaySandbox = lab("sandbox").GatewaySandbox

pytestmark = [pytest.mark.e2e, pytest.mark.real]


def test_no_network_is_said_within_seconds(native_exe, e2e_root):
    sb = GatewaySandbox(e2e_root / "unreachable", native_exe("2.1.330"))
    start = time.monotonic()
    # the namespace has no DNS: the gateway's lookup of the API fails at once
    r = sb.run(
        ["-p", "hi"], "https://api.anthropic.com:443", {"ANTHROPIC_API_KEY": "sk-ant-x"}, 120
    )
    took = time.monotonic() - start
    assert r.returncode == 1, r.describe()
    assert "API Error: 502" in r.stdout and "DNS lookup of api.anthropic.com failed" in r.stdout
    assert "sk-ant" not in r.stdout + r.stderr
    assert sb.gateway_log.read_text().count("-> 502") == 1  # Claude Code did not retry
    assert took < 30, took
