"""The real native builds the tests run, unpacked for this test session only.

The npm-pack cache keeps each native build the tests read as its compressed tarball (74-175 MB,
``npmcache.native_binary(..., into=...)``); the 236-381 MB executable is unpacked once per
session into one scratch folder, deleted when the session ends. The newest native build
(2.1.332) comes from the pinned Python Agent SDK's wheel, which bundles it byte for byte:
the wheel is cached once (``$CTXPATCH_CACHE/pypi/``) for both the Agent SDK test and this.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from scratch_dirs import scratch_dir

from patcher import npmcache

SDK_VERSION = "0.2.189"  # claude-agent-sdk on PyPI, bundling Claude Code 2.1.332
SDK_BUNDLED = "2.1.332"
BUNDLED_MEMBER = "claude_agent_sdk/_bundled/claude"

_scratch: Path | None = None


def scratch() -> Path:
    """This session's folder for unpacked builds (made on first use, deleted at exit, or by the
    next run when this one was killed: tests/scratch_dirs.py)."""
    global _scratch
    if _scratch is None:
        _scratch = scratch_dir("ctxpatch-natives-")
    return _scratch


def native(version: str, package: str = "cc") -> Path:
    """The real linux-x64 ``claude`` of ``version`` (fetched into the cache as a tarball when
    missing), unpacked into this session's scratch. Raises ``CtxpatchError`` when the fetch
    fails."""
    return npmcache.native_binary(package, version, into=scratch())


def sdk_wheels(version: str = SDK_VERSION) -> Path:
    """The folder holding the wheels of ``claude-agent-sdk==version`` and its dependencies
    (``pip download``ed once into ``$CTXPATCH_CACHE/pypi/``: 178 MB of wheels instead of the
    430 MB installed). Raises ``RuntimeError`` with pip's message when pip cannot get them."""
    dest = npmcache.cache_root() / "pypi" / f"claude-agent-sdk-{version}-wheels"
    if any(dest.glob("claude_agent_sdk-*.whl")):
        return dest
    with npmcache.fetch_lock(dest.parent, dest.name):  # parallel test workers: one downloads
        if not any(dest.glob("claude_agent_sdk-*.whl")):
            _download_sdk_wheels(version, dest)
    return dest


def _download_sdk_wheels(version: str, dest: Path) -> None:
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    try:
        r = subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                "--no-cache-dir", "--dest", str(tmp), f"claude-agent-sdk=={version}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"cannot download claude-agent-sdk=={version}: {r.stderr[-500:]}")
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sdk_wheel(version: str = SDK_VERSION) -> Path:
    return next(sdk_wheels(version).glob("claude_agent_sdk-*.whl"))


def newest_native() -> Path:
    """Claude Code :data:`SDK_BUNDLED`, the newest native build: the ``claude`` the pinned SDK's
    wheel bundles (the same bytes as ``@anthropic-ai/claude-code-linux-x64@2.1.332``),
    unpacked into this session's scratch."""
    out = scratch() / f"sdk-bundled-{SDK_BUNDLED}" / "claude"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(".claude.part")
        with (
            zipfile.ZipFile(sdk_wheel()) as whl,
            whl.open(BUNDLED_MEMBER) as src,
            part.open("wb") as dst,
        ):
            shutil.copyfileobj(src, dst, 1 << 20)
        part.chmod(0o755)
        part.rename(out)
    return out


def newest_native_or_skip() -> Path:
    """:func:`newest_native`, or a skip when the wheel cannot be downloaded (a failure in CI,
    where ``CI`` is set: the newest build's tests never skip there)."""
    try:
        return newest_native()
    except RuntimeError as e:
        if os.environ.get("CI"):
            raise
        import pytest

        pytest.skip(str(e))


def node18() -> Path:
    """A Node 18 executable: ``node-<system>-<arch>@18`` (the package ``npx node@18`` installs)
    fetched with npm pack, its 40 MB tarball kept in ``$CTXPATCH_CACHE/node/``, ``bin/node``
    (91 MB) unpacked into this session's scratch. Raises ``CtxpatchError`` when the fetch fails."""
    from lab.sandbox import node_platform

    arch, system = node_platform().split("-")
    package = f"node-{system}-{arch}"
    base = npmcache.cache_root() / "node"
    tgz = base / f"{package}-18.tgz"
    if not tgz.is_file():
        with npmcache.fetch_lock(base, f"{package}-18"):  # parallel test workers: one fetches
            if not tgz.is_file():
                npmcache._npm_pack(package, "18", base, tgz)
    out = scratch() / "node18" / "node"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(".node.part")
        with tarfile.open(tgz) as tar, part.open("wb") as dst:
            src = tar.extractfile("package/bin/node")
            if src is None:
                raise RuntimeError(f"{tgz} holds no package/bin/node")
            shutil.copyfileobj(src, dst, 1 << 20)
        part.chmod(0o755)
        part.rename(out)
    return out
