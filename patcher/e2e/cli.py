"""``ctxpatch verify``: wired into the main app by ``register(app)``.

Exit codes: 0 PASS, 1 FAIL, 2 usage, 3 refused (node missing, file not patched, no cli.js
found; the message says what, why and what to do), 4 unsupported build, 5 internal error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from patcher import __version__
from patcher.clifail import fail
from patcher.discover import environ, targets
from patcher.errors import CtxpatchError, ExitCode, NotFound


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command to ``app``."""

    @app.command("verify")
    def verify(
        path: Annotated[
            Path | None,
            typer.Option(
                "--path",
                "-p",
                help="The patched cli.js (or its package folder). Default: as `ctxpatch apply` "
                "finds it (CTXPATCH_CLI_JS, local node_modules upward, global install).",
                show_default=False,
            ),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
        timeout: Annotated[
            float, typer.Option("--timeout", help="Seconds one run of cli.js may take.")
        ] = 120.0,
    ) -> None:
        """Prove on your install that the patched cli.js prunes exactly as predicted.

        Copies cli.js into a throwaway sandbox (own HOME and TMPDIR, only 127.0.0.1 reachable), resumes a generated 9-turn session against a local mock of the Messages API with the prune knobs set low, and compares the request it sends with the engine's prediction (micro-compaction, then the text prune) byte for byte.

        Never touches the network or your ~/.claude. Exit 0 PASS, 1 FAIL, 3 node missing or the file not patched.

        Example: ctxpatch verify --path node_modules/@anthropic-ai/claude-code/cli.js
        """
        from patcher.e2e.verify import verify_install

        installs, chosen_by = targets(path, environ(), Path.cwd())
        if not installs:
            fail(
                NotFound(
                    "no Claude Code cli.js found",
                    why="looked in CTXPATCH_CLI_JS, node_modules/@anthropic-ai/{claude-agent-sdk,"
                    "claude-code} from the current folder upward, and the global npm install",
                    hint="pass the file with --path, e.g. ctxpatch verify --path "
                    "node_modules/@anthropic-ai/claude-code/cli.js",
                ),
                as_json,
            )
        reports = []
        for inst in installs:
            try:
                reports.append(verify_install(inst.path, timeout=timeout))
            except KeyboardInterrupt:
                typer.echo(
                    "interrupted: the sandbox is removed, nothing else was written", err=True
                )
                raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
            except CtxpatchError as e:
                fail(e, as_json)
            except Exception as e:  # a bug: exit 5 with a hint, never a bare traceback
                if os.environ.get("CTXPATCH_DEBUG"):
                    raise
                err = CtxpatchError(
                    f"internal error: {type(e).__name__}: {e}",
                    hint="this is a bug in ctxpatch; rerun with CTXPATCH_DEBUG=1 for a traceback "
                    "and report it",
                )
                err.exit_code = ExitCode.INTERNAL
                fail(err, as_json)
        code = 0 if all(r.passed for r in reports) else 1
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "ctxpatch": __version__,
                        "exit_code": code,
                        "chosen_by": chosen_by,
                        "results": [r.to_json() for r in reports],
                    },
                    indent=2,
                )
            )
        else:
            for r in reports:
                typer.echo(r.render())
        raise typer.Exit(code)
