"""``ctxpatch verify`` on a native build where no network namespace can be made: a refusal
(exit 3) that says why and how to allow it, before anything runs. No real binary needed: the
target is recognised as native by its first bytes, and the namespace check comes first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

from ctxpatch.cli.app import app
from lab import netns

WHY = "unshare -rn failed (unshare: write failed /proc/self/uid_map: Operation not permitted)"


@pytest.fixture
def native_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(netns, "netns_available", lambda: WHY)
    exe = tmp_path / "versions" / "2.1.330"  # the native installer's version file
    exe.parent.mkdir()
    exe.write_bytes(b"\x7fELF" + b"\0" * 60)
    return exe


def test_verify_refuses_a_native_build_without_a_network_namespace(native_file: Path) -> None:
    res = CliRunner().invoke(app, ["verify", "--path", str(native_file)])
    assert res.exit_code == 3, res.output
    assert f"error: cannot verify the native build {native_file}" in res.output, res.output
    assert "network namespace of its own, and " + WHY in res.output, res.output
    assert "hint: allow unprivileged user namespaces" in res.output, res.output


def test_verify_refusal_json(native_file: Path) -> None:
    res = CliRunner().invoke(app, ["verify", "--path", str(native_file), "--json"])
    assert res.exit_code == 3, res.output
    doc = json.loads(res.stdout)
    assert doc["exit_code"] == 3 and doc["error"]["error"] == "netns_missing", doc
    assert "unshare -rn" in doc["error"]["hint"], doc


def test_one_verify_driver_picks_the_proof_by_the_install(
    native_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lab.verifier.verify_path: a native build goes to the gateway proof (here its refusal: no
    namespace), a package folder without cli.js too (the missing binary named), a cli.js to the
    patched-file proof (an unpatched one refused as such)."""
    import lab.verify
    from ctxpatch.errors import NamespaceMissing, NotPatched
    from ctxpatch.errors import NotFound as Missing
    from lab.verifier import is_native_target, verify_path

    assert is_native_target(native_file)
    with pytest.raises(NamespaceMissing):
        verify_path(native_file)
    wrapper = tmp_path / "claude-code"
    wrapper.mkdir()
    (wrapper / "package.json").write_text('{"name": "@anthropic-ai/claude-code"}')
    assert is_native_target(wrapper)
    with pytest.raises(Missing, match="no native binary"):
        verify_path(wrapper)
    js = tmp_path / "pkg" / "cli.js"
    js.parent.mkdir()
    shutil.copyfile(FIXTURES / "rq-2.1.112.js", js)  # unpatched
    monkeypatch.setattr(lab.verify, "find_node", lambda: "node")  # refused before node runs
    assert not is_native_target(js) and not is_native_target(js.parent)
    with pytest.raises(NotPatched, match="is not patched by this ctxpatch"):
        verify_path(js.parent)
