"""``check`` of one cli.js: its state from the markers and hashes, and its backup's.

Reads, never writes, never takes the folder lock. A patched or outdated file is answered from
its markers alone; only an unpatched one is searched for the call site (``patcher.plan``, whose
parsers are imported there: ``check`` of a patched file runs at every start and parses nothing).
Reading the backup (:func:`read_backup`) is shared with apply and revert (``patcher.ops``).
"""

from __future__ import annotations

from pathlib import Path

from ctxpatch.errors import ExitCode, FileAccess, Unsupported
from patcher import backup, markers, snippet
from patcher.backup import BackupInfo, BackupStatus
from patcher.bundle import Bundle, load
from patcher.fsio import holds, read_regular
from patcher.markers import Marks, State
from patcher.result import Result, backup_json, result_for


def check_file(given: Path) -> Result:
    """Markers + hashes; a windowed search for the call site only when unpatched."""
    b = load(given)
    snip_sha = snippet.sha()
    marks = markers.read(b.data, snip_sha, snippet.clear_sha())
    bpath = backup.path_for(b.path)
    if marks.state is State.FOREIGN:
        saved = read_backup(b, bpath)
        info = (
            unreadable(saved)
            if isinstance(saved, FileAccess)
            else _foreign_backup(b, marks, saved, snip_sha)
        )
        return result_for(
            b,
            "checked",
            State.FOREIGN,
            ExitCode.REFUSED,
            reason=marks.reason,
            backup=backup_json(info, bpath),
        )
    bj = backup_json(_check_backup(b, marks, bpath, snip_sha), bpath)
    if marks.state in (State.PATCHED, State.OUTDATED):
        hdr = marks.header
        assert hdr is not None
        reason = ""
        if marks.state is State.OUTDATED:
            reason = f"patched by ctxpatch {hdr.ctxpatch_version} with an older snippet" + (
                "" if hdr.clear is not None else " and without server-side clearing"
            )
        code = ExitCode.CHANGE_NEEDED if reason else ExitCode.OK
        return result_for(
            b,
            "checked",
            marks.state,
            code,
            shape=hdr.shape,
            clearing=hdr.clear,
            reason=reason,
            backup=bj,
        )
    from patcher import plan  # its call-site search parses (tree-sitter): unpatched files only

    try:
        found = plan.locate(b.data, b.version)
    except Unsupported as e:  # a real build that cannot take the patch: a state, exit 4
        return result_for(
            b, "checked", State.UNSUPPORTED, e.exit_code, reason=f"{e.what}: {e.why}", backup=bj
        )
    # any other refusal (no call site, ambiguous) is an error of this file, exit 3, as in apply
    return result_for(
        b, "checked", State.UNPATCHED, ExitCode.CHANGE_NEEDED, shape=found.shape, backup=bj
    )


def read_backup(b: Bundle, bpath: Path) -> bytes | FileAccess | None:
    """The backup's bytes, None when there is none, or why it cannot be read (not raised: check
    reports it, revert works around it, apply refuses with it)."""
    try:
        return read_regular(bpath, limit=backup.max_size(len(b.data)))
    except PermissionError:
        return FileAccess(
            f"cannot read the backup {bpath}",
            why="permission denied (an earlier `sudo ctxpatch apply` could leave it owned by root)",
            hint=f"give it the owner of cli.js: sudo chown --reference={b.path} {bpath}",
        )
    except FileAccess as e:
        return e


def unreadable(err: FileAccess) -> BackupInfo:
    """The backup's info when it cannot be read."""
    return BackupInfo(BackupStatus.UNREADABLE, f"{err.what}: {err.why}")


def _check_backup(b: Bundle, marks: Marks, bpath: Path, snip_sha: str) -> BackupInfo:
    """The backup's state, for ``check``: first compared in place with the original, so the
    usual case (a valid backup) reads no 13.7 MB into memory; else read and classified."""
    original = marks.unpatched or markers.Original.whole(b.data)
    original_sha = marks.header.original_sha if marks.header else b.sha256
    if holds(bpath, original.data, original.ranges):
        return backup.valid_copy(original, original_sha)
    saved = read_backup(b, bpath)
    if isinstance(saved, FileAccess):
        return unreadable(saved)
    return backup.classify(saved, original_sha, b.version, snip_sha, original)


def _foreign_backup(b: Bundle, marks: Marks, data: bytes | None, snip_sha: str) -> BackupInfo:
    if marks.foreign_kind == "ruflo":
        if data is None:
            return BackupInfo(BackupStatus.MISSING, "no ruflo backup")
        if markers.strip_ruflo(b.data) == data:
            return BackupInfo(BackupStatus.VALID, "the ruflo patcher's backup, verified")
        return BackupInfo(BackupStatus.MISMATCH, "does not match the ruflo-patched file")
    if marks.header is not None:
        return backup.classify(data, marks.header.original_sha, b.version, snip_sha)
    return BackupInfo(
        BackupStatus.MISSING if data is None else BackupStatus.MISMATCH, "unknown original"
    )
