"""``ctxpatch verify`` through a throwaway typer app (the main app wires it with ``register``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from conftest import app_with
from typer.testing import CliRunner

from ctxpatch.cli.verifying import register
from patcher import ops

from .conftest import assert_proofs_pass, fetch_cli

pytestmark = pytest.mark.e2e

VERSION = "2.1.112"


def _app() -> typer.Typer:
    return app_with(register)


@pytest.fixture(scope="module")
def patched_install(tmp_path_factory: pytest.TempPathFactory, e2e_node: str) -> Path:
    src = fetch_cli(VERSION)
    dest = tmp_path_factory.mktemp("install") / "claude-code"
    dest.mkdir()
    shutil.copy2(src, dest / "cli.js")
    shutil.copy2(src.parent / "package.json", dest / "package.json")
    assert ops.apply_file(dest / "cli.js").state == "PATCHED"
    return dest / "cli.js"


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The caller's HOME: verify must leave it untouched, and its knobs must not leak in."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_TEXT_PRUNE_DISABLE", "1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://192.0.2.1:9")
    return home


def test_verify_passes_on_a_patched_install(patched_install: Path, fake_home: Path) -> None:
    res = CliRunner().invoke(_app(), ["verify", "--path", str(patched_install)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith("PASS"), out
    assert "15 text blocks shortened" in out and "cutoff at turn 7 of 10" in out, out
    assert "[ok] offline" in out and "[ok] request equals the engine's prediction" in out, out
    # the thinking-on proofs (server clearing under the enforced preserved-thinking check)
    assert "[ok] clearing sent: 6 of 6 main-loop requests carried clear_tool_uses_20250919" in out
    assert "[ok] clearing counted: usage " in out and "lower than without clearing" in out, out
    assert "[ok] thinking check: 6 requests checked, 0 HTTP 400, 0 thinking blocks dropped" in out
    assert list(fake_home.iterdir()) == []  # the user's HOME (and ~/.claude) untouched


def test_verify_json(patched_install: Path, fake_home: Path) -> None:
    res = CliRunner().invoke(_app(), ["verify", "--path", str(patched_install), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    (r,) = doc["results"]
    assert (doc["exit_code"], r["verdict"], r["version"], r["shape"]) == (0, "PASS", VERSION, "S6")
    assert r["sent"]["blocks_pruned"] == 15 and r["sent"]["cutoff_turn"] == 7
    assert all(c["ok"] for c in r["checks"]) and r["difference"] is None
    assert_proofs_pass(r["proofs"])


def test_verify_fails_when_the_clearing_edit_is_not_sent(
    patched_install: Path, fake_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lab.verify_thinking as vt

    monkeypatch.setattr(vt, "CLEAR", {**vt.CLEAR, "CLAUDE_CTX_CLEAR_DISABLE": "1"})
    res = CliRunner().invoke(_app(), ["verify", "--path", str(patched_install), "--json"])
    assert res.exit_code == 1, res.output
    p = json.loads(res.output)["results"][0]["proofs"]
    assert p["clearing_sent"]["ok"] is False and p["clearing_sent"]["carrying"] == 0, p
    assert p["clearing_counted"]["ok"] is False, p
    assert p["thinking_check"]["ok"] is True, p  # no edit: nothing to break either


def test_verify_fails_when_the_request_differs_from_the_prediction(
    patched_install: Path, fake_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.twins.textprune_shorten

    monkeypatch.setattr(
        engine.twins.textprune_shorten, "MARKER", "\n[a marker the snippet does not write]"
    )
    res = CliRunner().invoke(_app(), ["verify", "--path", str(patched_install)])
    assert res.exit_code == 1, res.output
    assert res.output.startswith("FAIL"), res.output
    assert "[FAIL] request equals the engine's prediction" in res.output
    assert "first difference: message 0 (role 'user' expected, 'user' sent), block 0" in res.output


def test_verify_refuses_an_unpatched_file(tmp_path: Path, fake_home: Path, e2e_node: str) -> None:
    cli = tmp_path / "cli.js"
    shutil.copy2(fetch_cli(VERSION), cli)
    res = CliRunner().invoke(_app(), ["verify", "--path", str(cli)])
    assert res.exit_code == 3, res.output
    assert "is not patched" in res.output and "ctxpatch apply --path" in res.output
    res = CliRunner().invoke(_app(), ["verify", "--path", str(cli), "--json"])
    assert res.exit_code == 3
    assert json.loads(res.output)["error"]["error"] == "not_patched"


def test_verify_refuses_without_node(
    patched_install: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    res = CliRunner().invoke(_app(), ["verify", "--path", str(patched_install)])
    assert res.exit_code == 3, res.output
    assert "node is not installed" in res.output and "install Node.js" in res.output


def test_verify_without_a_cli_js(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXPATCH_CLI_JS", str(tmp_path / "missing" / "cli.js"))
    res = CliRunner().invoke(_app(), ["verify"])
    assert res.exit_code == 3, res.output
