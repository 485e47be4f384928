"""Where the shared test input lives (real session transcripts, never copied into the repo).

``CTXPATCH_SHARED`` names the folder; by default ``../shared`` next to the checkout. The real
sessions are core test input: in CI (``CI`` set) a missing folder fails the whole run at start
(``tests/conftest.py``); a local run without it skips the tests that read it, and the short
summary folds those skips into one line: how many, and how to get the data (:func:`skip_reason`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SHARED = Path(os.environ.get("CTXPATCH_SHARED", Path(__file__).resolve().parents[2] / "shared"))
TRANSCRIPTS = SHARED / "transcripts"
SPOTTER = TRANSCRIPTS / "spotter"
PUBLIC = TRANSCRIPTS / "public"
CCLOG = TRANSCRIPTS / "claude-code-log"
REQUIRED = (SPOTTER, PUBLIC / "MANIFEST.json")


def missing() -> list[Path]:
    """The required shared inputs that are not there."""
    return [p for p in REQUIRED if not p.exists()]


def skip_reason() -> str:
    """The one reason every test reading the shared folder skips with when it is absent."""
    return (
        f"{_SKIP_PREFIX} at {SHARED}: the real-session tests need it; to run them set "
        "CTXPATCH_SHARED to the folder holding transcripts/spotter and transcripts/public"
    )


_SKIP_PREFIX = "shared test input not found"


def is_shared_skip(reason: str) -> bool:
    return reason.startswith(_SKIP_PREFIX)


def is_about_shared(reason: str) -> bool:
    """Whether a skip's reason is for want of the shared folder: the one reason, or any reason
    naming a path inside it (a test's own ``pytest.skip(f"{path} absent")``)."""
    return is_shared_skip(reason) or str(SHARED) in reason


def need_shared(path: Path) -> Path:
    """``path`` under the shared folder, or skip with the reason (CI never gets here without it:
    ``tests/conftest.py`` stops the run first)."""
    if not path.exists():
        import pytest

        pytest.skip(missing_message(path))
    return path


def missing_message(*paths: Path) -> str:
    gone = [*missing(), *(p for p in paths if not p.exists() and p not in missing())]
    return (
        f"{_SKIP_PREFIX}: {', '.join(str(p) for p in gone)}. The real session "
        "transcripts are core test input (golden tests of the engine); set CTXPATCH_SHARED to the "
        "folder holding transcripts/spotter and transcripts/public, or check out ../shared next "
        "to the repository"
    )


def public_manifest() -> list[dict]:
    """``transcripts/public/MANIFEST.json`` (one entry per session file), or [] when absent."""
    path = PUBLIC / "MANIFEST.json"
    return json.loads(path.read_text()) if path.is_file() else []
