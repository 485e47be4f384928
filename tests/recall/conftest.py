"""Recall tests: every index and session record goes to a fresh state dir."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("CTXPATCH_STATE_DIR", str(state))
    for var in ("CTXPATCH_RECALL_TRANSCRIPT", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(var, raising=False)
    return state
