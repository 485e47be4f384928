"""``ctxpatch verify``: prove on the user's install that the patched cli.js prunes as predicted.

The proofs are ``lab.verify`` (cli.js) and ``lab.verify_native``, picked by ``lab.verifier``;
printing and exit codes go through ``ctxpatch.cli.output``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxpatch.cli.options import with_codes
from ctxpatch.cli.output import emit_json, envelope, handle, out, worst
from ctxpatch.errors import NotFound
from patcher.discover import environ, targets


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command to ``app``."""
    app.command("verify", help=with_codes(verify, "verify"))(verify)


def verify(
    path: Annotated[
        Path | None,
        typer.Option(
            "--path",
            "-p",
            help="The patched cli.js (or its package folder), or a native claude: the "
            "executable, its package folder or the native installer's version file "
            "(~/.local/share/claude/versions/X). Default: as `ctxpatch apply` finds it "
            "(CTXPATCH_CLI_JS, local node_modules upward, global install), else the native "
            "installs (the native installer, claude on PATH, the Python SDK's).",
            show_default=False,
            readable=False,  # unreadable: our refusal (3), not a usage error
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds one run of cli.js may take.")
    ] = 120.0,
) -> None:
    """Prove on your install that the patched cli.js does exactly what ctxpatch installed.

    On a cli.js: copies it into a throwaway sandbox (own HOME and TMPDIR, only 127.0.0.1 reachable), resumes a generated 9-turn session against a local mock of the Messages API with the prune knobs set low, and compares the request it sends with the engine's prediction (micro-compaction, then the text prune) byte for byte. Where the server-side clearing is injected it also proves, in one more run with thinking on and the preserved-thinking check enforced by the mock: the clearing edit is sent with its beta, the mock's clearing shows up in Claude Code's next token count, and no request is rejected (0 HTTP 400, 0 thinking blocks dropped). Never touches the network or your ~/.claude.

    On a native build (Claude Code 2.1.113 and later, no cli.js: server-side clearing comes from `ctxpatch run -- claude`): runs your binary where it lies, behind the real `ctxpatch run`, both in a loopback-only network namespace (unshare -rn; refused with exit 3 where that is not allowed), against the same mock with thinking on and the check enforced, and proves the same three things: the clearing edit is sent (after Claude Code's own clear_thinking edit) with its beta and the mock cleared, Claude Code recorded the edited prompt's usage so its next auto-compact count is lower by what the server cleared, and 0 HTTP 400 / 0 thinking blocks dropped; plus offline (the namespace has lo only) and the install unchanged.

    Example: ctxpatch verify --path node_modules/@anthropic-ai/claude-code/cli.js
    """

    def body() -> int:
        from lab.verifier import verify_path

        installs, chosen_by = targets(path, environ(), Path.cwd())
        if not installs:
            raise NotFound.no_cli_js(
                "ctxpatch verify --path node_modules/@anthropic-ai/claude-code/cli.js"
            )
        reports = [verify_path(inst.path, timeout=timeout) for inst in installs]
        code = worst(r.exit_code for r in reports)
        if as_json:
            emit_json(envelope(code, [r.to_json() for r in reports], chosen_by=chosen_by))
        else:
            for r in reports:
                out(r.render())
        return code

    raise typer.Exit(
        handle(body, as_json, interrupted="the sandbox is removed, nothing else was written")
    )
