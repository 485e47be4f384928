"""``ctxpatch run``'s entry: the gateway's imports and settings, inside the fallback.

The gateway is imported here, in the function, so that a gateway that cannot even be imported
still lets ``run --fallback`` start the plain command (:mod:`gateway.fallback`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gateway.fallback import run_without_gateway


def launch(
    argv: Sequence[str],
    env: Mapping[str, str],
    upstream: str | None = None,
    log_file: Path | None = None,
    fallback: bool = False,
) -> int:
    """``ctxpatch run``'s body: the gateway's imports and settings inside the fallback too."""
    try:
        from gateway.run import run_command
        from gateway.server import validate_upstream

        target = validate_upstream(upstream) if upstream else None
    except Exception as exc:  # the gateway's own imports or settings: it cannot start
        if not (fallback and argv):
            raise
        return run_without_gateway(argv, env, exc)
    return run_command(argv, env, upstream=target, log_file=log_file, fallback=fallback)
