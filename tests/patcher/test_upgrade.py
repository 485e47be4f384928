"""A cli.js patched by ctxpatch 0.1.0 (text prune only) reads OUTDATED and ``apply`` upgrades it.

The 0.1.0 file is produced by the 0.1.0 code itself, taken out of git history (the last commit
before the clearing injection), not written by hand.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest
from conftest import IN_CI, ROOT, need

from patcher import markers, ops, snippet

# The last commit of ctxpatch 0.1.0 on main (before the server-side clearing injection).
V010 = "2177146"


def _old_patcher(dest: Path) -> Path:
    git = need("git", "the 0.1.0 patcher is taken out of git history")
    proc = subprocess.run(
        [git, "-C", str(ROOT), "archive", "--format=tar", V010, "patcher"],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        if IN_CI:
            pytest.fail(f"git archive {V010} failed: {proc.stderr.decode()[:300]}")
        pytest.skip(f"commit {V010} is not in this checkout (shallow clone?)")
    with tarfile.open(fileobj=BytesIO(proc.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _patch_with_010(old: Path, cli: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from patcher import __version__, ops; "
        "assert __version__ == '0.1.0', __version__; "
        f"r = ops.apply_file(Path({str(cli)!r}), node_check=False); "
        "assert r.action == 'patched', r"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=old, capture_output=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]


@pytest.mark.parametrize("name", ["rq-2.1.112.js", "s1-2.0.76.js"])
def test_a_010_patched_file_is_outdated_and_apply_upgrades_it(
    name: str, tmp_path: Path, fixture_copy
) -> None:
    old = _old_patcher(tmp_path / "v010")
    cli = fixture_copy(name)
    original = cli.read_bytes()
    _patch_with_010(old, cli)
    v010 = cli.read_bytes()
    assert b"v=0.1.0 " in v010 and b" clear=" not in v010  # what 0.1.0 writes
    assert markers.CLEAR_BEGIN not in v010

    checked = ops.check_file(cli)
    assert (checked.state, checked.exit_code) == ("OUTDATED", 1)
    assert "without server-side clearing" in checked.reason

    r = ops.apply_file(cli)
    assert (r.action, r.state) == ("repatched", "PATCHED")
    upgraded = cli.read_bytes()
    assert upgraded.count(markers.BEGIN) == 1 and snippet.source() in upgraded
    expect_clearing = name.startswith("rq-")
    assert (markers.CLEAR_BEGIN in upgraded) is expect_clearing
    assert r.clearing == ("create/cm" if expect_clearing else "none")
    assert markers.strip(upgraded) == original  # the proven original survives the upgrade
    assert ops.check_file(cli).state == "PATCHED"
    assert ops.apply_file(cli).action == "already-patched" and cli.read_bytes() == upgraded
    assert ops.revert_file(cli).action == "reverted" and cli.read_bytes() == original
