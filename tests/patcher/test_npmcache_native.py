"""The cache policy for native platform packages, on tiny synthetic tarballs (no network)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import native_builder as nbld
import pytest
from conftest import cached_tgz

from patcher import npmcache


def fake_tgz(root: Path, version: str) -> Path:
    files = {
        "package/claude": nbld.elf(nbld.blob(nbld.single_module_app())),
        "package/package.json": json.dumps({"name": "x", "version": version}).encode(),
        "package/README.md": b"big docs we never read\n" * 100,
    }
    return cached_tgz(root, "anthropic-ai-claude-code-linux-x64", version, files)


def test_unpacks_only_the_binary_and_deletes_the_tarball(tmp_path: Path) -> None:
    tgz = fake_tgz(tmp_path, "2.1.200")
    exe = npmcache.native_binary("cc", "2.1.200", root=tmp_path)
    assert exe.read_bytes().startswith(b"\x7fELF")
    assert sorted(p.name for p in exe.parent.iterdir()) == ["claude", "package.json"]
    assert not tgz.exists()
    assert npmcache.native_binary("cc", "2.1.200", root=tmp_path) == exe  # cached, no tarball


def test_keeps_the_most_recently_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPATCH_NATIVE_KEEP", "2")
    exes = {}
    for i, v in enumerate(("2.1.201", "2.1.202")):
        fake_tgz(tmp_path, v)
        exes[v] = npmcache.native_binary("cc", v, root=tmp_path)
        os.utime(exes[v].parent.parent, (1000 + i, 1000 + i))
    npmcache.native_binary("cc", "2.1.201", root=tmp_path)  # touch: now the most recent
    fake_tgz(tmp_path, "2.1.203")
    npmcache.native_binary("cc", "2.1.203", root=tmp_path)
    left = sorted(d.name for d in npmcache.native_dirs(tmp_path / "npm"))
    assert left == [
        "anthropic-ai-claude-code-linux-x64-2.1.201",
        "anthropic-ai-claude-code-linux-x64-2.1.203",
    ]
    assert not list((tmp_path / "npm").glob("*.tgz"))


def test_cli_js_packages_are_never_evicted(tmp_path: Path) -> None:
    keep = tmp_path / "npm" / "anthropic-ai-claude-code-2.1.112" / "package"
    keep.mkdir(parents=True)
    (keep / "cli.js").write_text("// Version: 2.1.112\n")
    for i, v in enumerate(("2.1.204", "2.1.205")):
        fake_tgz(tmp_path, v)
        exe = npmcache.native_binary("cc", v, root=tmp_path)
        os.utime(exe.parent.parent, (2000 + i, 2000 + i))
    os.utime(keep.parent, (1, 1))  # the oldest of all, yet not a native package
    gone = npmcache.prune_native(tmp_path / "npm", keep=1)
    assert [d.name for d in gone] == ["anthropic-ai-claude-code-linux-x64-2.1.204"]
    assert (keep / "cli.js").exists()
    assert len(npmcache.native_dirs(tmp_path / "npm")) == 1


def test_into_keeps_the_tarball_and_unpacks_into_the_callers_folder(tmp_path: Path) -> None:
    """The tests' way: the cache keeps the compressed tarball, the executable is unpacked into
    the caller's scratch (deleted by the caller), nothing unpacked stays in the cache."""
    tgz = fake_tgz(tmp_path, "2.1.200")
    scratch = tmp_path / "scratch"
    exe = npmcache.native_binary("cc", "2.1.200", root=tmp_path, into=scratch)
    assert exe.is_relative_to(scratch) and exe.read_bytes().startswith(b"\x7fELF")
    assert sorted(p.name for p in exe.parent.iterdir()) == ["claude", "package.json"]
    assert not tgz.exists()
    kept = tmp_path / "npm" / npmcache.NATIVE_TARBALLS / tgz.name
    assert kept.read_bytes()[:2] == b"\x1f\x8b"  # kept compressed
    assert npmcache.native_dirs(tmp_path / "npm") == []
    assert npmcache.native_binary("cc", "2.1.200", root=tmp_path, into=scratch) == exe
    again = npmcache.native_binary("cc", "2.1.200", root=tmp_path, into=tmp_path / "other")
    assert again.read_bytes() == exe.read_bytes()  # from the kept tarball: no npm on PATH
    # the default way unpacks into the cache from the kept tarball, and leaves it kept
    cached = npmcache.native_binary("cc", "2.1.200", root=tmp_path)
    assert cached.is_relative_to(tmp_path / "npm") and kept.is_file()
    # a copy unpacked in the cache is used as is, not unpacked again
    assert npmcache.native_binary("cc", "2.1.200", root=tmp_path, into=tmp_path / "u") == cached
    assert not (tmp_path / "u").exists()


def test_into_keeps_the_most_recently_used_tarballs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXPATCH_NATIVE_KEEP", "2")
    kept = tmp_path / "npm" / npmcache.NATIVE_TARBALLS
    for i, v in enumerate(("2.1.201", "2.1.202")):
        name = fake_tgz(tmp_path, v).name
        npmcache.native_binary("cc", v, root=tmp_path, into=tmp_path / "s")
        os.utime(kept / name, (1000 + i, 1000 + i))
    npmcache.native_binary("cc", "2.1.201", root=tmp_path, into=tmp_path / "t")  # most recent
    fake_tgz(tmp_path, "2.1.203")
    npmcache.native_binary("cc", "2.1.203", root=tmp_path, into=tmp_path / "s")
    assert sorted(p.name for p in kept.iterdir()) == [
        "anthropic-ai-claude-code-linux-x64-2.1.201.tgz",
        "anthropic-ai-claude-code-linux-x64-2.1.203.tgz",
    ]
    assert not list((tmp_path / "npm").glob("*.tgz"))
