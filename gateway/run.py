"""``ctxpatch run -- COMMAND ...``: one gateway for the lifetime of one command.

The gateway starts on a free loopback port; the command runs with ``ANTHROPIC_BASE_URL``
pointing at it and ``CTXPATCH_UPSTREAM`` holding where its requests go on to (the user's own
``ANTHROPIC_BASE_URL`` if set, else the Anthropic API). Signals: SIGTERM, SIGHUP, SIGUSR1 and
SIGUSR2 sent to ctxpatch are passed to the command. Ctrl-C (SIGINT) and Ctrl-\\ (SIGQUIT) reach
the command straight from the terminal (same process group): ctxpatch does not deliver them a
second time (Claude Code reads a second Ctrl-C as "exit") and never ends the command itself; the
command decides. A SIGINT or SIGQUIT sent to ctxpatch alone (no terminal, or ctxpatch not in
its foreground) is passed on; with no terminal the command has a process group of its own, so a
signal sent to ctxpatch's group reaches it once, not twice. The exit code is the command's (128 + N when a signal N ended
it); the gateway stops after it.

If ctxpatch itself dies (SIGKILL, a crash), the command would go on pointing at a port nobody
listens on; on Linux it gets SIGTERM then (``PR_SET_PDEATHSIG``), as when its terminal closes.
The environment is the command's own, so nothing else (no other shell, no later ``claude``)
ever points at the dead port.

Silence: the command owns the terminal. The gateway's log (and aiohttp's, asyncio's) goes to
``--log FILE`` (created mode 600, credentials scrubbed, see :mod:`gateway.logs`) or nowhere.

Tool search: Claude Code 2.1.113-2.1.2xx turn on-demand tool search off for any base URL that
is not Anthropic's, so behind the gateway they send every tool definition up front (8-10K more
input tokens per request; measured in ``tests/e2e/test_base_url.py``). When the gateway's
upstream IS Anthropic's API, the command gets ``ENABLE_TOOL_SEARCH=true`` (unless the user set
it), which that test shows restores first-party's tools and beta. Nothing else first-party-only
is claimed (no ``_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL``: it would also make the binary sign
the body that the gateway then changes).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from ctxpatch.errors import UsageError
from gateway.server import UPSTREAM_ENV, ThreadedGateway, upstream_from_env

FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
FROM_TERMINAL = (signal.SIGINT, signal.SIGQUIT)  # passed on unless the terminal sent them
PR_SET_PDEATHSIG = 1


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
    from gateway.logs import quiet

    target = upstream or upstream_from_env(env)
    with quiet(log_file):
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


def _run(argv: Sequence[str], env: dict[str, str]) -> int:
    previous = {}
    terminal = _terminal_fd()
    for sig in (*FROM_TERMINAL, *FORWARDED):  # before the start: none is lost in between
        previous[sig] = signal.signal(sig, signal.SIG_IGN)
    try:
        # the command starts with the dispositions ctxpatch was given (ignored stays ignored)
        inherited = {
            sig: signal.SIG_IGN if old == signal.SIG_IGN else signal.SIG_DFL
            for sig, old in previous.items()
        }
        # with no terminal, the command gets a process group of its own: a SIGINT sent to our
        # group (a harness, an IDE) then reaches it once, through ``forward``, not twice
        proc = subprocess.Popen(
            list(argv),
            env=env,
            preexec_fn=_child_setup(os.getpid(), inherited),
            process_group=0 if terminal is None else None,
        )

        def forward(n: int, _frame: object) -> None:
            if n in FROM_TERMINAL and _terminal_sent_it(terminal):
                return  # the command got it from the terminal too
            proc.send_signal(n)

        for sig in (*FROM_TERMINAL, *FORWARDED):
            signal.signal(sig, forward)
        return proc.wait()
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if terminal is not None:
            os.close(terminal)


def _terminal_fd() -> int | None:
    """Our controlling terminal, if any (to ask who is in its foreground)."""
    try:
        return os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return None


def _terminal_sent_it(terminal: int | None) -> bool:
    """Whether our process group is the terminal's foreground one: then a SIGINT we got came
    from the keyboard and reached the command (same group) as well."""
    if terminal is None:
        return False
    try:
        return os.tcgetpgrp(terminal) == os.getpgrp()
    except OSError:
        return False


def _child_setup(
    parent: int, dispositions: dict[signal.Signals, signal.Handlers]
) -> Callable[[], None]:
    """The ``preexec_fn``: the command's signal dispositions as ctxpatch got them, and (Linux)
    SIGTERM to the command when ctxpatch dies, even by SIGKILL."""
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork
        except (OSError, AttributeError):
            prctl = None

    def setup() -> None:
        for sig, disposition in dispositions.items():
            signal.signal(sig, disposition)
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
            if os.getppid() != parent:  # ctxpatch died between fork and prctl
                os.kill(os.getpid(), signal.SIGTERM)

    return setup
