"""Where are the cli.js files? ``--path``, ``CTXPATCH_CLI_JS``, node_modules upward, then global."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from patcher.bundle import PACKAGES


@dataclass(frozen=True)
class Install:
    path: Path  # the cli.js, or the package folder when it has none (native binary)
    scope: str  # "explicit" | "local" | "global"
    package: str | None


def explicit(path: Path) -> Install:
    return Install(path, "explicit", None)


def local_installs(start: Path) -> list[Install]:
    """``node_modules/@anthropic-ai/{claude-agent-sdk,claude-code}`` in ``start`` and upward."""
    found: list[Install] = []
    for folder in [start, *start.parents]:
        found.extend(_in_node_modules(folder / "node_modules", "local"))
    return found


def global_installs(env: Mapping[str, str]) -> list[Install]:
    root = npm_global_root(env)
    return _in_node_modules(root, "global") if root is not None else []


def _in_node_modules(node_modules: Path, scope: str) -> list[Install]:
    out = []
    for name in (PACKAGES[1], PACKAGES[0]):  # agent-sdk first, as the issue lists it
        pkg = node_modules / name
        if (pkg / "cli.js").is_file():
            out.append(Install(pkg / "cli.js", scope, name))
        elif (pkg / "package.json").is_file():
            out.append(Install(pkg, scope, name))
    return out


def npm_global_root(env: Mapping[str, str]) -> Path | None:
    """``$(npm root -g)``; ``CTXPATCH_NPM_ROOT`` overrides it (empty: no global search)."""
    if "CTXPATCH_NPM_ROOT" in env:
        value = env["CTXPATCH_NPM_ROOT"]
        return Path(value) if value else None
    import subprocess  # here: most runs never ask npm

    try:
        out = subprocess.run(
            ["npm", "root", "-g"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = out.stdout.strip()
    return Path(line) if out.returncode == 0 and line else None


def targets(path: Path | None, env: Mapping[str, str], cwd: Path) -> tuple[list[Install], str]:
    """What apply/check/revert act on, and a sentence saying how they were chosen."""
    if path is not None:
        return [explicit(path)], "the path given with --path"
    if env.get("CTXPATCH_CLI_JS"):
        return [explicit(Path(env["CTXPATCH_CLI_JS"]))], "CTXPATCH_CLI_JS"
    local = local_installs(cwd)
    if local:
        return local, f"the local install(s) found from {cwd} upward"
    return global_installs(env), "the global npm install (npm root -g)"


def all_installs(env: Mapping[str, str], cwd: Path) -> list[Install]:
    seen: set[Path] = set()
    out = []
    extra = [explicit(Path(env["CTXPATCH_CLI_JS"]))] if env.get("CTXPATCH_CLI_JS") else []
    for inst in [*extra, *local_installs(cwd), *global_installs(env)]:
        key = inst.path.resolve() if inst.path.exists() else inst.path
        if key not in seen:
            seen.add(key)
            out.append(inst)
    return out


def environ() -> Mapping[str, str]:
    return os.environ
