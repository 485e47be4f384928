"""Writing files so that the user's cli.js is either untouched or fully replaced.

* temp file in the same folder, fsync, mode and (where allowed) owner kept, ``os.replace``,
  then fsync of the folder: a crash leaves the old file or the new one, never half of one;
* replacing by rename gives the path a new inode, which breaks hard links (pnpm and bun
  link package files from a shared store: editing in place would patch every project);
* the file is re-hashed right before the rename, so a change by someone else between our
  read and our write is detected and nothing is written;
* an advisory lock on the folder serialises concurrent ctxpatch runs.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from patcher.errors import FileAccess, FileBusy

LOCK_TIMEOUT = float(os.environ.get("CTXPATCH_LOCK_TIMEOUT", "30"))


@contextlib.contextmanager
def folder_lock(folder: Path, timeout: float | None = None) -> Iterator[None]:
    """Exclusive ``flock`` on the folder itself: no lock file is left behind."""
    limit = LOCK_TIMEOUT if timeout is None else timeout
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + limit
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise FileBusy(
                        f"another ctxpatch is working in {folder}",
                        why=f"it held the lock for more than {limit:g} s",
                        hint="wait for it to finish, then run the command again",
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def sha256_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


# Test seam: called after the temp file is complete and before the final hash check.
before_replace: Callable[[Path], None] | None = None


def atomic_replace(
    path: Path,
    data: bytes,
    *,
    expected_sha: str | None,
    mode: int,
    owner: tuple[int, int] | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    ``expected_sha`` is the sha256 the file had when we read it (None: it must not exist).
    """
    folder = path.parent
    try:
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".ctxpatch")
    except PermissionError:
        raise FileAccess(
            f"cannot write in {folder}",
            why="permission denied creating a temporary file next to the target",
            hint="run ctxpatch as the user that owns the install (for a global npm install "
            "that may mean sudo)",
        ) from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            if owner is not None:
                with contextlib.suppress(PermissionError):
                    os.fchown(f.fileno(), *owner)
            os.fsync(f.fileno())
        if before_replace is not None:
            before_replace(path)
        if sha256_file(path) != expected_sha:
            raise FileBusy(
                f"{path} changed on disk while ctxpatch was working",
                why="another program (an npm install or update?) wrote it after ctxpatch read it",
                hint="nothing was written; run the command again once the other program is done",
            )
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_optional(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise FileAccess(f"cannot read {path}", why=e.strerror or str(e)) from None
