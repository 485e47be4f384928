"""``ctxpatch verify`` on a native build where no network namespace can be made: a refusal
(exit 3) that says why and how to allow it, before anything runs. No real binary needed: the
target is recognised as native by its first bytes, and the namespace check comes first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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
