"""``ctxpatch gateway`` and ``ctxpatch run``: server-side clearing through a loopback gateway.

The gateway itself is the ``gateway`` package; this module only parses options and reports
through ``ctxpatch.cli.output``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ctxpatch.cli.options import with_codes
from ctxpatch.cli.output import err, handle


def register(app: typer.Typer) -> None:
    """Add the ``gateway`` and ``run`` commands to ``app``."""
    app.command("gateway", help=with_codes(gateway, "gateway"))(gateway)
    app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        help=run.__doc__,
    )(run)


UPSTREAM_HELP = (
    "Where requests go on to. Default: CTXPATCH_UPSTREAM, else ANTHROPIC_BASE_URL, "
    "else https://api.anthropic.com."
)


def gateway(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")
    ] = 0,
    upstream: Annotated[
        str | None, typer.Option("--upstream", help=UPSTREAM_HELP, show_default=False)
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log headers too (credentials redacted).")
    ] = False,
) -> None:
    """Run the loopback gateway until Ctrl-C: server-side tool-result clearing for any client.

    Listens on 127.0.0.1 only and forwards every request unchanged, except that POST /v1/messages gets the clear_tool_uses_20250919 edit in context_management and the context-management-2025-06-27 beta in anthropic-beta (merged with the client's; messages are never touched). The edit comes from the CLAUDE_CTX_CLEAR_* knobs; CLAUDE_CTX_CLEAR_DISABLE=1 forwards everything untouched. Replies stream back as they arrive. Prints its URL on the first line; one log line per request on stderr, credentials never logged. Point a client at it with ANTHROPIC_BASE_URL (Agent SDKs: env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:PORT"}).

    Example: ctxpatch gateway --port 8787
    """

    def body() -> int:
        import asyncio
        import logging

        from gateway.logs import scrubbed
        from gateway.server import Gateway, new_event_loop, serve_until_signal, validate_upstream

        target = validate_upstream(upstream) if upstream else None
        logging.basicConfig(
            level=logging.DEBUG if verbose else logging.INFO,
            format="%(asctime)s %(levelname)s %(message)s",
        )
        logging.getLogger("aiohttp").setLevel(logging.WARNING)
        for handler in logging.getLogger().handlers:  # stderr: credentials scrubbed
            scrubbed(handler)
        gw = Gateway(upstream=target, port=port)
        with asyncio.Runner(loop_factory=new_event_loop) as runner:  # uvloop when installed
            return runner.run(serve_until_signal(gw, lambda url: print(url, flush=True)))

    raise typer.Exit(handle(body, as_json=False, interrupted="the gateway stopped"))


def run(
    ctx: typer.Context,
    upstream: Annotated[
        str | None, typer.Option("--upstream", help=UPSTREAM_HELP, show_default=False)
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option("--log", help="Append the gateway's log to this file.", show_default=False),
    ] = None,
    fallback: Annotated[
        bool,
        typer.Option(
            "--fallback",
            help="If the gateway cannot start, print one warning line and run the command "
            "without it (what `ctxpatch shell-init` uses) instead of exiting 3.",
        ),
    ] = False,
) -> None:
    """Run a command (Claude Code) through a fresh loopback gateway, then stop the gateway.

    The command gets ANTHROPIC_BASE_URL pointing at the gateway (the user's own base URL, if any, stays the upstream: CTXPATCH_UPSTREAM). See `ctxpatch gateway --help` for what the gateway changes. Exit code: the command's (128 + N if signal N ended it); 2 when ctxpatch's own options or the command are wrong; 3 when the gateway cannot start (with --fallback: one warning line on stderr, then the command runs without the gateway and its exit code is returned); 5 on an internal error. SIGTERM/SIGHUP/SIGUSR1/SIGUSR2 are passed to the command; Ctrl-C reaches it from the terminal directly.

    Example: ctxpatch run -- claude --continue
    """

    def body() -> int:
        from gateway.launch import launch

        return launch(ctx.args, os.environ, upstream=upstream, log_file=log, fallback=fallback)

    code = handle(body, as_json=False)
    if code and not ctx.args:
        err("usage: ctxpatch run [--upstream URL] [--log FILE] -- COMMAND [ARGS...]")
    raise typer.Exit(code)
