"""Proof offline for the cli.js side of the ledger (issue 14, part 1): the real cli.js 2.1.112
(the SDK's APIPromise: the reply read from a clone of its fetch Response) and 1.0.112 (a
MessageStream: its events), patched by ``ctxpatch apply``, run straight against the loopback mock of the Messages API (no
gateway). The injected code writes one line per main-loop request into the sandbox's XDG state
dir (``$HOME/.local/state/ctxpatch/ledger``: the sandbox sets no ``XDG_STATE_HOME``), each equal
to the usage and ``applied_edits`` the mock answered, with the session id Claude Code sent; and
``ctxpatch report`` over the sandbox's projects folder shows them.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest
from conftest import run_cli

from engine.api.context_management import CLEAR_TOOL_USES
from lab.harness import MODEL
from lab.mock import MockConfig
from lab.scenarios import rounds_session
from usage import ledger as L

pytestmark = [pytest.mark.e2e]

USAGE = {
    "input_tokens": 2_345,
    "cache_creation_input_tokens": 1_111,
    "cache_read_input_tokens": 54_321,
    "output_tokens": 123,
}
KNOBS = {  # the injected edit, small enough for the mock to clear on this short session
    "CLAUDE_CTX_CLEAR_TRIGGER": "5000",
    "CLAUDE_CTX_CLEAR_KEEP": "2",
    "CLAUDE_CTX_CLEAR_POLICY": "fixed",
    "CLAUDE_CTX_CLEAR_STEP": "1",
}


def _named(body: dict) -> str:
    """The session id in a request's metadata.user_id (JSON in 2.1.x, ``..._session_<id>``
    before)."""
    uid = body["metadata"]["user_id"]
    return json.loads(uid)["session_id"] if uid.startswith("{") else uid.rsplit("_session_", 1)[1]


@pytest.mark.parametrize("version", ["2.1.112", "1.0.112"])
def test_the_patched_cli_js_writes_the_mock_numbers_and_report_shows_them(
    sandbox_for, mock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: str
) -> None:
    sb = sandbox_for(version, patched=True)
    state = sb.home / ".local" / "state"
    shutil.rmtree(state / "ctxpatch", ignore_errors=True)  # another test's run of this sandbox
    session = rounds_session(
        str(sb.proj), n=12, result_chars=6_000, last_usage=60_000, version=version, model=MODEL
    )
    sid = session.session_id
    session.write(sb.projects_dir)
    mock.reset(MockConfig(usage=dict(USAGE)))
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
        mock.base_url,
        {"ANTHROPIC_MODEL": MODEL, **KNOBS},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ctxpatch" not in run.stdout and "ctxpatch" not in run.stderr  # nothing printed

    d = state / "ctxpatch" / "ledger"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / L.NAME).stat().st_mode) == 0o600
    read = L.read_ledger(d)
    assert read.skipped == 0
    lines = read.entries
    main = mock.requests("main")
    # one line per watched request: the query loop's (side queries are not built there)
    assert len(lines) == len(main) >= 1, (lines, [r.kind for r in mock.requests()])
    for line, req in zip(lines, main, strict=True):
        assert line["src"] == "cli.js" and line["status"] == req.status == 200
        assert (line["input"], line["cache_write_5m"], line["cache_read"], line["output"]) == (
            USAGE["input_tokens"],
            USAGE["cache_creation_input_tokens"],
            USAGE["cache_read_input_tokens"],
            USAGE["output_tokens"],
        )
        assert line["cache_write_1h"] == 0 and "cut" not in line
        applied = [e for e in req.applied_edits if e["type"] == CLEAR_TOOL_USES]
        assert line["cleared_tool_uses"] == sum(e["cleared_tool_uses"] for e in applied)
        assert line["cleared_input_tokens"] == sum(e["cleared_input_tokens"] for e in applied)
        assert line["session"] == _named(req.body) and line["model"] == req.body["model"]
        assert line["edit"] == "added" and "why" not in line
        assert any(e["type"] == CLEAR_TOOL_USES for e in req.body["context_management"]["edits"])
    assert lines[0]["cleared_tool_uses"] > 0 and lines[0]["cleared_input_tokens"] > 0
    # the session is the one the request named: 2.1.x continues the resumed session; 1.0.x forks
    # it into a new transcript (the copied history plus this turn) and names that one
    sid = lines[-1]["session"]
    if version.startswith("2."):
        assert sid == session.session_id
    assert (sb.projects_dir / f"{sid}.jsonl").is_file()

    # the report over the sandbox's projects folder reads the cli.js lines beside the replay
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code, out, err = run_cli(
        "report", "--projects", str(sb.projects_dir.parent), "--json", "--jobs", "1"
    )
    assert code == 0, err
    (s,) = [r for r in json.loads(out)["results"] if r["session"] == sid]
    got = s["ledger"]
    assert got["requests"] == len(lines)
    assert got["cleared_tool_uses"] == sum(x["cleared_tool_uses"] for x in lines)
    assert got["cleared_input_tokens"] == sum(x["cleared_input_tokens"] for x in lines)
    assert got["usage"]["cache_read"] == USAGE["cache_read_input_tokens"] * len(lines)
    assert got["edits"] == {"added": len(lines)}
    assert got["usd"] is not None and got["usd"] > 0
