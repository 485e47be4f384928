"""Exit codes and the one error type per user-facing failure.

Every error renders as::

    error: <what went wrong>
      why: <the cause>
      hint: <what to do>
      info: key=value ...

Library code raises these; only ``patcher.cli`` catches them and turns them into an exit code.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The published exit-code contract (README "Exit codes")."""

    OK = 0  # done, or nothing to do (already patched / already reverted / check: patched)
    CHANGE_NEEDED = 1  # check: the file is not patched with the current snippet
    USAGE = 2  # bad options (typer/click's own code)
    REFUSED = 3  # a known problem: nothing was written, the message has a hint
    UNSUPPORTED = 4  # this cli.js cannot take the patch (no micro-compaction, native binary)
    INTERNAL = 5  # a bug: verification of our own output failed; nothing was written
    INTERRUPTED = 130


class CtxpatchError(Exception):
    """Base of every user-facing failure."""

    exit_code: ExitCode = ExitCode.REFUSED
    code: str = "error"  # stable machine name, used in --json output

    def __init__(self, what: str, why: str = "", hint: str = "", **info: object) -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.hint = hint
        self.info = {k: v for k, v in info.items() if v is not None}

    def render(self) -> str:
        lines = [f"error: {self.what}"]
        if self.why:
            lines.append(f"  why: {self.why}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        if self.info:
            lines.append("  info: " + " ".join(f"{k}={v}" for k, v in self.info.items()))
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "error": self.code,
            "exit_code": int(self.exit_code),
            "what": self.what,
            "why": self.why,
            "hint": self.hint,
            "info": {k: str(v) for k, v in self.info.items()},
        }


class NotFound(CtxpatchError):
    """No cli.js where we looked."""

    code = "not_found"


class NotABundle(CtxpatchError):
    """The path exists but is not a Claude Code cli.js (empty, binary, directory, truncated)."""

    code = "not_a_bundle"


class Unsupported(CtxpatchError):
    """A real Claude Code build that cannot take the patch."""

    code = "unsupported"
    exit_code = ExitCode.UNSUPPORTED


class TargetNotFound(CtxpatchError):
    """The micro-compaction call site was not found in a build that should have one."""

    code = "target_not_found"


class AmbiguousTarget(CtxpatchError):
    """More than one candidate call site: refusing to guess."""

    code = "ambiguous_target"


class ForeignPatch(CtxpatchError):
    """Another patcher's marker, or a damaged ctxpatch marker."""

    code = "foreign_patch"


class BackupMismatch(CtxpatchError):
    """A backup exists that belongs to a different original."""

    code = "backup_mismatch"


class RevertImpossible(CtxpatchError):
    """Neither the backup nor removing the marked edits gives back the recorded original."""

    code = "revert_impossible"


class FileBusy(CtxpatchError):
    """Another ctxpatch holds the lock, or the file changed while we worked."""

    code = "file_busy"


class FileAccess(CtxpatchError):
    """Permissions, read-only files, unwritable folders."""

    code = "file_access"


class VerificationFailed(CtxpatchError):
    """Our own output did not pass verification: a bug. Nothing was written."""

    code = "verification_failed"
    exit_code = ExitCode.INTERNAL


class InternalError(CtxpatchError):
    """An unexpected exception: a bug. Reported with exit 5, never as a traceback."""

    code = "internal"
    exit_code = ExitCode.INTERNAL
