"""Published Claude Code packages, fetched with ``npm pack`` into a cache outside the repo.

Real ``cli.js`` files are proprietary and 11-14 MB: they are never committed. Tests and
``ctxpatch regress`` fetch the versions they need into ``$CTXPATCH_CACHE`` (default
``~/.cache/ctxpatch``) as ``npm/<package>-<version>.tgz`` and extract ``package/`` beside it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from patcher.errors import CtxpatchError

SHORT = {"cc": "@anthropic-ai/claude-code", "sdk": "@anthropic-ai/claude-agent-sdk"}


class FetchFailed(CtxpatchError):
    code = "fetch_failed"


def cache_root() -> Path:
    return Path(os.environ.get("CTXPATCH_CACHE") or Path.home() / ".cache" / "ctxpatch")


def _slug(package: str, version: str) -> str:
    return f"{package.replace('@', '').replace('/', '-')}-{version}"


def package_dir(package: str, version: str, root: Path | None = None) -> Path:
    """The extracted ``package/`` folder of ``package@version``, fetching it if needed."""
    package = SHORT.get(package, package)
    base = (root or cache_root()) / "npm"
    slug = _slug(package, version)
    out = base / slug
    if (out / "package" / "package.json").is_file():
        return out / "package"
    base.mkdir(parents=True, exist_ok=True)
    tgz = base / f"{slug}.tgz"
    if not tgz.is_file():
        _npm_pack(package, version, base, tgz)
    tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{slug}."))
    try:
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp, filter="data")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "package"


def _npm_pack(package: str, version: str, base: Path, tgz: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise FetchFailed(
            f"cannot download {package}@{version}",
            why="npm is not on PATH",
            hint="install Node.js (which brings npm), e.g. apt-get install nodejs npm",
        )
    work = Path(tempfile.mkdtemp(dir=base, prefix=".pack."))
    try:
        proc = subprocess.run(
            [npm, "pack", f"{package}@{version}", "--silent", "--pack-destination", str(work)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        files = list(work.glob("*.tgz"))
        if proc.returncode != 0 or len(files) != 1:
            raise FetchFailed(
                f"npm pack {package}@{version} failed",
                why=(proc.stderr or proc.stdout).strip()[-400:],
                hint="check that the version exists (npm view "
                f"{package} versions) and that the npm registry is reachable",
            )
        files[0].replace(tgz)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cli_js(package: str, version: str, root: Path | None = None) -> Path:
    return package_dir(package, version, root) / "cli.js"


# One version per call-site shape (shared/research/versions.md §4), both packages, and the
# first native-only releases. Tests and CI use this list; `ctxpatch regress` takes any.
CI_SAMPLE: tuple[tuple[str, str], ...] = (
    ("cc", "1.0.60"),  # S0
    ("cc", "1.0.128"),  # S1
    ("cc", "2.0.76"),  # S1
    ("sdk", "0.1.76"),  # S1 (= 2.0.76)
    ("cc", "2.1.7"),  # S1'
    ("sdk", "0.2.7"),  # S1' (= 2.1.7)
    ("cc", "2.1.30"),  # S1''
    ("cc", "2.1.50"),  # S3
    ("cc", "2.1.61"),  # S4
    ("cc", "2.1.68"),  # S5
    ("cc", "2.1.112"),  # S6
    ("sdk", "0.2.112"),  # S6 (= 2.1.112)
    ("cc", "1.0.50"),  # no micro-compaction: refused
    ("sdk", "0.2.113"),  # native binary: refused
)


if __name__ == "__main__":  # python -m patcher.npmcache: warm the cache for the CI sample
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        for path in pool.map(lambda pv: package_dir(*pv), CI_SAMPLE):
            print(path)
