"""The outcome of apply / check / revert / status on one file (``Result``, its JSON), npm cli.js
or native build alike, the Result of a command that failed on it, and the Result for a loaded
cli.js. Apart from ``patcher.ops`` so a native install (``patcher.native.state``) and ``check``
(``patcher.check``) build one without the cli.js writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxpatch.errors import CtxpatchError, ExitCode, Unsupported
from patcher.backup import BackupInfo
from patcher.bundle import Bundle
from patcher.markers import State


class Result:
    """One file's outcome. A plain class, not a dataclass: ``check`` runs at every start and
    builds one (dataclasses imports inspect, ~10 ms). The JSON keys are in this order."""

    def __init__(
        self,
        path: str,
        action: str,  # patched | repatched | already-patched | reverted | not-patched | checked
        state: str,  # the state after the command
        exit_code: int,
        version: str | None = None,
        package: str | None = None,
        shape: str | None = None,
        clearing: str | None = None,  # request-builder shape of the clearing injection, "none"
        reason: str = "",
        backup: dict[str, object] | None = None,
        notes: list[str] | None = None,
        error: dict[str, object] | None = None,  # CtxpatchError.to_json() when it failed
        native: NativeFacts | None = None,  # a native build (patcher.native.state) only
    ) -> None:
        self.path = path
        self.action = action
        self.state = state
        self.exit_code = exit_code
        self.version = version
        self.package = package
        self.shape = shape
        self.clearing = clearing
        self.reason = reason
        self.backup: dict[str, object] = {} if backup is None else backup
        self.notes: list[str] = [] if notes is None else notes
        self.error = error
        self.native = native

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Result) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"Result({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    def to_json(self) -> dict[str, object]:
        """Every field in order (its lists and dicts copied); ``error`` only when set; the
        native part's fields at the top level, after the others, only for a native build."""
        doc = {
            k: list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
            for k, v in vars(self).items()
            if k != "native"
        }
        if doc["error"] is None:
            del doc["error"]
        if self.native is not None:
            doc.update(self.native.to_json())
        return doc


class NativeFacts:
    """The part of a :class:`Result` only a native build has (:mod:`patcher.native.state`): the
    kind of install, the lever, its state, the executable and what the binary does. A plain
    class for the same reason as ``Result``; its JSON keys sit at the top level of the Result's,
    in this order."""

    def __init__(
        self,
        kind: str,  # native installer | npm wrapper | agent-sdk | python sdk | binary
        lever: str,  # gateway (no native build has a settings lever)
        lever_state: str,  # nothing-to-write
        binary: str,  # the executable, links resolved
        lever_facts: dict[str, object],  # what the binary does (native.levers)
    ) -> None:
        self.kind = kind
        self.lever = lever
        self.lever_state = lever_state
        self.binary = binary
        self.lever_facts = lever_facts

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NativeFacts) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"NativeFacts({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    def to_json(self) -> dict[str, object]:
        return {k: dict(v) if isinstance(v, dict) else v for k, v in vars(self).items()}


def result_for(b: Bundle, action: str, state: State, code: ExitCode, **kw: Any) -> Result:
    """The Result for ``b`` (pure: everything it says was read when ``b`` was loaded); ``kw``
    the other Result fields."""
    if b.shadow:
        notes = list(kw.pop("notes", []))
        notes.append(
            f"{b.shadow} is installed: the agent SDK runs that native binary instead of "
            "this cli.js, so the patch has no effect there (uninstall it to use cli.js)"
        )
        kw["notes"] = notes
    return Result(
        path=str(b.path),
        action=action,
        state=state.value,
        exit_code=int(code),
        version=b.version,
        package=f"{b.package.name}@{b.package.version}" if b.package else None,
        **kw,
    )


def backup_json(info: BackupInfo, path: Path) -> dict[str, object]:
    """A Result's ``backup``: where it is, its status and why."""
    return {"path": str(path), "status": info.status.value, "detail": info.detail}


def error_result(path: Path, err: CtxpatchError) -> Result:
    """A failed command on one file, as a Result (so several files can all be reported)."""
    if isinstance(err, Unsupported):
        r = unsupported_result(path, err)
        r.notes.append(err.hint)
        return r
    action = "error" if err.exit_code == ExitCode.INTERNAL else "refused"
    return Result(
        path=str(path),
        action=action,
        state="ERROR",
        exit_code=int(err.exit_code),
        reason=err.render(),
        error=err.to_json(),
    )


def unsupported_result(path: Path, err: Unsupported) -> Result:
    return Result(
        path=str(path),
        action="refused",
        state=State.UNSUPPORTED.value,
        exit_code=int(err.exit_code),
        reason=f"{err.what}: {err.why}",
    )
