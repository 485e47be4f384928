"""The cache policy for cli.js packages, on a tiny synthetic tarball (no network): only what
ctxpatch and its tests read is kept, and the tarball goes once extracted."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import cached_tgz

from lab.sandbox import node_platform
from patcher import npmcache


def _tgz(root: Path, version: str) -> Path:
    here = node_platform()
    files = {
        "package/cli.js": b"#!/usr/bin/env node\n// Version: 2.1.112\n",
        "package/package.json": b'{"name": "@anthropic-ai/claude-code", "version": "2.1.112"}',
        "package/yoga.wasm": b"\0asm",
        "package/sdk-tools.d.ts": b"declare const x: 1;\n",
        "package/README.md": b"docs\n",
        f"package/vendor/ripgrep/{here}/rg": b"rg here",
        "package/vendor/ripgrep/COPYING": b"license",
        "package/vendor/ripgrep/other-os/rg": b"rg elsewhere",
        "package/vendor/seccomp/x64/apply-seccomp": b"x",
        "package/vendor/audio-capture/x64-linux/a.node": b"x",
    }
    return cached_tgz(root, "anthropic-ai-claude-code", version, files)


def test_keeps_what_is_read_and_deletes_the_tarball(tmp_path: Path) -> None:
    tgz = _tgz(tmp_path, "2.1.112")
    folder = npmcache.package_dir("cc", "2.1.112", root=tmp_path)
    kept = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    here = node_platform()
    assert kept == sorted(
        [
            "cli.js",
            "package.json",
            "yoga.wasm",
            "vendor/ripgrep/COPYING",
            f"vendor/ripgrep/{here}/rg",
        ]
    )
    assert not tgz.exists()
    assert npmcache.package_dir("cc", "2.1.112", root=tmp_path) == folder  # cached, no npm


FAKE_NPM = """#!/usr/bin/env python3
import io, json, os, sys, tarfile
args = sys.argv[1:]
dest, cache = args[args.index("--pack-destination") + 1], args[args.index("--cache") + 1]
os.makedirs(os.path.join(cache, "_cacache"), exist_ok=True)
with open(os.path.join(cache, "_cacache", "blob"), "wb") as f:
    f.write(b"x" * 1000)  # what npm keeps of every download
with open(os.environ["FAKE_NPM_LOG"], "w") as f:
    json.dump(args, f)
with tarfile.open(os.path.join(dest, "pkg.tgz"), "w:gz") as tar:
    for name, data in {"package/cli.js": b"// Version: 2.1.112\\n",
                       "package/package.json": b"{}"}.items():
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
"""


def test_npm_pack_keeps_nothing_in_npms_own_cache(tmp_path: Path, monkeypatch) -> None:
    """npm pack's own cache (~/.npm/_cacache by default, 1.1 GB after a test run) is a
    throwaway folder: after the fetch only the trimmed package is left, here and in HOME."""
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    home.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM)
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FAKE_NPM_LOG", str(tmp_path / "args.json"))
    root = tmp_path / "cache"
    folder = npmcache.package_dir("cc", "2.1.112", root=root)
    args = json.loads((tmp_path / "args.json").read_text())
    assert args[:2] == ["pack", "@anthropic-ai/claude-code@2.1.112"]
    assert Path(args[args.index("--cache") + 1]).is_relative_to(root)
    files = [p for p in root.rglob("*") if p.is_file()]
    locks = [p for p in files if p.name.endswith(".lock")]  # npmcache.fetch_lock's, empty
    assert [p.name for p in locks] == [".anthropic-ai-claude-code-2.1.112.lock"]
    assert locks[0].stat().st_size == 0
    left = sorted(str(p.relative_to(root)) for p in files if p not in locks)
    assert left == [str((folder / n).relative_to(root)) for n in ("cli.js", "package.json")]
    assert not any(home.iterdir())


def test_identical_files_of_two_versions_are_kept_once(tmp_path: Path, monkeypatch) -> None:
    """ripgrep is the same binary in most packages: one copy on disk, hard-linked into each."""
    monkeypatch.setattr(npmcache, "SHARE_FROM", 1)  # the synthetic files are tiny
    _tgz(tmp_path, "2.1.111")
    _tgz(tmp_path, "2.1.112")
    a = npmcache.package_dir("cc", "2.1.111", root=tmp_path)
    b = npmcache.package_dir("cc", "2.1.112", root=tmp_path)
    rg = f"vendor/ripgrep/{node_platform()}/rg"
    assert (a / rg).read_bytes() == b"rg here" and (b / rg).read_bytes() == b"rg here"
    assert os.path.samefile(a / rg, b / rg)  # one inode
    assert os.path.samefile(a / "cli.js", b / "cli.js")  # the same bytes here too
    blobs = tmp_path / "npm" / npmcache.BLOBS
    inodes = {p.stat().st_ino for p in a.rglob("*") if p.is_file()}
    assert {p.stat().st_ino for p in blobs.iterdir()} == inodes  # every shared file, once
    # a package deleted, the next extraction drops the blobs nobody holds any more
    import shutil

    shutil.rmtree(a.parent)
    shutil.rmtree(b.parent)
    _tgz(tmp_path, "2.1.110")
    c = npmcache.package_dir("cc", "2.1.110", root=tmp_path)
    assert {p.stat().st_ino for p in blobs.iterdir()} == {
        p.stat().st_ino for p in c.rglob("*") if p.is_file()
    }
