"""Several processes share the npm-pack cache (the test suite's parallel workers, ``regress
--jobs``, two ctxpatch runs): a package two of them ask for at once is downloaded once, and both
get it whole. A fake ``npm`` on PATH (no network) logs each call and takes its time, so that
without the lock both callers would find the cache empty and download."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from patcher import npmcache

FAKE_NPM = """#!/usr/bin/env python3
import io, os, sys, tarfile, time
args = sys.argv[1:]
dest = args[args.index("--pack-destination") + 1]
with open(os.environ["FAKE_NPM_LOG"], "a") as f:
    f.write(args[1] + "\\n")
time.sleep(0.5)  # a download: the other caller has time to look at the cache
with tarfile.open(os.path.join(dest, "pkg.tgz"), "w:gz") as tar:
    for name, data in {"package/cli.js": b"// Version: 2.1.112\\n",
                       "package/claude": b"\\x7fELF not really",
                       "package/package.json": b"{}"}.items():
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
"""


@pytest.fixture
def npm_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM)
    npm.chmod(0o755)
    log = tmp_path / "npm.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NPM_LOG", str(log))
    return log


def both_at_once(calls: list[Callable[[], Path]]) -> list[Path]:
    """Run the calls in threads started together (each opens the lock file itself, so the
    ``flock`` separates them as it separates processes); re-raise the first failure."""
    results: list[Path | BaseException | None] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = calls[i]()
        except BaseException as e:  # handed to the test below
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    assert all(isinstance(r, Path) for r in results), results
    return results  # type: ignore[return-value]


def test_a_package_asked_for_twice_at_once_is_fetched_once(tmp_path: Path, npm_log: Path) -> None:
    root = tmp_path / "cache"
    folders = both_at_once([lambda: npmcache.package_dir("cc", "2.1.112", root=root)] * 2)
    assert npm_log.read_text().splitlines() == ["@anthropic-ai/claude-code@2.1.112"]
    assert folders[0] == folders[1]
    assert (folders[0] / "cli.js").read_text() == "// Version: 2.1.112\n"
    assert not list((root / "npm").glob("*.tgz"))  # the tarball went once extracted


def test_a_native_build_asked_for_twice_at_once_is_fetched_once(
    tmp_path: Path, npm_log: Path
) -> None:
    """Two test workers, each unpacking into its own scratch folder from one kept tarball."""
    root = tmp_path / "cache"
    scratch = [tmp_path / "worker-a", tmp_path / "worker-b"]
    exes = both_at_once(
        [
            lambda: npmcache.native_binary("cc", "2.1.330", root=root, into=scratch[0]),
            lambda: npmcache.native_binary("cc", "2.1.330", root=root, into=scratch[1]),
        ]
    )
    assert npm_log.read_text().splitlines() == ["@anthropic-ai/claude-code-linux-x64@2.1.330"]
    assert [e.read_bytes() for e in exes] == [b"\x7fELF not really"] * 2
    assert exes[0].is_relative_to(scratch[0]) and exes[1].is_relative_to(scratch[1])
    kept = list((root / "npm" / npmcache.NATIVE_TARBALLS).glob("*.tgz"))
    assert [t.name for t in kept] == ["anthropic-ai-claude-code-linux-x64-2.1.330.tgz"]
    assert not list((root / "npm").glob("*.tgz"))  # npm pack's download went into the kept one


def test_the_lock_is_released_when_a_fetch_fails(tmp_path: Path, monkeypatch) -> None:
    """npm failing (here: not on PATH) raises the usual refusal, and the next call is not
    kept waiting by a lock the failed one left held."""
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    root = tmp_path / "cache"
    for _ in range(2):
        with pytest.raises(npmcache.FetchFailed, match="cannot download"):
            npmcache.package_dir("cc", "2.1.112", root=root)
