"""Where are the cli.js files and native builds? ``--path``, ``CTXPATCH_CLI_JS``, node_modules
upward, the global npm install, then the native installs outside npm.

Native builds (Claude Code >= 2.1.113) are where users have them:

* the native installer: ``~/.local/bin/claude`` -> ``~/.local/share/claude/versions/<version>``;
* ``claude`` on ``PATH``, links resolved (the installer's link, npm's ``bin/claude.exe``);
* the npm packages ``@anthropic-ai/claude-code`` >= 2.1.113 and ``@anthropic-ai/claude-agent-sdk``
  >= 0.2.113 (found like the cli.js packages; their binary is in the ``-<platform>`` package
  beside them, :func:`patcher.native.package.find_binary`);
* the Python ``claude-agent-sdk``: ``claude_agent_sdk/_bundled/claude`` in this interpreter's
  ``site-packages`` or a ``.venv``/``venv`` from here upward.

:func:`native_of` tells what a path is (a native build, and which kind) without reading more
than the first bytes of the file; the version is read later from the binary itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from patcher.bundle import PACKAGES
from patcher.native.package import find_binary, package_name
from patcher.versions import parse_version


class Install(NamedTuple):
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
    """``$(npm root -g)``; ``CTXPATCH_NPM_ROOT`` overrides it (empty: no global search).

    Asking npm costs ~150 ms (a node start), too much for a ``check`` at every start, so the
    answer is remembered in the cache folder together with everything npm derives it from:
    the npm and node executables found on PATH (resolved, with size and mtime), every
    ``npm_config_*``/``PREFIX``/``DESTDIR`` variable, and the npmrc files it reads (user,
    global beside node, npm's builtin). Any of them changed, or the remembered folder gone:
    npm is asked again."""
    if "CTXPATCH_NPM_ROOT" in env:
        value = env["CTXPATCH_NPM_ROOT"]
        return Path(value) if value else None
    key = _npm_root_key(env)
    memo = _memo_path(env)
    if key is not None and memo is not None:
        hit = _read_memo(memo, key)
        if hit is not None:
            return hit
    root = _ask_npm(env)
    if root is not None and key is not None and memo is not None:
        _write_memo(memo, key, root)
    return root


def _ask_npm(env: Mapping[str, str]) -> Path | None:
    import subprocess  # here (~10 ms): most runs, and `check` at every start, never ask npm

    try:
        out = subprocess.run(
            ["npm", "root", "-g"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            env=dict(env),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = out.stdout.strip()
    return Path(line) if out.returncode == 0 and line else None


def _which(name: str, env: Mapping[str, str]) -> Path | None:
    for folder in (env.get("PATH") or "").split(os.pathsep):
        candidate = Path(folder or ".") / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _stamp(path: Path) -> list:
    try:
        st = path.stat()
    except OSError:
        return [str(path), None]
    return [str(path), st.st_size, st.st_mtime_ns]


def _npm_root_key(env: Mapping[str, str]) -> str | None:
    """What ``npm root -g`` depends on, as one string (None: no npm on PATH)."""
    npm = _which("npm", env)
    if npm is None:
        return None
    npm_real = npm.resolve()
    node = _which("node", env)
    node_real = node.resolve() if node is not None else None
    home = Path(env.get("HOME") or Path.home())
    userconfig = env.get("npm_config_userconfig") or env.get("NPM_CONFIG_USERCONFIG")
    files = [Path(userconfig) if userconfig else home / ".npmrc"]
    if node_real is not None:
        files.append(node_real.parent.parent / "etc" / "npmrc")
    files.extend(parent / "npmrc" for parent in npm_real.parents[:3])  # npm's builtin npmrc
    variables = sorted(
        (k, v)
        for k, v in env.items()
        if k.lower().startswith("npm_config_") or k in ("PREFIX", "DESTDIR")
    )
    parts = [
        _stamp(npm),
        _stamp(npm_real),
        _stamp(node_real) if node_real else None,
        [_stamp(f) for f in files],
        variables,
    ]
    return json.dumps(parts, sort_keys=True)


def _memo_path(env: Mapping[str, str]) -> Path | None:
    base = env.get("CTXPATCH_CACHE") or (
        str(Path(env["HOME"]) / ".cache" / "ctxpatch") if env.get("HOME") else ""
    )
    return Path(base) / "npm-root-g.json" if base else None


def _read_memo(memo: Path, key: str) -> Path | None:
    try:
        data = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    root = data.get("root")
    return Path(root) if isinstance(root, str) and Path(root).is_dir() else None


def _write_memo(memo: Path, key: str, root: Path) -> None:
    """Best effort: a folder we cannot write only costs the next run the npm call."""
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "root": str(root)}), encoding="utf-8")
        os.replace(tmp, memo)
    except OSError:
        pass


def targets(path: Path | None, env: Mapping[str, str], cwd: Path) -> tuple[list[Install], str]:
    """What apply/check/revert act on, and a sentence saying how they were chosen."""
    if path is not None:
        return [explicit(path)], "the path given with --path"
    if env.get("CTXPATCH_CLI_JS"):
        return [explicit(Path(env["CTXPATCH_CLI_JS"]))], "CTXPATCH_CLI_JS"
    local = local_installs(cwd)
    if local:
        return local, f"the local install(s) found from {cwd} upward"
    found = global_installs(env)
    if found:
        return found, "the global npm install (npm root -g)"
    return _unique(native_installs(env, cwd)), "the native installs (installer, PATH, Python SDK)"


def all_installs(env: Mapping[str, str], cwd: Path) -> list[Install]:
    extra = [explicit(Path(env["CTXPATCH_CLI_JS"]))] if env.get("CTXPATCH_CLI_JS") else []
    found = [*extra, *local_installs(cwd), *global_installs(env), *native_installs(env, cwd)]
    return _unique(found)


def _unique(installs: list[Install]) -> list[Install]:
    """Each file once: by its resolved path, and a native build by its inode (npm hard-links
    the platform package's binary into the wrapper's ``bin/claude.exe``)."""
    seen: set[object] = set()
    out = []
    for inst in installs:
        keys: set[object] = {inst.path.resolve() if inst.path.exists() else inst.path}
        native = native_of(inst.path)
        if native is not None:
            keys.add(_inode(native.binary))
        if not keys & seen:
            seen |= keys
            out.append(inst)
    return out


def _inode(path: Path) -> tuple[int, int] | Path:
    try:
        st = path.stat()
    except OSError:
        return path
    return st.st_dev, st.st_ino


# --------------------------------------------------------------------------- native builds

KINDS = ("native installer", "npm wrapper", "agent-sdk", "python sdk", "binary")
_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")
_EXES = ("claude", "claude.exe")  # the Python SDK's _bundled/ name on Linux/macOS, Windows


class NativeInstall(NamedTuple):
    binary: Path  # the executable, links resolved
    kind: str  # one of KINDS
    found_as: Path  # what led to it: the path given, the link on PATH, the package folder


def native_installs(env: Mapping[str, str], cwd: Path) -> list[Install]:
    """Native builds outside node_modules: the native installer's link, ``claude`` on PATH,
    the Python SDK's bundled binary (this interpreter, a .venv/venv from ``cwd`` upward)."""
    import shutil  # here (tempfile's weight): a cli.js's `check` at every start never searches PATH

    home = Path(env.get("HOME") or Path.home())
    candidates = [home / ".local" / "bin" / "claude"]
    on_path = shutil.which("claude", path=env.get("PATH", ""))
    if on_path:
        candidates.append(Path(on_path))
    candidates += python_sdk_binaries(cwd)
    out = []
    for c in candidates:
        if native_of(c) is not None:
            out.append(Install(c, "native", None))
    return out


def interpreter_sdk() -> Path | None:
    """The folder of the ``claude_agent_sdk`` package this interpreter would import (found
    without importing it), or None."""
    import importlib.util  # here (~4 ms): `check` of a cli.js, at every start, never asks

    try:
        spec = importlib.util.find_spec("claude_agent_sdk")
    except (ImportError, ValueError):
        return None
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def python_sdk_binaries(cwd: Path) -> list[Path]:
    """``claude_agent_sdk/_bundled/claude`` of the Python SDK: in this interpreter's import path
    (found without importing it), and in ``.venv``/``venv`` from ``cwd`` upward."""
    found: list[Path] = []
    package = interpreter_sdk()
    if package is not None:
        found += [package / "_bundled" / exe for exe in _EXES]
    for folder in [cwd, *cwd.parents]:
        for venv in (".venv", "venv"):
            lib = folder / venv / "lib"
            if lib.is_dir():
                found += sorted(lib.glob("python3*/site-packages/claude_agent_sdk/_bundled/claude"))
            sp = folder / venv / "Lib" / "site-packages"  # Windows venv layout
            if sp.is_dir():
                found += [sp / "claude_agent_sdk" / "_bundled" / exe for exe in _EXES]
    return [p for p in found if p.is_file()]


def native_of(path: Path) -> NativeInstall | None:
    """The native build ``path`` is or holds (a binary, a link to one, a package folder, the
    Python SDK's package or ``_bundled`` folder, the native installer's folder); None for a
    cli.js, its package, or anything else. Reads the first bytes of a file, nothing more."""
    try:
        exe = _binary_in(path) if path.is_dir() else path if _looks_native(path) else None
        if exe is None:
            return None
        real = exe.resolve()
    except OSError:
        return None
    return NativeInstall(real, kind_of(real, path), path)


def _binary_in(folder: Path) -> Path | None:
    if (folder / "cli.js").exists():  # the JavaScript package, whatever else is beside it
        return None
    for sub in (folder, folder / "_bundled", folder / "claude_agent_sdk" / "_bundled"):
        for name in _EXES:
            exe = sub / name
            if sub.name == "_bundled" and exe.is_file() and _looks_native(exe):
                return exe
    versions = folder / "versions" if (folder / "versions").is_dir() else None
    if versions is None and folder.name == "versions" and folder.parent.name == "claude":
        versions = folder
    if versions is not None:
        return _installer_version(versions)
    return find_binary(folder, must=False)


def _installer_version(versions: Path) -> Path | None:
    """The version the installer's link points at, else the newest one in ``versions/``."""
    link = versions.parent.parent.parent / "bin" / "claude"  # ~/.local/share/claude -> ~/.local
    try:
        target = link.resolve()
        if target.parent == versions.resolve() and _looks_native(target):
            return target
    except OSError:
        pass
    exes = [p for p in versions.iterdir() if p.is_file() and _looks_native(p)]
    keyed = []
    for p in exes:
        try:
            keyed.append((parse_version(p.name), p))
        except ValueError:
            continue
    return max(keyed)[1] if keyed else None


def _looks_native(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head in _MAGIC or head[:2] == b"MZ"


def kind_of(binary: Path, found_as: Path | None = None) -> str:
    """Which of :data:`KINDS` installed ``binary`` (a resolved path), also judged by every link
    from ``found_as`` to it (``~/.local/bin/claude`` -> ``…/claude/versions/<v>``)."""
    for hop in [*_link_chain(found_as), binary]:
        if hop.parent.name == "versions" and hop.parent.parent.name == "claude":
            return "native installer"
        if hop.parent.name == "_bundled" and hop.parent.parent.name == "claude_agent_sdk":
            return "python sdk"
    for folder in (binary.parent, binary.parent.parent, found_as):
        name = package_name(folder) if folder is not None and folder.is_dir() else None
        if name and name.startswith("@anthropic-ai/claude-agent-sdk"):
            return "agent-sdk"
        if name and name.startswith("@anthropic-ai/claude-code"):
            return "npm wrapper"
    return "binary"


def _link_chain(path: Path | None, limit: int = 40) -> list[Path]:
    """``path`` and each symlink target after it (absolute, not resolved further)."""
    out: list[Path] = []
    while path is not None and len(out) < limit:
        out.append(path)
        try:
            target = os.readlink(path)
        except OSError:
            break
        path = path.parent / target
    return out


def environ() -> Mapping[str, str]:
    return os.environ
