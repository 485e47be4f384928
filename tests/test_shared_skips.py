"""Without the shared real sessions, every skip for want of them folds into ONE summary line
saying how to get them (``tests/conftest.py``'s report hook), including a test's own
``pytest.skip`` naming a path inside the shared folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import shared_data
from conftest import ROOT

# a test skipping through need_shared, one through a skipif with the one reason, one whose
# parameters come from the shared folder (an empty set), and the ad-hoc reason written below
INNER = (
    "tests/recall/test_digest.py::test_a_real_session",
    "tests/recall/test_index.py",
    "tests/engine/test_golden_spotter.py",
)
AD_HOC = """
import pytest
from shared_data import SPOTTER

def test_own_reason():
    pytest.skip(f"{SPOTTER / 'x.jsonl'} absent")

def test_unrelated():
    pytest.skip("no frobnicator here")
"""


def _pytest(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """An inner ``pytest -q`` of this repository under ``env``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_every_shared_skip_folds_into_one_line(tmp_path: Path) -> None:
    own = ROOT / "tests" / f"test_zz_shared_skip_{os.getpid()}.py"  # inside tests/: its conftest
    own.write_text(AD_HOC)
    try:
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        env.update(CTXPATCH_SHARED=str(tmp_path / "no-shared"), PYTHONPATH=str(ROOT))
        out = _pytest([*INNER, str(own)], env).stdout
    finally:
        own.unlink()
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    shared = [line for line in skipped if "shared_data.py" in line]
    assert len(shared) == 1, skipped
    n = int(re.match(r"SKIPPED \[(\d+)\]", shared[0]).group(1))  # type: ignore[union-attr]
    assert n >= 4 and "CTXPATCH_SHARED" in shared[0], shared
    others = [line for line in skipped if line not in shared]
    assert len(others) == 1 and "no frobnicator here" in others[0], skipped  # not folded
    assert not any(str(tmp_path) in line for line in others)


def test_a_reason_naming_a_shared_path_is_about_shared() -> None:
    assert shared_data.is_about_shared(shared_data.skip_reason())
    assert shared_data.is_about_shared(f"{shared_data.SPOTTER / 'a.jsonl'} absent")
    assert not shared_data.is_about_shared("node not on PATH")


def test_ci_refuses_a_run_without_them_in_one_line(tmp_path: Path) -> None:
    """With ``CI`` set the run stops before any test: exit 4 (pytest's usage error) and the
    what/why/what-to-do printed once, to stderr, not twice as ``pytest.exit`` printed it."""
    env = dict(os.environ, CI="true", CTXPATCH_SHARED=str(tmp_path / "no-shared"))
    env["PYTHONPATH"] = str(ROOT)
    done = _pytest(["-n0", "tests/test_scratch_dirs.py"], env)
    assert done.returncode == 4, (done.returncode, done.stdout, done.stderr)
    printed = done.stdout + done.stderr
    assert printed.count("CI run refused") == 1, printed
    refusal = next(line for line in done.stderr.splitlines() if "CI run refused" in line)
    assert refusal.startswith("ERROR: CI run refused: shared test input not found")
    assert str(tmp_path / "no-shared") in refusal and "set CTXPATCH_SHARED" in refusal
    assert " passed" not in printed  # no test ran
