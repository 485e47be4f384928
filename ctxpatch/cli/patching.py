"""``ctxpatch apply``, ``check``, ``revert`` and ``status``: the commands that patch.

Thin typer declarations; the work is in ``ctxpatch.cli.files`` and, for ``check``,
``ctxpatch.cli.quickcheck`` (typer-free: it runs at every start), the printing and exit codes
in ``ctxpatch.cli.output``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxpatch.cli import files, quickcheck
from ctxpatch.cli.options import JsonOpt, with_codes
from ctxpatch.cli.output import handle
from ctxpatch.errors import UsageError

PathOpt = Annotated[
    Path | None,
    typer.Option(
        "--path",
        "-p",
        help="cli.js (or its package folder), or a native build (the `claude` executable, its "
        "npm or Python SDK package folder) to act on. Default: CTXPATCH_CLI_JS, else "
        "node_modules/@anthropic-ai/{claude-agent-sdk,claude-code} from here upward, else the "
        "global npm install, else the native installs (~/.local/bin/claude, claude on PATH, "
        "the Python SDK's bundled binary).",
        show_default=False,
        readable=False,  # unreadable: our refusal (3), not a usage error
    ),
]
NoNodeOpt = Annotated[
    bool,
    typer.Option(
        "--no-node-check",
        help="Skip the whole-file `node --input-type=module --check` (the edited regions are "
        "still checked with tree-sitter and esprima).",
    ),
]


def register(app: typer.Typer) -> None:
    """Add ``apply``, ``check``, ``revert`` and ``status`` to ``app``."""
    for name, fn in (("apply", apply), ("check", check), ("revert", revert), ("status", status)):
        app.command(name, help=with_codes(fn, name))(fn)


def apply(
    path: PathOpt = None,
    check: Annotated[
        bool, typer.Option("--check", help="Only report the state (as `ctxpatch check`).")
    ] = False,
    revert: Annotated[
        bool, typer.Option("--revert", help="Restore the original (as `ctxpatch revert`).")
    ] = False,
    as_json: JsonOpt = False,
    no_node_check: NoNodeOpt = False,
    no_recall: Annotated[
        bool,
        typer.Option(
            "--no-recall",
            help="Do not register recall with Claude Code (its MCP server `ctxpatch mcp` in "
            "~/.claude.json, the `ctxpatch recall hook` hooks in ~/.claude/settings.json).",
        ),
    ] = False,
) -> None:
    """Inject server-side tool-result clearing and the thinking-safe text prune into cli.js.

    The clearing goes where the query loop builds its API request (wherever the version can
    carry it), _aggressiveTextPrune right after the micro-compaction call. A native build
    (>= 2.1.113) is never written: apply says which lever it has (`ctxpatch run -- claude`).
    Writes cli.js.backup first, verifies the result (tree-sitter, esprima, node ESM check),
    then replaces cli.js atomically. Then, for any install (cli.js or native), registers recall
    with Claude Code: the MCP server `ctxpatch mcp` (~/.claude.json) and the `ctxpatch recall
    hook` hooks (~/.claude/settings.json), every other byte of both files kept (--no-recall:
    not). Applying twice changes nothing. With --check or --revert
    it is `ctxpatch check` or `ctxpatch revert` (and exits as they do).

    Example: ctxpatch apply --path node_modules/@anthropic-ai/claude-code/cli.js
    """

    def body() -> int:
        if check and revert:
            raise UsageError(
                "--check and --revert cannot be used together",
                hint="use one of them (or `ctxpatch check` / `ctxpatch revert`)",
            )
        verb = "check" if check else "revert" if revert else "apply"
        return files.run(path, as_json, verb, node_check=not no_node_check, recall=not no_recall)

    raise typer.Exit(handle(body, as_json))


def check(path: PathOpt = None, as_json: JsonOpt = False) -> None:
    """Report UNPATCHED / PATCHED / OUTDATED / FOREIGN / UNSUPPORTED and the backup's state.

    A native build (Claude Code >= 2.1.113) is NATIVE: its version, kind of install and the
    lever that applies (read from the binary; today `gateway` for every version).

    Reads markers and hashes only: fast enough for every start (`ctxpatch check || ctxpatch
    apply`).

    Example: ctxpatch check --json
    """
    raise typer.Exit(handle(lambda: quickcheck.run(path, as_json), as_json))


def revert(path: PathOpt = None, as_json: JsonOpt = False) -> None:
    """Restore the original cli.js byte for byte (from the backup, or by removing the edits).

    Also removes exactly the recall entries apply added to Claude Code's settings, also when
    no Claude Code install is left. Reverting an unpatched file is a no-op that says so.

    Example: ctxpatch revert
    """
    raise typer.Exit(handle(lambda: files.run(path, as_json, "revert"), as_json))


def status(as_json: JsonOpt = False) -> None:
    """List every cli.js and native build found and its state.

    Searched: CTXPATCH_CLI_JS, local node_modules upward, the global npm install, the native
    installer (~/.local/bin/claude), claude on PATH, the Python SDK's bundled binary. A native
    build is listed as NATIVE with its version, kind of install and lever.

    Example: ctxpatch status
    """
    raise typer.Exit(handle(lambda: files.status(as_json), as_json))
