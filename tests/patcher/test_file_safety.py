"""Files that are not what a plain install leaves: a byte-order mark, a backup that is not a
regular file or belongs to root, temp files of a killed run."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT, copy_fixture, run_node

from ctxpatch.errors import ExitCode, FileAccess, FileBusy
from patcher import backup, bundle, fsio, markers, ops, selfcheck
from patcher.result import result_for

BOM = b"\xef\xbb\xbf"
IS_ROOT = os.geteuid() == 0
NOBODY = (65534, 65534)


def _with_bom(cli: Path, *, shebang: bool) -> bytes:
    data = cli.read_bytes()
    if not shebang:
        data = data.split(b"\n", 1)[1]
    cli.write_bytes(BOM + data)
    return BOM + data


@pytest.mark.parametrize("shebang", [True, False], ids=["bom+shebang", "bom"])
@pytest.mark.parametrize("name", ["s1-2.0.76.js", "s6-2.1.112.js"])
def test_byte_order_mark_stays_first(name: str, shebang: bool, fixture_copy, node) -> None:
    cli = fixture_copy(name)
    original = _with_bom(cli, shebang=shebang)
    version = name.split("-", 1)[1].removesuffix(".js")
    assert run_node(node, [str(cli), "--version"]).returncode == 0  # node runs the original

    r = ops.apply_file(cli)  # with the whole-file node check
    patched = cli.read_bytes()
    assert r.state == "PATCHED" and patched.startswith(BOM)
    head = patched[len(BOM) :]
    if shebang:
        assert head.startswith(b"#!") and head.split(b"\n", 1)[1].startswith(markers.BEGIN)
    else:
        assert head.startswith(markers.BEGIN)
    assert selfcheck.node_check(patched, node).ok
    run = run_node(node, [str(cli), "--version"])
    assert run.returncode == 0 and version.encode() in run.stdout, run.stderr
    assert ops.check_file(cli).state == "PATCHED"

    assert ops.revert_file(cli).action == "reverted"
    assert cli.read_bytes() == original


def test_byte_order_mark_without_node_check_is_still_valid(fixture_copy, node) -> None:
    # the reported defect: --no-node-check wrote a SyntaxError that `check` called PATCHED
    cli = fixture_copy("s3-2.1.50.js")
    _with_bom(cli, shebang=True)
    ops.apply_file(cli, node_check=False)
    run = run_node(node, [str(cli), "--version"])
    assert run.returncode == 0, run.stderr


# ------------------------------------------------------------------ backups after sudo (defect 2)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user can reach (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="ctxpatch-owner-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


@contextmanager
def as_user(uid: int, gid: int) -> Iterator[None]:
    """Run the block with the effective ids of another user (we are root)."""
    os.setegid(gid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def _owned_by_nobody(folder: Path, name: str) -> Path:
    cli = copy_fixture(name, folder / "pkg")
    for p in (folder / "pkg", cli, folder / "pkg" / "package.json"):
        os.chown(p, *NOBODY)
    cli.chmod(0o750)
    return cli


@pytest.mark.skipif(
    not IS_ROOT, reason="needs root: it applies as root to a file another user owns"
)
def test_backup_written_by_root_gets_the_files_owner_and_mode(shared_dir: Path) -> None:
    cli = _owned_by_nobody(shared_dir, "s3-2.1.50.js")
    original = cli.read_bytes()
    assert ops.apply_file(cli, node_check=False).state == "PATCHED"  # `sudo ctxpatch apply`
    st = backup.path_for(cli).stat()
    assert (st.st_uid, st.st_gid) == NOBODY
    assert stat.S_IMODE(st.st_mode) == 0o640  # 0750 without execute
    assert (cli.stat().st_uid, stat.S_IMODE(cli.stat().st_mode)) == (NOBODY[0], 0o750)
    with as_user(*NOBODY):  # the owner, later
        r = ops.check_file(cli)
        assert (r.state, r.exit_code, r.backup["status"]) == ("PATCHED", 0, "valid")
        assert ops.apply_file(cli, node_check=False).action == "already-patched"
        r = ops.revert_file(cli)
        assert r.action == "reverted" and "from the backup" in r.reason
    assert cli.read_bytes() == original


@contextmanager
def _unreadable_backup(cli: Path) -> Iterator[None]:
    """Make cli.js.backup unreadable for the code in the block, as an old root run left it."""
    b = backup.path_for(cli)
    if IS_ROOT:
        os.chown(b, 0, 0)
        b.chmod(0o600)
        with as_user(*NOBODY):
            yield
    else:
        b.chmod(0)
        try:
            yield
        finally:
            b.chmod(0o600)


def _owned_fixture(shared_dir: Path, fixture_copy) -> Path:
    return _owned_by_nobody(shared_dir, "s3-2.1.50.js") if IS_ROOT else fixture_copy("s3-2.1.50.js")


def test_unreadable_backup_check_reports_it_and_revert_strips_the_markers(
    shared_dir: Path, fixture_copy
) -> None:
    cli = _owned_fixture(shared_dir, fixture_copy)
    original = cli.read_bytes()
    ops.apply_file(cli, node_check=False)
    patched = cli.read_bytes()
    with _unreadable_backup(cli):
        r = ops.check_file(cli)
        assert (r.state, r.exit_code) == ("PATCHED", 0)
        assert r.backup["status"] == "unreadable" and "permission denied" in r.backup["detail"]

        r = ops.apply_file(cli, node_check=False)
        assert (r.action, r.exit_code, r.backup["status"]) == ("already-patched", 0, "unreadable")
        assert any("chown --reference=" in n for n in r.notes)
        assert cli.read_bytes() == patched

        r = ops.revert_file(cli)  # the markers prove the original's sha
        assert r.action == "reverted" and "removing the marked edits" in r.reason
        assert any("cannot read the backup" in n for n in r.notes)
        assert cli.read_bytes() == original

        with pytest.raises(FileAccess, match="cannot read the backup") as e:
            ops.apply_file(cli, node_check=False)  # it cannot tell whose backup that is
        assert "chown --reference=" in e.value.hint
        assert cli.read_bytes() == original
    if IS_ROOT:  # the next `sudo ctxpatch apply` gives the verified backup back to its owner
        assert ops.apply_file(cli, node_check=False).state == "PATCHED"
        assert (backup.path_for(cli).stat().st_uid, backup.path_for(cli).stat().st_gid) == NOBODY
        with as_user(*NOBODY):
            assert ops.check_file(cli).backup["status"] == "valid"


# ------------------------------------------------------- a backup that is no file (defect 5)


@contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    def hung(*_: object) -> None:
        raise TimeoutError(f"hung for {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _check_refused(cli: Path, what: str) -> None:
    """check reports the backup, apply refuses, the lock is free again, nothing written."""
    before = cli.read_bytes()
    r = ops.check_file(cli)
    assert r.backup["status"] == "unreadable" and what in r.backup["detail"]
    with pytest.raises(FileAccess) as e:
        ops.apply_file(cli, node_check=False)
    assert what in e.value.why + e.value.what and "mv " in e.value.hint
    assert cli.read_bytes() == before
    with fsio.folder_lock(cli.parent, timeout=0.1):
        pass


def test_fifo_backup_does_not_hang(fixture_copy) -> None:
    cli = fixture_copy("s1-2.0.76.js")
    original = cli.read_bytes()
    ops.apply_file(cli, node_check=False)
    bpath = backup.path_for(cli)
    bpath.unlink()
    os.mkfifo(bpath)
    with _deadline(20):
        r = ops.check_file(cli)
        assert (r.state, r.backup["status"]) == ("PATCHED", "unreadable")
        assert "FIFO" in r.backup["detail"]
        r = ops.revert_file(cli)
        assert r.action == "reverted" and cli.read_bytes() == original
        _check_refused(cli, "FIFO")
    assert stat.S_ISFIFO(bpath.lstat().st_mode)  # never replaced


def test_backup_linked_to_a_device_is_not_read(fixture_copy) -> None:
    cli = fixture_copy("s1-2.0.76.js")
    backup.path_for(cli).symlink_to("/dev/zero")
    with _deadline(20):
        _check_refused(cli, "character device")


def test_backup_far_larger_than_cli_js_is_not_read(fixture_copy) -> None:
    cli = fixture_copy("s1-2.0.76.js")
    with backup.path_for(cli).open("wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB that costs no disk
    _check_refused(cli, "too large")


def test_backup_limit_leaves_room_for_another_version() -> None:
    assert backup.max_size(13_700_000) > 2 * 13_700_000
    assert backup.max_size(0) == 1 << 20


# --------------------------------------------------- temp files of killed runs (defect 6)

_KILLED_RUN = """
import os, signal, sys
from pathlib import Path
from patcher import ops
target = Path(sys.argv[1])
real_replace = os.replace
def killed(src, dst):
    if Path(dst).name == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst)
os.replace = killed
ops.apply_file(target, node_check=False)
"""


@pytest.mark.parametrize("killed_at", ["cli.js.backup", "cli.js"])
def test_temp_file_of_a_killed_run_is_removed_under_the_lock(killed_at: str, fixture_copy) -> None:
    cli = fixture_copy("s6-2.1.112.js")
    original = cli.read_bytes()
    run = subprocess.run(
        [sys.executable, "-c", _KILLED_RUN, str(cli), killed_at], cwd=ROOT, check=False
    )
    assert run.returncode == -signal.SIGKILL
    folder = cli.parent
    (stale,) = [p for p in folder.iterdir() if p.name.endswith(fsio.TEMP_SUFFIX)]
    assert stale.name.startswith(f".{killed_at}.") and cli.read_bytes() == original
    # look-alikes that are not ours: another file's temp, other names, a link
    decoys = [".package.json.abcd1234.ctxpatch", "notes.ctxpatch", ".cli.js.abcd1234.ctxpatch.old"]
    for d in decoys:
        (folder / d).write_text("keep")
    (folder / ".cli.js.zzzz9999.ctxpatch").symlink_to(folder / "notes.ctxpatch")
    decoys.append(".cli.js.zzzz9999.ctxpatch")

    with fsio.folder_lock(folder, timeout=1), pytest.raises(FileBusy):
        ops.apply_file(cli, node_check=False, lock_timeout=0.2)  # another run holds the lock
    assert stale.exists()

    r = ops.apply_file(cli, node_check=False)
    assert r.state == "PATCHED"
    assert any(stale.name in n and "interrupted" in n for n in r.notes)
    assert not stale.exists()
    assert sorted(p.name for p in folder.iterdir() if p.name not in ("cli.js", "package.json")) == (
        sorted([*decoys, "cli.js.backup"])
    )


# ------------------------------------------------------------------------ the pure core


def test_plan_and_backup_do_not_import_the_io_module() -> None:
    code = (
        "import sys, patcher.plan, patcher.backup, patcher.selfcheck\n"
        "print(sorted(m for m in sys.modules if m in ('patcher.bundle', 'patcher.fsio')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, check=True)
    assert out.stdout.strip() == b"[]"


def test_fsio_does_not_read_the_environment_at_import() -> None:
    env = {**os.environ, "CTXPATCH_LOCK_TIMEOUT": "not a number"}
    code = "import patcher.fsio, patcher.ops; print(patcher.fsio.DEFAULT_LOCK_TIMEOUT)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, check=False
    )
    assert out.returncode == 0 and out.stdout.strip() == b"30.0", out.stderr


def test_building_a_result_reads_nothing_from_disk(tmp_path: Path, monkeypatch) -> None:
    cli = copy_fixture("s6-2.1.112.js", tmp_path / "@anthropic-ai" / "claude-agent-sdk")
    b = bundle.load(cli)
    b.shadow = "@anthropic-ai/claude-agent-sdk-linux-x64"
    shutil.rmtree(tmp_path / "@anthropic-ai")

    def no_disk(*_: object, **__: object) -> None:
        raise AssertionError("result_for touched the disk")

    for name in ("glob", "is_file", "exists", "stat", "iterdir"):
        monkeypatch.setattr(Path, name, no_disk)
    r = result_for(b, "checked", markers.State.PATCHED, ExitCode.OK)
    assert r.version == "2.1.112" and any("linux-x64 is installed" in n for n in r.notes)
