"""apply / revert / status over the cli.js files found: one Result per file, printed.

``check`` is ``ctxpatch.cli.quickcheck`` (it runs at every start); ``status`` checks and prints
each file as it does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

from ctxpatch.cli.output import emit_json, envelope, err, error_of, out, worst
from ctxpatch.cli.quickcheck import checked, line, one, recall_line
from ctxpatch.errors import NotFound, UsageError
from patcher import ops
from patcher.discover import all_installs, environ, targets
from patcher.fsio import DEFAULT_LOCK_TIMEOUT
from patcher.native import state
from patcher.result import Result
from recall import register, registered


def lock_timeout(env: Mapping[str, str]) -> float:
    """Seconds to wait for another ctxpatch's lock: ``CTXPATCH_LOCK_TIMEOUT``, else 30.

    Anything but a finite number >= 0 is a usage error (``nan`` would wait forever)."""
    raw = env.get("CTXPATCH_LOCK_TIMEOUT")
    if raw is None:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(
            f"CTXPATCH_LOCK_TIMEOUT={raw!r} is not a number of seconds",
            why="it must be a finite number >= 0: how long to wait for another ctxpatch "
            "working in the same folder",
            hint=f"unset it (default {DEFAULT_LOCK_TIMEOUT:g}) or set e.g. CTXPATCH_LOCK_TIMEOUT=30",
        )
    return value


def action_for(verb: str, *, node_check: bool = True) -> Callable[[Path], Result]:
    """apply or revert on one file, with their lock timeout read first."""
    timeout = lock_timeout(environ())
    if verb == "revert":
        return lambda p: ops.revert_file(p, lock_timeout=timeout)
    return lambda p: ops.apply_file(p, node_check=node_check, lock_timeout=timeout)


def run(
    path: Path | None, as_json: bool, verb: str, *, node_check: bool = True, recall: bool = True
) -> int:
    """``verb`` (apply or revert) on the chosen files; prints their results; the exit code (the
    worst one).

    They also register / unregister recall with Claude Code (its hooks and MCP server,
    :mod:`recall.register`) unless ``recall`` is False (then its state is reported, as by
    ``check``)."""
    action = action_for(verb, node_check=node_check)  # bad settings: before anything
    installs, chosen_by = targets(path, environ(), Path.cwd())
    if not installs:
        left = _revert_recall_only(as_json) if verb == "revert" and recall else None
        if left is not None:
            return left
        raise NotFound.no_cli_js(
            f"ctxpatch {verb} --path node_modules/@anthropic-ai/claude-code/cli.js"
        )
    if len(installs) > 1 and not as_json:
        err(f"{verb}: {len(installs)} copies, chosen from {chosen_by}:")
    native = state.apply_native if verb == "apply" else state.revert_native
    results = [one(inst.path, action, native) for inst in installs]
    code = worst(r.exit_code for r in results)
    recall_doc, recall_code = recall_step(verb if recall else "check")
    code = worst((code, recall_code))
    if as_json:
        emit_json(
            envelope(code, [r.to_json() for r in results], chosen_by=chosen_by, recall=recall_doc)
        )
    else:
        for r in results:
            _human(r, verb)
        _human_recall(recall_doc, verb if recall else "check")
    return code


def _revert_recall_only(as_json: bool) -> int | None:
    """``revert`` with no Claude Code install left (removed before ``revert``): recall's entries
    in Claude Code's settings are still ctxpatch's, so they go, byte for byte as apply added
    them. None when there was nothing of ctxpatch's there either: then the usual "no Claude
    Code found" refusal stands."""
    doc, code = recall_step("revert")
    if "error" not in doc and not any(f["action"] in ("removed", "deleted") for f in doc["files"]):
        return None
    note = "no Claude Code install found: no cli.js to restore"
    if as_json:
        emit_json(envelope(code, [], chosen_by=None, recall=doc, note=note))
    else:
        err(f"revert: {note}; recall's entries in Claude Code's settings:")
        _human_recall(doc, "revert")
    return code


def recall_step(verb: str) -> tuple[dict, int]:
    """Register (apply), unregister (revert) or report (check) recall: its JSON and exit code.
    A settings file ctxpatch cannot edit is refused (3) with nothing written, the patch's own
    result stands."""
    if verb == "check":
        return registered.status(environ()), 0
    try:
        report = register.register(environ()) if verb == "apply" else register.unregister(environ())
        return report.to_json(), 0
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        error = error_of(exc)
        return {"registered": None, "error": error.to_json()}, int(error.exit_code)


_RECALL_DONE = {
    "added": "added to",
    "created": "written in a new",
    "already": "already in",
    "removed": "removed from",
    "deleted": "removed (file deleted, ctxpatch had created it):",
    "absent": "not in",
    "registered": "in",
}


def _human_recall(doc: dict, verb: str) -> None:
    if "error" in doc or verb in ("check", "status"):  # check's line on stdout, status's beside
        recall_line(doc, out if verb == "check" else err)  # its notes; an error on stderr
        return
    for f in doc["files"]:
        what = "hooks" if f["path"].endswith("settings.json") else "MCP server"
        entries = f" ({', '.join(f['entries'])})" if f["entries"] else ""
        err(f"recall: {what}{entries} {_RECALL_DONE.get(f['action'], f['action'])} {f['path']}")
        if f.get("note"):
            err(f"  note: {f['note']}")
    if verb == "apply" and any(f["action"] in ("added", "created") for f in doc["files"]):
        err("recall: restart Claude Code to load them (ctxpatch revert removes them)")


def status(as_json: bool) -> int:
    """Every copy found and its state; 0 when at least one was listed."""
    installs = all_installs(environ(), Path.cwd())
    if not installs:
        raise NotFound.no_cli_js(
            "CTXPATCH_CLI_JS=node_modules/@anthropic-ai/claude-code/cli.js ctxpatch status"
        )
    results = [checked(inst.path) for inst in installs]
    recall_doc, _ = recall_step("check")
    if as_json:
        emit_json(
            envelope(0, [r.to_json() for r in results], chosen_by="status", recall=recall_doc)
        )
        return 0
    for r in results:
        out(line(r))
        if r.state == "ERROR":  # why this copy could not be read (what, why, hint)
            err("  " + r.reason.replace("\n", "\n  "))
        for note in r.notes:
            err(f"  note: {note}")
    _human_recall(recall_doc, "status")
    return 0


_DONE = {
    "patched": "patched",
    "repatched": "re-patched (replaced an older snippet)",
    "already-patched": "already patched, nothing to do",
    "reverted": "reverted",
    "not-patched": "not patched, nothing to revert",
    "refused": "refused",
    "nothing-to-write": "nothing written (native build)",
}


def _human(r: Result, verb: str) -> None:
    if r.state == "ERROR":
        err(f"{r.path}:\n{r.reason}")
        return
    detail = ", ".join(
        x
        for x in (
            f"Claude Code {r.version}" if r.version else "",
            f"shape {r.shape}" if r.shape else "",
        )
        if x
    )
    if r.native:
        detail = ", ".join(x for x in (detail, r.native.kind, f"lever {r.native.lever}") if x)
    err(f"{_DONE.get(r.action, r.action)}: {r.path}" + (f" ({detail})" if detail else ""))
    if r.reason and r.action in ("reverted", "refused", "nothing-to-write"):
        err(f"  {r.reason}")
    if r.backup and verb == "apply":
        err(f"  backup: {r.backup['path']} ({r.backup['status']})")
    for note in r.notes:
        err(f"  note: {note}")
