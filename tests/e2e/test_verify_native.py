"""``ctxpatch verify`` on the real native 2.1.330 and 2.1.113 (issue 9, "Done when": the real
binary's requests carry the clearing edit through ``ctxpatch run`` and verify says PASS), and a
verify that FAILs when the gateway adds nothing (``CLAUDE_CTX_CLEAR_DISABLE=1`` reaching it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ctxpatch.cli.verifying import register

from .conftest import assert_proofs_pass

pytestmark = [pytest.mark.e2e, pytest.mark.real]


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test app"""

    register(app)
    return app


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The caller's HOME and knobs: verify must leave the one untouched and ignore the others."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CTX_CLEAR_DISABLE", "1")  # the user's own: must not leak in
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://192.0.2.1:9")
    return home


def test_verify_passes_on_the_native_2_1_330(native_exe, fake_home: Path) -> None:
    exe = native_exe("2.1.330")
    res = CliRunner().invoke(_app(), ["verify", "--path", str(exe)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith(f"PASS  {exe}  (Claude Code 2.1.330, native"), out
    assert "[ok] offline: a network namespace with lo only" in out, out
    assert "[ok] clearing sent: 6 of 6 main-loop requests carried clear_tool_uses_20250919" in out
    assert "[ok] clearing counted: usage " in out and "lower than without clearing" in out, out
    assert "[ok] thinking check: 6 requests checked, 0 HTTP 400, 0 thinking blocks dropped" in out
    assert "[ok] install unchanged" in out, out
    assert list(fake_home.iterdir()) == []  # the user's HOME (and ~/.claude) untouched


def test_verify_json_on_the_native_2_1_113_package_folder(native_exe, fake_home: Path) -> None:
    folder = native_exe("2.1.113").parent  # the platform package: package.json + claude
    res = CliRunner().invoke(_app(), ["verify", "--path", str(folder), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    (r,) = doc["results"]
    assert (doc["exit_code"], r["verdict"], r["version"], r["shape"]) == (
        0,
        "PASS",
        "2.1.113",
        "native",
    )
    assert doc["chosen_by"] == "the path given with --path"
    assert_proofs_pass(r["proofs"])
    assert all(x["ok"] for x in r["checks"]), r["checks"]


def test_verify_fails_when_the_gateway_adds_nothing(
    native_exe, fake_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lab.verify_thinking as vt

    # CLAUDE_CTX_CLEAR_DISABLE=1 in the run's environment: `ctxpatch run` forwards untouched
    monkeypatch.setattr(vt, "CLEAR", {**vt.CLEAR, "CLAUDE_CTX_CLEAR_DISABLE": "1"})
    res = CliRunner().invoke(_app(), ["verify", "--path", str(native_exe("2.1.330")), "--json"])
    assert res.exit_code == 1, res.output
    (r,) = json.loads(res.output)["results"]
    assert r["verdict"] == "FAIL"
    p = r["proofs"]
    assert p["clearing_sent"]["ok"] is False and p["clearing_sent"]["carrying"] == 0, p
    assert p["clearing_counted"]["ok"] is False, p
    assert p["thinking_check"]["ok"] is True, p  # no edit: nothing to break either
    assert "CLAUDE_CTX_CLEAR_DISABLE is set" in r["log"], r["log"]  # the gateway's log, shown
