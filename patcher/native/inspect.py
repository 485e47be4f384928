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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxpatch.errors import CtxpatchError
from patcher.native.app import App, read_app
from patcher.native.levels import Levels, extract
from patcher.native.package import find_binary
from patcher.native.reader import NativeBinary

_OLD_ANCHOR = b"isAboveAutoCompactThreshold"

# Profile fields compared with what levels.extract reads: (constant or feature, Profile attr)
LEVEL_CHECKS = (
    ("autocompact_offset", "autocompact_offset"),
    ("warning_offset", "warning_offset"),
    ("blocking_offset", "blocking_offset"),
    ("reserve_cap", "reserve_cap"),
    ("precompute_buffer_fraction", "precompute_buffer_fraction"),
)
FEATURE_CHECKS = (
    ("pct_override", "has_pct_override"),
    ("blocking_override", "has_blocking_override"),
    ("proactive_needs_configured_window", "proactive_needs_configured_window"),
    ("count_adds_server_cleared", "count_adds_server_cleared"),
)


@dataclass
class NativeReport:
    path: str
    container: str
    layout: str
    version: str | None
    modules: int
    js_modules: int
    js_bytes: int
    reader: str  # "cli.js" (the cli.js inspector) | "levels"
    report: dict[str, Any] = field(default_factory=dict)  # the reader's own JSON
    profile: str | None = None
    profile_range: str | None = None
    profile_problem: str = ""
    compared: list[str] = field(default_factory=list)
    drift: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rendered: str = ""  # the reader's text (cli.js inspector only)
    lever: dict[str, Any] = field(default_factory=dict)  # native.levers: facts, lever, why

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("rendered")
        return d


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
    from patcher.bundle import load
    from patcher.discover import environ, targets

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


def inspect_path(path: Path) -> NativeReport:
    exe = find_binary(path) if path.is_dir() else path
    assert exe is not None
    with NativeBinary(exe) as nb:
        app = read_app(nb)
        rep = new_report(nb, app, f"{nb.location.container} ({nb.location.how})")
    return inspect_app(app, rep)


def new_report(nb: NativeBinary, app: App, container: str) -> NativeReport:
    """The report of ``app`` read out of ``nb``, before any inspection."""
    return NativeReport(
        path=str(nb.path),
        container=container,
        layout=app.layout,
        version=app.version,
        modules=len(nb.entries),
        js_modules=len(app.sources),
        js_bytes=app.size,
        reader="levels",
    )


def inspect_app(app: App, rep: NativeReport) -> NativeReport:
    from patcher.native import levers
    from patcher.native.newer import newer_than_profiles

    facts = levers.extract(app.sources)
    lever = levers.decide(facts, app.version)
    rep.lever = {"lever": lever.name, "why": lever.why, "facts": facts.to_json()}

    if app.layout == "single" and _OLD_ANCHOR in app.sources[0].data:
        _with_cli_js_inspector(app, rep)
    else:
        levels = extract(app.sources)
        rep.report = levels.to_json()
        _compare_levels(levels, rep)
    newer = newer_than_profiles(rep.version)
    if newer:
        rep.warnings.append(newer)
    return rep


def _with_cli_js_inspector(app: App, rep: NativeReport) -> None:
    from patcher.inspect import inspect, render

    r = inspect(app.sources[0].data, app.version)
    c = r.comparison
    rep.reader = "cli.js"
    rep.report = r.to_json()
    rep.rendered = render(r)
    rep.profile, rep.profile_range, rep.profile_problem = (
        c.profile,
        c.profile_range,
        c.profile_problem,
    )
    rep.compared = list(c.compared)
    rep.drift = [{"field": d.field, "file": d.file, "profile": d.profile} for d in c.drift]


def _compare_levels(levels: Levels, rep: NativeReport) -> None:
    from engine.profiles import profile_for

    if not levels.found:
        rep.profile_problem = "; ".join(levels.unresolved) or "no compaction code found"
        return
    if rep.version is None:
        rep.profile_problem = "unknown version: no profile to compare with"
        return
    try:
        p = profile_for(rep.version)
    except ValueError as e:
        rep.profile_problem = str(e)
        return
    rep.profile, rep.profile_range = p.name, p.range
    for key, attr in LEVEL_CHECKS:
        if key in levels.constants:
            _check(rep, attr, levels.value(key), getattr(p, attr))
    for key, attr in FEATURE_CHECKS:
        if key in levels.features:
            _check(rep, attr, levels.features[key], getattr(p, attr))


def _check(rep: NativeReport, name: str, file_value: Any, profile_value: Any) -> None:
    rep.compared.append(name)
    if file_value != profile_value:
        rep.drift.append({"field": name, "file": file_value, "profile": profile_value})


# --- rendering -------------------------------------------------------------------------------


def render(rep: NativeReport) -> str:
    lines = [
        f"{rep.path}",
        f"native build: {rep.container}, {rep.modules} modules; Claude Code's JavaScript: "
        f"{rep.layout} layout, {rep.js_modules} module(s), {rep.js_bytes:,} bytes",
    ]
    if rep.reader == "cli.js":
        lines.append(rep.rendered)
    else:
        lines += _render_levels(rep)
    if rep.lever:
        lines.append(f"lever: {rep.lever['lever']} ({rep.lever['why']})")
    lines += [f"warning: {w}" for w in rep.warnings]
    return "\n".join(lines)


def _render_levels(rep: NativeReport) -> list[str]:
    r = rep.report
    consts, feats, fns = r.get("constants", {}), r.get("features", {}), r.get("functions", {})

    def c(key: str) -> str:
        v = consts.get(key)
        if v is None:
            return "?"
        via = "" if v["via"] == "literal" else f" ({v['via']})"
        return f"{v['value']}{via}"

    def yes(key: str) -> str:
        return {True: "yes", False: "no"}.get(feats.get(key), "?")

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
        "env vars: " + (", ".join(k for k, v in r.get("env_vars", {}).items() if v) or "none"),
    ]
    if rep.profile:
        lines.append(
            f"engine profile {rep.profile} ({rep.profile_range}): {len(rep.compared)} fields "
            "compared, " + ("no drift" if not rep.drift else f"{len(rep.drift)} DRIFT")
        )
        lines += [
            f"  drift {d['field']}: file {d['file']!r} != profile {d['profile']!r}"
            for d in rep.drift
        ]
    else:
        lines.append(f"engine profile: none ({rep.profile_problem})")
    if r.get("unresolved"):
        lines.append("unresolved:")
        lines += [f"  {u}" for u in r["unresolved"]]
    return lines
