"""The cache policy for cli.js packages, on a tiny synthetic tarball (no network): only what
ctxpatch and its tests read is kept, and the tarball goes once extracted."""

from __future__ import annotations

from pathlib import Path

from conftest import cached_tgz

from patcher import npmcache
from patcher.e2e.sandbox import node_platform


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
