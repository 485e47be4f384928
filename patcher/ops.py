"""apply / revert on one file: read, plan (pure), verify, write. Returns a Result.

``check_file`` (markers and hashes, nothing written) lives in ``patcher.check``, light enough
for every start; it is named here too as the third operation on one file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from ctxpatch.errors import (
    BackupMismatch,
    ExitCode,
    FileAccess,
    NotABundle,
    RevertImpossible,
    VerificationFailed,
)
from patcher import backup, markers, plan, selfcheck, snippet
from patcher.backup import BackupInfo, BackupStatus
from patcher.bundle import Bundle, load, resolve_target, writable_problem
from patcher.check import check_file as check_file  # ops' third verb; patcher.check holds it
from patcher.check import read_backup, unreadable
from patcher.fsio import (
    DEFAULT_LOCK_TIMEOUT,
    atomic_replace,
    folder_lock,
    remove_stale_temps,
)
from patcher.markers import Marks, State
from patcher.result import Result, backup_json, result_for

# --------------------------------------------------------------------------------- apply


@contextmanager
def _locked(given: Path, timeout: float) -> Iterator[tuple[Bundle, list[str]]]:
    """Lock the file's folder, remove what killed runs left there, then read the file (so a
    concurrent run is seen finished). Yields the bundle and notes on what was removed."""
    target = resolve_target(given)
    folder = target.resolve().parent
    if not folder.is_dir():
        yield load(given), []  # raises the right "does not exist" error
        return
    with folder_lock(folder, timeout):
        name = target.resolve().name
        removed = remove_stale_temps(folder, (name, backup.path_for(Path(name)).name))
        notes = [
            f"removed {n} ({size} bytes), a temporary file left by an interrupted ctxpatch run"
            for n, size in removed
        ]
        yield load(given), notes


def apply_file(
    given: Path, *, node_check: bool = True, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
) -> Result:
    node = selfcheck.node_binary() if node_check else None
    snip = snippet.source()
    with _locked(given, lock_timeout) as (b, cleanup):
        r = _apply_locked(b, snip, snippet.sha(), node=node, node_asked=node_check)
    r.notes.extend(cleanup)
    return r


def _apply_locked(
    b: Bundle, snip: bytes, snip_sha: str, *, node: str | None, node_asked: bool
) -> Result:
    marks = markers.read(b.data, snip_sha, snippet.clear_sha())
    bpath = backup.path_for(b.path)
    saved = read_backup(b, bpath)
    if marks.state is State.FOREIGN:
        raise plan.refuse_foreign(marks, b.path, b.version)
    if marks.state is State.PATCHED:
        hdr = marks.header
        assert hdr is not None
        if isinstance(saved, FileAccess):  # nothing to write; say what is wrong with it
            return result_for(
                b,
                "already-patched",
                State.PATCHED,
                ExitCode.OK,
                shape=hdr.shape,
                backup=backup_json(unreadable(saved), bpath),
                notes=[f"{saved.what}: {saved.why}; {saved.hint}"],
            )
        info, notes = _backup_plan(b, hdr.original_sha, bpath, saved, snip_sha)
        info = _save_backup(b, plan.unpatched_original(marks), bpath, info)
        return result_for(
            b,
            "already-patched",
            State.PATCHED,
            ExitCode.OK,
            shape=hdr.shape,
            clearing=hdr.clear,
            backup=backup_json(info, bpath),
            notes=notes,
        )
    if marks.state is State.UNPATCHED:
        original, original_sha = b.data, b.sha256
    else:
        assert marks.header is not None  # OUTDATED: the markers were read and proved
        original, original_sha = plan.unpatched_original(marks), marks.header.original_sha
    problem = writable_problem(b)
    if problem:
        raise FileAccess(
            f"cannot patch {b.path}",
            why=problem,
            hint=f"make it writable (chmod u+w {b.path}) or run as the user that installed it",
        )
    if isinstance(saved, FileAccess):
        raise saved  # a backup we cannot verify is never replaced
    patch = plan.plan_patch(original, b.version, snip, snippet.clear_source())
    with ThreadPoolExecutor(1) as pool:  # node's whole-file check overlaps our own checks
        gate = pool.submit(_node_gate, patch.new, original, node) if node else None
        selfcheck.check_patch(
            patch,
            snip,
            snip_sha,
            esprima_check=gate is None,
            clear_snippet=snippet.clear_source(),
        )
        info, backup_notes = _backup_plan(b, original_sha, bpath, saved, snip_sha)
        notes = gate.result() if gate else [_no_node_note(node_asked)]
    info = _save_backup(b, original, bpath, info)
    atomic_replace(b.path, patch.new, expected_sha=b.sha256, mode=b.mode, owner=(b.uid, b.gid))
    _confirm(b.path, patch.new)
    if b.nlink > 1:
        notes.append(f"cli.js had {b.nlink} hard links; the patched file is a new, unlinked copy")
    action = "patched" if marks.state is State.UNPATCHED else "repatched"
    return result_for(
        b,
        action,
        State.PATCHED,
        ExitCode.OK,
        shape=patch.site.shape,
        clearing=patch.clearing.shape if patch.clearing else None,
        backup=backup_json(info, bpath),
        notes=notes + backup_notes + _clearing_notes(patch),
    )


def _clearing_notes(patch: plan.Patch) -> list[str]:
    found = patch.clearing
    if found is None:
        return []
    if found.builder is None:
        return [f"server-side tool-result clearing not injected: {found.reason}"]
    calls = len(found.builder.watches)
    return [
        f"server-side tool-result clearing injected into the request builder "
        f"({found.builder.shape}; {calls} request call{'s' if calls > 1 else ''} watched "
        "for a refusal)"
    ]


def _no_node_note(asked: bool) -> str:
    why = "node not found" if asked else "--no-node-check"
    return (
        f"{why}: the whole-file ESM check was skipped (tree-sitter and esprima checks of "
        "the edited regions passed)"
    )


def _node_gate(new: bytes, original: bytes, node: str) -> list[str]:
    res = selfcheck.node_check(new, node)
    if res.ok:
        return []
    if not selfcheck.node_check(original, node).ok:
        raise NotABundle(
            "this cli.js does not parse as an ES module, even before patching",
            why="it is truncated or corrupted (node --input-type=module --check: "
            + res.message.replace("\n", " | ")[:300]
            + ")",
            hint="reinstall the package (npm install), then run ctxpatch again",
        )
    raise VerificationFailed(
        "the patched file failed node's ESM syntax check; nothing was written",
        why=res.message.replace("\n", " | ")[:500],
        hint="this is a bug in ctxpatch: please report it with the cli.js version and sha256",
    )


def _backup_plan(
    b: Bundle, original_sha: str, bpath: Path, saved: bytes | None, snip_sha: str
) -> tuple[BackupInfo, list[str]]:
    """Classify the backup against the original's sha; refuse one that is not ours to replace."""
    info = backup.classify(saved, original_sha, b.version, snip_sha)
    if info.status is BackupStatus.MISMATCH:
        raise BackupMismatch(
            f"{bpath} belongs to a different original",
            why=info.detail,
            hint=f"ctxpatch never overwrites it: look at it, then move it away "
            f"(mv {bpath} {bpath}.old) and run the command again",
            backup_sha256=(info.sha256 or "")[:12],
        )
    if info.status is BackupStatus.STALE:
        return info, [f"replaced the stale backup ({info.detail})"]
    if info.status is BackupStatus.MISSING:
        return info, [f"wrote the backup {bpath}"]
    return info, []


def _save_backup(b: Bundle, original: bytes, bpath: Path, info: BackupInfo) -> BackupInfo:
    """Write ``original`` to the backup unless it is already there; the backup's info after."""
    if info.status is not BackupStatus.VALID:  # the owner too: a root run must not lock it away
        atomic_replace(
            bpath,
            original,
            expected_sha=info.sha256,
            mode=backup.mode_for(b.mode),
            owner=(b.uid, b.gid),
        )
        _confirm(bpath, original)
    elif _give_owner(bpath, b.uid, b.gid):
        return BackupInfo(BackupStatus.VALID, "byte copy of the original; given cli.js's owner")
    return BackupInfo(BackupStatus.VALID, "byte copy of the original")


def _give_owner(path: Path, uid: int, gid: int) -> bool:
    """As root, give a (verified) backup that an older run left root-owned back to cli.js's
    owner. True when it changed."""
    if os.geteuid() != 0:
        return False
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode) or (st.st_uid, st.st_gid) == (uid, gid):
        return False
    os.chown(path, uid, gid, follow_symlinks=False)
    return True


def _confirm(path: Path, data: bytes) -> None:
    if path.read_bytes() != data:
        raise VerificationFailed(
            f"{path} does not hold what ctxpatch just wrote",
            why="the file changed right after the atomic replace",
            hint="run `ctxpatch check` to see the file's state",
        )


# --------------------------------------------------------------------------------- revert


def revert_file(given: Path, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> Result:
    with _locked(given, lock_timeout) as (b, cleanup):
        r = _revert_locked(b, snippet.sha())
    r.notes.extend(cleanup)
    return r


def _revert_locked(b: Bundle, snip_sha: str) -> Result:
    marks = markers.read(b.data, snip_sha)
    bpath = backup.path_for(b.path)
    if marks.state is State.UNPATCHED:
        return result_for(
            b, "not-patched", State.UNPATCHED, ExitCode.OK, reason="nothing to revert"
        )
    saved = read_backup(b, bpath)
    notes: list[str] = []
    if isinstance(saved, FileAccess):
        if marks.state is State.FOREIGN:  # the backup is the only proof of the original
            raise saved
        notes.append(f"{saved.what}: {saved.why}; {saved.hint}")
        saved = None
    if marks.state is State.FOREIGN:
        restored, source = _foreign_original(b, marks, saved, bpath)
    else:
        hdr = marks.header
        assert hdr is not None
        if saved is not None and markers.sha256(saved) == hdr.original_sha:
            restored, source = saved, f"from the backup {bpath}"
        else:
            restored, source = (
                plan.unpatched_original(marks),
                "by removing the marked edits",
            )
    if markers.sha256(restored) == b.sha256:
        return result_for(b, "not-patched", State.UNPATCHED, ExitCode.OK)
    if not b.mode & 0o222:
        raise FileAccess(
            f"cannot revert {b.path}",
            why="the file is read-only",
            hint=f"chmod u+w {b.path}, then run the command again",
        )
    atomic_replace(b.path, restored, expected_sha=b.sha256, mode=b.mode, owner=(b.uid, b.gid))
    _confirm(b.path, restored)
    return result_for(
        b,
        "reverted",
        State.UNPATCHED,
        ExitCode.OK,
        reason=f"restored {source}",
        shape=marks.header.shape if marks.header else None,
        notes=notes,
    )


def _foreign_original(
    b: Bundle, marks: Marks, saved: bytes | None, bpath: Path
) -> tuple[bytes, str]:
    if marks.foreign_kind == "ruflo" and saved is not None and markers.strip_ruflo(b.data) == saved:
        return saved, f"from the ruflo patcher's backup {bpath} (verified)"
    if (
        marks.header is not None
        and saved is not None
        and (markers.sha256(saved) == marks.header.original_sha)
    ):
        return saved, f"from the backup {bpath} (its sha256 is the recorded original's)"
    raise RevertImpossible(
        f"cannot restore the original of {b.path}",
        why=marks.reason + "; and no backup proves what the original was",
        hint="reinstall the package (npm install) to get a clean cli.js"
        + (f", or restore {bpath} by hand if you trust it" if saved is not None else ""),
        version=b.version,
    )
