"""What to type on THIS machine to run a native install through the gateway.

``check``/``status``/``apply`` used to say ``ctxpatch run -- claude`` for every native build,
which fails (exit 2, "command not found") where ``claude`` is not on PATH, e.g. an npm-local
project that only has ``node_modules/.bin/claude``. The hint names the command that exists:

* ``claude`` on PATH is this very binary (same file, links and npm's hard link followed): the
  one-step ``shell-init`` line (or where it already is), else ``ctxpatch run -- claude``;
* an npm package in a project: its ``node_modules/.bin/claude``, relative to here;
* the Python SDK's bundled binary: the ``ctxpatch.agent_sdk`` one-liner;
* the npm Agent SDK: the program run under ``ctxpatch run`` (the SDK hands its environment,
  ``ANTHROPIC_BASE_URL`` included, to the Claude Code it starts);
* anything else: the path it was found at.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from patcher.discover import NativeInstall

SDK_ONE_LINER = "import ctxpatch.agent_sdk; ctxpatch.agent_sdk.enable()"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _shown(path: Path, env: Mapping[str, str], cwd: Path) -> str:
    """``path`` as the user would type it here: ``./…`` under this folder, ``~/…`` under the
    home folder, ``../…`` a level or two up, else absolute."""
    if path.is_relative_to(cwd):
        return "./" + str(path.relative_to(cwd))
    home = env.get("HOME")
    if home and path.is_relative_to(home):
        return "~/" + str(path.relative_to(home))
    rel = os.path.relpath(path, cwd)
    return rel if rel.count("..") <= 2 else str(path)


def on_path(ni: NativeInstall, env: Mapping[str, str]) -> bool:
    """Whether ``claude`` on PATH runs this install's binary."""
    found = shutil.which("claude", path=env.get("PATH", ""))
    return found is not None and (
        _same_file(Path(found), ni.binary) or _same_file(Path(found), ni.found_as)
    )


def npm_bin(ni: NativeInstall) -> Path | None:
    """``node_modules/.bin/claude`` of the npm package this binary came with, if it exists."""
    for folder in (ni.found_as, *ni.binary.parents):
        if folder.parent.parent.name == "node_modules" and folder.parent.name.startswith("@"):
            exe = folder.parent.parent / ".bin" / "claude"
            return exe if exe.exists() else None
    return None


def run_hint(ni: NativeInstall, env: Mapping[str, str], cwd: Path) -> str:
    """One sentence: the command that routes this install through the gateway, here."""
    if ni.kind == "python sdk":
        return (
            f"in Python, before the SDK starts a session: `{SDK_ONE_LINER}` "
            "(every claude-agent-sdk session of that process goes through the gateway)"
        )
    if ni.kind == "agent-sdk":
        return (
            "run your program as `ctxpatch run -- node your-app.js` (the SDK passes "
            "ANTHROPIC_BASE_URL on to Claude Code), or point it at `ctxpatch gateway`"
        )
    if on_path(ni, env):
        from gateway.shell_init import find_lines, setup_advice

        if find_lines(env):
            return setup_advice(env)
        return f"{setup_advice(env)}; or run `ctxpatch run -- claude …` each time"
    exe = npm_bin(ni)
    if exe is not None:
        return (
            f"`claude` is not on PATH here: run `ctxpatch run -- {_shown(exe, env, cwd)} …` "
            "(or `ctxpatch run -- npx claude …` from the project)"
        )
    where = "is another build" if shutil.which("claude", path=env.get("PATH", "")) else "is none"
    return f"`claude` on PATH {where}: run `ctxpatch run -- {_shown(ni.found_as, env, cwd)} …`"
