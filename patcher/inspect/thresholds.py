"""The auto-compaction thresholds, read from the warning-state function.

The anchor is the function returning ``{percentLeft, isAboveWarningThreshold,
isAboveErrorThreshold, isAboveAutoCompactThreshold[, isAtBlockingLimit]}``. Each flag's value
is followed through the function's locals to ``tokens >= base - OFFSET`` (or ``base * RATIO``
in the ratio era), and ``OFFSET`` to its ``NAME=value`` declaration. The auto-compact flag
leads to the **threshold** function (``effectiveWindow - 13000``,
``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``) and its left operand to the **effective window**, whose
``Math.min(maxOutput, CAP)`` is the output-reserve cap. The **blocking limit** is
``base - 3000`` where base is the effective or the raw window.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from tree_sitter import Node

from patcher import jsparse
from patcher.inspect.finding import Finding, Notes, present
from patcher.inspect.jsconst import (
    Constant,
    Reader,
    Scope,
    Unresolved,
    callee,
    env_read,
    name,
    op,
    text,
    walk,
)
from patcher.inspect.patterns import last_return, limit, return_object
from patcher.jsparse import ParsedFunction

Era = Literal["offset", "ratio", "none", "unknown"]


@dataclass(frozen=True)
class Thresholds(Finding):
    """``era``: "offset" (``window - OFFSET``), "ratio" (``window * RATIO``, before 1.0.80),
    "none" (no warning-state function) or "unknown". The booleans are None when not read."""

    era: Era = "unknown"
    blocking_override: bool | None = None  # CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE in warning state
    disable_compact_in_enabled: bool | None = None
    disable_auto_compact_in_enabled: bool | None = None
    disable_compact_in_dispatcher: bool | None = None
    pct_override: bool | None = None  # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE in the threshold function
    has_blocking_limit: bool | None = None  # isAtBlockingLimit in the warning state
    blocking_base: Literal["effective", "window"] | None = None

    def features(self) -> dict[str, Any]:
        out = present(
            blocking_override_in_warning_state=self.blocking_override,
            disable_compact_in_enabled=self.disable_compact_in_enabled,
            disable_auto_compact_in_enabled=self.disable_auto_compact_in_enabled,
            disable_compact_in_dispatcher=self.disable_compact_in_dispatcher,
            pct_override_in_threshold=self.pct_override,
            blocking_base=self.blocking_base,
        )
        if self.has_blocking_limit is False:
            out["blocking_base"] = None  # read: there is no blocking limit
        return out


def extract(r: Reader) -> Thresholds:
    notes = Notes()
    fields: dict[str, Any] = {}
    try:
        _read(r, notes, fields)
    except Unresolved as e:
        notes.unresolved.append(str(e))
    return Thresholds(**fields, **notes.common())


def _read(r: Reader, notes: Notes, out: dict[str, Any]) -> None:
    w = _find_warning_state(r)
    if w is None:
        out["era"] = "none"
        raise Unresolved(
            "warning-state function ({percentLeft, isAboveWarningThreshold, ...}) "
            "not found: no auto-compaction thresholds"
        )
    notes.functions["warning_state"] = name(w)
    scope = r.scope(w)
    flags = return_object(w)
    out["blocking_override"] = b"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE" in r.body(w)

    # warning and error: tokens >= base - OFFSET (offset era) or base * RATIO (ratio era)
    for flag, key in (("isAboveWarningThreshold", "warning"), ("isAboveErrorThreshold", "error")):
        lim = limit(scope, flags.get(flag))
        if lim is None:
            notes.unresolved.append(f"{key}: the {flag} value is not `tokens >= limit`")
            continue
        kind = {"-": "offset", "*": "ratio"}.get(op(lim))
        if kind is None:
            notes.unresolved.append(
                f"{key}: limit {text(lim)[:60]!r} is neither base-offset nor base*ratio"
            )
            continue
        notes.set(f"{key}_{kind}", partial(r.const, lim.child_by_field_name("right"), w, key))

    # auto-compact: enabled() && tokens >= threshold
    ac = flags.get("isAboveAutoCompactThreshold")
    ac = scope.follow(ac) if ac is not None else None
    enabled = None
    if ac is not None and op(ac) == "&&":
        left = scope.follow_field(ac, "left")
        enabled = callee(left)
        ac = ac.child_by_field_name("right")
    if enabled:
        notes.functions["autocompact_enabled"] = enabled
        en = r.function(enabled)
        if en is not None:
            body = r.body(en)
            out["disable_compact_in_enabled"] = env_read(body, "DISABLE_COMPACT")
            out["disable_auto_compact_in_enabled"] = env_read(body, "DISABLE_AUTO_COMPACT")
    # DISABLE_COMPACT may also (2.0.30-2.0.64: only) be read by the auto-compact dispatcher, the
    # function that returns {wasCompacted} / {compactionResult}
    dispatcher = _dispatcher_reading(r, "DISABLE_COMPACT", exclude=enabled)
    if dispatcher:
        notes.functions["autocompact_dispatcher"] = dispatcher
    out["disable_compact_in_dispatcher"] = dispatcher is not None
    lim = limit(scope, ac)
    threshold_fn = None
    if lim is None:
        notes.unresolved.append(
            "autocompact: the isAboveAutoCompactThreshold value is not `tokens >= limit`"
        )
    elif lim.type == "call_expression":
        threshold_fn = callee(lim)
    effective_fn = None
    if lim is not None and op(lim) in ("-", "*"):  # threshold computed inline: window() - OFFSET
        effective_fn = _threshold_expr(r, notes, out, lim, w, scope)
    t = _named(r, notes, "threshold", threshold_fn, "threshold")
    if t is not None:
        out["pct_override"] = b"process.env.CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in r.body(t)
        tscope = r.scope(t)
        ret = last_return(t)
        ret = tscope.follow(ret) if ret is not None else None
        if ret is not None and ret.type == "ternary_expression":
            ret = tscope.follow_field(ret, "alternative")
        if ret is not None and op(ret) in ("-", "*"):
            effective_fn = _threshold_expr(r, notes, out, ret, t, tscope)
        else:
            notes.unresolved.append(
                f"autocompact: {threshold_fn} does not return `window - offset`"
            )
    if out.get("era", "unknown") == "unknown" and "autocompact_offset" in notes.constants:
        out["era"] = "offset"

    # the effective window and its output-reserve cap
    e = _named(r, notes, "effective_window", effective_fn, "reserve cap")
    if e is not None:
        notes.constants["reserve_cap"] = _reserve_cap(r, e)

    # blocking: tokens >= (override || base - OFFSET)
    out["has_blocking_limit"] = "isAtBlockingLimit" in flags
    if "isAtBlockingLimit" in flags:
        _blocking(r, notes, out, w, scope, flags["isAtBlockingLimit"], effective_fn)


def _named(r: Reader, notes: Notes, role: str, fn: str | None, what: str) -> ParsedFunction | None:
    """The function ``fn`` that plays ``role`` (recorded in ``notes``); None when there is no
    name, or when no function has it (noted as unresolved for ``what``)."""
    if not fn:
        return None
    notes.functions[role] = fn
    found = r.function(fn)
    if found is None:
        notes.unresolved.append(f"{what}: function {fn} not found")
    return found


def _blocking(
    r: Reader,
    notes: Notes,
    out: dict[str, Any],
    w: ParsedFunction,
    scope: Scope,
    flag: Node,
    effective_fn: str | None,
) -> None:
    lim = limit(scope, flag)
    for _ in range(4):
        if lim is None:
            break
        if lim.type == "ternary_expression":
            lim = scope.follow_field(lim, "alternative")
        elif op(lim) == "||":
            lim = scope.follow_field(lim, "right")
        else:
            break
    if lim is None or op(lim) != "-":
        notes.unresolved.append(
            "blocking: the isAtBlockingLimit value is not `tokens >= base - offset`"
        )
        return
    right = lim.child_by_field_name("right")
    notes.set("blocking_offset", lambda: r.const(right, w, "blocking"))
    base = callee(scope.follow_field(lim, "left"))
    if base:
        notes.functions["blocking_base"] = base
        out["blocking_base"] = "effective" if effective_fn and base == effective_fn else "window"


def _threshold_expr(
    r: Reader, notes: Notes, out: dict[str, Any], expr: Node, fn: ParsedFunction, scope: Scope
) -> str | None:
    """``window() - OFFSET`` (offset era) or ``window() * RATIO`` (ratio era): record the
    constant and the era, and return the name of the function giving the window."""
    ratio = op(expr) == "*"
    out["era"] = "ratio" if ratio else "offset"
    notes.set(
        "autocompact_ratio" if ratio else "autocompact_offset",
        lambda: r.const(expr.child_by_field_name("right"), fn, "autocompact"),
    )
    return callee(scope.follow_field(expr, "left"))


def _reserve_cap(r: Reader, e: ParsedFunction) -> Constant:
    """``Math.min(maxOutput(model), CAP)`` in the effective-window function; none = full reserve."""
    for node in walk(e.node):
        if (
            node.type != "call_expression"
            or text(node.child_by_field_name("function")) != "Math.min"
        ):
            continue
        consts = []
        args = node.child_by_field_name("arguments")
        for a in args.named_children if args is not None else []:
            if a.type != "comment":
                with contextlib.suppress(Unresolved):
                    consts.append(r.const(a, e, "reserve cap"))
        if consts:
            return consts[-1]
    return Constant(None, "no Math.min(maxOutput, cap)", name(e))


def _find_warning_state(r: Reader) -> ParsedFunction | None:
    for hit in jsparse.iter_find(r.data, b"isAboveAutoCompactThreshold:"):
        fn = r.enclosing(hit)
        if fn is not None and "percentLeft" in return_object(fn):
            return fn
    return None


def _dispatcher_reading(r: Reader, env: str, exclude: str | None) -> str | None:
    """The function that reads ``process.env.<env>`` and returns ``{compactionResult}`` or
    ``{wasCompacted}`` (the auto-compact dispatcher), if any."""
    needle = b"process.env." + env.encode()
    for hit in jsparse.iter_find(r.data, needle):
        after = hit + len(needle)
        if after < len(r.data) and jsparse.is_ident_byte(r.data[after]):
            continue
        fn = r.enclosing(hit)
        if fn is None or name(fn) == exclude:
            continue
        body = r.body(fn)
        if b"compactionResult:" in body or b"wasCompacted:" in body:
            return name(fn)
    return None
