"""What ctxpatch registers with Claude Code and where, and whether it is there (light).

``ctxpatch check`` reports the registration at every start of Claude Code, so this module
imports no parser, no dataclasses, no state folder: the entries' exact values, the two files'
places, and :func:`status` (a JSON read of ``.claude.json``, a text search in
``settings.json``). :mod:`recall.register` does the edits.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SERVER = "ctxpatch"
HOOK_EVENTS = ("SessionStart", "PreCompact")
HOOK_TIMEOUT = 10  # seconds Claude Code waits for the hook at most (it takes ~0.1-0.5 s)


def cli_package() -> str:
    """The package whose ``-m`` runs the ctxpatch command line: ``ctxpatch`` once it holds the
    command line (``ctxpatch.cli`` and ``ctxpatch.__main__``), else ``patcher``."""
    from importlib.util import find_spec

    for pkg in ("ctxpatch", "patcher"):
        try:
            if find_spec(f"{pkg}.cli") is not None and find_spec(f"{pkg}.__main__") is not None:
                return pkg
        except ImportError:
            continue
    return "patcher"


def command(*args: str) -> list[str]:
    """An absolute command line (this Python, ``-m <package>``): it runs whatever ``PATH``
    Claude Code has."""
    return [sys.executable, "-m", cli_package(), *args]


def hook_command() -> str:
    return shlex.join(command("recall", "hook"))


def server_entry() -> dict[str, Any]:
    cmd = command("mcp")
    return {"type": "stdio", "command": cmd[0], "args": cmd[1:]}


def hook_group() -> dict[str, Any]:
    return {"hooks": [{"type": "command", "command": hook_command(), "timeout": HOOK_TIMEOUT}]}


def places(env: Mapping[str, str]) -> tuple[Path, Path]:
    """(settings.json, .claude.json) where Claude Code reads them: ``$CLAUDE_CONFIG_DIR``
    (else ``~/.claude``)/settings.json; ``<that folder>/.config.json`` when it exists (older
    installs), else ``$CLAUDE_CONFIG_DIR`` (else ``~``)/.claude.json."""
    home = Path(env.get("HOME") or Path.home())
    custom = env.get("CLAUDE_CONFIG_DIR")
    config_dir = Path(custom) if custom else home / ".claude"
    legacy = config_dir / ".config.json"
    base = Path(custom) if custom else home
    return config_dir / "settings.json", legacy if legacy.is_file() else base / ".claude.json"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def status(env: Mapping[str, str]) -> dict[str, Any]:
    """``{"registered": bool, "files": [{"path", "action": "registered"|"absent",
    "entries"}]}``: the hook command under both events, the server with our command."""
    settings, config = places(env)
    text = _read(settings)
    cmd = json.dumps(hook_command())[1:-1].encode()
    hooks = [e for e in HOOK_EVENTS if f'"{e}"'.encode() in text] if cmd in text else []
    server = False
    raw = _read(config)
    if raw:
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        servers = doc.get("mcpServers") if isinstance(doc, dict) else None
        entry = servers.get(SERVER) if isinstance(servers, dict) else None
        want = server_entry()
        server = (
            isinstance(entry, dict)
            and entry.get("command") == want["command"]
            and entry.get("args") == want["args"]
        )
    files = [
        {
            "path": str(settings),
            "action": "registered" if len(hooks) == len(HOOK_EVENTS) else "absent",
            "entries": hooks,
        },
        {
            "path": str(config),
            "action": "registered" if server else "absent",
            "entries": [SERVER] if server else [],
        },
    ]
    return {"registered": all(f["action"] == "registered" for f in files), "files": files}
