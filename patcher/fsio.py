"""Writing files so that the user's cli.js is either untouched or fully replaced.

* temp file in the same folder, fsync, mode and (where allowed) owner kept, ``os.replace``,
  then fsync of the folder: a crash leaves the old file or the new one, never half of one;
* replacing by rename gives the path a new inode, which breaks hard links (pnpm and bun
  link package files from a shared store: editing in place would patch every project);
* the file is re-hashed right before the rename, so a change by someone else between our
  read and our write is detected and nothing is written;
* an advisory lock on the folder serialises concurrent ctxpatch runs; every temp file is
  written under it, so one found while holding the lock was left by a killed run and is removed;
* files we only read (the backup) are opened without blocking and must be regular files of a
  bounded size: a FIFO or a link to a device must not hang the run while it holds the lock.

Nothing here reads the environment: the lock timeout is the caller's (the CLI reads
``CTXPATCH_LOCK_TIMEOUT``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ctxpatch.errors import FileAccess, FileBusy

DEFAULT_LOCK_TIMEOUT = 30.0  # seconds
TEMP_SUFFIX = ".ctxpatch"  # temp files are ".<name>.<8 random chars>.ctxpatch" (mkstemp)
_TEMP_RANDOM = r"[a-z0-9_]{8}"  # tempfile's random part


@contextlib.contextmanager
def folder_lock(folder: Path, timeout: float) -> Iterator[None]:
    """Exclusive ``flock`` on the folder itself: no lock file is left behind."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + timeout
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
                        why=f"it held the lock for more than {timeout:g} s",
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
    import tempfile  # here: `check` (every start) writes nothing; tempfile costs ~4 ms

    folder = path.parent
    try:
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
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


def read_regular(path: Path, *, limit: int) -> bytes | None:
    """The bytes of the regular file at ``path`` (symlinks followed); None when there is none.

    Opened with ``O_NONBLOCK`` and checked with ``fstat`` on that descriptor, so a FIFO, a
    device, a socket or a folder is refused without blocking, and a file over ``limit`` bytes
    without reading it. Raises FileAccess for those; a PermissionError is the caller's to word.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    except PermissionError:
        raise
    except OSError as e:
        raise FileAccess(f"cannot open {path}", why=e.strerror or str(e)) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileAccess(
                f"{path} is not a regular file",
                why=f"it is {_kind(st.st_mode)}; ctxpatch reads it only as a plain file",
                hint=f"move it away (mv {path} {path}.old) and run the command again",
            )
        data = f.read(limit + 1) if st.st_size <= limit else b""
        if st.st_size > limit or len(data) > limit:
            raise FileAccess(
                f"{path} is too large to be what ctxpatch expects",
                why=f"it has {max(st.st_size, len(data))} bytes; the limit here is {limit}",
                hint=f"move it away (mv {path} {path}.old) and run the command again",
            )
        return data


def holds(
    path: Path, data: bytes, ranges: Iterable[tuple[int, int]], *, chunk: int = 1 << 18
) -> bool:
    """True when the regular file at ``path`` holds exactly ``data[a:b]`` for each ``(a, b)`` of
    ``ranges``, one after the other; False otherwise, and on any doubt (missing, not a regular
    file, unreadable, a read error): the caller then reads it the long way (``read_regular``),
    which says why.

    Read in ``chunk``-sized pieces into one buffer, each compared in place (a memcmp at its
    offset in ``data``): a 13.7 MB backup costs ``check`` no 13.7 MB allocation. Opened like
    ``read_regular`` (``O_NONBLOCK``, ``fstat`` of that descriptor): a FIFO never blocks.
    """
    ranges = list(ranges)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb", buffering=0) as f:
            st = os.fstat(fd)
            size = sum(b - a for a, b in ranges)
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                return False
            view = memoryview(bytearray(max(1, min(chunk, size))))
            for a, b in ranges:
                while a < b:
                    n = f.readinto(view[: min(len(view), b - a)])
                    if not n or not data.startswith(view[:n], a):
                        return False  # shorter than fstat said, or a byte differs
                    a += n
            return f.read(1) == b""  # and nothing more
    except OSError:
        return False


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
        stat.S_ISDIR: "a folder",
    }
    return next((k for test, k in kinds.items() if test(mode)), "not a regular file")


def remove_stale_temps(folder: Path, names: Iterable[str]) -> list[tuple[str, int]]:
    """Delete the temp files that killed runs left for ``names``; (name, size) of each removed.

    Call only while holding ``folder_lock(folder)``: every ctxpatch run writes its temp files
    under that lock, so one that exists now belongs to a run that is gone. Only regular files
    (not links) named exactly as ``atomic_replace`` names them are touched.
    """
    alts = "|".join(re.escape(n) for n in names)
    ours = re.compile(rf"\.(?:{alts})\.{_TEMP_RANDOM}{re.escape(TEMP_SUFFIX)}")
    removed: list[tuple[str, int]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if not ours.fullmatch(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            try:
                size = entry.stat(follow_symlinks=False).st_size
                os.unlink(entry.path)
            except OSError:
                continue  # not ours to remove after all (permissions): leave it
            removed.append((entry.name, size))
    return removed
