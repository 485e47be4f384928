"""Reading a ``cli.js`` and telling what it is: the only module that reads bundles from disk."""

from __future__ import annotations

import json
import os
import stat
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

from ctxpatch.errors import FileAccess, NotABundle, Unsupported, from_exception
from engine.versions import FIRST_NATIVE, FIRST_NATIVE_SDK
from patcher import markers
from patcher.backup import SUFFIX as BACKUP_SUFFIX
from patcher.versions import version_of

PACKAGES = ("@anthropic-ai/claude-code", "@anthropic-ai/claude-agent-sdk")
NATIVE_FROM = {
    "@anthropic-ai/claude-code": FIRST_NATIVE,
    "@anthropic-ai/claude-agent-sdk": FIRST_NATIVE_SDK,
}
_INSTALL_HINT = (
    "the last versions that ship cli.js are @anthropic-ai/claude-code@2.1.112 and "
    "@anthropic-ai/claude-agent-sdk@0.2.112; pin one of those to use ctxpatch"
)

_BINARY_MAGIC = (b"\x7fELF", b"MZ", b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"\xfe\xed\xfa")


class Package(NamedTuple):
    name: str
    version: str
    claude_code_version: str | None  # agent-sdk's claudeCodeVersion (0.2.6 on)


class Bundle:
    """A cli.js as read, and what it is. A plain class (a cached sha256), not a dataclass: see
    ``patcher.markers`` for why the records on ``check``'s path avoid dataclasses."""

    def __init__(
        self,
        *,
        path: Path,  # the real file (symlinks resolved)
        given: Path,  # what the user named
        data: bytes,
        version: str | None,  # Claude Code version, from the bundle itself
        package: Package | None,
        mode: int,
        nlink: int,
        uid: int,
        gid: int,
        shadow: str | None = None,  # a native platform package that runs instead
    ) -> None:
        self.path = path
        self.given = given
        self.data = data
        self.version = version
        self.package = package
        self.mode = mode
        self.nlink = nlink
        self.uid = uid
        self.gid = gid
        self.shadow = shadow

    def __repr__(self) -> str:
        return f"Bundle({self.path}, <{len(self.data)} bytes>, version={self.version!r})"

    @cached_property
    def sha256(self) -> str:
        """Hashed when asked: `check` of a patched file never needs it (10 ms on 13.7 MB)."""
        return markers.sha256(self.data)


def read_package(folder: Path) -> Package | None:
    try:
        meta = json.loads((folder / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("name") not in PACKAGES:
        return None
    ccv = meta.get("claudeCodeVersion")
    return Package(str(meta["name"]), str(meta.get("version", "")), ccv if ccv else None)


def resolve_target(given: Path) -> Path:
    """A package folder names its ``cli.js``; a native-only package is refused."""
    if given.is_dir():
        cli = given / "cli.js"
        if cli.exists():
            return cli
        pkg = read_package(given)
        if pkg is not None:
            raise native_package(pkg, given)
        raise NotABundle(
            f"{given} is a folder, not a cli.js",
            why="ctxpatch patches the cli.js file of @anthropic-ai/claude-code or "
            "@anthropic-ai/claude-agent-sdk",
            hint="pass the cli.js file, or the package folder that contains it",
        )
    return given


def native_package(pkg: Package, folder: Path) -> Unsupported:
    return Unsupported(
        f"{pkg.name}@{pkg.version} in {folder} has no cli.js",
        why=f"from {pkg.name}@{NATIVE_FROM[pkg.name]} on, Claude Code ships a native binary "
        "instead of bundled JavaScript, so there is no cli.js to patch",
        hint=_INSTALL_HINT,
        package=pkg.name,
        version=pkg.version,
    )


def load(given: Path) -> Bundle:
    """Read and identify a bundle. Raises a CtxpatchError for anything that is not one."""
    target = resolve_target(given)
    try:
        real = target.resolve(strict=True)
        st = real.stat()
    except FileNotFoundError:
        raise FileAccess(
            f"{target} does not exist",
            hint="check the path, or run `ctxpatch status` to list the installed copies",
        ) from None
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (pathlib < 3.13)
        raise from_exception(e) from None
    if stat.S_ISDIR(st.st_mode):
        return load(real)
    if not stat.S_ISREG(st.st_mode):
        raise NotABundle(f"{target} is not a regular file", hint="pass the cli.js file itself")
    for name in {target.name, real.name}:
        if name.endswith(BACKUP_SUFFIX):
            raise NotABundle(
                f"{target} is ctxpatch's backup of the original, not a cli.js to act on",
                why="ctxpatch never patches, reverts or reads its backup in place of cli.js: it "
                "is the proof of the original",
                hint=f"pass {target.with_name(name.removesuffix(BACKUP_SUFFIX))}; "
                "`ctxpatch revert` restores the original from this backup",
            )
    try:
        data = real.read_bytes()
    except PermissionError:
        raise FileAccess(
            f"cannot read {real}",
            why="permission denied",
            hint="run ctxpatch as the user that installed Claude Code (for a global npm "
            "install that may mean sudo)",
        ) from None
    _check_content(real, data)
    version = version_of(data)
    if version is None and not claude_code_signs(data):
        raise NotABundle(
            f"{real} is not Claude Code's cli.js",
            why="it has no Claude Code version line (`// Version: X`) and none of the names "
            "every Claude Code bundle carries (its tengu_ events, its micro-compaction)",
            hint="pass the cli.js of @anthropic-ai/claude-code or @anthropic-ai/claude-agent-sdk "
            "(`ctxpatch status` lists the installed copies)",
        )
    return Bundle(
        path=real,
        given=given,
        data=data,
        version=version,
        package=read_package(real.parent),
        mode=stat.S_IMODE(st.st_mode),
        nlink=st.st_nlink,
        uid=st.st_uid,
        gid=st.st_gid,
        shadow=native_shadow(real),
    )


# Names every Claude Code bundle holds whatever its version: telemetry events (tengu_...), the
# micro-compaction switch and function. Looked for only when a file declares no version.
_SIGNS = (b"tengu_", b"DISABLE_MICROCOMPACT", b"microcompact")


def claude_code_signs(data: bytes) -> bool:
    """Whether ``data`` holds any of the names every Claude Code bundle carries."""
    return any(sign in data for sign in _SIGNS)


def _check_content(path: Path, data: bytes) -> None:
    if not data or data.isspace():  # (not data.strip(): a 13.7 MB copy on every check)
        raise NotABundle(
            f"{path} is empty",
            why="an interrupted install or a disk problem can leave an empty cli.js",
            hint="reinstall the package (npm install) and run ctxpatch again",
        )
    if data.startswith(_BINARY_MAGIC) or b"\0" in data[:65536]:
        pkg = read_package(path.parent)
        if data.startswith(_BINARY_MAGIC):
            raise Unsupported(
                f"{path} is a native executable, not JavaScript",
                why="Claude Code 2.1.113 and later ship a compiled binary; ctxpatch patches "
                "only the JavaScript cli.js",
                hint=_INSTALL_HINT,
                package=pkg.name if pkg else None,
            )
        raise NotABundle(
            f"{path} is binary data, not a JavaScript bundle",
            hint="pass Claude Code's cli.js (see `ctxpatch status`)",
        )
    try:
        data[:65536].decode("utf-8")
    except UnicodeDecodeError:
        # a cut inside a multi-byte character at the 64 KiB edge is fine; anything else is not
        try:
            data[:65533].decode("utf-8")
        except UnicodeDecodeError:
            raise NotABundle(
                f"{path} is not UTF-8 text", hint="pass Claude Code's cli.js"
            ) from None


def writable_problem(bundle: Bundle) -> str | None:
    """Why the file cannot be replaced, or None."""
    if not bundle.mode & 0o222:
        return "the file is read-only (no write permission bit set)"
    if not os.access(bundle.path.parent, os.W_OK | os.X_OK):
        return f"the folder {bundle.path.parent} is not writable by this user"
    return None


def native_shadow(cli_js: Path) -> str | None:
    """A platform package that the agent SDK's ``sdk.mjs`` would run instead of this cli.js.

    From agent-sdk 0.2.x ``sdk.mjs`` first resolves ``@anthropic-ai/claude-agent-sdk-<platform>``
    (research/versions.md §2): when one is installed beside the SDK, a patched cli.js is not
    what runs.
    """
    pkg = cli_js.parent
    if pkg.name != "claude-agent-sdk" or pkg.parent.name != "@anthropic-ai":
        return None
    for sibling in sorted(pkg.parent.glob("claude-agent-sdk-*")):
        if (sibling / "package.json").is_file():
            return f"@anthropic-ai/{sibling.name}"
    return None
