"""``ctxpatch inspect`` for native builds: a ``claude`` executable or an installed package folder.

Reading only (ctxpatch never writes into a binary). The JavaScript comes out of the Bun module
graph (:mod:`patcher.native.app`); then

* a single-module build whose ``cli.js`` still has the ``{percentLeft, isAboveWarningThreshold,
  …}`` function (2.1.113 and the first builds after it) is read by the ``cli.js`` inspector
  (:mod:`patcher.inspect`), exactly as an npm ``cli.js``;
* later builds (the "levels" code, single-module or code-split) by :mod:`patcher.native.levels`,
  which searches its anchors across every chunk and reads each number in the module it is in.

Both are compared with the engine's profile for the version; a version newer than every profile
is a warning (an error with ``strict``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ctxpatch.errors import CtxpatchError
from patcher import inspection
from patcher.bundle import load
from patcher.discover import environ, targets
from patcher.inspect import render as render_cli_js
from patcher.inspect.report import Report
from patcher.inspection import (
    CliJsReader,
    Container,
    FindingsReader,
    Inspection,
    LevelsReader,
    NativePart,
)
from patcher.native import levers
from patcher.native.app import App, read_app
from patcher.native.levels import Levels
from patcher.native.newer import newer_than_profiles
from patcher.native.package import find_binary
from patcher.native.reader import NativeBinary

_OLD_ANCHOR = b"isAboveAutoCompactThreshold"


def reader_for(app: App) -> FindingsReader:
    """The cli.js inspector for a single-module build that still has the ``{percentLeft,
    isAboveWarningThreshold, …}`` function, else the levels reader."""
    if app.layout == "single" and _OLD_ANCHOR in app.sources[0].data:
        return CliJsReader()
    return LevelsReader()


# --- finding the binary ----------------------------------------------------------------------


def is_native(path: Path) -> bool:
    """A file that starts like an executable, or a folder that holds (or names) a native build."""
    if path.is_dir():  # a folder with a cli.js is the JavaScript package, whatever is beside it
        return not (path / "cli.js").exists() and find_binary(path, must=False) is not None
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head in (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe") or head[:2] == b"MZ"


def discover() -> Path | None:
    """The ``claude`` on PATH when it is a native build (the native installer's symlink)."""
    found = shutil.which("claude")
    if not found:
        return None
    real = Path(os.path.realpath(found))
    return real if is_native(real) and _has_trailer(real) else None


def installed_version(cwd: Path | None = None) -> str | None:
    """The Claude Code version installed here: the first cli.js or native package ``ctxpatch
    check`` would pick (local node_modules upward, then global), else a native ``claude`` on
    PATH. Reading only; None when there is none."""
    installs, _ = targets(None, environ(), cwd or Path.cwd())
    for inst in installs:
        try:
            if inst.path.is_file() and not is_native(inst.path):
                version = load(inst.path).version
            else:
                exe = find_binary(inst.path, must=False) if inst.path.is_dir() else inst.path
                version = _version_of_binary(exe) if exe else None
        except CtxpatchError:
            continue
        if version:
            return version
    exe = discover()
    return _version_of_binary(exe) if exe else None


def _version_of_binary(exe: Path) -> str | None:
    with NativeBinary(exe) as nb:
        return read_app(nb).version


def _has_trailer(p: Path) -> bool:
    try:
        with NativeBinary(p):
            return True
    except (CtxpatchError, OSError):
        return False


# --- inspecting ------------------------------------------------------------------------------


def inspect_path(path: Path) -> Inspection:
    exe = find_binary(path) if path.is_dir() else path
    assert exe is not None
    with NativeBinary(exe) as nb:
        app = read_app(nb)
        build = new_report(nb, app, f"{nb.location.container} ({nb.location.how})")
    return inspect_app(app, build)


def new_report(nb: NativeBinary, app: App, container: str) -> Container:
    """The container facts of ``app`` read out of ``nb``, before any inspection."""
    return Container(
        path=str(nb.path),
        container=container,
        layout=app.layout,
        version=app.version,
        modules=len(nb.entries),
        js_modules=len(app.sources),
        js_bytes=app.size,
    )


def inspect_app(app: App, build: Container) -> Inspection:
    facts = levers.extract(app.sources)
    newer = newer_than_profiles(build.version)
    part = NativePart(build, facts, levers.decide(facts, app.version), (newer,) if newer else ())
    return inspection.read(reader_for(app), app.sources, app.version, native=part)


# --- rendering -------------------------------------------------------------------------------


def render(rep: Inspection) -> str:
    """The text of ``inspect`` on a native build."""
    assert rep.native is not None
    b = rep.native.build
    lines = [
        f"{b.path}",
        f"native build: {b.container}, {b.modules} modules; Claude Code's JavaScript: "
        f"{b.layout} layout, {b.js_modules} module(s), {b.js_bytes:,} bytes",
    ]
    if isinstance(rep.findings, Report):
        lines.append(render_cli_js(rep.findings, rep.comparison))
    else:
        lines += _render_levels(rep, rep.findings)
    lines.append(f"lever: {rep.native.lever.name} ({rep.native.lever.why})")
    lines += [f"warning: {w}" for w in rep.warnings]
    return "\n".join(lines)


def _render_levels(rep: Inspection, r: Levels) -> list[str]:
    consts, feats, fns = r.constants, r.features, r.functions

    def c(key: str) -> str:
        v = consts.get(key)
        if v is None:
            return "?"
        via = "" if v.via == "literal" else f" ({v.via})"
        return f"{v.value}{via}"

    said: dict[Any, str] = {True: "yes", False: "no"}

    def yes(key: str) -> str:
        return said.get(feats.get(key), "?")

    lines = [
        f"Claude Code {rep.version or '(unknown version)'}",
        "thresholds:  levels era"
        + (f" (level {fns['level']}, threshold {fns.get('threshold', '?')})" if fns else ""),
        f"  auto-compact offset   {c('autocompact_offset')}  (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: "
        f"{yes('pct_override')})",
        f"  warning offset        {c('warning_offset')}",
        f"  blocking offset       {c('blocking_offset')} from the effective window "
        f"(CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE: {yes('blocking_override')})",
        f"  output-reserve cap    {c('reserve_cap')}",
        f"  precomputed compaction {yes('precompute')}: armed at min(eff - round(eff * "
        f"{c('precompute_buffer_fraction')}), threshold)",
        f"  proactive auto-compact only with a configured window: "
        f"{yes('proactive_needs_configured_window')}",
        f"  count adds server-cleared tokens: {yes('count_adds_server_cleared')}",
        "context: 1M via [1m] suffix "
        f"{yes('model_suffix_1m')}, context-1m beta {yes('beta_context_1m')}; "
        f"server clearing (clear_tool_uses) {yes('clear_tool_uses')}",
        f"micro-compaction: time-based {yes('time_based_microcompact')}, keep-recent "
        f"{yes('keep_recent_microcompact')}, microcompact_boundary records "
        f"{yes('microcompact_boundary_record')}",
        "env vars: " + (", ".join(k for k, v in r.env_vars.items() if v) or "none"),
    ]
    if rep.profile:
        lines.append(
            f"engine profile {rep.profile} ({rep.profile_range}): {len(rep.compared)} fields "
            "compared, " + ("no drift" if not rep.drift else f"{len(rep.drift)} DRIFT")
        )
        lines += [f"  drift {d}" for d in rep.drift]
    else:
        lines.append(f"engine profile: none ({rep.profile_problem})")
    if r.unresolved:
        lines.append("unresolved:")
        lines += [f"  {u}" for u in r.unresolved]
    return lines
