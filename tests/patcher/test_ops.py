"""apply / check / revert on synthetic fixtures: round trips, states, backups, bad input."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURES, SHAPE_FIXTURES, copy_fixture, snippet_010

from ctxpatch.errors import (
    AmbiguousTarget,
    BackupMismatch,
    FileAccess,
    FileBusy,
    ForeignPatch,
    NotABundle,
    RevertImpossible,
    Unsupported,
    VerificationFailed,
)
from patcher import backup, fsio, markers, ops, selfcheck, snippet

SHAPES = SHAPE_FIXTURES


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".ctxpatch"))


@pytest.mark.parametrize("name", SHAPES)
def test_round_trip(name: str, fixture_copy) -> None:
    cli = fixture_copy(name)
    original = cli.read_bytes()
    first_line = original.split(b"\n", 1)[0]

    r = ops.apply_file(cli)
    patched = cli.read_bytes()
    assert (r.action, r.state, r.exit_code) == ("patched", "PATCHED", 0)
    assert patched != original
    assert patched.split(b"\n", 1)[0] == first_line  # shebang kept
    assert stat.S_IMODE(cli.stat().st_mode) == 0o755  # mode kept
    assert patched.count(markers.BEGIN) == patched.count(markers.WRAP_OPEN) == 1
    assert snippet.source() in patched
    assert markers.strip(patched) == original

    assert ops.check_file(cli).state == "PATCHED"
    again = ops.apply_file(cli)
    assert again.action == "already-patched" and cli.read_bytes() == patched

    bk = backup.path_for(cli)
    assert bk.read_bytes() == original
    assert ops.revert_file(cli).action == "reverted"
    assert cli.read_bytes() == original
    assert ops.revert_file(cli).action == "not-patched"
    assert leftovers(cli.parent) == []


def test_patched_fixtures_pass_the_node_esm_check(fixture_copy, node: str) -> None:
    for name in SHAPES:
        cli = fixture_copy(name)
        ops.apply_file(cli)
        res = selfcheck.node_check(cli.read_bytes(), node)
        assert res.ok, (name, res.message)


def test_validator_rejects_a_broken_esm_file(fixture_copy, node: str) -> None:
    # `node --check` on a .js file outside a "type":"module" package passes broken ESM
    # (research/deps.md §3): the validator must feed the bytes in explicit ESM mode.
    cli = fixture_copy("s1-2.0.76.js")
    good = cli.read_bytes()
    assert selfcheck.node_check(good, node).ok
    for broken in (
        good + b"\nfunction f(){ a(,); }\n",
        good.replace(b"void 0", b"void", 1),
        good + b"\nlet x=1;let x=2;\n",
    ):
        res = selfcheck.node_check(broken, node)
        assert not res.ok and "SyntaxError" in res.message


def test_check_states_and_backup_report(fixture_copy) -> None:
    cli = fixture_copy("s6-2.1.112.js")
    r = ops.check_file(cli)
    assert (r.state, r.exit_code, r.shape, r.backup["status"]) == ("UNPATCHED", 1, "S6", "missing")
    ops.apply_file(cli)
    r = ops.check_file(cli)
    assert (r.state, r.exit_code, r.backup["status"]) == ("PATCHED", 0, "valid")


def test_outdated_snippet_is_detected_and_replaced(fixture_copy, monkeypatch) -> None:
    cli = fixture_copy("s3-2.1.50.js")
    original = cli.read_bytes()
    old = b"function _aggressiveTextPrune(messages){return messages}\n"
    monkeypatch.setattr(snippet, "source", lambda: old)
    monkeypatch.setattr(snippet, "sha", lambda: markers.sha256(old))
    ops.apply_file(cli)
    monkeypatch.undo()
    r = ops.check_file(cli)
    assert (r.state, r.exit_code) == ("OUTDATED", 1)
    r = ops.apply_file(cli)
    assert (r.action, r.state) == ("repatched", "PATCHED")
    assert snippet.source() in cli.read_bytes() and old not in cli.read_bytes()
    ops.revert_file(cli)
    assert cli.read_bytes() == original


def test_hand_edited_snippet_is_foreign_and_reverts_from_backup(fixture_copy) -> None:
    cli = fixture_copy("s4-2.1.61.js")
    original = cli.read_bytes()
    ops.apply_file(cli)
    data = cli.read_bytes()
    cli.write_bytes(data.replace(b"earlier context pruned", b"EARLIER context pruned", 1))
    r = ops.check_file(cli)
    assert (r.state, r.exit_code) == ("FOREIGN", 3)
    assert "edited" in r.reason
    with pytest.raises(ForeignPatch):
        ops.apply_file(cli)
    assert ops.revert_file(cli).action == "reverted"
    assert cli.read_bytes() == original


def test_hand_edited_snippet_without_backup_cannot_revert(fixture_copy) -> None:
    cli = fixture_copy("s4-2.1.61.js")
    ops.apply_file(cli)
    backup.path_for(cli).unlink()
    edited = cli.read_bytes().replace(b"earlier context pruned", b"EARLIER context pruned", 1)
    cli.write_bytes(edited)
    with pytest.raises(RevertImpossible):
        ops.revert_file(cli)
    assert cli.read_bytes() == edited


def test_revert_without_backup_removes_the_marked_edits(fixture_copy) -> None:
    cli = fixture_copy("s5-2.1.68.js")
    original = cli.read_bytes()
    ops.apply_file(cli)
    backup.path_for(cli).unlink()
    assert ops.check_file(cli).backup["status"] == "missing"
    r = ops.revert_file(cli)
    assert "removing the marked edits" in r.reason
    assert cli.read_bytes() == original


def test_apply_on_patched_file_restores_a_missing_backup(fixture_copy) -> None:
    cli = fixture_copy("s1-2.0.76.js")
    original = cli.read_bytes()
    ops.apply_file(cli)
    backup.path_for(cli).unlink()
    r = ops.apply_file(cli)
    assert r.action == "already-patched"
    assert backup.path_for(cli).read_bytes() == original


# ------------------------------------------------------------------ ruflo (the original patcher)


def ruflo_copy(tmp_path: Path) -> Path:
    cli = copy_fixture("ruflo-patched-2.0.76.js", tmp_path / "pkg")
    shutil.copyfile(FIXTURES / "ruflo-patched-2.0.76.js.backup", backup.path_for(cli))
    return cli


def test_ruflo_patch_is_foreign_and_its_backup_is_recognised(tmp_path: Path) -> None:
    cli = ruflo_copy(tmp_path)
    r = ops.check_file(cli)
    assert (r.state, r.exit_code) == ("FOREIGN", 3)
    assert "ruflo" in r.reason and r.backup["status"] == "valid"
    with pytest.raises(ForeignPatch, match="modified by something other") as e:
        ops.apply_file(cli)
    assert "ctxpatch revert" in e.value.hint


def test_ruflo_revert_then_apply(tmp_path: Path) -> None:
    cli = ruflo_copy(tmp_path)
    r = ops.revert_file(cli)
    assert r.action == "reverted" and "ruflo" in r.reason
    assert cli.read_bytes() == (FIXTURES / "s1-2.0.76.js").read_bytes()
    assert ops.apply_file(cli).state == "PATCHED"


def test_ruflo_with_foreign_backup_is_not_reverted(tmp_path: Path) -> None:
    cli = ruflo_copy(tmp_path)
    backup.path_for(cli).write_bytes((FIXTURES / "s3-2.1.50.js").read_bytes())
    before = cli.read_bytes()
    with pytest.raises(RevertImpossible):
        ops.revert_file(cli)
    assert cli.read_bytes() == before


# ------------------------------------------------------------------ backups


def test_stale_backup_of_another_version_is_replaced(fixture_copy) -> None:
    cli = fixture_copy("s6-2.1.112.js")
    bk = backup.path_for(cli)
    old = (FIXTURES / "s5-2.1.68.js").read_bytes()
    bk.write_bytes(old)
    r = ops.apply_file(cli)
    assert any("stale" in n for n in r.notes)
    assert bk.read_bytes() == markers.strip(cli.read_bytes())


def test_mismatched_backup_of_same_version_is_never_overwritten(fixture_copy) -> None:
    cli = fixture_copy("s6-2.1.112.js")
    original = cli.read_bytes()
    bk = backup.path_for(cli)
    other = original + b"\n// a different build of the same version\n"
    assert other != original
    bk.write_bytes(other)
    with pytest.raises(BackupMismatch) as e:
        ops.apply_file(cli)
    assert f"mv {bk}" in e.value.hint
    assert cli.read_bytes() == original and bk.read_bytes() == other


def test_patched_backup_is_a_mismatch(fixture_copy, tmp_path: Path) -> None:
    cli = fixture_copy("s6-2.1.112.js")
    twin = copy_fixture("s6-2.1.112.js", tmp_path / "twin")
    ops.apply_file(twin)
    backup.path_for(cli).write_bytes(twin.read_bytes())
    with pytest.raises(BackupMismatch, match="different original"):
        ops.apply_file(cli)


# ------------------------------------------------------------------ refusals and bad input


def test_ambiguous_and_unsupported_fixtures_are_refused_untouched(fixture_copy, tmp_path) -> None:
    cli = fixture_copy("ambiguous-two-sites.js")
    before = cli.read_bytes()
    with pytest.raises(AmbiguousTarget):
        ops.apply_file(cli)
    assert cli.read_bytes() == before
    none = copy_fixture("none-1.0.50.js", tmp_path / "none")
    with pytest.raises(Unsupported):
        ops.apply_file(none)
    assert not backup.path_for(none).exists() and not backup.path_for(cli).exists()


def test_native_binary_package_is_unsupported(tmp_path: Path) -> None:
    pkg = tmp_path / "claude-code"
    shutil.copytree(FIXTURES / "native-2.1.113", pkg)
    with pytest.raises(Unsupported, match=r"has no cli\.js") as e:
        ops.apply_file(pkg)
    assert "2.1.112" in e.value.hint
    with pytest.raises(Unsupported):
        ops.check_file(pkg / "cli.js" if (pkg / "cli.js").exists() else pkg)
    assert sorted(p.name for p in pkg.iterdir()) == sorted(
        p.name for p in (FIXTURES / "native-2.1.113").iterdir()
    )


@pytest.mark.parametrize(
    ("content", "error", "match"),
    [
        (b"", NotABundle, "is empty"),
        (b"\n  \n", NotABundle, "is empty"),
        (b"\x00\x01\x02binary", NotABundle, "binary data"),
        (b"\x7fELF\x02\x01\x01" + b"\0" * 100, Unsupported, "native executable"),
        (b"\xff\xfe\xfd not utf-8 " * 10, NotABundle, "not UTF-8"),
    ],
    ids=["empty", "blank", "binary", "elf", "latin1"],
)
def test_bad_content_is_refused(tmp_path: Path, content: bytes, error, match: str) -> None:
    cli = tmp_path / "cli.js"
    cli.write_bytes(content)
    with pytest.raises(error, match=match):
        ops.apply_file(cli)
    assert cli.read_bytes() == content


def test_directory_without_package_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotABundle, match="is a folder"):
        ops.apply_file(tmp_path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileAccess, match="does not exist"):
        ops.apply_file(tmp_path / "cli.js")


def test_truncated_bundle_is_refused_as_input_problem(fixture_copy, node: str) -> None:
    cli = fixture_copy("s1-2.0.76.js")
    data = cli.read_bytes()
    cut = data[: len(data) - 40]  # the loop survives, the file's tail does not
    cli.write_bytes(cut)
    with pytest.raises(NotABundle, match="does not parse as an ES module, even before"):
        ops.apply_file(cli)
    assert cli.read_bytes() == cut and not backup.path_for(cli).exists()


def test_read_only_file_is_refused(fixture_copy) -> None:
    cli = fixture_copy("s1-2.0.76.js")
    before = cli.read_bytes()
    cli.chmod(0o444)
    with pytest.raises(FileAccess, match="cannot patch") as e:
        ops.apply_file(cli)
    assert "chmod u+w" in e.value.hint
    assert cli.read_bytes() == before and stat.S_IMODE(cli.stat().st_mode) == 0o444


def test_unreadable_file(fixture_copy, monkeypatch) -> None:
    cli = fixture_copy("s1-2.0.76.js")
    if os.geteuid() != 0:
        cli.chmod(0o000)
    else:  # root reads anything: simulate the kernel's answer
        real = Path.read_bytes

        def deny(self: Path) -> bytes:
            if self.name == "cli.js":
                raise PermissionError(13, "Permission denied")
            return real(self)

        monkeypatch.setattr(Path, "read_bytes", deny)
    with pytest.raises(FileAccess, match="cannot read"):
        ops.apply_file(cli)


def test_unwritable_folder(fixture_copy, monkeypatch) -> None:
    cli = fixture_copy("s1-2.0.76.js")
    before = cli.read_bytes()
    if os.geteuid() != 0:
        cli.parent.chmod(0o555)
    else:

        def deny(*a: object, **k: object) -> object:
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(tempfile, "mkstemp", deny)  # fsio imports it when it writes
    try:
        with pytest.raises(FileAccess, match="cannot write"):
            ops.apply_file(cli)
    finally:
        cli.parent.chmod(0o755)
    assert cli.read_bytes() == before


def test_symlink_patches_the_real_file_and_keeps_the_link(tmp_path: Path) -> None:
    real = copy_fixture("s1pp-2.1.30.js", tmp_path / "store")
    link_dir = tmp_path / "project"
    link_dir.mkdir()
    link = link_dir / "cli.js"
    link.symlink_to(real)
    r = ops.apply_file(link)
    assert r.path == str(real)
    assert link.is_symlink() and markers.BEGIN in real.read_bytes()
    assert backup.path_for(real).exists()


def test_hard_link_is_broken_so_the_other_copy_stays_original(fixture_copy, tmp_path) -> None:
    cli = fixture_copy("s1pp-2.1.30.js")
    original = cli.read_bytes()
    store = tmp_path / "store-copy.js"
    os.link(cli, store)
    r = ops.apply_file(cli)
    assert any("hard links" in n for n in r.notes)
    assert store.read_bytes() == original
    assert cli.stat().st_nlink == 1 and markers.BEGIN in cli.read_bytes()


def test_change_on_disk_between_read_and_write_is_detected(fixture_copy, monkeypatch) -> None:
    cli = fixture_copy("s3-2.1.50.js")
    intruder = cli.read_bytes() + b"\n// written by npm meanwhile\n"

    checked = selfcheck.check_patch

    def npm_writes_while_we_check(*args, **kw) -> None:  # after our read, before our write
        checked(*args, **kw)
        cli.write_bytes(intruder)

    monkeypatch.setattr(selfcheck, "check_patch", npm_writes_while_we_check)
    with pytest.raises(FileBusy, match="changed on disk"):
        ops.apply_file(cli)
    assert cli.read_bytes() == intruder
    assert leftovers(cli.parent) == []


def test_lock_held_by_another_run_times_out(fixture_copy) -> None:
    cli = fixture_copy("s3-2.1.50.js")
    before = cli.read_bytes()
    with (
        fsio.folder_lock(cli.parent, timeout=1),
        pytest.raises(FileBusy, match="another ctxpatch"),
    ):
        ops.apply_file(cli, lock_timeout=0.2)
    assert cli.read_bytes() == before


def test_verification_failure_writes_nothing(fixture_copy, monkeypatch) -> None:
    cli = fixture_copy("s3-2.1.50.js")
    before = cli.read_bytes()
    monkeypatch.setattr(
        snippet, "source", lambda: b"function _aggressiveTextPrune(m){return m.?x}\n"
    )
    with pytest.raises(VerificationFailed):
        ops.apply_file(cli)
    assert cli.read_bytes() == before and not backup.path_for(cli).exists()


def test_sdk_mode_0644_is_kept(fixture_copy) -> None:
    cli = fixture_copy("s6-2.1.112.js")
    cli.chmod(0o644)
    ops.apply_file(cli)
    assert stat.S_IMODE(cli.stat().st_mode) == 0o644
    ops.revert_file(cli)
    assert stat.S_IMODE(cli.stat().st_mode) == 0o644


def test_without_node_the_snippet_must_be_es2017(fixture_copy, monkeypatch) -> None:
    # `?.` is ES2020: tree-sitter and node accept it, esprima 4 (ES2017) does not. Where node
    # is absent the pure-Python check is the one that guards the snippet.
    cli = fixture_copy("s3-2.1.50.js")
    before = cli.read_bytes()
    modern = b"function _aggressiveTextPrune(m){return m?.slice()}\n"
    monkeypatch.setattr(snippet, "source", lambda: modern)
    monkeypatch.setattr(snippet, "sha", lambda: markers.sha256(modern))
    monkeypatch.setattr(selfcheck, "node_binary", lambda: None)
    with pytest.raises(VerificationFailed) as e:
        ops.apply_file(cli)
    assert "not valid ES2017" in e.value.why
    assert cli.read_bytes() == before
    monkeypatch.undo()
    monkeypatch.setattr(snippet, "source", lambda: modern)
    monkeypatch.setattr(snippet, "sha", lambda: markers.sha256(modern))
    with pytest.raises(VerificationFailed) as e:
        ops.apply_file(cli, node_check=False)
    assert "not valid ES2017" in e.value.why
    assert cli.read_bytes() == before


def test_without_node_apply_says_the_whole_file_check_was_skipped(fixture_copy, monkeypatch):
    cli = fixture_copy("s3-2.1.50.js")
    monkeypatch.setattr(selfcheck, "node_binary", lambda: None)
    r = ops.apply_file(cli)
    assert r.state == "PATCHED"
    assert any("node not found" in n for n in r.notes)


def test_native_platform_package_beside_the_sdk_is_reported(tmp_path: Path) -> None:
    scope = tmp_path / "node_modules" / "@anthropic-ai"
    cli = copy_fixture("s6-2.1.112.js", scope / "claude-agent-sdk")
    assert not any("native binary" in n for n in ops.check_file(cli).notes)
    (scope / "claude-agent-sdk-linux-x64").mkdir()
    (scope / "claude-agent-sdk-linux-x64" / "package.json").write_text("{}")
    assert any("claude-agent-sdk-linux-x64 is installed" in n for n in ops.check_file(cli).notes)
    r = ops.apply_file(cli)
    assert r.state == "PATCHED" and any("native binary" in n for n in r.notes)


def test_a_file_patched_by_the_0_1_0_snippet_reads_outdated_and_upgrades(
    fixture_copy, monkeypatch
) -> None:
    """The real 0.1.0 snippet (before the thinking-safe rule), in the current header."""
    cli = fixture_copy("s6-2.1.112.js")
    original = cli.read_bytes()
    old = snippet_010()
    assert b"CLAUDE_TEXT_PRUNE_THINKING" not in old and old != snippet.source()
    monkeypatch.setattr(snippet, "source", lambda: old)
    monkeypatch.setattr(snippet, "sha", lambda: markers.sha256(old))
    ops.apply_file(cli)
    monkeypatch.undo()
    assert (ops.check_file(cli).state, ops.check_file(cli).exit_code) == ("OUTDATED", 1)
    r = ops.apply_file(cli)
    assert (r.action, r.state) == ("repatched", "PATCHED")
    assert snippet.source() in cli.read_bytes() and old not in cli.read_bytes()
    assert ops.check_file(cli).state == "PATCHED"
    ops.revert_file(cli)
    assert cli.read_bytes() == original
