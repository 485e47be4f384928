"""Checks that run on our own output before it may replace the user's file.

1. the edited regions re-parse with no ERROR/MISSING node (tree-sitter, windowed);
2. the marker pairs of both injections (text prune; server-side clearing where it applies) are
   where ctxpatch puts them, and stripping all of them gives back the original sha;
3. applying again changes nothing;
4. where node is absent or skipped, the snippet parses as ES2017 (esprima, pure Python);
5. where node exists, the whole file passes ``node --input-type=module --check``
   (a plain ``node --check`` passes broken ESM files, see research/deps.md §3).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import NoReturn

from ctxpatch.errors import NodeMissing, VerificationFailed
from patcher import clearsite, jsparse, markers
from patcher.markers import State
from patcher.plan import Patch

_GENERATOR = frozenset({"generator_function_declaration"})


def check_patch(
    patch: Patch,
    snippet: bytes,
    snippet_sha: str,
    *,
    esprima_check: bool,
    clear_snippet: bytes | None = None,
) -> None:
    """Steps 1-4 (step 4 only with ``esprima_check``: where node checks the whole file, the
    pure-Python ES2017 parse of the snippet adds 0.3 s of import for nothing node misses).
    Raises VerificationFailed (a bug in ctxpatch) on any failure."""
    new = patch.new
    clear_sha = markers.sha256(clear_snippet) if clear_snippet is not None else None
    marks = markers.read(new, snippet_sha, clear_sha)
    if marks.state is not State.PATCHED:  # includes: stripping the edits gives the original sha
        _fail(f"the patched file reads back as {marks.state.value}: {marks.reason}")
    if marks.header is None or marks.header.original_sha != markers.sha256(patch.original):
        _fail("the recorded original sha256 is not the original's")
    builder = patch.clearing.builder if patch.clearing is not None else None
    if (builder is not None) != (marks.header.clear not in (None, markers.NO_CLEARING)):
        _fail("the header's clear field does not say what was injected")
    _check_snippet(snippet, markers.FUNCTION_NAME, esprima_check=esprima_check)
    _check_call_site(new)
    if builder is not None and clear_snippet is not None:
        _check_snippet(clear_snippet, markers.CLEAR_FUNCTION, esprima_check=esprima_check)
        _check_clearing_sites(new, len(builder.watches))


def _check_snippet(snippet: bytes, name: bytes, *, esprima_check: bool) -> None:
    if not jsparse.error_free(snippet):
        _fail(f"the injected function {name.decode()} does not parse (tree-sitter)")
    err = es2017_error(snippet.decode("utf-8"), name.decode()) if esprima_check else None
    if err:
        _fail(f"the injected function is not valid ES2017 (esprima): {err}")


def es2017_error(js: str, name: str = markers.FUNCTION_NAME.decode()) -> str | None:
    """None when ``js`` parses as an ES2017 script with esprima 4, else the error."""
    import esprima  # imported here: it costs ~0.25 s, and `check` never needs it

    try:
        program = esprima.parseScript(js)
    except esprima.Error as e:
        return str(e)
    body = program.body
    if len(body) != 1 or body[0].type != "FunctionDeclaration":
        return "the snippet must be exactly one function declaration"
    if body[0].id.name != name:
        return f"the function must be named {name}"
    return None


def _check_call_site(new: bytes) -> None:
    at = new.find(markers.WRAP_OPEN)
    name_at = at + len(b"/*ctxpatch:wrap*/")
    index = jsparse.FunctionIndex(new)
    gen = index.enclosing(at, b"async function*", _GENERATOR)
    if gen is None:
        _fail("the wrapped call is not inside an error-free async generator after patching")
    ident = gen.node_at(name_at, name_at + len(markers.FUNCTION_NAME))
    call = ident.parent if ident is not None else None
    if call is None or call.type != "call_expression":
        _fail("the wrap is not a call of _aggressiveTextPrune after patching")
    if jsparse.nearest_function(call) != gen.node:
        _fail("the wrap landed inside a nested function")


def _check_clearing_sites(new: bytes, watches: int) -> None:
    """Each clearing wrap is a call of the clearing function, in an error-free generator:
    one on an object literal (the request), ``watches`` on a call with the "watch" mode."""
    index = jsparse.FunctionIndex(new)
    seen = {markers.CLEAR_OPEN: 0, markers.WATCH_OPEN: 0}
    for open_ in seen:
        name_at_offset = len(open_) - len(markers.CLEAR_FUNCTION) - 1
        for at in jsparse.iter_find(new, open_):
            gen = index.enclosing(at, b"async function*", _GENERATOR, clearsite.LOOKBACK)
            if gen is None:
                _fail("a clearing wrap is not inside an error-free async generator")
            name_at = at + name_at_offset
            ident = gen.node_at(name_at, name_at + len(markers.CLEAR_FUNCTION))
            call = ident.parent if ident is not None else None
            if call is None or call.type != "call_expression":
                _fail("a clearing wrap is not a call of _ctxpatchContextClearing")
            args = call.child_by_field_name("arguments")
            kids = args.named_children if args is not None else []
            if open_ == markers.CLEAR_OPEN:
                ok = len(kids) == 1 and kids[0].type == "object"
            else:
                ok = (
                    len(kids) == 2
                    and kids[0].type == "call_expression"
                    and (kids[1].text == b'"watch"')
                )
            if not ok:
                _fail(f"the clearing wrap at byte {at} does not wrap what it should")
            seen[open_] += 1
    if seen[markers.CLEAR_OPEN] != 1 or seen[markers.WATCH_OPEN] != watches:
        _fail(f"expected 1 request wrap and {watches} watch wraps, found {seen}")


def _fail(why: str) -> NoReturn:
    raise VerificationFailed(
        "ctxpatch's own output failed verification; nothing was written",
        why=why,
        hint="this is a bug in ctxpatch: please report it with the cli.js version and sha256",
    )


@dataclass(frozen=True)
class NodeResult:
    ok: bool
    message: str


def node_binary() -> str | None:
    """``CTXPATCH_NODE`` (which must run), else node on PATH, else None (checks skipped)."""
    named = os.environ.get("CTXPATCH_NODE")
    if not named:
        return shutil.which("node")
    found = shutil.which(named)
    if found is None:
        raise NodeMissing(
            f"CTXPATCH_NODE={named} cannot be run",
            why="no executable file by that name (CTXPATCH_NODE names the node that checks the "
            "patched file)",
            hint="point it at node (e.g. CTXPATCH_NODE=$(command -v node)), unset it to use the "
            "node on PATH, or pass --no-node-check",
        )
    return found


def node_check(source: bytes, node: str, timeout: float = 120.0) -> NodeResult:
    """``node --input-type=module --check`` on ``source`` fed through stdin.

    A leading byte-order mark is dropped first, as node's loader does when it runs the file:
    ``--check`` and stdin keep it, and then reject a ``#!`` line right after it.
    """
    proc = subprocess.run(
        [node, "--input-type=module", "--check"],
        input=source.removeprefix(markers.BOM),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    err = proc.stderr.decode("utf-8", "replace")
    lines = [ln[:200] for ln in err.splitlines() if ln.strip()][:6]
    return NodeResult(proc.returncode == 0, "\n".join(lines))
