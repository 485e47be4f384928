"""Which lever a native build offers (patcher.native.levers), read by meaning from synthetic
sources shaped like the real builds (our own names and text, never Claude Code's code)."""

from __future__ import annotations

import pytest

from patcher.native.app import Source
from patcher.native.levers import decide, extract

HEAD = b"// @bun @bytecode\n// Version: 2.1.400\n"

# 2.1.113-like: the beta switch read, then and-ed with the build's false; no edit builder
SWITCH_OFF = (
    b"function betas(m){let a=[],f=on(process.env.USE_API_CONTEXT_MANAGEMENT)&&!1;return a}"
)
SWITCH_OFF_PLAIN = b"let r=env.USE_API_CONTEXT_MANAGEMENT&&!1,o=x(e.model);"
SWITCH_READ = b"let r=on(process.env.USE_API_CONTEXT_MANAGEMENT),o=x(e.model);"
# a bundled document quoting the edit inside JSON: not code that builds it
DOC = (
    b'var guide="context_management={\\"edits\\": [{\\"type\\": \\"clear_tool_uses_20250919\\"}]}";'
)
# 2.1.330-like idle clearing: the edit builder, the mode function, the idle constants
IDLE = (
    b'var Fl="tengu_some_flag",Kp=12,Cfg={minIdleSeconds:3900,keepToolUses:Kp,clearAtLeast:1};'
    b'function mode(){let{value:v,source:s}=flagWithSource(Fl,"off");if(s==="fallback")return"unknown";'
    b'return v==="on"||v==="shadow"?v:"off"}'
    b'function edit(p,c){return{type:"clear_tool_uses_20250919",trigger:{type:"tool_uses",'
    b'value:p.t},keep:{type:"tool_uses",value:p.k}}}'
)
CLIENT_NULL = (
    b"class Flags{getEnvironmentOverrides(){return null}hasOverride(e){return!1}}"
    b"function deps(){return{readEnvironmentOverrides:()=>env.CLAUDE_INTERNAL_FC_OVERRIDES}}"
)
CLIENT_DEAD = (
    b"function overrides(){if(done)return ov;return done=!0,ov;"
    b"let e=process.env.CLAUDE_INTERNAL_FC_OVERRIDES;if(!e)return ov;return JSON.parse(e)}"
)
CLIENT_LIVE = (
    b"class Flags{getEnvironmentOverrides(){let e=this.deps.readEnvironmentOverrides();"
    b"return e?JSON.parse(e):null}}"
    b"function deps(){return{readEnvironmentOverrides:()=>env.CLAUDE_INTERNAL_FC_OVERRIDES}}"
)
LISTED_ONLY = b'var allow=new Set(["CLAUDE_CONFIG_DIR","CLAUDE_INTERNAL_FC_OVERRIDES"]);'


def srcs(*chunks: bytes) -> list[Source]:
    return [Source(f"/$bunfs/root/chunk-{i:04d}.js", HEAD + c) for i, c in enumerate(chunks)]


def test_first_native_builds_never_build_the_edit() -> None:
    f = extract(srcs(SWITCH_OFF, DOC))
    assert f.builds_edit is False
    assert f.switches == {"USE_API_CONTEXT_MANAGEMENT": "compiled-off"}
    assert f.idle_flag is None and f.flag_overrides == "absent"
    lever = decide(f, "2.1.113")
    assert lever.name == "gateway"
    assert "never builds a clear_tool_uses_20250919 edit" in lever.why
    assert "USE_API_CONTEXT_MANAGEMENT compiled off" in lever.why
    assert "ctxpatch run -- claude" in lever.hint


@pytest.mark.parametrize(
    ("code", "state"),
    [(SWITCH_OFF, "compiled-off"), (SWITCH_OFF_PLAIN, "compiled-off"), (SWITCH_READ, "read")],
    ids=["wrapped", "plain", "read"],
)
def test_switch_states(code: bytes, state: str) -> None:
    assert extract(srcs(code)).switches == {"USE_API_CONTEXT_MANAGEMENT": state}


def test_compiled_off_wins_over_a_read_elsewhere() -> None:
    f = extract(srcs(SWITCH_READ, SWITCH_OFF))
    assert f.switches == {"USE_API_CONTEXT_MANAGEMENT": "compiled-off"}


def test_idle_clearing_found_in_the_module_that_builds_the_edit() -> None:
    f = extract(srcs(LISTED_ONLY, IDLE, CLIENT_NULL))
    assert f.builds_edit is True
    assert (f.idle_flag, f.idle_min_seconds, f.idle_keep_tool_uses) == ("tengu_some_flag", 3900, 12)
    assert f.flag_overrides == "compiled-out"
    lever = decide(f, "2.1.400")
    assert lever.name == "gateway"
    assert "only after idle (after 3900 s idle, keeping 12)" in lever.why
    assert "remote flag tengu_some_flag" in lever.why and "compiled out" in lever.why


def test_idle_pieces_elsewhere_than_the_builder_are_not_claimed() -> None:
    builder, rest = IDLE.split(b"function edit", 1)
    f = extract(srcs(builder, b"function edit" + rest))
    assert f.builds_edit is True and f.idle_flag is None and f.idle_min_seconds is None


def test_doc_quotes_do_not_count_as_a_builder() -> None:
    assert extract(srcs(DOC)).builds_edit is False


@pytest.mark.parametrize(
    ("chunks", "state"),
    [
        ((CLIENT_NULL,), "compiled-out"),
        ((CLIENT_DEAD,), "compiled-out"),
        ((CLIENT_LIVE,), "read"),
        ((LISTED_ONLY,), "absent"),
        ((), "absent"),
        ((CLIENT_NULL, CLIENT_LIVE), "read"),  # a live read anywhere is reported
    ],
    ids=["null-method", "dead-return", "live", "listed", "none", "mixed"],
)
def test_flag_override_states(chunks: tuple[bytes, ...], state: str) -> None:
    assert extract(srcs(IDLE, *chunks)).flag_overrides == state


def test_a_live_override_map_is_reported_not_used() -> None:
    lever = decide(extract(srcs(IDLE, CLIENT_LIVE)), "2.1.500")
    assert lever.name == "gateway"
    assert "CLAUDE_INTERNAL_FC_OVERRIDES is read by this build but not measured" in lever.why
