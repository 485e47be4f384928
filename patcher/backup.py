"""``cli.js.backup``: a byte copy of the original, tied to it by its sha256.

Rules (pure ``classify``; the writes happen in ``patcher.ops``):

* VALID: the backup's sha256 is the original's. Kept as it is.
* MISSING: written from the (verified) original before the patched file replaces cli.js.
* STALE: an unpatched cli.js of a *different* Claude Code version, left by an earlier apply
  before ``npm install`` replaced cli.js. Replaced by a backup of the new original.
* MISMATCH: same version but different bytes, or a backup that is itself patched, or not a
  cli.js at all. It belongs to a different original: never overwritten; apply refuses.
* UNREADABLE: no permission to read it (an earlier ``sudo ctxpatch apply`` used to leave it
  root-owned), or not a regular file, or far larger than a cli.js. ``check`` reports it, revert
  removes the marked edits instead (their recorded sha proves the original), apply refuses to
  replace what it cannot verify.

A backup gets the owner of its cli.js and the same read/write permission bits (no execute).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from patcher import markers
from patcher.markers import State
from patcher.versions import HEADER_SPAN, header_version, version_of

SUFFIX = ".backup"


class BackupStatus(StrEnum):
    VALID = "valid"
    MISSING = "missing"
    STALE = "stale"
    MISMATCH = "mismatch"
    UNREADABLE = "unreadable"


class BackupInfo(NamedTuple):
    status: BackupStatus
    detail: str
    version: str | None = None
    sha256: str | None = None


def path_for(cli_js: Path) -> Path:
    return cli_js.with_name(cli_js.name + SUFFIX)


def max_size(cli_js_size: int) -> int:
    """The most bytes a backup of a cli.js of this size is read up to: an original, or one of
    another version left before an update, is never twice as large (plus 1 MiB of slack)."""
    return 2 * cli_js_size + (1 << 20)


def mode_for(cli_js_mode: int) -> int:
    """The backup's permission bits: the file's read/write bits, without execute."""
    return cli_js_mode & 0o666


def valid_copy(original: markers.Original, original_sha: str) -> BackupInfo:
    """``classify``'s answer for a backup already proven to hold ``original`` byte for byte
    (``fsio.holds``), without reading the backup into memory: ``check`` runs at every start."""
    version = header_version(original.head(HEADER_SPAN))
    if version is None:  # no header line: version_of reads on, through the whole file
        version = version_of(original.join())
    return BackupInfo(BackupStatus.VALID, "byte copy of the original", version, original_sha)


def classify(
    backup: bytes | None,
    original_sha: str,
    original_version: str | None,
    snippet_sha: str,
    original: markers.Original | None = None,
) -> BackupInfo:
    """``original``, when the caller has the original (its bytes, or the ranges of a patched
    file that make it up), spares a hash of the backup: a byte-for-byte comparison proves it."""
    if backup is None:
        return BackupInfo(BackupStatus.MISSING, "no backup")
    if original is not None and original.same_as(backup):
        return BackupInfo(
            BackupStatus.VALID, "byte copy of the original", version_of(backup), original_sha
        )
    sha = markers.sha256(backup)
    version = version_of(backup)
    if sha == original_sha:
        return BackupInfo(BackupStatus.VALID, "byte copy of the original", version, sha)
    state = markers.read(backup, snippet_sha).state
    if state is not State.UNPATCHED:
        return BackupInfo(
            BackupStatus.MISMATCH, f"the backup itself is {state.value.lower()}", version, sha
        )
    if version is None:
        return BackupInfo(
            BackupStatus.MISMATCH, "the backup is not a Claude Code cli.js", None, sha
        )
    if original_version is not None and version != original_version:
        return BackupInfo(
            BackupStatus.STALE,
            f"backup of Claude Code {version}, left from before an update to {original_version}",
            version,
            sha,
        )
    return BackupInfo(
        BackupStatus.MISMATCH,
        f"backup of the same version {version} but with different bytes (sha256 {sha[:12]})",
        version,
        sha,
    )
