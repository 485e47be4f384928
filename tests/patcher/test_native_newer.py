"""A native build newer than every engine profile (2.1.332 installed, profiles up to 2.1.330):
status, check, apply and revert say so in one line, text and JSON; a modelled version does not."""

from __future__ import annotations

import json
from pathlib import Path

import native_builder as nbld
import pytest
from conftest import run_cli

from engine.profiles import PROFILES

pytestmark = pytest.mark.usefixtures("isolated_cli")
NEWEST = PROFILES[-1].last


def fake_claude(version: str) -> bytes:
    """A code-split Bun executable of ``version`` (tests/native_builder.py)."""
    head = b"// @bun @bytecode\n// Version: " + version.encode() + b"\n"
    mods = [
        nbld.Mod("/$bunfs/root/cli", head + b'import"/$bunfs/root/chunk-0000abcd.js";\n'),
        nbld.Mod("/$bunfs/root/chunk-0000abcd.js", head + b"var x=1;"),
        nbld.Mod("/$bunfs/root/pad.bin", b"\x01" * 70_000, loader="file", fmt=0),
    ]
    return nbld.elf(nbld.blob(mods, entry_point=0))


def put(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755)
    return path


def newer() -> str:
    major, minor, patch = NEWEST.split(".")
    return f"{major}.{minor}.{int(patch) + 2}"


@pytest.mark.parametrize("command", ["status", "check", "apply", "revert"])
def test_a_version_newer_than_every_profile_is_one_line(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = put(tmp_path / "bin" / "claude", fake_claude(newer()))
    monkeypatch.setenv("CTXPATCH_CLI_JS", str(exe))  # what status lists
    args = [command] if command == "status" else [command, "--path", str(exe)]
    code, out, err = run_cli(*args)
    assert code == {"status": 0, "check": 4, "apply": 4, "revert": 0}[command], out + err
    lines = [x for x in (out + err).splitlines() if "newer than every engine profile" in x]
    assert len(lines) == 1, out + err
    assert f"Claude Code {newer()}" in lines[0] and f"the newest ends at {NEWEST}" in lines[0]
    _, out, _ = run_cli(*args, "--json")
    (result,) = json.loads(out)["results"]
    assert sum("newer than every engine profile" in n for n in result["notes"]) == 1


def test_a_modelled_version_says_nothing(tmp_path: Path) -> None:
    exe = put(tmp_path / "bin" / "claude", fake_claude(NEWEST))
    code, out, err = run_cli("check", "--path", str(exe))
    assert code == 4 and "NATIVE" in out
    assert "newer than every engine profile" not in out + err


def test_verify_of_a_newer_native_build_warns_in_text_and_json() -> None:
    from lab.verify import NativeRun, VerifyReport

    rep = VerifyReport("/x/claude", newer(), "native", True, 1.0, native=NativeRun.of(newer()))
    assert [line for line in rep.render().splitlines() if "newer than every" in line] == [
        f"  warning: Claude Code {newer()} is newer than every engine profile (the newest ends "
        f"at {NEWEST}): its numbers are extrapolated"
    ]
    assert len(rep.to_json()["warnings"]) == 1  # type: ignore[arg-type]
    same = VerifyReport("/x/claude", NEWEST, "native", True, 1.0, native=NativeRun.of(NEWEST))
    assert same.to_json()["warnings"] == []
    assert "warnings" not in VerifyReport("/x/cli.js", NEWEST, "S6", True, 1.0).to_json()
