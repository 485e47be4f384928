"""``ctxpatch check [--path P] [--json]``: the command run at every start of Claude Code
(``ctxpatch check || ctxpatch apply``), held to <= 100 ms on the patched 13.7 MB cli.js
(``bench/bench_patcher.py --check-only``).

``ctxpatch.cli.main`` sends a plain ``check`` command line (:func:`quick_check_args`) here
without typer; the typer command ``check`` runs the same :func:`run`. Its whole path is this
module and the light ones it imports: ``patcher.check`` (markers and hashes: no parser, no
writer), ``patcher.discover``, ``recall.registered``, ``ctxpatch.cli.output``. The native reader
is imported for a native install only. ``status`` (``ctxpatch.cli.files``) checks and prints
each file the same way: :func:`checked`, :func:`line`, :func:`recall_line`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ctxpatch.cli.output import emit_json, envelope, err, error_of, out, worst
from ctxpatch.errors import NotFound
from patcher import check
from patcher.discover import NativeInstall, environ, native_of, targets
from patcher.result import Result, error_result
from recall import registered


def quick_check_args(argv: list[str]) -> tuple[Path | None, bool] | None:
    """``(path, as_json)`` when ``argv`` is a plain ``check`` command line, else None."""
    if not argv or argv[0] != "check":
        return None
    path: Path | None = None
    as_json = False
    rest = argv[1:]
    while rest:
        arg = rest.pop(0)
        if arg == "--json" and not as_json:
            as_json = True
        elif (
            arg in ("--path", "-p")
            and path is None
            and rest
            and rest[0]
            and not rest[0].startswith("-")
        ):
            path = Path(rest.pop(0))
        elif arg.startswith("--path=") and path is None and len(arg) > len("--path="):
            path = Path(arg.removeprefix("--path="))
        else:
            return None
    return path, as_json


def run(path: Path | None, as_json: bool) -> int:
    """``check`` of the chosen files and recall's registration; prints them; the exit code
    (the worst one)."""
    installs, chosen_by = targets(path, environ(), Path.cwd())
    if not installs:
        raise NotFound.no_cli_js(
            "ctxpatch check --path node_modules/@anthropic-ai/claude-code/cli.js"
        )
    if len(installs) > 1 and not as_json:
        err(f"check: {len(installs)} copies, chosen from {chosen_by}:")
    results = [checked(inst.path) for inst in installs]
    code = worst(r.exit_code for r in results)
    recall_doc = registered.status(environ())
    if as_json:
        emit_json(
            envelope(code, [r.to_json() for r in results], chosen_by=chosen_by, recall=recall_doc)
        )
        return code
    for r in results:
        if r.state == "ERROR":  # what, why, hint: its notes are in there
            err(f"{r.path}:\n{r.reason}")
            continue
        out(line(r))
        for note in r.notes:
            err(f"  note: {note}")
    recall_line(recall_doc, out)
    return code


def checked(path: Path) -> Result:
    """``check`` of one file: a cli.js's markers and hashes, or a native build's state."""
    return one(path, lambda p: check.check_file(p), _check_native)


def one(
    path: Path, action: Callable[[Path], Result], native: Callable[[NativeInstall], Result]
) -> Result:
    """``action`` on one cli.js, ``native`` on a native build; a failure becomes a Result (so
    every file is reported)."""
    try:
        ni = native_of(path)
        return action(path) if ni is None else native(ni)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        return error_result(path, error_of(exc))


def _check_native(ni: NativeInstall) -> Result:
    from patcher.native.state import check_native  # the native reader: for a native build only

    return check_native(ni)


def line(r: Result) -> str:
    """A file's state in a line (and its reason, and a native build's executable, below)."""
    bits = [f"{r.state:<11} {r.path}"]
    if r.version:
        bits.append(f"Claude Code {r.version}")
    if r.native:
        bits.append(f"{r.native.kind}, lever {r.native.lever} ({r.native.lever_state})")
    if r.shape:
        bits.append(f"shape {r.shape}")
    if r.backup:
        bits.append(f"backup {r.backup.get('status')}")
    text = "  ".join(bits)
    if r.reason and r.state not in ("PATCHED", "ERROR"):
        text += f"\n  {r.reason}"
    if r.native and r.native.binary and r.native.binary != r.path:
        text += f"\n  binary: {r.native.binary}"
    return text


def recall_line(doc: dict, say: Callable[[str], None]) -> None:
    """recall's registration in one line (``say``: check's stdout, status's stderr); an error
    on stderr with its hint."""
    if "error" in doc:
        e = doc["error"]
        err(
            f"recall: not registered: {e['what']}" + (f"\n  hint: {e['hint']}" if e["hint"] else "")
        )
    elif doc["registered"]:
        say("recall: registered (" + ", ".join(f["path"] for f in doc["files"]) + ")")
    else:
        missing = [f["path"] for f in doc["files"] if f["action"] != "registered"]
        say(f"recall: not registered in {', '.join(missing)} (ctxpatch apply registers it)")
