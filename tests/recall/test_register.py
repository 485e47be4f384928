"""apply/revert register recall with Claude Code: every other byte kept, revert byte-identical."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ctxpatch.errors import CtxpatchError, FileBusy
from recall import register, registered
from recall.jsonc import BadJson

SETTINGS = [
    b"{}\n",
    b'{\n  // mine\n  "model": "opus",\n  "env": {"A": "1",},\n}\n',
    b'{\n    "hooks": {\n        "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],'
    b'\n        "SessionStart": [\n            {"matcher": "startup", "hooks": [{"type": '
    b'"command", "command": "echo hi"}]}, // mine\n        ]\n    }\n}',
    b'{"a": 1, "hooks": {"PreCompact": []}}',
    b'/* top */ {\n\t"permissions": {\n\t\t"allow": []\n\t}\n}\n',
]
CONFIGS = [
    {"numStartups": 3, "mcpServers": {"other": {"type": "stdio", "command": "x", "args": []}}},
    {"numStartups": 1, "projects": {"/p": {"allowedTools": []}}},
    {"mcpServers": {}},
]


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path)}  # the state folder: tests/recall/conftest.py


def files(env: dict[str, str]) -> tuple[Path, Path]:
    return registered.places(env)


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("config", CONFIGS)
def test_apply_then_revert_gives_every_byte_back(home, settings: bytes, config: dict) -> None:
    s, c = files(home)
    s.parent.mkdir(parents=True)
    s.write_bytes(settings)
    c.write_text(json.dumps(config, indent=2))  # as Claude Code writes it
    c.chmod(0o600)
    before = (s.read_bytes(), c.read_bytes())

    report = register.register(home)
    assert [f.action for f in report.files] == ["added", "added"]
    doc_c = json.loads(c.read_text())
    assert doc_c["mcpServers"]["ctxpatch"] == registered.server_entry()
    assert {k: v for k, v in doc_c.items() if k != "mcpServers"} == {
        k: v for k, v in config.items() if k != "mcpServers"
    }
    assert registered.status(home)["registered"] is True
    assert oct(c.stat().st_mode & 0o777) == "0o600"
    # applying twice changes nothing
    again = (s.read_bytes(), c.read_bytes())
    assert [f.action for f in register.register(home).files] == ["already", "already"]
    assert (s.read_bytes(), c.read_bytes()) == again

    report = register.unregister(home)
    assert [f.action for f in report.files] == ["removed", "removed"]
    assert [f.byte_identical for f in report.files] == [True, True]
    assert (s.read_bytes(), c.read_bytes()) == before
    assert registered.status(home)["registered"] is False
    # a second revert has nothing to do
    assert [f.action for f in register.unregister(home).files] == ["absent", "absent"]


def test_the_hook_entries(home) -> None:
    s, _ = files(home)
    register.register(home)
    doc = json.loads(s.read_text())
    assert set(doc["hooks"]) == {"SessionStart", "PreCompact"}
    (group,) = doc["hooks"]["SessionStart"]
    (h,) = group["hooks"]
    assert h == {"type": "command", "command": registered.hook_command(), "timeout": 10}
    assert "matcher" not in group  # every source: startup, resume, clear, compact
    # absolute: this python, -m the package; no PATH lookup
    words = h["command"].split()
    assert words[0] == sys.executable and os.path.isabs(words[0])
    pkg = registered.cli_package()
    assert pkg in ("patcher", "ctxpatch")
    assert words[1:] == ["-m", pkg, "recall", "hook"]
    assert registered.server_entry() == {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", pkg, "mcp"],
    }


def test_no_files_apply_creates_them_and_revert_deletes_them(home) -> None:
    s, c = files(home)
    report = register.register(home)
    assert [f.action for f in report.files] == ["created", "created"]
    assert s.is_file() and c.is_file()
    report = register.unregister(home)
    assert [f.action for f in report.files] == ["deleted", "deleted"]
    assert not s.exists() and not c.exists()


def test_claude_code_rewriting_its_config_in_between(home) -> None:
    """Claude Code rewrites ~/.claude.json from memory (other keys change, ours kept): revert
    takes out ctxpatch's server only, and says the file changed since apply."""
    _, c = files(home)
    c.write_text(json.dumps({"numStartups": 1, "mcpServers": {"a": {"command": "a"}}}, indent=2))
    register.register(home)
    doc = json.loads(c.read_text())
    doc["numStartups"] = 2
    doc["mcpServers"]["b"] = {"command": "b"}
    c.write_text(json.dumps(doc, indent=2))
    report = register.unregister(home)
    assert report.files[1].action == "removed" and report.files[1].byte_identical is False
    assert "changed since apply" in report.files[1].note
    expected = {"numStartups": 2, "mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}}
    assert c.read_text() == json.dumps(expected, indent=2)


def test_an_older_command_is_replaced_not_doubled(home) -> None:
    s, _ = files(home)
    old = "/old/python -m patcher recall hook"
    s.parent.mkdir(parents=True)
    group = {"hooks": [{"type": "command", "command": old, "timeout": 10}]}
    s.write_text(json.dumps({"hooks": {"SessionStart": [group]}}))
    register.register(home)
    doc = json.loads(s.read_text())
    assert doc["hooks"]["SessionStart"] == [registered.hook_group()]
    register.unregister(home)
    # the old entry was replaced, so the list was there before apply: it stays, empty
    assert json.loads(s.read_text()) == {"hooks": {"SessionStart": []}}


def test_other_hooks_and_servers_are_untouched(home) -> None:
    s, c = files(home)
    s.parent.mkdir(parents=True)
    theirs = {"type": "command", "command": "python -m mytool hook"}
    s.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [theirs]}]}}, indent=2))
    c.write_text(json.dumps({"mcpServers": {"x": {"command": "x"}}}, indent=2))
    register.register(home)
    assert json.loads(s.read_text())["hooks"]["SessionStart"][0] == {"hooks": [theirs]}
    register.unregister(home)
    assert json.loads(s.read_text()) == {"hooks": {"SessionStart": [{"hooks": [theirs]}]}}
    assert json.loads(c.read_text()) == {"mcpServers": {"x": {"command": "x"}}}


@pytest.mark.parametrize(
    "settings",
    [b"not json", b"[]", b'{"hooks": []}', b'{"hooks": {"SessionStart": {}}}', b'{"a": 1'],
)
def test_a_settings_file_it_cannot_edit_is_refused_untouched(home, settings: bytes) -> None:
    s, c = files(home)
    s.parent.mkdir(parents=True)
    s.write_bytes(settings)
    with pytest.raises(BadJson) as e:
        register.register(home)
    assert e.value.exit_code == 3 and "nothing was written" in (e.value.hint + e.value.what)
    assert s.read_bytes() == settings and not c.exists()


def test_a_foreign_server_named_ctxpatch_is_refused(home) -> None:
    _, c = files(home)
    c.write_text(json.dumps({"mcpServers": {"ctxpatch": {"command": "/usr/bin/other"}}}))
    before = c.read_bytes()
    with pytest.raises(CtxpatchError) as e:
        register.register(home)
    assert "not ctxpatch's" in e.value.what and c.read_bytes() == before


def test_claude_codes_lock_is_honoured(home, monkeypatch: pytest.MonkeyPatch) -> None:
    _, c = files(home)
    lock = c.with_name(c.name + ".lock")
    lock.mkdir()  # Claude Code is writing
    monkeypatch.setattr(register, "LOCK_WAIT", 0.2)
    with pytest.raises(FileBusy):
        register.register(home)
    assert not c.exists() and lock.is_dir()
    old = 1_000_000_000
    os.utime(lock, (old, old))  # a dead process's: taken over
    register.register(home)
    assert c.is_file() and not lock.exists()


def test_claude_config_dir_is_followed(tmp_path) -> None:
    env = {"HOME": str(tmp_path / "h"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    register.register(env)
    assert (tmp_path / "cfg" / "settings.json").is_file()
    assert (tmp_path / "cfg" / ".claude.json").is_file()
    assert not (tmp_path / "h").exists()
