"""Which lever makes a native build clear old tool results: read from the binary, by meaning.

A *lever* is what ctxpatch can do on a native install (it never writes into the binary) so that
requests carry ``clear_tool_uses_20250919``. Two kinds exist in principle:

* **settings**: an environment variable (written into the ``env`` block of ``settings.json``)
  that makes Claude Code build the edit itself, as 2.0.x's ``USE_API_CLEAR_TOOL_RESULTS`` did;
* **gateway**: ``ctxpatch run -- claude …`` / ``ctxpatch gateway``, which adds the edit to every
  request on the way out (docs/gateway.md). Always possible.

:func:`extract` reads the facts a decision needs from Claude Code's JavaScript (pure; the
sources come from :func:`patcher.native.app.read_app`); :func:`decide` turns them into a
:class:`Lever`. The anchors are meanings, never minified names:

* **the edit builder**: an object literal ``{type:"clear_tool_uses_20250919",trigger:…`` (or
  ``keep:``/``clear_at_least:``) in code. The bundled API documents quote the same type inside
  JSON (``"type": "clear_tool_uses_20250919"``) and do not count.
* **compiled-off switches**: ``<env>.USE_API_CONTEXT_MANAGEMENT&&!1`` (2.1.112-2.1.330: the
  variable is still read, the build's constant ``false`` wins).
* **idle clearing** (2.1.330's "tool-result clearing after idle"): the mode function
  ``{value,source}=F(FLAG,"off"); if(source==="fallback")return"unknown"; …"on"||…"shadow"``
  names its remote flag; ``{minIdleSeconds:N,keepToolUses:K,…}`` gives the idle time and keep.
* **flag overrides from the environment** (``CLAUDE_INTERNAL_FC_OVERRIDES``, the feature-flag
  client's override map): *compiled out* when the client's ``getEnvironmentOverrides(){return
  null}`` (2.1.330) or the function reading the variable returns before it
  (``return X=!0,Y;let e=process.env.CLAUDE_INTERNAL_FC_OVERRIDES``, 2.1.217); *read* when a
  read of the variable is found in neither shape; *absent* otherwise (2.1.113).

What was measured (docs/native.md "Native installs", real linux-x64 builds, code read and run offline):
no published native build has a sound settings lever. 2.1.113 never builds the edit; 2.1.217
neither (its only occurrences are in bundled documents); 2.1.330 builds it only for its idle
clearing, whose mode comes from the remote flag ``tengu_jiggly_blossom``, and the override map
that could set it from the environment is compiled out (``getEnvironmentOverrides(){return
null}``), so a ``settings.json`` ``env`` entry cannot reach it (the offline runs: README
"Native installs"). The lever is the gateway for every native version; a build whose override
map is read again is reported (``flag_overrides: "read"``), never written to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from patcher.native.app import Source

_ID = rb"[\w$]+"
EDIT = b"clear_tool_uses_20250919"
_BUILDER = re.compile(
    rb'\{type:"clear_tool_uses_20250919",(?:trigger|keep|clear_at_least):'
)  # at 7 before
SWITCHES = ("USE_API_CLEAR_TOOL_RESULTS", "USE_API_CLEAR_TOOL_USES", "USE_API_CONTEXT_MANAGEMENT")
OVERRIDES_ENV = "CLAUDE_INTERNAL_FC_OVERRIDES"
_MODE = re.compile(
    rb"\{value:(" + _ID + rb"),source:(" + _ID + rb")\}=" + _ID + rb"\((" + _ID + rb'|"[\w-]+"),'
    rb'"off"\);if\(\2==="fallback"\)return"unknown";return \1==="on"\|\|\1==="shadow"'
)
_IDLE = re.compile(rb"\{minIdleSeconds:(\d+),keepToolUses:(" + _ID + rb")")
_OVERRIDES_NULL = b"getEnvironmentOverrides(){return null}"
_OVERRIDES_DEAD = re.compile(
    rb"return " + _ID + rb"=!0," + _ID + rb";let " + _ID + rb"=(?:process\.env|" + _ID + rb")\."
    rb"CLAUDE_INTERNAL_FC_OVERRIDES\b"
)
# the client's method with a body other than `return null`; a variable read into a local
_OVERRIDES_LIVE_METHOD = re.compile(rb"getEnvironmentOverrides\(\)\{(?!return null\})")
_OVERRIDES_LET = re.compile(
    rb"let " + _ID + rb"=(?:process\.env|" + _ID + rb")\.CLAUDE_INTERNAL_FC_OVERRIDES\b"
)

GATEWAY_HINT = "run `ctxpatch run -- claude …`, or point an SDK at `ctxpatch gateway`"


@dataclass(frozen=True)
class LeverFacts:
    """What a native build does about server-side tool-result clearing."""

    builds_edit: bool  # the code builds a clear_tool_uses_20250919 edit
    switches: dict[str, str] = field(default_factory=dict)  # env var -> "compiled-off" | "read"
    idle_flag: str | None = None  # the remote flag that switches idle clearing
    idle_min_seconds: int | None = None
    idle_keep_tool_uses: int | None = None
    flag_overrides: str = "absent"  # CLAUDE_INTERNAL_FC_OVERRIDES: absent | compiled-out | read

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Lever:
    name: str  # "gateway": the only lever any published native build has (module docstring)
    why: str  # one sentence: why this lever, read from the binary
    hint: str  # what the user does

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def extract(sources: Sequence[Source]) -> LeverFacts:
    builds = False
    switches: dict[str, str] = {}
    idle_flag: str | None = None
    idle: tuple[int, int | None] | None = None
    live = dead = False  # the flag client's environment overrides
    for s in sources:  # three scans of every module; the rest only where these hit
        data = s.data
        here = any(_BUILDER.match(w) for w in _windows(data, EDIT, 7, 40))
        builds = builds or here
        for w in _windows(data, b"USE_API_C", 40, 30):
            name = next((n for n in SWITCHES if n.encode() in w), None)
            if name is None:
                continue
            if re.search(rb"\." + name.encode() + rb"\)?&&!1(?![\w$])", w):
                switches[name] = "compiled-off"  # read, then and-ed with the build's false
            elif re.search(rb"(?:process\.env|" + _ID + rb")\." + name.encode() + rb"\b", w):
                switches.setdefault(name, "read")
        if here and idle_flag is None:  # the idle clearing lives with its edit builder
            for w in _windows(data, b'==="fallback")return"unknown"', 120, 60):
                m = _MODE.search(w)
                if m:
                    idle_flag = _string_of(data, m.group(3))
                    break
        if here and idle is None:
            for w in _windows(data, b"{minIdleSeconds:", 0, 80):
                m = _IDLE.match(w)
                if m:
                    idle = (int(m.group(1)), _int_of(data, m.group(2)))
                    break
        reads = _windows(data, b"CLAUDE_INTERNAL_FC_OVERRIDES", 80, 30)
        if not reads:
            continue
        dead = dead or _OVERRIDES_NULL in data  # the client's method, in the module read from
        for w in _windows(data, b"getEnvironmentOverrides(){", 0, 40):
            live = live or bool(_OVERRIDES_LIVE_METHOD.match(w))
        for w in reads:
            if _OVERRIDES_DEAD.search(w):
                dead = True
            elif _OVERRIDES_LET.search(w):
                live = True
    return LeverFacts(
        builds_edit=builds,
        switches=switches,
        idle_flag=idle_flag,
        idle_min_seconds=idle[0] if idle else None,
        idle_keep_tool_uses=idle[1] if idle else None,
        flag_overrides="read" if live else "compiled-out" if dead else "absent",
    )


def _windows(data: bytes, needle: bytes, before: int, after: int) -> list[bytes]:
    """The bytes around each occurrence of ``needle`` (regexes run on these, not on 66 MB)."""
    out = []
    at = data.find(needle)
    while at >= 0:
        out.append(data[max(0, at - before) : at + len(needle) + after])
        at = data.find(needle, at + 1)
    return out


def _string_of(data: bytes, token: bytes) -> str | None:
    if token.startswith(b'"'):
        return token.strip(b'"').decode()
    m = re.search(rb"(?:^|[\s,;{(])" + re.escape(token) + rb'="([\w-]+)"', data)
    return m.group(1).decode() if m else None


def _int_of(data: bytes, token: bytes) -> int | None:
    if token.isdigit():
        return int(token)
    m = re.search(rb"(?:^|[\s,;{(])" + re.escape(token) + rb"=(\d+)[,;]", data)
    return int(m.group(1)) if m else None


def decide(facts: LeverFacts, version: str | None) -> Lever:
    """The cheapest sound lever for a build with these facts: the gateway, with the reason.

    A settings lever (an ``env`` entry in ``settings.json``) would come first, but only once
    measured to work offline in a real binary; none has been (module docstring), so there is
    no writer for one either: ``apply`` on a native install writes nothing."""
    return Lever("gateway", why=_why_gateway(facts, version), hint=GATEWAY_HINT)


def _why_gateway(facts: LeverFacts, version: str | None) -> str:
    v = f"Claude Code {version}" if version else "this build"
    if not facts.builds_edit:
        off = [k for k, s in facts.switches.items() if s == "compiled-off"]
        return f"no in-binary switch: {v} never builds a clear_tool_uses_20250919 edit" + (
            f" ({', '.join(off)} compiled off)" if off else ""
        )
    if facts.idle_flag:
        idle = (
            f" (after {facts.idle_min_seconds} s idle, keeping {facts.idle_keep_tool_uses})"
            if facts.idle_min_seconds
            else ""
        )
        reach = {
            "compiled-out": f"its environment override ({OVERRIDES_ENV}) is compiled out",
            "read": f"{OVERRIDES_ENV} is read by this build but not measured as a lever",
            "absent": "no environment variable or setting sets it",
        }[facts.flag_overrides]
        return (
            f"no in-binary switch: {v} clears tool results itself only after idle{idle}, "
            f"switched by the remote flag {facts.idle_flag}; {reach}"
        )
    return f"no in-binary switch: {v} builds the edit, but no known setting turns it on"
