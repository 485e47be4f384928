"""The test processes' scratch folders: deleted at exit, swept by the next run when killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from scratch_dirs import alive, scratch_dir, sweep

HERE = Path(__file__).resolve().parent
PREFIX = "ctxpatch-scratch-test-"


def dead_pid() -> int:
    """The id of a process that has ended."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not alive(p.pid)
    return p.pid


def test_sweep_deletes_only_the_folders_of_ended_processes_this_user_owns(tmp_path: Path) -> None:
    dead = tmp_path / f"{PREFIX}{dead_pid()}-abc"
    (dead / "deep").mkdir(parents=True)
    (dead / "deep" / "binary").write_bytes(b"x" * 1000)
    live = tmp_path / f"{PREFIX}{os.getpid()}-abc"  # this process: alive
    live.mkdir()
    unnamed = tmp_path / f"{PREFIX}3naf00f8"  # the old names, without a pid: not ours to judge
    unnamed.mkdir()
    a_file = tmp_path / f"{PREFIX}{dead_pid()}-file"
    a_file.write_text("kept")
    other = tmp_path / f"{PREFIX}{dead_pid()}-other"
    other.mkdir()
    if os.getuid() == 0:
        os.chown(other, 65534, 65534)  # nobody's
    link = tmp_path / f"{PREFIX}{dead_pid()}-link"
    link.symlink_to(live)

    gone = sweep(PREFIX, tmp_path)

    assert gone == [dead]
    assert not dead.exists()
    assert live.is_dir() and unnamed.is_dir() and a_file.is_file() and link.is_symlink()
    assert other.is_dir() == (os.getuid() == 0)


def test_scratch_dir_is_private_named_for_its_process_and_sweeps_first() -> None:
    stale = Path(tempfile.gettempdir()) / f"{PREFIX}{dead_pid()}-stale"
    stale.mkdir()
    try:
        made = scratch_dir(PREFIX, at_exit=False)
        try:
            assert made.name.startswith(f"{PREFIX}{os.getpid()}-")
            assert made.stat().st_mode & 0o777 == 0o700
            assert not stale.exists()
        finally:
            made.rmdir()
    finally:
        if stale.exists():
            stale.rmdir()


def _child(tmp: Path, wait: bool) -> subprocess.Popen[str]:
    code = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(HERE)!r})
        from scratch_dirs import scratch_dir
        d = scratch_dir({PREFIX!r})
        (d / "unpacked").write_bytes(b"x" * 4096)
        print(d, flush=True)
        if {wait!r}:
            time.sleep(60)
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def test_a_normal_exit_deletes_the_folder(tmp_path: Path) -> None:
    child = _child(tmp_path, wait=False)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    made = Path(out.strip())
    assert made.parent == tmp_path
    assert not made.exists()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_a_killed_process_leaves_its_folder_to_the_next_run(tmp_path: Path) -> None:
    child = _child(tmp_path, wait=True)
    assert child.stdout is not None
    made = Path(child.stdout.readline().strip())
    assert (made / "unpacked").is_file()
    assert sweep(PREFIX, tmp_path) == []  # still running: kept
    child.kill()
    child.wait(timeout=30)
    assert made.is_dir()  # atexit does not run on SIGKILL
    assert sweep(PREFIX, tmp_path) == [made]
    assert not made.exists()
