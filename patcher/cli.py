"""The ``ctxpatch`` command line: the only module that prints or exits.

Exit codes (README "Exit codes"): 0 ok / nothing to do, 1 check: change needed, 2 usage,
3 refused (nothing written, see the hint), 4 unsupported build, 5 internal error, 130 ^C.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from engine.cli import register as register_engine
from patcher import __version__, ops
from patcher.clifail import fail
from patcher.discover import Install, all_installs, environ, targets
from patcher.e2e.cli import register as register_verify
from patcher.errors import CtxpatchError, ExitCode, InternalError, NotFound
from patcher.fidelity_cli import register as register_fidelity
from patcher.fsio import DEFAULT_LOCK_TIMEOUT
from patcher.ops import Result

app = typer.Typer(
    name="ctxpatch",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    help="Patch Claude Code's cli.js so old conversation text is pruned after micro-compaction, "
    "and model its compaction offline.",
)

PathOpt = Annotated[
    Path | None,
    typer.Option(
        "--path",
        "-p",
        help="cli.js (or its package folder) to act on. Default: CTXPATCH_CLI_JS, else "
        "node_modules/@anthropic-ai/{claude-agent-sdk,claude-code} from here upward, else the "
        "global npm install.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON document on stdout.")]
NoNodeOpt = Annotated[
    bool,
    typer.Option(
        "--no-node-check",
        help="Skip the whole-file `node --input-type=module --check` (the edited regions are "
        "still checked with tree-sitter and esprima).",
    ),
]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"ctxpatch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """ctxpatch: keep Claude Code sessions out of lossy full compaction."""


@app.command()
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
) -> None:
    """Inject _aggressiveTextPrune right after the query loop's micro-compaction call.

    Writes cli.js.backup first, verifies the result (tree-sitter, esprima, node ESM check),
    then replaces cli.js atomically. Applying twice changes nothing.

    Example: ctxpatch apply --path node_modules/@anthropic-ai/claude-code/cli.js
    """
    if check and revert:
        typer.echo("error: --check and --revert cannot be used together", err=True)
        raise typer.Exit(int(ExitCode.USAGE))
    if check:
        _run(path, as_json, ops.check_file, verb="check")
    elif revert:
        _run(path, as_json, _revert, verb="revert")
    else:

        def _apply(p: Path) -> Result:
            return ops.apply_file(p, node_check=not no_node_check, lock_timeout=_lock_timeout())

        _run(path, as_json, _apply, verb="apply")


@app.command("check")
def check_cmd(path: PathOpt = None, as_json: JsonOpt = False) -> None:
    """Report UNPATCHED / PATCHED / OUTDATED / FOREIGN / UNSUPPORTED and the backup's state.

    Reads markers and hashes only (fast enough for every start). Exit 0 = patched and current,
    1 = a change is needed, 3 = foreign or unrecognised, 4 = unsupported build.

    Example: ctxpatch check --json
    """
    _run(path, as_json, ops.check_file, verb="check")


@app.command("revert")
def revert_cmd(path: PathOpt = None, as_json: JsonOpt = False) -> None:
    """Restore the original cli.js byte for byte (from the backup, or by removing the edits).

    Reverting an unpatched file is a no-op that says so.

    Example: ctxpatch revert
    """
    _run(path, as_json, _revert, verb="revert")


def _revert(path: Path) -> Result:
    return ops.revert_file(path, lock_timeout=_lock_timeout())


def _lock_timeout() -> float:
    """Seconds to wait for another ctxpatch run in the same folder (CTXPATCH_LOCK_TIMEOUT)."""
    return float(os.environ.get("CTXPATCH_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT))


@app.command()
def status(as_json: JsonOpt = False) -> None:
    """List every cli.js found (CTXPATCH_CLI_JS, local node_modules upward, global) and its state.

    Example: ctxpatch status
    """
    installs = all_installs(environ(), Path.cwd())
    results = [_one(inst, ops.check_file) for inst in installs]
    code = _combined(results)
    if as_json:
        _emit_json(results, code, chosen_by="status")
    elif not results:
        typer.echo("no Claude Code cli.js found (local node_modules upward, or global)", err=True)
    for r in results if not as_json else []:
        typer.echo(_line(r))
        for note in r.notes:
            typer.echo(f"  note: {note}", err=True)
    raise typer.Exit(0 if results or as_json else int(ExitCode.REFUSED))


def _run(path: Path | None, as_json: bool, action: Callable[[Path], Result], *, verb: str) -> None:
    installs, chosen_by = targets(path, environ(), Path.cwd())
    if not installs:
        err = NotFound(
            "no Claude Code cli.js found",
            why="looked in CTXPATCH_CLI_JS, node_modules/@anthropic-ai/{claude-agent-sdk,"
            "claude-code} from the current folder upward, and the global npm install",
            hint="pass the file with --path, e.g. ctxpatch apply --path "
            "node_modules/@anthropic-ai/claude-code/cli.js",
        )
        fail(err, as_json)
    if len(installs) > 1 and not as_json:
        typer.echo(f"{verb}: {len(installs)} copies, chosen from {chosen_by}:", err=True)
    results = [_one(inst, action) for inst in installs]
    code = _combined(results)
    if as_json:
        _emit_json(results, code, chosen_by=chosen_by)
    else:
        for r in results:
            _human(r, verb)
    raise typer.Exit(code)


def _one(inst: Install, action: Callable[[Path], Result]) -> Result:
    try:
        return action(inst.path)
    except KeyboardInterrupt:
        typer.echo("interrupted: nothing half-written (writes are atomic)", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except CtxpatchError as e:
        return ops.error_result(inst.path, e)
    except Exception as e:  # the one guard that turns a bug into exit 5, never a traceback
        if os.environ.get("CTXPATCH_DEBUG"):
            raise
        return ops.error_result(
            inst.path,
            InternalError(
                f"internal error: {type(e).__name__}: {e}",
                hint="this is a bug in ctxpatch; rerun with CTXPATCH_DEBUG=1 for a traceback and "
                "report it",
            ),
        )


def _combined(results: list[Result]) -> int:
    codes = [r.exit_code for r in results]
    if not codes:
        return int(ExitCode.REFUSED)
    worst = [c for c in codes if c != 0]
    return max(worst) if worst else 0


def _emit_json(results: list[Result], code: int, *, chosen_by: str) -> None:
    doc = {
        "ctxpatch": __version__,
        "exit_code": code,
        "chosen_by": chosen_by,
        "results": [r.to_json() for r in results],
    }
    typer.echo(json.dumps(doc, indent=2))


def _line(r: Result) -> str:
    bits = [f"{r.state:<11} {r.path}"]
    if r.version:
        bits.append(f"Claude Code {r.version}")
    if r.shape:
        bits.append(f"shape {r.shape}")
    if r.backup:
        bits.append(f"backup {r.backup.get('status')}")
    line = "  ".join(bits)
    if r.reason and r.state not in ("PATCHED",):
        line += f"\n  {r.reason}" if r.state != "ERROR" else ""
    return line


def _human(r: Result, verb: str) -> None:
    if r.state == "ERROR":
        typer.echo(f"{r.path}:\n{r.reason}", err=True)
        return
    if verb == "check":
        typer.echo(_line(r))
    else:
        what = {
            "patched": "patched",
            "repatched": "re-patched (replaced an older snippet)",
            "already-patched": "already patched, nothing to do",
            "reverted": "reverted",
            "not-patched": "not patched, nothing to revert",
            "refused": "refused",
        }.get(r.action, r.action)
        detail = ", ".join(
            x
            for x in (
                f"Claude Code {r.version}" if r.version else "",
                f"shape {r.shape}" if r.shape else "",
            )
            if x
        )
        typer.echo(f"{what}: {r.path}" + (f" ({detail})" if detail else ""), err=True)
        if r.reason and r.action in ("reverted", "refused"):
            typer.echo(f"  {r.reason}", err=True)
        if r.backup and verb == "apply":
            typer.echo(f"  backup: {r.backup['path']} ({r.backup['status']})", err=True)
    for note in r.notes:
        typer.echo(f"  note: {note}", err=True)


# After the patch commands: `verify`, `simulate` and `thresholds` (engine never imports
# patcher), then `inspect` and `regress`.
register_verify(app)


def _installed_version() -> str | None:
    from patcher.native.inspect import installed_version

    return installed_version()


register_engine(app, installed_version=_installed_version)
register_fidelity(app)


def main() -> None:
    """Console-script entry point (typer handles usage errors with exit 2)."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
