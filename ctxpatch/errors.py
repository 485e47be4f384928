"""Exit codes and every user-facing error of ctxpatch, patcher and engine alike: one module.

Every error renders as::

    error: <what went wrong>
      why: <the cause>
      hint: <what to do>
      info: key=value ...

and, in ``--json``, as ``{"error": <code>, "exit_code", "what", "why", "hint", "info"}``.
Library code raises these; ``ctxpatch.cli.output`` is the one handler that turns them (and any
other exception, through ``from_exception``) into text or JSON and an exit code.

This module imports nothing from the project, so ``engine`` may import it: it is the tool's
vocabulary of failures, not patching machinery (README "Layout").
"""

from __future__ import annotations

import errno
from enum import IntEnum
from typing import ClassVar


class ExitCode(IntEnum):
    """The published exit-code contract (README "Exit codes")."""

    OK = 0  # done, or nothing to do (already patched / already reverted / check: patched)
    CHANGE_NEEDED = 1  # check: a change is needed; verify: FAIL; inspect/regress: drift
    USAGE = 2  # bad options or settings (typer/click's own code for bad options)
    REFUSED = 3  # a known problem: nothing was written, the message has a hint
    UNSUPPORTED = 4  # this cli.js cannot take the patch (no micro-compaction, native binary)
    INTERNAL = 5  # a bug: verification of our own output failed; nothing was written
    INTERRUPTED = 130


class CtxpatchError(Exception):
    """Base of every user-facing failure. A subclass names its machine code (and its exit code
    where it is not its base's) in its header: ``class FileBusy(CtxpatchError, code="file_busy")``.
    """

    exit_code: ClassVar[ExitCode] = ExitCode.REFUSED
    code: ClassVar[str] = "error"  # stable machine name, used in --json output

    def __init_subclass__(cls, *, code: str, exit_code: ExitCode | None = None) -> None:
        super().__init_subclass__()
        cls.code = code
        if exit_code is not None:
            cls.exit_code = exit_code

    def __init__(self, what: str, why: str = "", hint: str = "", **info: object) -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.hint = hint
        self.info = {k: v for k, v in info.items() if v is not None}

    def __str__(self) -> str:
        return f"{self.what}: {self.why}" if self.why else self.what

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


# ------------------------------------------------------------------------ a finding (1)


class StrictFailure(CtxpatchError, code="strict", exit_code=ExitCode.CHANGE_NEEDED):
    """``--strict``: a version newer than every engine profile (its numbers would be guessed)."""


# ----------------------------------------------------------------------------- usage (2)


class UsageError(CtxpatchError, code="usage", exit_code=ExitCode.USAGE):
    """A bad option value or setting (an environment variable ctxpatch reads)."""


class MissingExtra(UsageError, code="missing_extra"):
    """An option that needs an optional extra that is not installed (tiktoken, matplotlib)."""


class TokenizerUnavailable(MissingExtra, code="tokenizer_unavailable"):
    """``--tokenizer tiktoken`` without the ``tiktoken`` extra (or with broken rank files)."""


class PlotUnavailable(MissingExtra, code="plot_unavailable"):
    """``--plot`` without the ``plot`` extra (matplotlib)."""


# --------------------------------------------------------------------------- refused (3)


class NotFound(CtxpatchError, code="not_found"):
    """No cli.js where we looked."""

    @classmethod
    def no_cli_js(cls, example: str) -> NotFound:
        """The one "no Claude Code found" error: what is there (nothing, or a ``claude`` on
        PATH that is neither a cli.js nor a native build) and what to do; ``example`` is the
        ``--path`` command line for a file the user has elsewhere."""
        import shutil  # here: only this refusal looks at PATH

        looked = (
            "looked in CTXPATCH_CLI_JS, node_modules/@anthropic-ai/{claude-agent-sdk,"
            "claude-code} from the current folder upward, the global npm install, "
            "~/.local/bin/claude, claude on PATH and the Python SDK's bundled binary"
        )
        other = shutil.which("claude")
        if other is not None:
            return cls(
                "no Claude Code build ctxpatch can read here",
                why=f"`claude` on PATH ({other}) is neither a cli.js nor a native build "
                f"(a wrapper script?); {looked}",
                hint="the gateway works with any claude: `ctxpatch run -- claude`, or once "
                'for every shell: eval "$(ctxpatch shell-init bash)" in ~/.bashrc; '
                f"to act on a file: {example}",
            )
        return cls(
            "no Claude Code installed here",
            why=f"no cli.js and no native claude: {looked}",
            hint="install Claude Code (curl -fsSL https://claude.ai/install.sh | bash), then "
            'add eval "$(ctxpatch shell-init bash)" to ~/.bashrc (zsh/fish: ctxpatch '
            f"shell-init --help); for a cli.js or binary elsewhere: {example}",
        )


class NotABundle(CtxpatchError, code="not_a_bundle"):
    """The path exists but is not a Claude Code cli.js (empty, binary, directory, truncated)."""


class TargetNotFound(CtxpatchError, code="target_not_found"):
    """The micro-compaction call site was not found in a build that should have one."""


class AmbiguousTarget(CtxpatchError, code="ambiguous_target"):
    """More than one candidate call site: refusing to guess."""


class ForeignPatch(CtxpatchError, code="foreign_patch"):
    """Another patcher's marker, or a damaged ctxpatch marker."""


class NotPatched(CtxpatchError, code="not_patched"):
    """``verify`` needs a file patched with the current snippet."""


class BackupMismatch(CtxpatchError, code="backup_mismatch"):
    """A backup exists that belongs to a different original."""


class RevertImpossible(CtxpatchError, code="revert_impossible"):
    """Neither the backup nor removing the marked edits gives back the recorded original."""


class FileBusy(CtxpatchError, code="file_busy"):
    """Another ctxpatch holds the lock, or the file changed while we worked."""


class FileAccess(CtxpatchError, code="file_access"):
    """Permissions, read-only or immutable files, unwritable folders, symlink loops."""


class EnvironmentFailure(CtxpatchError, code="environment"):
    """The machine, not the input: disk full, out of memory, a tool that cannot be run."""


class NodeMissing(EnvironmentFailure, code="node_missing"):
    """node is needed (verify) or named (CTXPATCH_NODE) but cannot be run."""


class FetchFailed(EnvironmentFailure, code="fetch_failed"):
    """``npm pack`` / ``npm view`` failed (regress, the test cache)."""


class GatewayFailure(EnvironmentFailure, code="gateway"):
    """``ctxpatch gateway`` / ``run`` cannot listen (port taken, no loopback)."""


class NamespaceMissing(EnvironmentFailure, code="netns_missing"):
    """``verify`` on a native build needs a loopback-only network namespace (``unshare -rn``)."""


class TranscriptError(CtxpatchError, code="bad_transcript"):
    """A session transcript that cannot be read (``simulate``); ``line`` is 1-based."""

    def __init__(self, what: str, why: str, hint: str, line: int | None = None) -> None:
        super().__init__(f"{what} (line {line})" if line else what, why, hint, line=line)
        self.line = line


class SessionUnknown(CtxpatchError, code="session_unknown"):
    """``recall``/``mcp``: no transcript is known for the current Claude Code session."""


class UnknownToolUse(CtxpatchError, code="unknown_tool_use"):
    """``recall get``: the session's transcript holds no tool call with that id."""


# ----------------------------------------------------------------------- unsupported (4)


class Unsupported(CtxpatchError, code="unsupported", exit_code=ExitCode.UNSUPPORTED):
    """A real Claude Code build that cannot take the patch (or that the engine cannot model)."""


# -------------------------------------------------------------------------- internal (5)


class VerificationFailed(CtxpatchError, code="verification_failed", exit_code=ExitCode.INTERNAL):
    """Our own output did not pass verification: a bug. Nothing was written."""


class InternalError(CtxpatchError, code="internal", exit_code=ExitCode.INTERNAL):
    """An unexpected exception: a bug. Reported with exit 5, never as a traceback."""


# ------------------------------------------------------------------------ interrupted


class Interrupted(CtxpatchError, code="interrupted", exit_code=ExitCode.INTERRUPTED):
    """^C: writes are atomic, so nothing is half-written."""


# ------------------------------------------------------------- any exception -> an error

_ERRNO_WHY: dict[int, tuple[str, str]] = {
    errno.ENOSPC: (
        "the disk is full",
        "free some space on that file system, then run the command again",
    ),
    errno.EDQUOT: ("the disk quota is exceeded", "free some space, then run the command again"),
    errno.EROFS: (
        "the file system is mounted read-only",
        "remount it read-write or install Claude Code elsewhere",
    ),
    errno.EPERM: (
        "the operation is not permitted (an immutable or append-only file or folder, see lsattr)",
        "remove the attribute (chattr -i FILE) or run as the user that owns the install",
    ),
    errno.EACCES: (
        "permission denied",
        "run ctxpatch as the user that owns the install (for a global npm install that may mean sudo)",
    ),
    errno.ELOOP: (
        "too many levels of symbolic links (a symlink loop)",
        "fix the link: ls -l shows where it points",
    ),
    errno.ENAMETOOLONG: ("the path is too long", "pass a shorter path"),
    errno.EIO: (
        "an input/output error from the disk",
        "check the disk (dmesg), then run the command again",
    ),
    errno.EMFILE: ("too many open files", "close other programs or raise the limit (ulimit -n)"),
    errno.ENOENT: (
        "no such file or folder",
        "check the path, or run `ctxpatch status` to list the installed copies",
    ),
    errno.ENOTDIR: ("a part of the path is not a folder", "check the path"),
    errno.EISDIR: ("it is a folder", "pass the file itself"),
}


def from_exception(exc: BaseException) -> CtxpatchError:
    """The user-facing error for ``exc``: environment failures are refusals (exit 3) with a
    why and a hint; anything else is a bug (exit 5)."""
    if isinstance(exc, CtxpatchError):
        return exc
    if isinstance(exc, MemoryError):
        return EnvironmentFailure(
            "ran out of memory",
            why="the machine has not enough free memory for a 10-15 MB cli.js and its copies",
            hint="close other programs (or raise the memory limit), then run the command again",
        )
    if isinstance(exc, OSError):
        code = exc.errno if exc.errno is not None else -1
        why, hint = _ERRNO_WHY.get(code, (exc.strerror or str(exc), ""))
        kind = EnvironmentFailure if code in _MACHINE else FileAccess
        verb = "write to" if code in _WRITE else "use"
        target = exc.filename or "a file"
        return kind(
            f"cannot {verb} {target}",
            why=why,
            hint=hint or "fix the cause, then run the command again",
            errno=errno.errorcode.get(code),
        )
    if isinstance(exc, RuntimeError) and str(exc).startswith("Symlink loop"):  # pathlib < 3.13
        return FileAccess(
            f"cannot resolve {str(exc).removeprefix('Symlink loop from ')}",
            why=_ERRNO_WHY[errno.ELOOP][0],
            hint=_ERRNO_WHY[errno.ELOOP][1],
        )
    return InternalError(
        f"internal error: {type(exc).__name__}: {exc}",
        hint="this is a bug in ctxpatch; rerun with CTXPATCH_DEBUG=1 for a traceback and report it",
    )


_MACHINE = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EMFILE, errno.ENFILE, errno.ENOMEM}
_WRITE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EPERM}
