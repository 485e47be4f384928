from pathlib import Path

import pytest
from shared_data import CCLOG, PUBLIC, SHARED, SPOTTER, missing_message, need_shared

__all__ = ["CCLOG", "PUBLIC", "SHARED", "SPOTTER", "need_shared", "spotter_sessions"]


def spotter_sessions() -> list[Path]:
    return sorted(SPOTTER.glob("*.jsonl")) if SPOTTER.is_dir() else []


@pytest.fixture
def need_spotter():
    if not spotter_sessions():
        pytest.skip(missing_message())
