"""``cli.js.backup``: a byte copy of the original, tied to it by its sha256.

Rules (pure ``classify``; the writes happen in ``patcher.ops``):

* VALID: the backup's sha256 is the original's. Kept as it is.
* MISSING: written from the (verified) original before the patched file replaces cli.js.
* STALE: an unpatched cli.js of a *different* Claude Code version, left by an earlier apply
  before ``npm install`` replaced cli.js. Replaced by a backup of the new original.
* MISMATCH: same version but different bytes, or a backup that is itself patched, or not a
  cli.js at all. It belongs to a different original: never overwritten; apply refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from patcher import markers
from patcher.bundle import version_of
from patcher.markers import State

SUFFIX = ".backup"


class BackupStatus(StrEnum):
    VALID = "valid"
    MISSING = "missing"
    STALE = "stale"
    MISMATCH = "mismatch"


@dataclass(frozen=True)
class BackupInfo:
    status: BackupStatus
    detail: str
    version: str | None = None
    sha256: str | None = None


def path_for(cli_js: Path) -> Path:
    return cli_js.with_name(cli_js.name + SUFFIX)


def classify(
    backup: bytes | None, original_sha: str, original_version: str | None, snippet_sha: str
) -> BackupInfo:
    if backup is None:
        return BackupInfo(BackupStatus.MISSING, "no backup")
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
