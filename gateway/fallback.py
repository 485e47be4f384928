"""``ctxpatch run --fallback``: when the gateway cannot start, run the command without it.

This is what ``ctxpatch shell-init`` puts in front of ``claude``. The fallback happens inside
``run``, before the command has started, so the command runs exactly once and its exit code
is always its own: no exit code of ``run`` has to mean "the gateway failed" (Claude Code may
exit with any code, so none could), and no pre-flight probe costs a second Python start on
every ``claude``. The user gets ONE line on stderr saying why, then the plain command replaces
this process (``execvpe``: same PID, same terminal, same environment as if typed directly).

Imports nothing heavy: it must work when the gateway's own imports are what failed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

PREFIX = "ctxpatch: "


def warning_line(argv0: str, exc: BaseException) -> str:
    """The one line: what failed (the first line of the error) and what runs instead."""
    what = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    name = os.path.basename(argv0) or argv0
    return f"{PREFIX}the gateway could not start ({what}); running {name} without it"


def run_without_gateway(argv: Sequence[str], env: Mapping[str, str], exc: BaseException) -> int:
    """Print the warning line, then replace this process with ``argv`` in ``env`` (unchanged).

    Returns only when the command cannot be executed at all (the caller reports it)."""
    print(warning_line(argv[0], exc), file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execvpe(argv[0], list(argv), dict(env))
    raise AssertionError("unreachable: execvpe returns only by raising")  # pragma: no cover
