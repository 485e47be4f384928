"""``ctxpatch revert`` after Claude Code itself is gone: recall's entries in Claude Code's
settings are still removed, byte for byte, and it says so; with nothing of ctxpatch's left it
is the usual "no Claude Code installed here" refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from recall import register, registered

SETTINGS = (
    b'{\n  // mine\n  "model": "opus",\n  "hooks": {"Stop": [{"hooks": [{"type": "command",'
    b' "command": "say done"}]}]},\n}\n'
)
CONFIG = {"numStartups": 3, "mcpServers": {"other": {"type": "stdio", "command": "x", "args": []}}}


@pytest.fixture
def no_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An empty HOME, PATH and folder: no cli.js, no native build, no global npm install."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("CTXPATCH_NPM_ROOT", "")
    monkeypatch.delenv("CTXPATCH_CLI_JS", raising=False)
    monkeypatch.chdir(tmp_path)
    return {"HOME": str(tmp_path)}


def settings_files(home: dict[str, str]) -> tuple[Path, Path, tuple[bytes, bytes]]:
    s, c = registered.places(home)
    s.parent.mkdir(parents=True, exist_ok=True)
    s.write_bytes(SETTINGS)
    c.write_text(json.dumps(CONFIG, indent=2))
    return s, c, (s.read_bytes(), c.read_bytes())


def test_revert_removes_recall_when_no_install_is_left(no_install) -> None:
    s, c, before = settings_files(no_install)
    register.register(no_install)  # what apply added, before Claude Code was uninstalled
    assert registered.status(no_install)["registered"] is True

    code, _, err = run_cli("revert")
    assert code == 0, err
    assert "no Claude Code install found: no cli.js to restore" in err
    assert f"removed from {s}" in err and f"removed from {c}" in err
    assert (s.read_bytes(), c.read_bytes()) == before  # every byte as before apply
    assert registered.status(no_install)["registered"] is False

    # nothing of ctxpatch's left: the documented refusal (exit 3), nothing written
    code, _, err = run_cli("revert")
    assert code == 3 and "error: no Claude Code installed here" in err
    assert (s.read_bytes(), c.read_bytes()) == before


def test_revert_json_without_install(no_install) -> None:
    s, c, before = settings_files(no_install)
    register.register(no_install)
    code, out, _ = run_cli("revert", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["exit_code"] == 0 and doc["results"] == []
    assert doc["note"] == "no Claude Code install found: no cli.js to restore"
    files = doc["recall"]["files"]
    assert [f["action"] for f in files] == ["removed", "removed"]
    assert all(f["byte_identical"] for f in files)
    assert (s.read_bytes(), c.read_bytes()) == before


def test_files_apply_created_are_deleted(no_install) -> None:
    s, c = registered.places(no_install)
    register.register(no_install)  # neither file existed: apply created both
    code, _, err = run_cli("revert")
    assert code == 0, err
    assert not s.exists() and not c.exists()
    assert "removed (file deleted, ctxpatch had created it)" in err


def test_apply_without_install_still_refuses_and_writes_nothing(no_install) -> None:
    s, c, before = settings_files(no_install)
    code, _, err = run_cli("apply")
    assert code == 3 and "error: no Claude Code installed here" in err
    assert (s.read_bytes(), c.read_bytes()) == before
