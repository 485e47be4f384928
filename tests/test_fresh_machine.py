"""The README's two commands on a fresh machine: a copy of the checkout with no shared real
sessions beside it, a fresh venv, an empty HOME.

``bash scripts/demo.sh`` must exit 0, print verify's PASS and end with the savings line;
``bash .ci/run`` must install everything its gates import (the failure this test was written for:
mypy reads matplotlib, which only the ``plot`` extra installs), pass the gates, and run pytest
with the real-session tests skipped behind ONE summary line saying how to get them. Afterwards
the caches it left in HOME (ours, npm's, pip's) stay under the README's figure.

It downloads (PyPI, npm) and takes minutes, so it runs where the caller asks for it: in CI
(``CI`` set) always, elsewhere with ``CTXPATCH_FRESH_MACHINE=1``; otherwise it skips and says
so. The inner ``.ci/run`` runs a few test files (``.ci/run`` passes its arguments to pytest),
not the whole suite again: the suite itself is what the outer run is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import IN_CI, ROOT

# What the inner pytest runs: a module that reads the shared sessions (its skips must fold into
# one line) and one that does not.
INNER_TESTS = ("tests/engine/test_transcript.py", "tests/test_project.py")
CACHE_LIMIT = 1024**3  # README "Tests and caches": under 1 GB after a full run


def _wanted() -> None:
    if not (IN_CI or os.environ.get("CTXPATCH_FRESH_MACHINE") == "1"):
        pytest.skip(
            "the fresh-machine run downloads from PyPI and npm and takes minutes: CI runs it "
            "(CI=true); here, set CTXPATCH_FRESH_MACHINE=1"
        )


def tracked_copy(dest: Path) -> Path:
    """The tracked files of this checkout as they are on disk (a clone without ../shared)."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
    return dest


def du(path: Path) -> int:
    """Bytes on disk under ``path``, each inode once (the npm-pack cache hard-links copies)."""
    seen: dict[tuple[int, int], int] = {}
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.lstat()
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc.returncode, proc.stdout, time.monotonic() - start


@pytest.mark.real
def test_the_readme_commands_on_a_fresh_machine(tmp_path: Path) -> None:
    _wanted()
    for tool in ("node", "npm", "git"):
        assert shutil.which(tool), f"{tool} is needed on PATH"
    clone = tracked_copy(tmp_path / "clone" / "ctxpatch")
    assert not (clone.parent / "shared").exists()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("CTXPATCH_", "CLAUDE_", "ANTHROPIC_", "PYTHON", "PIP_", "npm_", "NPM_")
        )
        and k not in ("CI", "VIRTUAL_ENV", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")
    }
    env.update(HOME=str(home), PATH=f"{venv / 'bin'}:{os.environ['PATH']}", TMPDIR=str(tmp_path))

    rc, out, took = run(["bash", "scripts/demo.sh"], clone, env, timeout=1800)
    assert rc == 0, out[-4000:]
    assert re.search(r"^PASS ", out, re.M), out[-4000:]
    last = out.rstrip().splitlines()[-1]
    assert re.fullmatch(
        r"saved on the embedded session, patched vs unpatched: 1 of 1 compactions avoided, "
        r"[\d,]+ input tokens \(\d+\.\d%\), \$\d+\.\d\d of \$\d+\.\d\d \(\d+\.\d%\) at .*",
        last,
    ), last
    assert not list(tmp_path.glob("ctxpatch-demo.*"))  # its scratch project deleted at exit
    print(f"demo: rc 0 in {took:.0f} s")

    rc, out, took = run(
        ["bash", ".ci/run", "-p", "no:cacheprovider", *INNER_TESTS], clone, env, 3600
    )
    assert rc == 0, out[-4000:]
    skips = [line for line in out.splitlines() if "shared test input not found" in line]
    assert len(skips) == 1, skips  # ONE line for every real-session skip
    assert re.match(r"SKIPPED \[\d+\] tests/shared_data\.py: .*CTXPATCH_SHARED", skips[0]), skips
    print(f".ci/run: rc 0 in {took:.0f} s")

    left = {p.relative_to(home).as_posix(): du(p) for p in home.glob(".*/*") if p.is_dir()}
    total = du(home)
    print(f"caches in HOME: {total / 1e6:.0f} MB {left}")
    assert not (home / ".npm" / "_cacache").exists()  # npm's own cache: a throwaway folder
    assert not (home / ".npm" / "_npx").exists()  # node@18 lives in ctxpatch's cache
    assert total < CACHE_LIMIT, left
