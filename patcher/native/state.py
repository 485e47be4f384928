"""``check`` / ``apply`` / ``revert`` on a native install: which lever applies, and its state.

ctxpatch never writes into a native binary. What it can do for one is decided from the binary
(:mod:`patcher.native.levers`): today that is the gateway for every published native build
(no environment variable or setting makes them send ``clear_tool_uses_20250919``), so

* ``check`` reports ``NATIVE`` with the version, the kind of install and lever ``gateway``,
  ``lever_state`` ``nothing-to-write``, and exits 4 (nothing ctxpatch can write for this build:
  0 would tell a ``ctxpatch check && …`` script that the install is handled, and it is not);
* ``apply`` writes nothing, says exactly what to run instead, and exits 4 for the same reason
  (``ctxpatch check || ctxpatch apply`` then prints the command to use once per start): for a
  ``claude`` on PATH, the ``ctxpatch shell-init`` line to add to the rc file (or where it is);
  elsewhere the command that exists here (:mod:`patcher.native.command`);
* ``revert`` has nothing to undo in the binary and exits 0, as on an unpatched cli.js; it names
  the ``shell-init`` line(s) to remove, by file and line number.

The binary is memory-mapped and only Claude Code's JavaScript is read (0.03 s for 2.1.113,
about 0.1-0.3 s of CPU for the 381 MB 2.1.330 on a loaded 2-core machine; nothing is cached on
disk: a new version replaces the file, and the read is cheaper than proving a cache fresh).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ctxpatch.errors import ExitCode
from patcher.discover import NativeInstall, environ
from patcher.native.app import read_app
from patcher.native.command import run_hint
from patcher.native.levers import Lever, LeverFacts, decide, extract
from patcher.native.newer import newer_than_profiles
from patcher.native.reader import NativeBinary
from patcher.result import NativeFacts, Result

NATIVE = "NATIVE"  # the state of a native install (cli.js files have UNPATCHED, PATCHED, ...)
NOTHING_TO_WRITE = "nothing-to-write"


@dataclass(frozen=True)
class NativeState:
    install: NativeInstall
    version: str | None
    facts: LeverFacts
    lever: Lever


def read_state(ni: NativeInstall) -> NativeState:
    """The version and the lever, read from the binary (reading only)."""
    with NativeBinary(ni.binary) as nb:
        app = read_app(nb)
    facts = extract(app.sources)
    return NativeState(ni, app.version, facts, decide(facts, app.version))


def _result(st: NativeState, action: str, code: ExitCode, **kw: object) -> Result:
    newer = newer_than_profiles(st.version)  # one line in status, check, apply, revert
    notes = [*([newer] if newer else []), *kw.pop("notes", [])]  # type: ignore[misc]
    return Result(
        path=str(st.install.found_as),
        action=action,
        state=NATIVE,
        exit_code=int(code),
        version=st.version,
        package=_package(st.install),
        native=NativeFacts(
            kind=st.install.kind,
            lever=st.lever.name,
            lever_state=NOTHING_TO_WRITE,
            binary=str(st.install.binary),
            lever_facts=st.facts.to_json(),
        ),
        notes=notes,
        **kw,  # type: ignore[arg-type]
    )


def hint(st: NativeState) -> str:
    """What to do, naming the command that exists here (:mod:`patcher.native.command`)."""
    if st.lever.name != "gateway":
        return st.lever.hint
    return run_hint(st.install, environ(), Path.cwd())


def check_native(ni: NativeInstall) -> Result:
    st = read_state(ni)
    return _result(st, "checked", ExitCode.UNSUPPORTED, reason=st.lever.why, notes=[hint(st)])


def apply_native(ni: NativeInstall) -> Result:
    st = read_state(ni)
    return _result(
        st,
        "nothing-to-write",
        ExitCode.UNSUPPORTED,
        reason=st.lever.why,
        notes=[f"nothing written; {hint(st)}"],
    )


def revert_native(ni: NativeInstall) -> Result:
    """Nothing in the binary to undo; what routes ``claude`` through the gateway is a line the
    user added (``shell-init``): revert names it, exactly (ctxpatch never edits rc files)."""
    from gateway.shell_init import undo_advice  # a known exception of the layers (pyproject)

    st = read_state(ni)
    return _result(
        st,
        "not-patched",
        ExitCode.OK,
        reason="nothing to revert: ctxpatch writes nothing for this build",
        notes=[undo_advice(environ())],
    )


def _package(ni: NativeInstall) -> str | None:
    """``name@version`` of the npm package that installed the binary, when there is one."""
    for folder in (ni.found_as, ni.binary.parent, ni.binary.parent.parent):
        try:
            meta = json.loads((Path(folder) / "package.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and str(meta.get("name", "")).startswith("@anthropic-ai/"):
            return f"{meta['name']}@{meta.get('version', '')}"
    return None
