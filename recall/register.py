"""Register recall with Claude Code, and take it away again: ``apply`` / ``revert`` / ``check``.

Two entries, in the two files where every Claude Code (cli.js 2.1.112 and the native 2.1.332
alike) reads its user-wide configuration:

* the MCP server ``ctxpatch`` (``ctxpatch mcp``, stdio) in ``~/.claude.json``'s
  ``mcpServers``, where ``claude mcp add --scope user`` writes: neither build reads MCP servers
  from ``settings.json``. Claude Code rewrites that file while it runs, but always under its
  lock (``~/.claude.json.lock``, a folder), re-reading it first: ctxpatch takes the same lock
  for its read-edit-rename, so neither loses the other's change;
* the hooks (``ctxpatch recall hook`` for ``SessionStart`` and ``PreCompact``) in
  ``~/.claude/settings.json``'s ``hooks``, the documented place for a user's hooks, a file
  Claude Code only reads (it may hold comments and trailing commas: :mod:`recall.jsonc` edits
  it byte by byte).

A plugin (hooks and MCP server in one, which newer builds support) was not chosen: it must be
installed from a marketplace into Claude Code's own plugin cache and registry files, which
ctxpatch would then have to clean up, and 2.1.112 reads it differently from 2.1.332; the two
plain entries are read the same way by both and come out cleanly.

Both follow ``CLAUDE_CONFIG_DIR`` as Claude Code does. Commands are absolute (this Python and
``-m <package>``), so they run whatever ``PATH`` Claude Code has. ``revert`` removes exactly
the entries ``apply`` added (recognised by their command), and the containers it created; a
receipt in ctxpatch's state folder says which containers those were and the file's sha256
before and after, so the result can be told byte-identical (or not, when the file changed in
between). Files are replaced atomically (:func:`patcher.fsio.atomic_replace`), keeping their
mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shlex
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ctxpatch.errors import FileBusy
from recall.registered import HOOK_EVENTS, SERVER, hook_group, places, server_entry

LOCK_WAIT = 10.0  # seconds to wait for Claude Code's config lock
LOCK_STALE = 10.0  # a lock folder older than this is a dead process's (proper-lockfile's rule)
RECEIPT = "registration.json"


@dataclass
class FileReport:
    path: str
    action: str  # added, updated, already, removed, absent, created, deleted
    entries: list[str] = field(default_factory=list)
    byte_identical: bool | None = None  # revert: the file is what it was before apply
    note: str = ""


@dataclass
class Report:
    registered: bool
    files: list[FileReport]

    def to_json(self) -> dict[str, Any]:
        return {"registered": self.registered, "files": [asdict(f) for f in self.files]}


# --- the edits (pure: bytes in, bytes out) ---------------------------------------------------


def _is_ours_group(group: Any) -> bool:
    if not isinstance(group, dict):
        return False
    hooks = group.get("hooks")
    return (
        isinstance(hooks, list)
        and len(hooks) == 1
        and isinstance(hooks[0], dict)
        and _is_our_command(hooks[0].get("command"))
    )


def _is_our_command(cmd: Any) -> bool:
    """Any ctxpatch hook command (another Python or package name included: an update)."""
    if not isinstance(cmd, str):
        return False
    try:
        words = shlex.split(cmd)
    except ValueError:
        return False
    return words[-2:] == ["recall", "hook"] and "-m" in words


def add_hooks(data: bytes) -> tuple[bytes, list[str], list[str]]:
    """``data`` with our hook group under each of :data:`HOOK_EVENTS`: (bytes, entries
    added or updated, containers created)."""
    from recall import jsonc

    added: list[str] = []
    created: list[str] = []
    doc = jsonc.load(data, "settings.json")
    hooks = jsonc.member(doc, doc.root, "hooks")
    if hooks is None:
        value = {event: [hook_group()] for event in HOOK_EVENTS}
        return jsonc.insert_member(doc, doc.root, "hooks", value), list(HOOK_EVENTS), ["hooks"]
    for event in HOOK_EVENTS:
        doc = jsonc.load(data, "settings.json")
        hooks_obj = jsonc.value_of(_need(jsonc.member(doc, doc.root, "hooks")))
        if hooks_obj.type != "object":
            raise jsonc.BadJson(
                "settings.json's hooks is not an object",
                hint="fix it (see Claude Code's hooks documentation); nothing was written",
            )
        pair = jsonc.member(doc, hooks_obj, event)
        if pair is None:
            data = jsonc.insert_member(doc, hooks_obj, event, [hook_group()])
            added.append(event)
            created.append(f"hooks.{event}")
            continue
        arr = jsonc.value_of(pair)
        if arr.type != "array":
            raise jsonc.BadJson(
                f"settings.json's hooks.{event} is not an array",
                hint="fix it (see Claude Code's hooks documentation); nothing was written",
            )
        ours = [e for e in jsonc.items(arr) if _is_ours_group(jsonc.to_python(doc, e))]
        if ours and jsonc.to_python(doc, ours[-1]) == hook_group() and len(ours) == 1:
            continue
        for e in reversed(ours):  # an older command (another python): replace it
            data = jsonc.remove_item(doc, arr, e)
            doc = jsonc.load(data, "settings.json")
            arr = jsonc.value_of(_need(jsonc.member(doc, _hooks_obj(doc), event)))
        data = jsonc.append_element(doc, arr, hook_group())
        added.append(event)
    return data, added, created


def _need(node: Any) -> Any:
    assert node is not None
    return node


def _hooks_obj(doc: Any) -> Any:
    from recall import jsonc

    return jsonc.value_of(_need(jsonc.member(doc, doc.root, "hooks")))


def remove_hooks(data: bytes, created: list[str] | None) -> tuple[bytes, list[str]]:
    """``data`` without our hook groups, and without the containers apply created (``created``
    None: the ones left empty)."""
    from recall import jsonc

    removed: list[str] = []
    doc = jsonc.load(data, "settings.json")
    if jsonc.member(doc, doc.root, "hooks") is None:
        return data, removed
    if _hooks_obj(doc).type != "object":
        return data, removed
    events = [jsonc.key_of(doc, p) for p in jsonc.items(_hooks_obj(doc)) if p.type == "pair"]
    for event in [e for e in events if e]:
        while True:
            doc = jsonc.load(data, "settings.json")
            pair = jsonc.member(doc, _hooks_obj(doc), event)
            if pair is None or jsonc.value_of(pair).type != "array":
                break
            arr = jsonc.value_of(pair)
            ours = [e for e in jsonc.items(arr) if _is_ours_group(jsonc.to_python(doc, e))]
            if not ours:
                break
            data = jsonc.remove_item(doc, arr, ours[-1])
            if event not in removed:
                removed.append(event)
        doc = jsonc.load(data, "settings.json")
        pair = jsonc.member(doc, _hooks_obj(doc), event)
        if (
            pair is not None
            and event in removed
            and jsonc.value_of(pair).type == "array"
            and not jsonc.items(jsonc.value_of(pair))
            and (created is None or f"hooks.{event}" in created or "hooks" in created)
        ):
            data = jsonc.remove_item(doc, _hooks_obj(doc), pair)
    doc = jsonc.load(data, "settings.json")
    pair = jsonc.member(doc, doc.root, "hooks")
    if (
        pair is not None
        and removed
        and not jsonc.items(jsonc.value_of(pair))
        and (created is None or "hooks" in created)
    ):
        data = jsonc.remove_item(doc, doc.root, pair)
    return data, removed


def add_server(data: bytes) -> tuple[bytes, list[str], list[str]]:
    """``data`` with the ``ctxpatch`` MCP server: (bytes, entries, containers created)."""
    from recall import jsonc

    doc = jsonc.load(data, ".claude.json")
    servers = jsonc.member(doc, doc.root, "mcpServers")
    if servers is None:
        value = {SERVER: server_entry()}
        return jsonc.insert_member(doc, doc.root, "mcpServers", value), [SERVER], ["mcpServers"]
    obj = jsonc.value_of(servers)
    if obj.type != "object":
        raise jsonc.BadJson(
            ".claude.json's mcpServers is not an object",
            hint="fix it (claude mcp list shows what Claude Code reads); nothing was written",
        )
    pair = jsonc.member(doc, obj, SERVER)
    if pair is not None:
        current = jsonc.to_python(doc, jsonc.value_of(pair))
        if current == server_entry():
            return data, [], []
        if not _is_our_server(current):
            raise jsonc.BadJson(
                f"an MCP server named {SERVER!r} that is not ctxpatch's is registered",
                why=f"{SERVER!r} in mcpServers runs {current.get('command')!r}"
                if isinstance(current, dict)
                else "",
                hint="rename or remove it (claude mcp remove ctxpatch), or run apply "
                "--no-recall; nothing was written",
            )
        data = jsonc.remove_item(doc, obj, pair)
        doc = jsonc.load(data, ".claude.json")
        obj = jsonc.value_of(_need(jsonc.member(doc, doc.root, "mcpServers")))
    return jsonc.insert_member(doc, obj, SERVER, server_entry()), [SERVER], []


def _is_our_server(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    args = value.get("args")
    return (
        isinstance(args, list)
        and len(args) == 3
        and args[0] == "-m"
        and args[2] == "mcp"
        and isinstance(args[1], str)
        and args[1] in ("patcher", "ctxpatch")
    )


def remove_server(data: bytes, created: list[str] | None) -> tuple[bytes, list[str]]:
    from recall import jsonc

    doc = jsonc.load(data, ".claude.json")
    servers = jsonc.member(doc, doc.root, "mcpServers")
    if servers is None or jsonc.value_of(servers).type != "object":
        return data, []
    obj = jsonc.value_of(servers)
    pair = jsonc.member(doc, obj, SERVER)
    if pair is None or not _is_our_server(jsonc.to_python(doc, jsonc.value_of(pair))):
        return data, []
    data = jsonc.remove_item(doc, obj, pair)
    doc = jsonc.load(data, ".claude.json")
    servers = _need(jsonc.member(doc, doc.root, "mcpServers"))
    if not jsonc.items(jsonc.value_of(servers)) and (created is None or "mcpServers" in created):
        data = jsonc.remove_item(doc, doc.root, servers)
    return data, [SERVER]


# --- the files (I/O) -------------------------------------------------------------------------


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def claude_lock(path: Path, wait: float | None = None) -> Iterator[None]:
    """Claude Code's own lock on its config file: the folder ``<path>.lock`` (proper-lockfile's
    scheme: made with mkdir, stale when older than :data:`LOCK_STALE` s)."""
    lock = path.with_name(path.name + ".lock")
    wait = LOCK_WAIT if wait is None else wait
    deadline = time.monotonic() + wait
    while True:
        try:
            lock.mkdir()
            break
        except FileExistsError:
            try:
                age = time.time() - lock.stat().st_mtime
            except FileNotFoundError:
                continue
            if age > LOCK_STALE:
                with contextlib.suppress(OSError):
                    lock.rmdir()
                continue
            if time.monotonic() >= deadline:
                raise FileBusy(
                    f"Claude Code is writing {path}",
                    why=f"its lock {lock} was held for more than {wait:g} s",
                    hint="run the command again in a moment",
                ) from None
            time.sleep(0.05)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.rmdir()


def _write(path: Path, data: bytes, before: bytes | None) -> None:
    from patcher.fsio import atomic_replace

    mode = 0o600
    with contextlib.suppress(FileNotFoundError):
        mode = path.stat().st_mode & 0o777
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_replace(path, data, expected_sha=_sha(before), mode=mode)


def _receipt_path() -> Path:
    from recall.hook import state_dir

    return state_dir() / RECEIPT


def _load_receipt() -> dict[str, Any]:
    try:
        doc = json.loads(_receipt_path().read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _save_receipt(doc: dict[str, Any]) -> None:
    path = _receipt_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    from patcher.fsio import atomic_replace

    data = json.dumps(doc, indent=2).encode()
    atomic_replace(path, data, expected_sha=_sha(_read(path)), mode=0o600)


def _edit_add(path: Path, kind: str, receipt: dict[str, Any], locked: bool) -> FileReport:
    lock = claude_lock(path) if locked else contextlib.nullcontext()
    with lock:
        before = _read(path)
        source = before if before is not None and before.strip() else b"{}\n"
        if kind == "hooks":
            after, entries, created = add_hooks(source)
        else:
            after, entries, created = add_server(source)
        if not entries:
            return FileReport(str(path), "already", [])
        _write(path, after, before)
    old = receipt.get(str(path), {})
    receipt[str(path)] = {
        "kind": kind,
        "sha_before": old.get("sha_before", _sha(before)),
        "sha_after": _sha(after),
        "created_file": old.get("created_file", before is None),
        "empty_before": old.get("empty_before", before is not None and not before.strip()),
        "created": sorted(set(old.get("created", [])) | set(created)),
    }
    action = "created" if before is None else "added"
    return FileReport(str(path), action, entries)


@contextlib.contextmanager
def _serialised() -> Iterator[None]:
    """One ctxpatch at a time registers or unregisters (a flock on the state folder)."""
    from patcher.fsio import folder_lock
    from recall.hook import state_dir

    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with folder_lock(folder, LOCK_WAIT * 3):
        yield


def register(env: Mapping[str, str]) -> Report:
    """Add the hooks and the MCP server (``ctxpatch apply``)."""
    settings, config = places(env)
    with _serialised():
        receipt = _load_receipt()
        files = [
            _edit_add(settings, "hooks", receipt, locked=False),
            _edit_add(config, "server", receipt, locked=True),
        ]
        _save_receipt(receipt)
    return Report(True, files)


def _edit_remove(path: Path, kind: str, receipt: dict[str, Any], locked: bool) -> FileReport:
    lock = claude_lock(path) if locked else contextlib.nullcontext()
    mine = receipt.get(str(path))
    created = mine.get("created") if isinstance(mine, dict) else None
    with lock:
        before = _read(path)
        if before is None:
            return FileReport(str(path), "absent")
        if kind == "hooks":
            after, removed = remove_hooks(before, created)
        else:
            after, removed = remove_server(before, created)
        if not removed:
            receipt.pop(str(path), None)
            return FileReport(str(path), "absent")
        if isinstance(mine, dict) and mine.get("created_file") and not after.strip(b" \t\r\n{}"):
            path.unlink()
            receipt.pop(str(path), None)
            return FileReport(str(path), "deleted", removed, True)
        if isinstance(mine, dict) and mine.get("empty_before") and not after.strip(b" \t\r\n{}"):
            after = b""
        _write(path, after, before)
    same = _sha(after) == mine.get("sha_before") if isinstance(mine, dict) else None
    receipt.pop(str(path), None)
    note = (
        ""
        if same in (True, None)
        else "the file changed since apply: only ctxpatch's entries were removed"
    )
    return FileReport(str(path), "removed", removed, same, note)


def unregister(env: Mapping[str, str]) -> Report:
    """Remove what :func:`register` added (``ctxpatch revert``)."""
    settings, config = places(env)
    with _serialised():
        receipt = _load_receipt()
        files = [
            _edit_remove(settings, "hooks", receipt, locked=False),
            _edit_remove(config, "server", receipt, locked=True),
        ]
        _save_receipt(receipt)
    return Report(False, files)
