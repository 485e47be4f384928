"""The one handler: every command's outcome becomes text or one JSON envelope, and an exit code.

Every ``--json`` document is an envelope::

    {"ctxpatch": "<version>", "exit_code": N, ...context, "results": [...]}     # success
    {"ctxpatch": "<version>", "exit_code": N, "error": {"error", "exit_code", "what", "why",
                                                        "hint", "info"}}       # a failure

``exit_code`` is always the process's exit code. Commands return their exit code; an exception
of any kind reaches ``handle`` (the only ``except`` of the command line), which renders it with
``ctxpatch.errors.from_exception``. Imports neither typer nor the patcher (``check`` is fast).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence

from ctxpatch import __version__
from ctxpatch.errors import CtxpatchError, ExitCode, Interrupted, from_exception

# The exit codes of every command family: printed by each command's --help and checked against
# the README's table by the tests (one source for both).
EXIT_CODES: dict[str, dict[int, str]] = {
    "apply, revert": {
        0: "done, or nothing to do",
        2: "usage error",
        3: "refused, nothing written",
        4: "unsupported build (apply on a native build: nothing ctxpatch can write, use the gateway)",
        5: "internal error",
    },
    "check": {
        0: "patched with the current snippet",
        1: "change needed (UNPATCHED, OUTDATED)",
        2: "usage error",
        3: "refused (FOREIGN, unreadable, not a bundle)",
        4: "unsupported build (NATIVE: nothing ctxpatch can write, use the gateway)",
        5: "internal error",
    },
    "status": {
        0: "listed every copy found",
        2: "usage error",
        3: "no cli.js or native build found",
        5: "internal error",
    },
    "verify": {
        0: "PASS",
        1: "FAIL",
        2: "usage error",
        3: "refused (node missing, file not patched, no cli.js; native: no network namespace)",
        4: "a version the engine does not model",
        5: "internal error",
    },
    "inspect": {
        0: "no drift",
        1: "drift (--strict: or a version newer than every engine profile)",
        2: "usage error",
        3: "refused (neither a cli.js nor a native build, none found)",
        4: "a native package without its platform binary",
        5: "internal error",
    },
    "regress": {
        0: "every version passed or was rightly refused, no drift",
        1: "a version failed or drifted",
        2: "usage error",
        3: "refused (npm missing, versions not listable)",
        5: "internal error",
    },
    "gateway": {
        0: "stopped (Ctrl-C, SIGTERM)",
        2: "usage error",
        3: "refused (port taken)",
        5: "internal error",
    },
    "simulate, thresholds": {
        0: "done",
        1: "--strict: a version newer than every engine profile",
        2: "usage error (bad option, missing optional extra)",
        3: "refused (unreadable or malformed transcript)",
        5: "internal error",
    },
    "recall": {
        0: "done (search: matches or none)",
        2: "usage error",
        3: "refused (unreadable transcript, unknown tool_use_id, no current session)",
        5: "internal error",
    },
    "report": {
        0: "done (unreadable sessions are listed and skipped)",
        2: "usage error (bad option, bad price file, --plot folder missing)",
        3: "refused (no projects folder)",
        5: "internal error",
    },
}


def family(command: str) -> str:
    return next(f for f in EXIT_CODES if command in f.split(", "))


def help_codes(command: str) -> str:
    """The "Exit codes" paragraph of ``command``'s --help."""
    codes = EXIT_CODES[family(command)]
    return "Exit codes: " + ", ".join(f"{c} {m}" for c, m in codes.items()) + ", 130 interrupted."


def worst(codes: Iterable[int]) -> int:
    """The exit code of several results: the worst non-zero one, else 0."""
    bad = [c for c in codes if c != 0]
    return max(bad) if bad else 0


def envelope(code: int, results: Sequence[object], **context: object) -> dict[str, object]:
    return {"ctxpatch": __version__, "exit_code": code, **context, "results": results}


def error_envelope(err: CtxpatchError) -> dict[str, object]:
    return {"ctxpatch": __version__, "exit_code": int(err.exit_code), "error": err.to_json()}


def emit_json(doc: dict[str, object], indent: int = 2) -> None:
    sys.stdout.write(json.dumps(doc, indent=indent) + "\n")


def out(text: str) -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text + "\n")


def error_of(exc: BaseException) -> CtxpatchError:
    """``exc`` as a user-facing error; with CTXPATCH_DEBUG set, bugs propagate (traceback)."""
    error = from_exception(exc)
    if (
        error is not exc
        and error.exit_code == ExitCode.INTERNAL
        and os.environ.get("CTXPATCH_DEBUG")
    ):
        raise exc
    return error


def report(error: CtxpatchError, as_json: bool) -> int:
    """Print ``error`` (the JSON envelope on stdout, or what/why/hint on stderr); its code."""
    if as_json:
        emit_json(error_envelope(error))
    else:
        err(error.render())
    return int(error.exit_code)


def handle(body: Callable[[], int], as_json: bool, interrupted: str = "") -> int:
    """Run a command's body; any exception becomes a rendered error and its exit code."""
    try:
        return body()
    except KeyboardInterrupt:
        return report(Interrupted("interrupted", why=interrupted), as_json)
    except Exception as exc:  # MemoryError and OSError included: see errors.from_exception
        return report(error_of(exc), as_json)
