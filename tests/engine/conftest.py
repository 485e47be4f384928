from pathlib import Path

import pytest
from shared_data import CCLOG, PUBLIC, SHARED, SPOTTER, missing_message

__all__ = ["CCLOG", "PUBLIC", "SHARED", "SPOTTER", "need_shared", "spotter_sessions"]


def spotter_sessions() -> list[Path]:
    return sorted(SPOTTER.glob("*.jsonl")) if SPOTTER.is_dir() else []


def need_shared(path: Path) -> Path:
    """``path`` under the shared folder, or skip with the reason (CI never gets here without it:
    ``tests/conftest.py`` stops the run first)."""
    if not path.exists():
        pytest.skip(missing_message(path))
    return path


@pytest.fixture
def need_spotter():
    if not spotter_sessions():
        pytest.skip(missing_message())
