"""Proof offline (issue 14, part 5): the real cli.js 2.1.112 through ``ctxpatch gateway`` to the
loopback mock of the Messages API. The gateway's ledger holds exactly the numbers the mock
answered (usage, the applied edits' cleared tool uses and tokens, status, session id) and
``ctxpatch report`` over the sandbox's projects folder shows them next to the engine's replay.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from engine.api.context_management import CLEAR_TOOL_USES, ClearToolUses
from gateway.server import ThreadedGateway
from lab.harness import MODEL
from lab.mock import MockConfig
from lab.mock_api import make_usage
from lab.scenarios import rounds_session
from usage import ledger as L

pytestmark = [pytest.mark.e2e]

VERSION = "2.1.112"
USAGE = {
    "input_tokens": 3_210,
    "cache_creation_input_tokens": 1_234,
    "cache_read_input_tokens": 45_678,
    "output_tokens": 321,
}
EDIT = ClearToolUses(trigger_value=5_000, keep=2)


def test_ledger_holds_the_mock_numbers_and_report_shows_them(
    sandbox_for, mock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = sandbox_for(VERSION)
    session = rounds_session(
        str(sb.proj), n=12, result_chars=6_000, last_usage=60_000, version=VERSION, model=MODEL
    )
    sid = session.session_id
    session.write(sb.projects_dir)
    mock.reset(MockConfig(usage=dict(USAGE)))
    led = L.Ledger(tmp_path / "state" / "ctxpatch" / "ledger")
    with ThreadedGateway(upstream=mock.base_url, edit=EDIT, ledger=led) as gw:
        run = sb.run(
            [
                "-p",
                "continue",
                "--resume",
                sid,
                "--output-format",
                "json",
                "--model",
                MODEL,
                "--disallowedTools",
                "Skill",
            ],
            gw.url,
            {"ANTHROPIC_MODEL": MODEL},
        )
        assert run.returncode == 0, run.stderr[-2000:]
    assert led.flush() and led.errors == 0
    lines = L.read_ledger(led.directory).entries
    logged = [r for r in mock.requests() if r.kind in ("main", "side", "compact")]
    assert len(lines) == len(logged) and any(r.kind == "main" for r in logged)
    for line, req in zip(lines, logged, strict=True):
        want = USAGE if req.kind == "main" else make_usage(100, 5)
        assert line["status"] == req.status == 200
        assert (line["input"], line["cache_write_5m"], line["cache_read"], line["output"]) == (
            want["input_tokens"],
            want["cache_creation_input_tokens"],
            want["cache_read_input_tokens"],
            want["output_tokens"],
        ), req.kind
        cleared = [e for e in req.applied_edits if e["type"] == CLEAR_TOOL_USES]
        assert line["cleared_tool_uses"] == sum(e["cleared_tool_uses"] for e in cleared)
        assert line["cleared_input_tokens"] == sum(e["cleared_input_tokens"] for e in cleared)
        assert line["session"] == sid and line["model"] == req.body["model"]
        assert line["edit"] == "added"
    main = next(ln for ln, r in zip(lines, logged, strict=True) if r.kind == "main")
    assert main["cleared_tool_uses"] > 0 and main["cleared_input_tokens"] > 0

    # the report over the sandbox's projects folder: the ledger next to the replay
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code, out, err = run_cli(
        "report", "--projects", str(sb.projects_dir.parent), "--json", "--jobs", "1"
    )
    assert code == 0, err
    doc = json.loads(out)
    (s,) = [r for r in doc["results"] if r["session"] == sid]
    got = s["ledger"]
    assert got["requests"] == len(lines)
    assert got["cleared_tool_uses"] == sum(x["cleared_tool_uses"] for x in lines)
    assert got["cleared_input_tokens"] == sum(x["cleared_input_tokens"] for x in lines)
    assert got["usage"]["cache_read"] == sum(x["cache_read"] for x in lines)
    assert got["usd"] is not None and got["usd"] > 0
    assert s["replay"]["unpatched"]["tokens_sent"] > 0 and "patched" in s["replay"]
    code, text, _ = run_cli("report", "--projects", str(sb.projects_dir.parent), "--jobs", "1")
    assert code == 0 and f"{got['cleared_input_tokens']:,} tok" in text
