"""``ctxpatch run -- COMMAND ...``: one gateway for the lifetime of one command.

The gateway starts on a free loopback port; the command runs with ``ANTHROPIC_BASE_URL``
pointing at it and ``CTXPATCH_UPSTREAM`` holding where its requests go on to (the user's own
``ANTHROPIC_BASE_URL`` if set, else the Anthropic API). Signals: SIGTERM, SIGHUP, SIGUSR1 and
SIGUSR2 sent to ctxpatch are passed to the command; Ctrl-C (SIGINT) and Ctrl-\\ (SIGQUIT)
reach the command straight from the terminal (same process group), so ctxpatch ignores them
instead of delivering them twice (Claude Code reads a second Ctrl-C as "exit"). The exit code is
the command's (128 + N when a signal N ended it); the gateway stops after it.

Tool search: Claude Code 2.1.113-2.1.2xx turn on-demand tool search off for any base URL that
is not Anthropic's, so behind the gateway they send every tool definition up front (8-10K more
input tokens per request; measured in ``tests/e2e/test_base_url.py``). When the gateway's
upstream IS Anthropic's API, the command gets ``ENABLE_TOOL_SEARCH=true`` (unless the user set
it), which that test shows restores first-party's tools and beta. Nothing else first-party-only
is claimed (no ``_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL``: it would also make the binary sign
the body that the gateway then changes).
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from ctxpatch.errors import UsageError
from gateway.server import UPSTREAM_ENV, ThreadedGateway, upstream_from_env

FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
IGNORED = (signal.SIGINT, signal.SIGQUIT)


TOOL_SEARCH_ENV = "ENABLE_TOOL_SEARCH"
FIRST_PARTY_HOST = "api.anthropic.com"


def is_first_party(url: str) -> bool:
    """Whether ``url`` is Anthropic's own API (Claude Code's own test: the host, exactly)."""
    try:
        return (urlsplit(url).hostname or "").lower() == FIRST_PARTY_HOST
    except ValueError:
        return False


def command_env(env: Mapping[str, str], gateway_url: str, upstream: str) -> dict[str, str]:
    """The command's environment: ours, with the base URL pointing at the gateway (and tool
    search kept on when the upstream is Anthropic's API and the user did not choose)."""
    out = {**env, "ANTHROPIC_BASE_URL": gateway_url, UPSTREAM_ENV: upstream}
    if is_first_party(upstream) and TOOL_SEARCH_ENV not in env:
        out[TOOL_SEARCH_ENV] = "true"
    return out


def exit_code(returncode: int) -> int:
    """The shell's convention: 128 + N for a command ended by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run_command(
    argv: Sequence[str],
    env: Mapping[str, str],
    upstream: str | None = None,
    log_file: Path | None = None,
    fallback: bool = False,
) -> int:
    """Run ``argv`` through a fresh gateway; the command's exit code.

    ``fallback``: when the gateway cannot start, say so in one line and run the command
    without it (:mod:`gateway.fallback`) instead of failing with exit 3."""
    if not argv:
        raise UsageError(
            "no command to run",
            why="ctxpatch run needs the command after `--`",
            hint="ctxpatch run -- claude",
        )
    if shutil.which(argv[0], path=env.get("PATH")) is None:
        raise UsageError(
            f"command not found: {argv[0]}",
            why="it is not an executable file, nor on PATH",
            hint="give the full path of the command, e.g. ctxpatch run -- ~/.local/bin/claude",
        )
    target = upstream or upstream_from_env(env)
    handler = _log_to(log_file)
    try:
        try:
            gw = ThreadedGateway(upstream=target, env=env).start()
        except Exception as exc:
            if not fallback:
                raise
            from gateway.fallback import run_without_gateway

            return run_without_gateway(argv, env, exc)
        try:
            return exit_code(_run(argv, command_env(env, gw.url, target)))
        finally:
            gw.stop()
    finally:
        if handler is not None:
            logging.getLogger("ctxpatch.gateway").removeHandler(handler)
            handler.close()


def _run(argv: Sequence[str], env: dict[str, str]) -> int:
    proc = subprocess.Popen(list(argv), env=env)
    previous = {}
    try:
        for sig in IGNORED:
            previous[sig] = signal.signal(sig, signal.SIG_IGN)
        for sig in FORWARDED:
            previous[sig] = signal.signal(sig, lambda n, _f: proc.send_signal(n))
        return proc.wait()
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if proc.poll() is None:  # only when wait itself failed
            proc.terminate()
            proc.wait()


def _log_to(path: Path | None) -> logging.Handler | None:
    if path is None:
        return None
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("ctxpatch.gateway")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler
