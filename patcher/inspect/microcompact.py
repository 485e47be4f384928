"""Micro-compaction: which kind the query loop calls, and its constants.

The function is the one that reads ``DISABLE_MICROCOMPACT`` / emits ``"tengu_microcompact"``
(:mod:`patcher.callsite`), else the ``microcompact`` slot of the query-deps factory
``{callModel, microcompact, autocompact, ...}``. A *legacy* one clears old tool results:
``total - saved > TARGET``, ``ids.slice(-KEEP)``, ``... || saved < MIN_SAVING`` beside
``isAboveWarningThreshold``, ``TOOLS.has(block.name)``. A *stub* only returns its input; a
*time-based* one returns a helper's result, configured by ``{enabled, gapThresholdMinutes,
keepRecent}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from tree_sitter import Node

from patcher import callsite, jsparse
from patcher.inspect.finding import Finding, Notes, present
from patcher.inspect.jsconst import (
    Constant,
    Reader,
    Unresolved,
    arguments,
    member_call,
    name,
    op,
    text,
    walk,
)
from patcher.inspect.patterns import compares_type, image_and_divisor, object_with_key
from patcher.jsparse import ParsedFunction

Kind = Literal["legacy", "stub", "time-based"]


@dataclass(frozen=True)
class MicroCompaction(Finding):
    """``kind`` None: no micro-compaction function. The other fields are None when not read."""

    kind: Kind | None = None
    env_gate: bool | None = None  # reads DISABLE_MICROCOMPACT
    remote_kill_switch: bool | None = None  # tengu_cache_plum_violet
    clears_images: bool | None = None  # legacy only
    replacement: Literal["persisted", "cleared"] | None = None  # legacy only
    time_based_default_enabled: Any = None  # time-based only: the config's `enabled`

    def features(self) -> dict[str, Any]:
        return {
            "microcompact": self.kind,
            **present(
                mc_env_gate=self.env_gate,
                mc_remote_kill_switch=self.remote_kill_switch,
                mc_clears_images=self.clears_images,
                mc_replacement=self.replacement,
                time_based_default_enabled=self.time_based_default_enabled,
            ),
        }


def extract(r: Reader, found: callsite.Search) -> MicroCompaction:
    notes = Notes()
    fields: dict[str, Any] = {}
    try:
        _read(r, notes, fields, found)
    except Unresolved as e:
        notes.unresolved.append(str(e))
    return MicroCompaction(**fields, **notes.common())


def _read(r: Reader, notes: Notes, out: dict[str, Any], found: callsite.Search) -> None:
    legacy = None
    for fname in found.mc_functions:
        fn = r.function(fname)
        if fn is not None and legacy is None:
            legacy = fn
        if fn is not None and b"process.env.DISABLE_MICROCOMPACT" in r.body(fn):
            legacy = fn
            break
    factory, slot = _deps_factory(r)
    if factory:
        notes.functions["deps_factory"] = factory
    mc = legacy
    if slot and (mc is None or name(mc) != slot):
        slot_fn = r.function(slot)
        if mc is None:
            mc = slot_fn
        elif slot_fn is not None:
            notes.unresolved.append(
                f"micro-compaction: the deps slot {slot} is not the legacy {name(mc)}"
            )
    if mc is None:
        if found.mc_functions or slot:
            notes.unresolved.append("micro-compaction: function named but not parsable")
        return
    notes.functions["microcompact"] = name(mc)
    body = r.body(mc)
    env_gate = b"process.env.DISABLE_MICROCOMPACT" in body
    out["env_gate"] = env_gate
    out["remote_kill_switch"] = b'"tengu_cache_plum_violet"' in body
    kind = "legacy" if env_gate or b'"tengu_microcompact"' in body else _stub_or_time_based(r, mc)
    out["kind"] = kind
    if kind == "legacy":
        out["clears_images"] = compares_type(r, mc, "image", depth=0)
        out["replacement"] = (
            "persisted"
            if b"Tool result saved to" in body and b'"tengu_compact_mc_files"' not in body
            else "cleared"
        )
        _legacy_constants(r, notes, mc)
    elif kind == "time-based":
        _time_based_config(r, notes, out)


def _stub_or_time_based(r: Reader, mc: ParsedFunction) -> Kind:
    """``return reset(),{messages:q}`` only: stub; a returned helper result: time-based."""
    scope = r.scope(mc)
    for node in walk(mc.node):
        if node.type != "return_statement" or not node.named_children:
            continue
        arg = node.named_children[0]
        while arg.type == "sequence_expression":
            arg = arg.named_children[-1]
        arg = scope.follow(arg)
        if arg.type == "call_expression" or (
            arg.type == "identifier" and text(arg) not in scope.params
        ):
            return "time-based"
        if arg.type == "await_expression":
            return "time-based"
    return "stub"


def _legacy_constants(r: Reader, notes: Notes, mc: ParsedFunction) -> None:
    scope = r.scope(mc)
    target: Node | None = None
    keep: Node | None = None
    min_saving: Node | None = None
    tools: Node | None = None
    for node in walk(mc.node):
        t = node.type
        if target is None and t == "binary_expression" and op(node) in (">", "<="):
            # total - saved > TARGET (keep clearing), or its negation as a `continue` guard
            if op(scope.follow_field(node, "left")) == "-":
                right = scope.follow_field(node, "right")
                if right is not None and right.type == "ternary_expression":
                    right = right.child_by_field_name("alternative")  # manual ? it : DEFAULT
                elif right is not None and op(right) in ("??", "||"):  # manual ?? DEFAULT
                    right = right.child_by_field_name("right")
                target = right
        elif keep is None and member_call(node, ("slice",)):
            args = arguments(node)
            if (
                len(args) == 1
                and args[0].type == "unary_expression"
                and text(args[0].child_by_field_name("operator")) == "-"
            ):
                keep = args[0].child_by_field_name("argument")
        if tools is None and member_call(node, ("has", "includes")):
            tools = _tools_set(node, scope.knows)
        if (
            min_saving is None
            and t == "member_expression"
            and text(node.child_by_field_name("property")) == "isAboveWarningThreshold"
        ):
            min_saving = _min_saving(node, mc, scope)
    for key, found in (("mc_target", target), ("mc_keep", keep), ("mc_min_saving", min_saving)):
        if found is None:
            notes.unresolved.append(f"{key}: its use was not found in {name(mc)}")
        else:
            notes.set(key, partial(r.const, found, mc, key))
    if tools is None:
        notes.unresolved.append(f"mc_tools: no `TOOLS.has(block.name)` in {name(mc)}")
    else:
        tools_node = tools

        def get_tools() -> Constant:
            c = r.const(tools_node, mc, "mc_tools")
            if not isinstance(c.value, list) or not all(isinstance(x, str) for x in c.value):
                raise Unresolved(f"mc_tools: {c.via} is not a list of names")
            return c

        notes.set("mc_tools", get_tools)
    img, div = image_and_divisor(r, mc, depth=3)
    if img is not None:
        notes.constants["mc_image_tokens"] = img
    if div is not None:
        notes.constants["mc_chars_per_token"] = div


def _tools_set(call: Node, local: Any) -> Node | None:
    """``TOOLS.has(block.name)`` (or ``.includes``) with TOOLS a module name → TOOLS."""
    f = call.child_by_field_name("function")
    obj = f.child_by_field_name("object") if f is not None else None
    args = call.child_by_field_name("arguments")
    named = args.named_children if args is not None else []
    if (
        len(named) == 1
        and named[0].type == "member_expression"
        and text(named[0].child_by_field_name("property")) == "name"
        and obj is not None
        and obj.type == "identifier"
        and not local(text(obj))
    ):
        return obj
    return None


def _min_saving(flag: Node, mc: ParsedFunction, scope: Any) -> Node | None:
    """``!warning(...).isAboveWarningThreshold || saved < MIN_SAVING`` → MIN_SAVING."""
    cur = flag.parent
    while (
        cur is not None
        and cur != mc.node
        and not (cur.type == "binary_expression" and op(cur) == "||")
    ):
        cur = cur.parent
    if cur is None or cur == mc.node:
        return None
    cmp = scope.follow_field(cur, "right")
    return cmp.child_by_field_name("right") if cmp is not None and op(cmp) == "<" else None


def _time_based_config(r: Reader, notes: Notes, out: dict[str, Any]) -> None:
    """The default of the time-based flag: ``{enabled, gapThresholdMinutes, keepRecent}``."""
    obj = object_with_key(r, b"gapThresholdMinutes:")
    if obj is None:
        notes.unresolved.append(
            "time-based config object {gapThresholdMinutes, keepRecent} not found"
        )
        return
    value, where = obj
    for k_src, k_dst in (("keepRecent", "mc_keep"), ("gapThresholdMinutes", "mc_gap_minutes")):
        if k_src in value:
            notes.constants[k_dst] = Constant(value[k_src], f"{{{k_src}}}", where)
    if "enabled" in value:
        out["time_based_default_enabled"] = value["enabled"]


def _deps_factory(r: Reader) -> tuple[str | None, str | None]:
    """``function F(){return{callModel:…,microcompact:MC,autocompact:…}}`` → (F, MC)."""
    for hit in jsparse.iter_find(r.data, b"microcompact:"):
        if hit > 0 and jsparse.is_ident_byte(r.data[hit - 1]):
            continue
        fn = r.enclosing(hit)
        if fn is None:
            continue
        key = fn.node_at(hit, hit + len("microcompact"))
        pair = key.parent if key is not None else None
        obj = pair.parent if pair is not None else None
        if pair is None or pair.type != "pair" or obj is None or obj.type != "object":
            continue
        keys = {text(p.child_by_field_name("key")) for p in obj.named_children if p.type == "pair"}
        value = pair.child_by_field_name("value")
        if (
            {"callModel", "microcompact", "autocompact"} <= keys
            and value is not None
            and value.type == "identifier"
        ):
            return name(fn), text(value)
    return None, None
