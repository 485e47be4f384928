import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("CTXPATCH_SHARED", Path(__file__).resolve().parents[3] / "shared"))
SPOTTER = SHARED / "transcripts" / "spotter"
CCLOG = SHARED / "transcripts" / "claude-code-log"


def spotter_sessions() -> list[Path]:
    return sorted(SPOTTER.glob("*.jsonl")) if SPOTTER.is_dir() else []


@pytest.fixture
def need_spotter():
    if not spotter_sessions():
        pytest.skip(f"shared transcripts not found under {SPOTTER}")
