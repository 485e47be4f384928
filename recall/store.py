"""Where recall keeps its state: the user's XDG state dir (``platformdirs``), mode 600 files in a
mode 700 folder. ``CTXPATCH_STATE_DIR`` moves it (tests, or a user who wants it elsewhere).

What is kept there holds nothing the transcripts do not already hold: byte offsets, tool names,
the words of an inverted index, and which Claude Code process serves which session.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

STATE_ENV = "CTXPATCH_STATE_DIR"


def state_dir() -> Path:
    """ctxpatch's state folder (created, mode 700)."""
    env = os.environ.get(STATE_ENV)
    if env:
        base = Path(env)
    else:
        import platformdirs  # here: the command line's other paths do not need it

        base = Path(platformdirs.user_state_dir("ctxpatch", appauthor=False))
    return private_dir(base)


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty with mode 600 if it does not exist; tighten it if it does."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path


def index_path(transcript: Path) -> Path:
    """The index file of one session transcript (named by a hash of its absolute path)."""
    key = hashlib.sha256(str(transcript.resolve()).encode("utf-8", "surrogatepass")).hexdigest()
    return private_dir(state_dir() / "recall") / f"{key[:32]}.sqlite3"
