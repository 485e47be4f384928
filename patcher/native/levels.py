"""Compaction constants of the native-era JavaScript (the "levels" code of 2.1.1xx-2.1.330).

Pure: :func:`extract` takes Claude Code's sources (the single ``cli.js`` or the loader and its
chunks, :mod:`patcher.native.app`) and returns :class:`Levels`. Somewhere after 2.1.113 the
``{percentLeft, isAboveWarningThreshold, ...}`` function that :mod:`patcher.inspect` reads
was replaced by a *level* function returning ``{level: "ok" | "warn" | "compact" | "blocked",
pctLeft}``, and a background *precomputed* compaction appeared. The anchors here are meanings,
never minified names:

* **level function**: the one function that returns ``level:"blocked"``; its warning base is
  ``enabled ? threshold : window`` minus the warning offset, its blocking limit
  ``testBlockingOverride`` or ``window - OFFSET``; its first call is the **threshold** function
  (``window - 13000``, or ``floor(window * pct/100)`` with ``testPctOverride``).
* **precompute**: ``Math.min(w - Math.round(w * x.precomputeBufferFraction), threshold(w, x))``;
  the fraction's default is the fallback of the remote flag read ``e >= 0 && e < 1 ? e : DEFAULT``.
* **auto-compact decision**: the function that logs ``autocompact: tokens=… effectiveWindow=${F(…)}``;
  ``F`` is the **effective window** (``window - Math.min(maxOutput, CAP)``); a ``&& !G(…)``
  guard, where ``G`` tests ``….source !== "auto"``, means the proactive threshold only fires when
  the auto-compact window was configured (env, settings, server, experiment, model default);
  ``serverCleared`` in the log means the count adds back what server-side clearing removed.

Each number is resolved to its ``NAME=value`` declaration in the same module (minified names are
module-local in the code-split builds) and reported with the name it was read through.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from patcher.native.app import Source

_ID = rb"[\w$]+"
_NUM = rb"(?:\d+(?:\.\d+)?(?:e\d+)?|0x[0-9a-fA-F]+)"
_MAX_FN = 6000  # bytes of one function read at most

ENV_VARS = (
    "DISABLE_COMPACT",
    "DISABLE_AUTO_COMPACT",
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
    "CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    "CLAUDE_CODE_MAX_CONTEXT_TOKENS",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "CLAUDE_CODE_DISABLE_1M_CONTEXT",
    "DISABLE_MICROCOMPACT",
)
MARKERS = {  # feature -> a string literal whose presence shows it
    "beta_context_1m": b"context-1m-2025-08-07",
    "beta_context_management": b"context-management-2025-06-27",
    "clear_tool_uses": b"clear_tool_uses_20250919",
    "microcompact_boundary_record": b'"microcompact_boundary"',
    "time_based_microcompact": b"tengu_time_based_microcompact",
    "keep_recent_microcompact": b"[KEEP-RECENT MC]",
    "model_suffix_1m": b'"[1m]"',
}


@dataclass(frozen=True)
class Value:
    value: Any
    via: str  # the declaration's name, or "literal"
    module: str  # basename of the module it was read in

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "via": self.via, "module": self.module}


@dataclass(frozen=True)
class Levels:
    """The findings of the levels reader (``kind`` "levels": the drift table's key). Built once
    by :func:`extract` and immutable: read-only tables, a tuple of unresolved notes."""

    kind: ClassVar[str] = "levels"
    constants: Mapping[str, Value]
    features: Mapping[str, Any]
    functions: Mapping[str, str]  # role -> "name@module"
    env_vars: Mapping[str, bool]
    unresolved: tuple[str, ...]

    @property
    def found(self) -> bool:
        return "level" in self.functions

    def value(self, key: str) -> Any:
        v = self.constants.get(key)
        return None if v is None else v.value

    def to_json(self) -> dict[str, Any]:
        return {
            "constants": {k: v.to_json() for k, v in self.constants.items()},
            "features": dict(self.features),
            "functions": dict(self.functions),
            "env_vars": dict(self.env_vars),
            "unresolved": list(self.unresolved),
        }


@dataclass
class _Reading:
    """What :func:`extract` has read so far (the helpers add to it); :meth:`levels` freezes it."""

    constants: dict[str, Value] = field(default_factory=dict)
    features: dict[str, Any] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)

    def levels(self, env_vars: dict[str, bool]) -> Levels:
        return Levels(
            constants=MappingProxyType(self.constants),
            features=MappingProxyType(self.features),
            functions=MappingProxyType(self.functions),
            env_vars=MappingProxyType(env_vars),
            unresolved=tuple(self.unresolved),
        )


def extract(sources: Sequence[Source]) -> Levels:
    env_vars = {v: any(v.encode() in s.data for s in sources) for v in ENV_VARS}
    out = _Reading()
    for key, needle in MARKERS.items():
        out.features[key] = any(needle in s.data for s in sources)
    level = _find(sources, b'level:"blocked"')
    if level is None:
        out.unresolved.append('level function (returns level:"blocked") not found')
        return out.levels(env_vars)
    _level_function(out, *level)
    precompute = _find(sources, b".precomputeBufferFraction),")
    if precompute is None:
        out.features["precompute"] = False
    else:
        out.features["precompute"] = True
        _precompute_default(out, sources)
    decision = _find(sources, b"autocompact: tokens=")
    if decision is None:
        out.unresolved.append("auto-compact decision (logs `autocompact: tokens=`) not found")
    else:
        _decision(out, *decision)
    return out.levels(env_vars)


# --- anchors ---------------------------------------------------------------------------------


def _find(sources: Sequence[Source], needle: bytes) -> tuple[Source, int] | None:
    for s in sources:
        at = s.data.find(needle)
        if at >= 0:
            return s, at
    return None


def _function_around(data: bytes, at: int) -> tuple[str, bytes]:
    """The ``function NAME(...){...}`` enclosing ``at`` (a bounded, brace-matched slice)."""
    start = data.rfind(b"function ", max(0, at - _MAX_FN), at)
    if start < 0:
        return "?", data[max(0, at - 200) : at + 200]
    m = re.match(rb"function\s*(" + _ID + rb")?\s*\(", data[start : start + 200])
    name = m.group(1).decode() if m and m.group(1) else "?"
    return name, _braced(data, start)


def _function_named(source: Source, name: str) -> bytes | None:
    m = re.search(rb"function " + re.escape(name.encode()) + rb"\(", source.data)
    return _braced(source.data, m.start()) if m else None


def _braced(data: bytes, start: int) -> bytes:
    open_at = data.find(b"{", start, start + 400)
    if open_at < 0:
        return data[start : start + 400]
    depth = 0
    end = min(len(data), open_at + _MAX_FN)
    i = open_at
    while i < end:
        c = data[i]
        if c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return data[start : i + 1]
        elif c in (0x22, 0x27, 0x60):  # skip string literals (no nesting of templates needed)
            close = data.find(bytes([c]), i + 1, end)
            while close > 0 and data[close - 1] == 0x5C:
                close = data.find(bytes([c]), close + 1, end)
            if close < 0:
                break
            i = close
        i += 1
    return data[start:end]


def _resolve(source: Source, token: bytes, key: str, out: _Reading) -> None:
    text = token.decode()
    if re.fullmatch(_NUM.decode(), text):
        out.constants[key] = Value(_number(text), "literal", _base(source))
        return
    m = re.search(rb"(?:^|[\s,;{(])" + re.escape(token) + rb"=(" + _NUM + rb")[,;]", source.data)
    if m is None:
        out.unresolved.append(f"{key}: no `{text}=<number>` in {_base(source)}")
        return
    out.constants[key] = Value(_number(m.group(1).decode()), text, _base(source))


def _level_function(out: _Reading, source: Source, at: int) -> None:
    name, fn = _function_around(source.data, at)
    out.functions["level"] = f"{name}@{_base(source)}"
    first = re.search(rb"let (" + _ID + rb")=(?:" + _ID + rb"\?\?)?(" + _ID + rb")\(", fn)
    base = re.search(
        rb"(" + _ID + rb")=" + _ID + rb"\.enabled\?" + _ID + rb":" + _ID + rb",(" + _ID + rb")=\1-("
        + _ID + rb")",
        fn,
    )  # fmt: skip
    if base:
        _resolve(source, base.group(3), "warning_offset", out)
    else:
        out.unresolved.append("warning offset: no `base = enabled ? threshold : window` - N")
    block = re.search(
        rb"testBlockingOverride,.{0,160}?\?" + _ID + rb":" + _ID + rb"-(" + _ID + rb"),", fn
    )
    out.features["blocking_override"] = b"testBlockingOverride" in fn
    if block:
        _resolve(source, block.group(1), "blocking_offset", out)
    else:
        out.unresolved.append("blocking offset: no `override ?? window - N` in the level function")
    if first:
        thr = first.group(2).decode()
        out.functions["threshold"] = f"{thr}@{_base(source)}"
        body = _function_named(source, thr)
        m = re.search(rb"let " + _ID + rb"=" + _ID + rb"-(" + _ID + rb")", body or b"")
        if m:
            _resolve(source, m.group(1), "autocompact_offset", out)
        else:
            out.unresolved.append(f"auto-compact offset: no `window - N` in {thr}")
        out.features["pct_override"] = b"testPctOverride" in (body or b"")
    else:
        out.unresolved.append("threshold function: the level function calls none first")


def _precompute_default(out: _Reading, sources: Sequence[Source]) -> None:
    pat = re.compile(
        rb"\(\"tengu_\w+\",(" + _ID + rb")\);return typeof (" + _ID + rb")===\"number\"&&Number"
        rb"\.isFinite\(\2\)&&\2>=0&&\2<1\?\2:\1\}"
    )
    for s in sources:
        if b"precomputeBufferFraction" not in s.data:
            continue
        m = pat.search(s.data)
        if m:
            _resolve(s, m.group(1), "precompute_buffer_fraction", out)
            return
    out.unresolved.append("precompute buffer fraction: no remote-flag read with a [0,1) default")


def _decision(out: _Reading, source: Source, at: int) -> None:
    name, fn = _function_around(source.data, at)
    out.functions["autocompact_decision"] = f"{name}@{_base(source)}"
    out.features["count_adds_server_cleared"] = b"serverCleared" in fn
    eff = re.search(rb"effectiveWindow=\$\{(" + _ID + rb")\(", fn)
    if eff:
        ename = eff.group(1).decode()
        out.functions["effective_window"] = f"{ename}@{_base(source)}"
        body = _function_named(source, ename) or b""
        cap = re.search(rb"Math\.min\([^,()]*(?:\([^()]*\))?[^,()]*,(" + _ID + rb")\)", body)
        if cap:
            _resolve(source, cap.group(1), "reserve_cap", out)
        else:
            out.unresolved.append(f"output-reserve cap: no Math.min(maxOutput, CAP) in {ename}")
    else:
        out.unresolved.append("effective window: not named in the auto-compact log")
    guards = re.findall(rb"&&!(" + _ID + rb")\(", fn)
    configured_only = False
    for g in guards:
        body = _function_named(source, g.decode()) or b""
        if b'.source!=="auto"' in body and len(body) < 200:
            configured_only = True
    out.features["proactive_needs_configured_window"] = configured_only


def _base(source: Source) -> str:
    return source.name.rsplit("/", 1)[-1]


def _number(s: str) -> int | float:
    v = float(int(s, 16)) if s.lower().startswith("0x") else float(s)
    return int(v) if v.is_integer() else v
