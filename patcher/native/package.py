"""The package-folder rules of native builds: which ``claude`` executable an installed package
folder holds or names (the wrapper packages and their ``<name>-<platform>`` packages). A leaf of
``patcher.native``: discovery and ``inspect`` both read folders through it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ctxpatch.errors import NotABundle, NotFound

WRAPPERS = ("@anthropic-ai/claude-code", "@anthropic-ai/claude-agent-sdk")
_EXECUTABLES = ("claude", "claude.exe")
_PLACEHOLDER_MAX = 64 << 10  # the wrapper's bin/claude.exe before install is ~500 bytes


def platform_tag() -> str:
    import platform  # here (~2 ms): `check` of a cli.js, at every start, never asks

    osname = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(
        sys.platform, sys.platform
    )
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    return f"{osname}-{arch}"


def find_binary(folder: Path, must: bool = True) -> Path | None:
    """The native executable for a package folder.

    A platform package (``claude-code-linux-x64``) holds ``claude`` itself; the wrapper packages
    (``@anthropic-ai/claude-code`` ≥ 2.1.113, ``@anthropic-ai/claude-agent-sdk`` ≥ 0.2.113) name
    it through their platform package, installed beside them (``node_modules/@anthropic-ai/
    claude-code-<platform>``) or inside them; the wrapper's ``bin/claude.exe`` counts once the
    postinstall has replaced its placeholder with the real binary.
    """
    for exe in _EXECUTABLES:
        if _real_executable(folder / exe):
            return folder / exe
    name = package_name(folder)
    if name in WRAPPERS:
        short = name.split("/", 1)[1]
        scopes = [folder.parent, folder / "node_modules" / "@anthropic-ai"]
        found = [
            p / exe
            for scope in scopes
            for p in sorted(scope.glob(f"{short}-*"))
            for exe in _EXECUTABLES
            if _real_executable(p / exe)
        ]
        mine = [p for p in found if p.parent.name.startswith(f"{short}-{platform_tag()}")]
        if mine or found:
            return (mine or found)[0]
        if _real_executable(folder / "bin" / "claude.exe"):
            return folder / "bin" / "claude.exe"
        if must:
            raise NotFound(
                f"{name} in {folder} has no native binary installed",
                why=f"from 2.1.113 the package runs {short}-<platform>'s `claude`, and none was "
                "found beside it or inside it (optional dependencies skipped?)",
                hint=f"reinstall without --omit=optional, or pass the binary: ctxpatch inspect "
                f"node_modules/@anthropic-ai/{short}-{platform_tag()}/claude",
            )
    elif must:
        raise NotABundle(
            f"{folder} holds no Claude Code native build",
            why="no `claude` executable and not an @anthropic-ai/claude-code or claude-agent-sdk "
            "package folder",
            hint="pass the `claude` executable or the package folder",
        )
    return None


def _real_executable(p: Path) -> bool:
    try:
        return p.is_file() and p.stat().st_size > _PLACEHOLDER_MAX
    except OSError:
        return False


def package_name(folder: Path) -> str | None:
    try:
        meta = json.loads((folder / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta.get("name") if isinstance(meta, dict) else None
