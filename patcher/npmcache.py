"""Published Claude Code packages, fetched with ``npm pack`` into a cache outside the repo.

Real ``cli.js`` files are proprietary and 11-14 MB: they are never committed. Tests and
``ctxpatch regress`` fetch the versions they need into ``$CTXPATCH_CACHE`` (default
``~/.cache/ctxpatch``): ``npm pack`` writes ``npm/<package>-<version>.tgz``, ``package/`` is
extracted beside it and trimmed to what is read (:data:`KEEP`, ripgrep for this platform), and
the tarball is deleted. npm's own cache is a throwaway folder, deleted with the tarball: the
cache keeps what is read and nothing else. docs/development.md "Cache" gives the sizes.

Several processes share the cache (the test suite's parallel workers, ``regress --jobs``, two
ctxpatch runs): one at a time fetches or unpacks a given package (:func:`fetch_lock`, an empty
lock file per package), and the others then find it there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from ctxpatch.errors import FetchFailed

SHORT = {"cc": "@anthropic-ai/claude-code", "sdk": "@anthropic-ai/claude-agent-sdk"}


def cache_root() -> Path:
    return Path(os.environ.get("CTXPATCH_CACHE") or Path.home() / ".cache" / "ctxpatch")


def _slug(package: str, version: str) -> str:
    return f"{package.replace('@', '').replace('/', '-')}-{version}"


@contextlib.contextmanager
def fetch_lock(base: Path, slug: str) -> Iterator[None]:
    """Held while this process fetches or unpacks ``slug`` into ``base``: an exclusive
    ``flock`` on ``base/.<slug>.lock`` (made if missing; the lock goes with the process, so a
    killed fetch leaves none held). Another process fetching the same package waits, then finds
    it fetched; without the lock both downloaded into the same tarball path, and one deleted it
    under the other (a parallel test run on a cold cache)."""
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{slug}.lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def package_dir(
    package: str, version: str, root: Path | None = None, *, locked: bool = False
) -> Path:
    """The extracted ``package/`` folder of ``package@version``, fetching it if needed (under
    :func:`fetch_lock`; ``locked``: the caller holds it)."""
    package = SHORT.get(package, package)
    base = (root or cache_root()) / "npm"
    slug = _slug(package, version)
    out = base / slug
    if (out / "package" / "package.json").is_file():
        return out / "package"
    if not locked:
        with fetch_lock(base, slug):
            return package_dir(package, version, root, locked=True)
    tgz = base / f"{slug}.tgz"
    if not tgz.is_file():
        _npm_pack(package, version, base, tgz)
    tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{slug}."))
    try:
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp, filter="data")
        if (tmp / "package").is_dir():
            trim(tmp / "package")
            share_copies(tmp / "package", base / BLOBS)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tgz.unlink(missing_ok=True)  # nothing reads it again: package.json marks the cached copy
    return out / "package"


# What ctxpatch and its tests read of a package: the bundle, its package.json, and what an
# e2e sandbox copies to run it (lab.sandbox.copy_install): ripgrep for this platform,
# yoga.wasm (<= 2.0.0). The rest (ripgrep and audio-capture for five other platforms, seccomp,
# type declarations, the SDK's other entry points) is deleted on extraction.
KEEP = frozenset({"cli.js", "package.json", "yoga.wasm"})


def trim(package: Path, platform: str | None = None) -> None:
    """Delete from an extracted ``package/`` everything :data:`KEEP` and ripgrep for
    ``platform`` (default: this machine's, as node names it) do not hold."""
    from lab.sandbox import node_platform

    keep_rg = platform or node_platform()
    for p in package.iterdir():
        if p.name in KEEP:
            continue
        if p.name == "vendor" and p.is_dir() and not p.is_symlink():
            for sub in p.iterdir():
                if sub.name == "ripgrep" and sub.is_dir() and not sub.is_symlink():
                    for q in sub.iterdir():
                        if q.name not in (keep_rg, "COPYING"):
                            _remove(q)
                else:
                    _remove(sub)
            continue
        _remove(p)


# Identical files of different versions (ripgrep is the same binary in 16 of the CI sample's
# packages, a claude-code cli.js can be its agent SDK's byte for byte) are kept once: each is a
# hard link to ``npm/.blobs/<sha256>``, so the disk holds one copy (186 MB fewer on the sample
# plus the real tests' versions). Nothing in the cache is written in place (the e2e sandboxes
# copy what they run), so sharing the inode is safe; deleting a package unlinks only its names.
BLOBS = ".blobs"
SHARE_FROM = 1 << 20  # files of 1 MiB or more: the bundles and binaries, not package.json


def share_copies(package: Path, blobs: Path) -> None:
    """Replace every file of ``package`` of at least :data:`SHARE_FROM` bytes by a hard link to
    its content's blob in ``blobs`` (made from it when new). Best effort: a file system without
    hard links keeps the copies."""
    import hashlib

    for f in sorted(package.rglob("*")):
        if f.is_symlink() or not f.is_file() or f.stat().st_size < SHARE_FROM:
            continue
        with f.open("rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        blob = blobs / digest
        try:
            blobs.mkdir(exist_ok=True)
            if not blob.exists():
                os.link(f, blob)
                continue
            spare = f.with_name(f".{f.name}.link")
            os.link(blob, spare)
            os.replace(spare, f)
        except OSError:
            return
    for blob in blobs.iterdir() if blobs.is_dir() else ():
        try:
            if blob.stat().st_nlink == 1:  # no package holds it any more
                blob.unlink()
        except OSError:
            pass


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()


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
            [
                *(npm, "pack", f"{package}@{version}", "--silent"),
                *("--pack-destination", str(work)),
                # npm's own cache (~/.npm/_cacache) would keep a second copy of every tarball,
                # 1.1 GB after a test run: a throwaway one, deleted with ``work`` below
                *("--cache", str(work / ".npm-cache")),
            ],
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


# --- native builds (2.1.113 on): the platform packages, 230-380 MB each ----------------------
#
# ``@anthropic-ai/claude-code-linux-x64@2.1.330`` is a 175 MB download holding one 381 MB
# executable (2.1.113: 74 MB / 236 MB). Two ways to hold one:
#
# * ``native_binary(...)`` (``ctxpatch regress --native``, the benches): the unpacked binary is
#   kept in the cache, the tarball deleted, at most NATIVE_KEEP versions (least recently used
#   evicted first; ``CTXPATCH_NATIVE_KEEP`` overrides);
# * ``native_binary(..., into=FOLDER)`` (the tests): the cache keeps the compressed tarball
#   (``npm/native-tgz/<slug>.tgz``, at most NATIVE_KEEP of them, least recently used evicted
#   first) and the binary is unpacked into FOLDER, the caller's scratch, deleted by the caller
#   (tests/native_builds.py). A call without ``into`` unpacks a kept tarball too, and leaves it.

NATIVE_PACKAGES = {
    "cc": "@anthropic-ai/claude-code-{platform}",
    "sdk": "@anthropic-ai/claude-agent-sdk-{platform}",
}
NATIVE_EXECUTABLE = "claude"
NATIVE_KEEP = 3
NATIVE_CI_SAMPLE: tuple[tuple[str, str], ...] = (
    ("cc", "2.1.113"),  # first native build, single module (236 MB)
    ("cc", "2.1.217"),  # a 2.1.2xx single-module build (269 MB)
    ("cc", "2.1.330"),  # code-split, zstd entries (381 MB)
)


def native_keep() -> int:
    try:
        return max(1, int(os.environ.get("CTXPATCH_NATIVE_KEEP", NATIVE_KEEP)))
    except ValueError:
        return NATIVE_KEEP


def native_binary(
    package: str,
    version: str,
    platform: str = "linux-x64",
    root: Path | None = None,
    *,
    log: Callable[[str], None] | None = None,
    into: Path | None = None,
    locked: bool = False,
) -> Path:
    """The ``claude`` executable of ``package``'s platform package at ``version``.

    Only ``package/claude`` and ``package/package.json`` are unpacked. Without ``into`` they
    are kept in the cache, the downloaded tarball deleted right after, older native versions
    beyond :func:`native_keep` evicted. With ``into``: unpacked into ``into/<slug>/package/``
    (the caller deletes it), the tarball kept in the cache (``npm/native-tgz/``, at most
    :func:`native_keep` of them); a copy already unpacked in the cache is used as is. Fetched
    and unpacked under :func:`fetch_lock` (``locked``: the caller holds it), as
    :func:`package_dir` does.
    """
    name = NATIVE_PACKAGES.get(package, package).format(platform=platform)
    base = (root or cache_root()) / "npm"
    slug = _slug(name, version)
    for out in (base / slug, *([into / slug] if into is not None else [])):
        exe = out / "package" / NATIVE_EXECUTABLE
        if exe.is_file() and (out / "package" / "package.json").is_file():
            if out.parent == base:  # unpacked in the cache (also for ``into``: used as is)
                os.utime(out)  # recently used: evicted last
            return exe
    if not locked:  # look again under the lock: another process may have fetched it meanwhile
        with fetch_lock(base, slug):
            return native_binary(package, version, platform, root, log=log, into=into, locked=True)
    out = (into if into is not None else base) / slug
    exe = out / "package" / NATIVE_EXECUTABLE
    tgz = base / f"{slug}.tgz"  # where npm pack puts a download: emptied below, always
    kept = base / NATIVE_TARBALLS / f"{slug}.tgz"  # what ``into`` calls keep
    try:
        if not kept.is_file() and not tgz.is_file():
            if log is not None:
                log(
                    f"fetching {name}@{version} (a 70-180 MB download, 230-380 MB unpacked; "
                    f"kept: the {native_keep()} most recently used native versions)"
                )
            _npm_pack(name, version, base, tgz)
        if into is not None:
            if not kept.is_file():
                kept.parent.mkdir(exist_ok=True)
                tgz.replace(kept)
            os.utime(kept)  # recently used: evicted last
            prune_native_tarballs(kept.parent, keep=native_keep(), spare=kept)
            into.mkdir(parents=True, exist_ok=True)
        _unpack_native(kept if kept.is_file() else tgz, out, name, version)
    finally:
        tgz.unlink(missing_ok=True)  # 70-180 MB that nothing reads again
    if into is None:
        prune_native(base, keep=native_keep(), spare=out)
    return exe


def _unpack_native(tgz: Path, out: Path, name: str, version: str) -> None:
    """``package/claude`` and ``package/package.json`` of ``tgz`` into ``out/package/``
    (atomically: a temp folder beside ``out``, renamed)."""
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        with tarfile.open(tgz) as tar:
            members = [
                m
                for m in tar.getmembers()
                if m.name in (f"package/{NATIVE_EXECUTABLE}", "package/package.json")
            ]
            tar.extractall(tmp, members=members, filter="data")
        if not (tmp / "package" / NATIVE_EXECUTABLE).is_file():
            raise FetchFailed(
                f"{name}@{version} has no `{NATIVE_EXECUTABLE}` executable",
                why="the platform package's layout is not the one ctxpatch knows",
                hint="check the version; native builds start at claude-code 2.1.113",
            )
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# the folder of ``npm/`` holding the native tarballs ``into`` calls keep
NATIVE_TARBALLS = "native-tgz"


def prune_native_tarballs(folder: Path, keep: int, spare: Path | None = None) -> list[Path]:
    """Delete all but the ``keep`` most recently used tarballs in ``folder`` (``npm/``'s
    :data:`NATIVE_TARBALLS`); return what went."""
    found = sorted((t for t in folder.glob("*.tgz") if t != spare), key=lambda t: t.stat().st_mtime)
    gone = found[: max(0, len(found) - (keep - (1 if spare is not None else 0)))]
    for t in gone:
        t.unlink(missing_ok=True)
    return gone


def native_dirs(base: Path) -> list[Path]:
    """Cached native platform packages, least recently used first."""
    found = [
        d
        for d in base.glob("anthropic-ai-claude-*-*-*")
        if (d / "package" / NATIVE_EXECUTABLE).is_file()
    ]
    return sorted(found, key=lambda d: d.stat().st_mtime)


def prune_native(base: Path, keep: int, spare: Path | None = None) -> list[Path]:
    """Delete all but the ``keep`` most recently used native versions; return what went."""
    dirs = [d for d in native_dirs(base) if d != spare]
    room = keep - (1 if spare is not None else 0)
    gone = dirs[: max(0, len(dirs) - room)]
    for d in gone:
        shutil.rmtree(d, ignore_errors=True)
    return gone


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
