"""Scratch folders of a test process, gone when it ends, and swept when it was killed.

The suite unpacks native builds (1.3 GB a worker), Claude Code sandboxes (0.5 GB) and a ledger
folder per process into the system's temporary folder. A process that ends normally deletes
its own (``atexit``, or the fixture's ``finally``); one that is killed (a timeout, ^C twice, an
xdist worker taken down) cannot. So each folder's name holds the id of the process that made
it, ``<prefix><pid>-<random>``, and making one first deletes the folders of the same prefix
whose process is gone and that belong to this user. A folder of a live process (another test
run beside this one) is never touched; a reused pid only keeps a stale folder a little longer.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether a process with this id exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(prefix: str, root: Path | None = None) -> list[Path]:
    """Delete the ``<prefix><pid>-*`` folders under ``root`` (the temporary folder) whose
    process is gone and that this user owns; the folders deleted."""
    root = Path(root or tempfile.gettempdir())
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    gone: list[Path] = []
    uid = os.getuid()
    for path in root.glob(f"{prefix}*"):
        m = pattern.match(path.name)
        try:
            mine = path.is_dir() and not path.is_symlink() and path.lstat().st_uid == uid
        except OSError:
            continue
        if m is None or not mine or alive(int(m.group(1))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        gone.append(path)
    return gone


def scratch_dir(prefix: str, *, at_exit: bool = True) -> Path:
    """A new private folder ``<prefix><pid>-<random>`` in the temporary folder, after sweeping
    the ones killed processes left; deleted when this process exits (``at_exit``; else the
    caller deletes it)."""
    sweep(prefix)
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    if at_exit:
        atexit.register(shutil.rmtree, path, True)
    return path
