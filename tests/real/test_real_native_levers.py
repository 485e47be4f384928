"""The lever of the real native builds (linux-x64), read from the binaries, and what
``ctxpatch check`` / ``apply`` / ``revert`` say and write on them (nothing).

Measured (docs/native.md "Native installs"): no published native build has a setting that makes it
send clear_tool_uses_20250919; 2.1.330's own idle clearing is switched by a remote flag whose
environment override is compiled out. A build that changes any of this fails here first.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxpatch.cli.app import app
from patcher.native.app import read_app
from patcher.native.levers import decide, extract
from patcher.native.reader import NativeBinary

from .conftest import binary

pytestmark = pytest.mark.real

FACTS = {
    "2.1.113": {
        "builds_edit": False,
        "switches": {"USE_API_CONTEXT_MANAGEMENT": "compiled-off"},
        "idle_flag": None,
        "idle_min_seconds": None,
        "idle_keep_tool_uses": None,
        "flag_overrides": "absent",
    },
    "2.1.330": {
        "builds_edit": True,
        "switches": {"USE_API_CONTEXT_MANAGEMENT": "compiled-off"},
        "idle_flag": "tengu_jiggly_blossom",
        "idle_min_seconds": 3900,
        "idle_keep_tool_uses": 12,
        "flag_overrides": "compiled-out",
    },
}


@pytest.mark.parametrize("version", sorted(FACTS))
def test_real_lever_facts(version: str) -> None:
    with NativeBinary(binary(version)) as nb:
        app = read_app(nb)
    facts = extract(app.sources)
    assert facts.to_json() == FACTS[version]
    assert decide(facts, app.version).name == "gateway"


@pytest.mark.parametrize("version", sorted(FACTS))
def test_real_check_apply_revert_write_nothing(
    version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = binary(version)
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(b'{\n  // mine\n  "env": {"A": "1",},\n}\n')  # comments, trailing commas
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    before = hashlib.sha256(exe.read_bytes()).hexdigest()
    listing = sorted(p.name for p in exe.parent.iterdir())
    runner = CliRunner()
    for verb, code, action in (
        ("check", 4, "checked"),
        ("apply", 4, "nothing-to-write"),
        ("revert", 0, "not-patched"),
    ):
        r = runner.invoke(app, [verb, "--path", str(exe.parent), "--json"])
        doc = json.loads(r.stdout)
        assert r.exit_code == code == doc["exit_code"], r.stdout
        (res,) = doc["results"]
        assert (res["state"], res["action"], res["version"]) == ("NATIVE", action, version)
        assert (res["lever"], res["lever_state"]) == ("gateway", "nothing-to-write")
        assert res["binary"] == str(exe.resolve())
        # recall is registered for a native install too, and revert takes it away again
        assert doc["recall"]["registered"] is {"check": False, "apply": True, "revert": False}[verb]
    assert hashlib.sha256(exe.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in exe.parent.iterdir()) == listing
    assert settings.read_bytes() == b'{\n  // mine\n  "env": {"A": "1",},\n}\n'
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]
    assert not (tmp_path / ".claude.json").exists()  # apply created it, revert deleted it
