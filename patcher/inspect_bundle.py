"""``ctxpatch inspect``: what a ``cli.js`` really does about compaction, read by meaning.

Pure: ``inspect(data)`` takes the bytes of a ``cli.js`` and returns a :class:`Report`. No I/O.

Every constant is reached through the code that uses it, never by searching for its value (20000
is the warning offset, the error offset, the output-reserve cap and the micro-compaction minimum
saving all at once). The anchors, each a meaning rather than a minified name
(``shared/research/versions.md`` §7.1):

* **warning state**: the function returning ``{percentLeft, isAboveWarningThreshold,
  isAboveErrorThreshold, isAboveAutoCompactThreshold[, isAtBlockingLimit]}``. Each flag's value is
  followed through the function's locals to ``tokens >= base - OFFSET`` (or ``base * RATIO`` in
  the ratio era), and ``OFFSET`` to its ``NAME=value`` declaration.
* **threshold**: the function the auto-compact flag compares with (``effectiveWindow - 13000``,
  ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``); its left operand calls the **effective window** function,
  whose ``Math.min(maxOutput, CAP)`` is the output-reserve cap.
* **blocking limit**: ``base - 3000`` where base is the effective window or the raw window.
* **micro-compaction**: the function that reads ``DISABLE_MICROCOMPACT`` / emits
  ``"tengu_microcompact"`` (:mod:`patcher.callsite`), else the ``microcompact`` slot of the query-deps
  factory ``{callModel, microcompact, autocompact, ...}``. Legacy constants come from its body:
  ``total - saved > TARGET``, ``ids.slice(-KEEP)``, ``... || saved < MIN_SAVING`` beside
  ``isAboveWarningThreshold``, ``TOOLS.has(block.name)``.
* **token estimate**: the message-level estimator (iterates ``message.content``; ``x4/3`` when it
  ends with ``Math.ceil(n*1.3333333333333333)``), its image constant and ``s.length/4`` divisor.
* **session memory**: the config object ``{minTokens, minTextBlockMessages, maxTokens}``.

Only functions around those anchors are parsed (windowed tree-sitter parses, see
:mod:`patcher.jsparse`): never the whole file.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from tree_sitter import Node

from patcher import callsite, jsparse
from patcher.bundle import version_of
from patcher.jsparse import FUNCTION_TYPES, ParsedFunction
from patcher.markers import sha256

ENV_VARS = (
    "DISABLE_COMPACT",
    "DISABLE_AUTO_COMPACT",
    "DISABLE_MICROCOMPACT",
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
    "CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    "CLAUDE_CODE_MAX_CONTEXT_TOKENS",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "ENABLE_CLAUDE_CODE_SM_COMPACT",
    "DISABLE_CLAUDE_CODE_SM_COMPACT",
    "CLAUDE_CODE_DISABLE_1M_CONTEXT",
    "USE_API_CONTEXT_MANAGEMENT",
)

_DECL = frozenset({"function_declaration", "generator_function_declaration"})
_MAX_FOLLOW = 12
_MAX_EXPR = 4096
_MAX_DECLARATIONS = 24  # more `NAME=` than this: a local name, not a module constant
_MAX_VISITS = 48  # functions parsed while looking for an image constant / chars divisor
_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)$")


class Unresolved(Exception):
    """An expression that is not a compile-time constant (or too far away to follow)."""


@dataclass
class Constant:
    """One resolved number or list, and how it was reached."""

    value: Any
    via: str  # the identifier it was declared as, or "literal"
    fn: str  # the anchor function it was read in

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "via": self.via, "fn": self.fn}


@dataclass
class Drift:
    field: str
    file: Any
    profile: Any

    def __str__(self) -> str:
        return f"{self.field}: file {self.file!r} != profile {self.profile!r}"


@dataclass
class Report:
    version: str | None
    sha256: str
    size: int
    shape: str | None = None  # call-site shape of the query loop's MC call (S0..S6)
    call_site: dict[str, Any] = field(default_factory=dict)
    locate_problem: str = ""  # why no single call site, when there is none
    era: str = "unknown"  # "offset" | "ratio" | "none" (no auto-compact found)
    functions: dict[str, str] = field(default_factory=dict)  # role -> minified name
    constants: dict[str, Constant] = field(default_factory=dict)
    features: dict[str, Any] = field(default_factory=dict)
    env_vars: dict[str, bool] = field(default_factory=dict)
    profile: str | None = None  # the engine profile compared with, "1.0.80" ...
    profile_range: str | None = None
    profile_problem: str = ""  # why no profile was compared
    drift: list[Drift] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)  # profile fields compared
    unresolved: list[str] = field(default_factory=list)  # what could not be read, and why

    def value(self, name: str) -> Any:
        c = self.constants.get(name)
        return None if c is None else c.value

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["constants"] = {k: v.to_json() for k, v in self.constants.items()}
        d["drift"] = [asdict(x) for x in self.drift]
        return d


# ------------------------------------------------------------------------------ the reader


class _Reader:
    """Function lookup, local dataflow and constant evaluation over one file."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.index = jsparse.FunctionIndex(data)
        self._functions: dict[str, ParsedFunction | None] = {}
        self._globals: dict[str, Any] = {}
        self._scopes: dict[int, _Scope] = {}

    # --- functions ---------------------------------------------------------------------

    def function(self, name: str) -> ParsedFunction | None:
        """The (first parsable) ``function NAME(`` declaration in the file."""
        if name in self._functions:
            return self._functions[name]
        found = None
        needle = b"function " + name.encode() + b"("
        for hit in jsparse.iter_find(self.data, needle):
            if hit > 0 and jsparse.is_ident_byte(self.data[hit - 1]):
                continue
            start = hit - 6 if self.data[max(0, hit - 6) : hit] == b"async " else hit
            found = self.index.at(start, _DECL)
            if found is not None:
                break
        self._functions[name] = found
        return found

    def enclosing(self, offset: int) -> ParsedFunction | None:
        return self.index.enclosing(offset, b"function", _DECL)

    def scope(self, fn: ParsedFunction) -> _Scope:
        key = fn.start
        if key not in self._scopes:
            self._scopes[key] = _Scope(fn)
        return self._scopes[key]

    # --- constants ---------------------------------------------------------------------

    def const(self, node: Node | None, fn: ParsedFunction, role: str) -> Constant:
        """The constant value of ``node`` (a literal, or a chain of locals ending in one, or a
        module-level ``NAME=value``)."""
        if node is None:
            raise Unresolved(f"{role}: nothing to read")
        scope = self.scope(fn)
        node = scope.follow(node)
        name = _name(fn)
        if node.type == "identifier":
            ident = _text(node)
            if ident in scope.defaults:
                return Constant(self.eval(scope.defaults[ident], 0), f"default of {ident}", name)
            if ident in scope.params or ident in scope.locals:
                raise Unresolved(
                    f"{role}: {ident} is a parameter or a non-constant local in {name}"
                )
            return Constant(self.global_value(ident, 0), ident, name)
        return Constant(self.eval(node, 0), "literal", name)

    def global_value(self, ident: str, depth: int) -> Any:
        """The value of a module-level ``ident``: every ``ident=<expr>`` in the file must agree."""
        if ident in self._globals:
            v = self._globals[ident]
            if isinstance(v, Unresolved):
                raise v
            return v
        if depth > 6:
            raise Unresolved(f"{ident}: too deep")
        values: list[Any] = []
        problems: list[str] = []
        needle = ident.encode() + b"="
        hits = []
        for hit in jsparse.iter_find(self.data, needle):
            if hit > 0 and (
                jsparse.is_ident_byte(self.data[hit - 1]) or self.data[hit - 1] in b".#"
            ):
                continue
            after = hit + len(needle)
            if self.data[after : after + 1] in (b"=", b">"):
                continue
            hits.append(after)
            if len(hits) > _MAX_DECLARATIONS:
                break
        if len(hits) > _MAX_DECLARATIONS:  # a local name reused everywhere, not a module constant
            self._globals[ident] = Unresolved(f"{ident}: assigned in many places (a local name)")
            raise self._globals[ident]
        for after in hits:
            expr = _expression_at(self.data, after)
            if expr is None:
                problems.append("an expression too long to read")
                continue
            try:
                v = self.eval(_parse_expr(expr), depth + 1)
            except Unresolved as e:
                problems.append(str(e))
                continue
            if v not in values:
                values.append(v)
        if len(values) == 1:
            result: Any = values[0]
        elif not values:
            result = Unresolved(f"{ident}: no constant declaration ({'; '.join(problems[:2])})")
        else:
            result = Unresolved(f"{ident}: declared with different values {values[:4]!r}")
        self._globals[ident] = result
        if isinstance(result, Unresolved):
            raise result
        return result

    def eval(self, node: Node, depth: int) -> Any:
        t = node.type
        if t == "parenthesized_expression":
            inner = [c for c in node.named_children if c.type != "comment"]
            if len(inner) != 1:
                raise Unresolved(_text(node)[:60])
            return self.eval(inner[0], depth)
        if t == "number":
            return _number(_text(node))
        if t == "string":
            return _string(node)
        if t in ("true", "false"):
            return t == "true"
        if t in ("null", "undefined"):
            return None
        if t == "identifier":
            if _text(node) == "undefined":
                return None
            return self.global_value(_text(node), depth + 1)
        if t == "unary_expression":
            op = _text(node.child_by_field_name("operator"))
            arg = node.child_by_field_name("argument")
            if op == "void":
                return None
            v = self.eval(arg, depth)  # type: ignore[arg-type]
            if op == "!":
                return not v
            if op == "-" and isinstance(v, (int, float)):
                return -v
            if op == "+" and isinstance(v, (int, float)):
                return v
            raise Unresolved(_text(node)[:60])
        if t == "binary_expression":
            op = _text(node.child_by_field_name("operator"))
            a = self.eval(node.child_by_field_name("left"), depth)  # type: ignore[arg-type]
            b = self.eval(node.child_by_field_name("right"), depth)  # type: ignore[arg-type]
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                res = {
                    "+": lambda: a + b,
                    "-": lambda: a - b,
                    "*": lambda: a * b,
                    "/": lambda: a / b if b else math.inf,
                }.get(op)
                if res is not None:
                    return _clean(res())
            raise Unresolved(_text(node)[:60])
        if t == "array":
            out: list[Any] = []
            for el in node.named_children:
                if el.type == "spread_element":
                    inner = self.eval(el.named_children[0], depth)
                    if not isinstance(inner, list):
                        raise Unresolved(_text(el)[:60])
                    out.extend(inner)
                elif el.type != "comment":
                    out.append(self.eval(el, depth))
            return out
        if t == "new_expression":
            ctor = _text(node.child_by_field_name("constructor"))
            args = node.child_by_field_name("arguments")
            if ctor in ("Set", "Map") and args is not None:
                items = [a for a in args.named_children if a.type != "comment"]
                return self.eval(items[0], depth) if items else []
            raise Unresolved(_text(node)[:60])
        if t == "call_expression":
            callee = node.child_by_field_name("function")
            if callee is not None and callee.type == "member_expression":
                prop = _text(callee.child_by_field_name("property"))
                obj = self.eval(callee.child_by_field_name("object"), depth)  # type: ignore[arg-type]
                if prop == "filter" and isinstance(obj, list):
                    return [x for x in obj if x is not None and x is not False]
            raise Unresolved(_text(node)[:60])
        if t == "object":
            out_d: dict[str, Any] = {}
            for pair in node.named_children:
                if pair.type != "pair":
                    raise Unresolved(_text(node)[:60])
                key = pair.child_by_field_name("key")
                k = _string(key) if key is not None and key.type == "string" else _text(key)
                out_d[k] = self.eval(pair.child_by_field_name("value"), depth)  # type: ignore[arg-type]
            return out_d
        raise Unresolved(_text(node)[:60])


class _Scope:
    """The parameters and single-assignment locals of one function (not of nested ones)."""

    def __init__(self, fn: ParsedFunction) -> None:
        self.fn = fn
        self.params: set[str] = set()
        self.defaults: dict[str, Node] = {}
        self.locals: dict[str, Node | None] = {}
        params = fn.node.child_by_field_name("parameters")
        for p in params.named_children if params is not None else []:
            if p.type == "identifier":
                self.params.add(_text(p))
            elif p.type == "assignment_pattern":
                left = p.child_by_field_name("left")
                if left is not None and left.type == "identifier":
                    self.params.add(_text(left))
                    self.defaults[_text(left)] = p.child_by_field_name("right")  # type: ignore[assignment]
        for node in _walk(fn.node):
            if node.type == "variable_declarator":
                name = node.child_by_field_name("name")
                if name is None or name.type != "identifier":
                    continue
                key = _text(name)
                value = node.child_by_field_name("value")
                self.locals[key] = value if key not in self.locals else None  # None: reassigned
        for node in _walk(fn.node):
            if node.type in ("assignment_expression", "augmented_assignment_expression"):
                left = node.child_by_field_name("left")
                if left is not None and left.type == "identifier" and _text(left) in self.locals:
                    self.locals[_text(left)] = None

    def follow(self, node: Node) -> Node:
        """Strip parentheses and follow single-assignment locals to their initialiser."""
        for _ in range(_MAX_FOLLOW):
            while node.type == "parenthesized_expression" and node.named_child_count == 1:
                node = node.named_children[0]
            if node.type != "identifier":
                return node
            value = self.locals.get(_text(node))
            if value is None:
                return node
            node = value
        return node


# ------------------------------------------------------------------------------ anchors


def inspect(data: bytes, version: str | None = None) -> Report:
    """Read ``data`` (a whole ``cli.js``) and compare it with the engine's profile."""
    rep = Report(version=version or version_of(data), sha256=sha256(data), size=len(data))
    r = _Reader(data)
    found = callsite.search(data)
    if len(found.candidates) == 1:
        c = found.candidates[0]
        rep.shape = c.shape
        rep.call_site = {
            "callee": c.callee,
            "generator": c.generator,
            "messages_var": c.messages_var,
            "byte": c.call_start,
        }
    elif found.candidates:
        rep.locate_problem = f"{len(found.candidates)} candidate call sites (ambiguous)"
    else:
        rep.locate_problem = (
            "no micro-compaction function"
            if not found.mc_functions and not found.deps_calls
            else "micro-compaction found but no query-loop call of it"
        )
    rep.env_vars = {v: _env_read(data, v) for v in ENV_VARS}
    for step in (_warning_state, _counter, _micro_compaction, _estimator, _session_memory):
        try:
            step(r, rep, found)
        except Unresolved as e:  # a step that cannot start: recorded, the others go on
            rep.unresolved.append(str(e))
    compare(rep)
    return rep


def _threshold_expr(r: Any, rep: Report, expr: Node, fn: Any, scope: Any) -> str | None:
    """``window() - OFFSET`` (offset era) or ``window() * RATIO`` (ratio era): record the
    constant and the era, and return the name of the function giving the window."""
    ratio = _op(expr) == "*"
    rep.era = "ratio" if ratio else "offset"
    _set(
        rep,
        "autocompact_ratio" if ratio else "autocompact_offset",
        lambda: r.const(expr.child_by_field_name("right"), fn, "autocompact"),
    )
    return _callee(scope.follow(expr.child_by_field_name("left")))


def _set(rep: Report, key: str, get: Any) -> None:
    try:
        rep.constants[key] = get()
    except Unresolved as e:
        rep.unresolved.append(f"{key}: {e}")


def _warning_state(r: _Reader, rep: Report, found: callsite.Search) -> None:
    w = _find_warning_state(r)
    if w is None:
        rep.era = "none"
        raise Unresolved(
            "warning-state function ({percentLeft, isAboveWarningThreshold, ...}) "
            "not found: no auto-compaction thresholds"
        )
    wname = _name(w)
    rep.functions["warning_state"] = wname
    scope = r.scope(w)
    flags = _return_object(w)
    rep.features["blocking_override_in_warning_state"] = (
        b"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE" in r.data[w.start : w.end]
    )

    # warning and error: tokens >= base - OFFSET (offset era) or base * RATIO (ratio era)
    for flag, key in (("isAboveWarningThreshold", "warning"), ("isAboveErrorThreshold", "error")):
        lim = _limit(scope, flags.get(flag))
        if lim is None:
            rep.unresolved.append(f"{key}: the {flag} value is not `tokens >= limit`")
            continue
        op = _op(lim)
        if op == "-":
            _set(
                rep,
                f"{key}_offset",
                lambda lim=lim, key=key: r.const(lim.child_by_field_name("right"), w, key),
            )
        elif op == "*":
            _set(
                rep,
                f"{key}_ratio",
                lambda lim=lim, key=key: r.const(lim.child_by_field_name("right"), w, key),
            )
        else:
            rep.unresolved.append(
                f"{key}: limit {_text(lim)[:60]!r} is neither base-offset nor base*ratio"
            )

    # auto-compact: enabled() && tokens >= threshold
    ac = flags.get("isAboveAutoCompactThreshold")
    ac = scope.follow(ac) if ac is not None else None
    enabled = None
    if ac is not None and _op(ac) == "&&":
        enabled = _callee(scope.follow(ac.child_by_field_name("left")))  # type: ignore[arg-type]
        ac = ac.child_by_field_name("right")
    if enabled:
        rep.functions["autocompact_enabled"] = enabled
        en = r.function(enabled)
        if en is not None:
            body = r.data[en.start : en.end]
            rep.features["disable_compact_in_enabled"] = _env_read(body, "DISABLE_COMPACT")
            rep.features["disable_auto_compact_in_enabled"] = _env_read(
                body, "DISABLE_AUTO_COMPACT"
            )
    # DISABLE_COMPACT may also (2.0.30-2.0.64: only) be read by the auto-compact dispatcher, the
    # function that returns {wasCompacted} / {compactionResult}
    dispatcher = _dispatcher_reading(r, "DISABLE_COMPACT", exclude=enabled)
    if dispatcher:
        rep.functions["autocompact_dispatcher"] = dispatcher
    rep.features["disable_compact_in_dispatcher"] = dispatcher is not None
    lim = _limit(scope, ac)
    threshold_fn = None
    if lim is None:
        rep.unresolved.append(
            "autocompact: the isAboveAutoCompactThreshold value is not `tokens >= limit`"
        )
    elif lim.type == "call_expression":
        threshold_fn = _callee(lim)
    effective_fn = None
    if lim is not None and _op(lim) in ("-", "*"):  # threshold computed inline: window() - OFFSET
        effective_fn = _threshold_expr(r, rep, lim, w, scope)
    if threshold_fn:
        rep.functions["threshold"] = threshold_fn
        t = r.function(threshold_fn)
        if t is None:
            rep.unresolved.append(f"threshold: function {threshold_fn} not found")
        else:
            rep.features["pct_override_in_threshold"] = (
                b"process.env.CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in r.data[t.start : t.end]
            )
            tscope = r.scope(t)
            ret = _last_return(t)
            ret = tscope.follow(ret) if ret is not None else None
            if ret is not None and ret.type == "ternary_expression":
                ret = tscope.follow(ret.child_by_field_name("alternative"))  # type: ignore[arg-type]
            if ret is not None and _op(ret) in ("-", "*"):
                effective_fn = _threshold_expr(r, rep, ret, t, tscope)
            else:
                rep.unresolved.append(
                    f"autocompact: {threshold_fn} does not return `window - offset`"
                )
    if rep.era == "unknown" and ("autocompact_offset" in rep.constants):
        rep.era = "offset"

    # the effective window and its output-reserve cap
    if effective_fn:
        rep.functions["effective_window"] = effective_fn
        e = r.function(effective_fn)
        if e is None:
            rep.unresolved.append(f"reserve cap: function {effective_fn} not found")
        else:
            _reserve_cap(r, rep, e)

    # blocking: tokens >= (override || base - OFFSET)
    if "isAtBlockingLimit" in flags:
        lim = _limit(scope, flags["isAtBlockingLimit"])
        for _ in range(4):
            if lim is None:
                break
            if lim.type == "ternary_expression":
                lim = scope.follow(lim.child_by_field_name("alternative"))  # type: ignore[arg-type]
            elif _op(lim) == "||":
                lim = scope.follow(lim.child_by_field_name("right"))  # type: ignore[arg-type]
            else:
                break
        if lim is not None and _op(lim) == "-":
            _set(
                rep,
                "blocking_offset",
                lambda: r.const(lim.child_by_field_name("right"), w, "blocking"),
            )
            base = _callee(scope.follow(lim.child_by_field_name("left")))  # type: ignore[arg-type]
            if base:
                rep.functions["blocking_base"] = base
                rep.features["blocking_base"] = (
                    "effective" if effective_fn and base == effective_fn else "window"
                )
        else:
            rep.unresolved.append(
                "blocking: the isAtBlockingLimit value is not `tokens >= base - offset`"
            )
    else:
        rep.features["blocking_base"] = None


def _counter(r: _Reader, rep: Report, found: callsite.Search) -> None:
    """The auto-compact token count: ``{isAboveAutoCompactThreshold:x}=warningState(COUNT(m))``
    in the should-auto-compact function. Usage only, or usage plus an estimate of the newer
    messages (its image constant is the profile's ``newer_image_tokens``)."""
    wname = rep.functions.get("warning_state")
    if not wname:
        return
    for hit in jsparse.iter_find(r.data, b"{isAboveAutoCompactThreshold:"):
        fn = r.enclosing(hit)
        if fn is None or _name(fn) == wname:
            continue
        node = fn.node_at(hit, hit + 1)
        while node is not None and node.type not in (
            "variable_declarator",
            "assignment_expression",
        ):
            node = node.parent
        value = None
        if node is not None:
            value = node.child_by_field_name("value") or node.child_by_field_name("right")
        if value is None or value.type != "call_expression" or _callee(value) != wname:
            continue
        args = value.child_by_field_name("arguments").named_children  # type: ignore[union-attr]
        if not args:
            continue
        scope = r.scope(fn)
        count = scope.follow(args[0])
        if _op(count) == "-":  # tokens - already-freed
            count = scope.follow(count.child_by_field_name("left"))  # type: ignore[arg-type]
        name = _callee(count)
        if name is None:
            continue
        rep.functions["should_autocompact"] = _name(fn)
        rep.functions["autocompact_counter"] = name
        counter = r.function(name)
        if counter is None:
            rep.unresolved.append(f"count_mode: counter {name} not found")
            return
        newer = _newer_estimate(counter)
        rep.features["count_mode"] = "usage+newer" if newer else "usage"
        if newer is None:
            return
        rep.functions["newer_estimate"] = newer
        start = _from_message_start(r, counter)
        if isinstance(start, bool):
            rep.features["newer_from_message_start"] = start
        else:
            rep.unresolved.append(f"newer_from_message_start: {start}")
        est = r.function(newer)
        if est is None:
            rep.unresolved.append(f"newer_image_tokens: estimator {newer} not found")
            return
        img, div = _image_and_divisor(r, est, depth=4)
        renders = _renders_attachments(r, est)
        rep.features["newer_counts_attachments"] = renders is not None
        if renders is not None:
            rep.features["newer_renders_attachments"] = renders
        blocks = _counts_all_blocks(r, est)
        if isinstance(blocks, bool):
            rep.features["newer_counts_all_blocks"] = blocks
        else:
            rep.unresolved.append(f"newer_counts_all_blocks: {blocks}")
        if img is not None:
            rep.constants["newer_image_tokens"] = img
        if div is not None:
            rep.constants["newer_chars_per_token"] = div
        return


def _newer_estimate(counter: ParsedFunction) -> str | None:
    """``usage(last) + ESTIMATE(messages.slice(i+1))``: the estimator of the newer messages."""
    for node in _walk(counter.node):
        if node.type != "call_expression":
            continue
        args = node.child_by_field_name("arguments")
        first = args.named_children[0] if args is not None and args.named_child_count else None
        if first is None or first.type != "call_expression":
            continue
        f = first.child_by_field_name("function")
        if (
            f is not None
            and f.type == "member_expression"
            and _text(f.child_by_field_name("property")) == "slice"
        ):
            return _callee(node)
    return None


def _from_message_start(r: _Reader, counter: ParsedFunction) -> bool | str:
    """Whether the counter starts the newer messages at the first record of the last reply's
    message id (profile ``newer_from_message_start``).

    It counts ``ESTIMATE(m.slice(i+1))``; in 2.1.64 and 2.1.69+ an inner loop walks back and
    moves ``i`` to an earlier record when ``ID(m[j])===ID(m[i])``, where ``ID`` reads
    ``.message.id``. Without that loop ``i`` is only decremented. A string: why it is unclear.
    """
    index = None
    for node in _walk(counter.node):
        if node.type != "call_expression":
            continue
        f = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        if (
            f is None
            or f.type != "member_expression"
            or _text(f.child_by_field_name("property")) != "slice"
            or args is None
        ):
            continue
        first = args.named_children[0] if args.named_child_count else None
        left = first.child_by_field_name("left") if _op(first) == "+" else None
        if left is not None and left.type == "identifier":
            index = _text(left)
            break
    if index is None:
        return f"{_name(counter)}: no m.slice(i+1)"
    scope = r.scope(counter)
    for node in _walk(counter.node):
        if node.type != "assignment_expression" or _text(node.child_by_field_name("left")) != index:
            continue
        loops, cur = 0, node.parent
        cond: Node | None = None
        while cur is not None and cur != counter.node:
            if cur.type == "if_statement" and cond is None:
                cond = cur.child_by_field_name("condition")
            if cur.type in ("while_statement", "for_statement", "do_statement"):
                loops += 1
            cur = cur.parent
        if loops < 2 or cond is None:
            continue
        cmp = cond.named_children[0] if cond.type == "parenthesized_expression" else cond
        if _op(cmp) != "===":
            continue
        callees = []
        for side in ("left", "right"):
            value = scope.follow(cmp.child_by_field_name(side))  # type: ignore[arg-type]
            callees.append({_callee(n) for n in [value, *_walk(value)]} - {None})
        for name in callees[0] & callees[1]:
            fn = r.function(name)  # type: ignore[arg-type]
            if fn is not None and b".message.id" in r.data[fn.start : fn.end]:
                return True
    return False


def _reserve_cap(r: _Reader, rep: Report, e: ParsedFunction) -> None:
    """``Math.min(maxOutput(model), CAP)`` in the effective-window function; none = full reserve."""
    for node in _walk(e.node):
        if (
            node.type != "call_expression"
            or _text(node.child_by_field_name("function")) != "Math.min"
        ):
            continue
        args = [
            a for a in node.child_by_field_name("arguments").named_children if a.type != "comment"
        ]  # type: ignore[union-attr]
        consts = []
        for a in args:
            with contextlib.suppress(Unresolved):
                consts.append(r.const(a, e, "reserve cap"))
        if consts:
            rep.constants["reserve_cap"] = consts[-1]
            return
    rep.constants["reserve_cap"] = Constant(None, "no Math.min(maxOutput, cap)", _name(e))


def _micro_compaction(r: _Reader, rep: Report, found: callsite.Search) -> None:
    legacy = None
    for name in found.mc_functions:
        fn = r.function(name)
        if fn is not None and legacy is None:
            legacy = fn
        if fn is not None and b"process.env.DISABLE_MICROCOMPACT" in r.data[fn.start : fn.end]:
            legacy = fn
            break
    factory, slot = _deps_factory(r)
    if factory:
        rep.functions["deps_factory"] = factory
    mc = legacy
    if slot and (mc is None or _name(mc) != slot):
        slot_fn = r.function(slot)
        if mc is None:
            mc = slot_fn
        elif slot_fn is not None:
            rep.unresolved.append(
                f"micro-compaction: the deps slot {slot} is not the legacy {_name(mc)}"
            )
    if mc is None:
        rep.features["microcompact"] = None
        if found.mc_functions or slot:
            rep.unresolved.append("micro-compaction: function named but not parsable")
        return
    name = _name(mc)
    rep.functions["microcompact"] = name
    body = r.data[mc.start : mc.end]
    env_gate = b"process.env.DISABLE_MICROCOMPACT" in body
    rep.features["mc_env_gate"] = env_gate
    rep.features["mc_remote_kill_switch"] = b'"tengu_cache_plum_violet"' in body
    kind = "legacy" if env_gate or b'"tengu_microcompact"' in body else _stub_or_time_based(r, mc)
    rep.features["microcompact"] = kind
    if kind == "legacy":
        rep.features["mc_clears_images"] = _compares_type(r, mc, "image", depth=0)
        rep.features["mc_replacement"] = (
            "persisted"
            if b"Tool result saved to" in body and b'"tengu_compact_mc_files"' not in body
            else "cleared"
        )
        _legacy_constants(r, rep, mc)
    elif kind == "time-based":
        _time_based_config(r, rep)


def _stub_or_time_based(r: _Reader, mc: ParsedFunction) -> str:
    """``return reset(),{messages:q}`` only: stub; a returned helper result: time-based."""
    scope = r.scope(mc)
    for node in _walk(mc.node):
        if node.type != "return_statement" or not node.named_children:
            continue
        arg = node.named_children[0]
        while arg.type == "sequence_expression":
            arg = arg.named_children[-1]
        arg = scope.follow(arg)
        if arg.type == "call_expression" or (
            arg.type == "identifier" and _text(arg) not in scope.params
        ):
            return "time-based"
        if arg.type == "await_expression":
            return "time-based"
    return "stub"


def _legacy_constants(r: _Reader, rep: Report, mc: ParsedFunction) -> None:
    scope = r.scope(mc)
    target = keep = min_saving = tools = None
    for node in _walk(mc.node):
        t = node.type
        if target is None and t == "binary_expression" and _op(node) in (">", "<="):
            # total - saved > TARGET (keep clearing), or its negation as a `continue` guard
            left = scope.follow(node.child_by_field_name("left"))  # type: ignore[arg-type]
            if _op(left) == "-":
                right = scope.follow(node.child_by_field_name("right"))  # type: ignore[arg-type]
                if right.type == "ternary_expression":  # manual threshold ? it : DEFAULT
                    right = right.child_by_field_name("alternative")  # type: ignore[assignment]
                elif _op(right) in ("??", "||"):  # manual threshold ?? DEFAULT
                    right = right.child_by_field_name("right")  # type: ignore[assignment]
                target = right
        elif keep is None and t == "call_expression":
            callee = node.child_by_field_name("function")
            if (
                callee is not None
                and callee.type == "member_expression"
                and _text(callee.child_by_field_name("property")) == "slice"
            ):
                args = [a for a in node.child_by_field_name("arguments").named_children]  # type: ignore[union-attr]
                if (
                    len(args) == 1
                    and args[0].type == "unary_expression"
                    and _text(args[0].child_by_field_name("operator")) == "-"
                ):
                    keep = args[0].child_by_field_name("argument")
        if tools is None and t == "call_expression":
            callee = node.child_by_field_name("function")
            if (
                callee is not None
                and callee.type == "member_expression"
                and _text(callee.child_by_field_name("property")) in ("has", "includes")
            ):
                args = node.child_by_field_name("arguments").named_children  # type: ignore[union-attr]
                obj = callee.child_by_field_name("object")
                if (
                    len(args) == 1
                    and args[0].type == "member_expression"
                    and _text(args[0].child_by_field_name("property")) == "name"
                    and obj is not None
                    and obj.type == "identifier"
                    and _text(obj) not in scope.locals
                    and _text(obj) not in scope.params
                ):
                    tools = obj
        if (
            min_saving is None
            and t == "member_expression"
            and _text(node.child_by_field_name("property")) == "isAboveWarningThreshold"
        ):
            cur = node.parent
            while (
                cur is not None
                and cur != mc.node
                and not (cur.type == "binary_expression" and _op(cur) == "||")
            ):
                cur = cur.parent
            if cur is not None and cur != mc.node:
                cmp = scope.follow(cur.child_by_field_name("right"))  # type: ignore[arg-type]
                if _op(cmp) == "<":
                    min_saving = cmp.child_by_field_name("right")
    for key, node in (("mc_target", target), ("mc_keep", keep), ("mc_min_saving", min_saving)):
        if node is None:
            rep.unresolved.append(f"{key}: its use was not found in {_name(mc)}")
        else:
            _set(rep, key, lambda node=node, key=key: r.const(node, mc, key))
    if tools is None:
        rep.unresolved.append(f"mc_tools: no `TOOLS.has(block.name)` in {_name(mc)}")
    else:

        def get_tools() -> Constant:
            c = r.const(tools, mc, "mc_tools")
            if not isinstance(c.value, list) or not all(isinstance(x, str) for x in c.value):
                raise Unresolved(f"mc_tools: {c.via} is not a list of names")
            return c

        _set(rep, "mc_tools", get_tools)
    img, div = _image_and_divisor(r, mc, depth=3)
    if img is not None:
        rep.constants["mc_image_tokens"] = img
    if div is not None:
        rep.constants["mc_chars_per_token"] = div


def _time_based_config(r: _Reader, rep: Report) -> None:
    """The default of the time-based flag: ``{enabled, gapThresholdMinutes, keepRecent}``."""
    obj = _object_with_key(r, b"gapThresholdMinutes:")
    if obj is None:
        rep.unresolved.append(
            "time-based config object {gapThresholdMinutes, keepRecent} not found"
        )
        return
    value, where = obj
    for k_src, k_dst in (("keepRecent", "mc_keep"), ("gapThresholdMinutes", "mc_gap_minutes")):
        if k_src in value:
            rep.constants[k_dst] = Constant(value[k_src], f"{{{k_src}}}", where)
    if "enabled" in value:
        rep.features["time_based_default_enabled"] = value["enabled"]


def _estimator(r: _Reader, rep: Report, found: callsite.Search) -> None:
    """The message-level estimate: iterates ``message.content``, maybe ends with x4/3."""
    factor_fn = None
    for hit in jsparse.iter_find(r.data, b"*1.3333333333333333)"):
        fn = r.enclosing(hit)
        if fn is None:
            continue
        body = r.data[fn.start : fn.end]
        if b".message.content" in body and (b'"image"' in body or b'"tool_result"' in body):
            factor_fn = fn
            break
    rep.features["estimate_factor_4_3"] = factor_fn is not None
    if factor_fn is None:
        return
    rep.functions["estimator"] = _name(factor_fn)
    # 2.1.47+: ``x.type==="image"||x.type==="document"`` (profile estimate_counts_documents)
    rep.features["estimate_counts_documents"] = _compares_type(r, factor_fn, "document", 0)
    # 2.1.75+: thinking/redacted_thinking/tool_use branches (profile estimate_counts_block_text)
    rep.features["estimate_counts_block_text"] = all(
        _compares_type(r, factor_fn, t, 0) for t in ("thinking", "redacted_thinking", "tool_use")
    )
    img, div = _image_and_divisor(r, factor_fn, depth=2)
    if img is not None:
        rep.constants["image_tokens"] = img
    if div is not None:
        rep.constants["chars_per_token"] = div


def _session_memory(r: _Reader, rep: Report, found: callsite.Search) -> None:
    rep.features["session_memory"] = b'"tengu_sm_compact' in r.data
    obj = _object_with_key(r, b"minTextBlockMessages:")
    if obj is None:
        return
    value, where = obj
    for k_src, k_dst in (
        ("minTokens", "sm_min_tokens"),
        ("minTextBlockMessages", "sm_min_text_messages"),
        ("maxTokens", "sm_max_tokens"),
    ):
        if k_src in value:
            rep.constants[k_dst] = Constant(value[k_src], f"{{{k_src}}}", where)


# ------------------------------------------------------------------------------ helpers


def _find_warning_state(r: _Reader) -> ParsedFunction | None:
    for hit in jsparse.iter_find(r.data, b"isAboveAutoCompactThreshold:"):
        fn = r.enclosing(hit)
        if fn is not None and "percentLeft" in _return_object(fn):
            return fn
    return None


def _return_object(fn: ParsedFunction) -> dict[str, Node]:
    """Keys and value nodes of the object literal this function returns (with percentLeft)."""
    for node in _walk(fn.node):
        if node.type != "return_statement" or not node.named_children:
            continue
        arg = node.named_children[0]
        if arg.type != "object":
            continue
        pairs = {}
        for pair in arg.named_children:
            if pair.type == "pair":
                pairs[_text(pair.child_by_field_name("key"))] = pair.child_by_field_name("value")
            elif pair.type == "shorthand_property_identifier":
                pairs[_text(pair)] = pair
        if "percentLeft" in pairs:
            return pairs  # type: ignore[return-value]
    return {}


def _limit(scope: _Scope, value: Node | None) -> Node | None:
    """``tokens >= LIMIT`` → LIMIT (followed through locals)."""
    if value is None:
        return None
    v = scope.follow(value)
    if v.type == "binary_expression" and _op(v) == "&&":
        v = scope.follow(v.child_by_field_name("right"))  # type: ignore[arg-type]
    if v.type != "binary_expression" or _op(v) not in (">=", ">"):
        return None
    return scope.follow(v.child_by_field_name("right"))  # type: ignore[arg-type]


def _last_return(fn: ParsedFunction) -> Node | None:
    body = fn.node.child_by_field_name("body")
    if body is None:
        return None
    for stmt in reversed(body.named_children):
        if stmt.type == "return_statement" and stmt.named_children:
            arg = stmt.named_children[0]
            while arg.type == "sequence_expression":
                arg = arg.named_children[-1]
            return arg
    return None


def _dispatcher_reading(r: _Reader, env: str, exclude: str | None) -> str | None:
    """The function that reads ``process.env.<env>`` and returns ``{compactionResult}`` or
    ``{wasCompacted}`` (the auto-compact dispatcher), if any."""
    needle = b"process.env." + env.encode()
    for hit in jsparse.iter_find(r.data, needle):
        after = hit + len(needle)
        if after < len(r.data) and jsparse.is_ident_byte(r.data[after]):
            continue
        fn = r.enclosing(hit)
        if fn is None or _name(fn) == exclude:
            continue
        body = r.data[fn.start : fn.end]
        if b"compactionResult:" in body or b"wasCompacted:" in body:
            return _name(fn)
    return None


def _deps_factory(r: _Reader) -> tuple[str | None, str | None]:
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
        keys = {_text(p.child_by_field_name("key")) for p in obj.named_children if p.type == "pair"}
        value = pair.child_by_field_name("value")
        if (
            {"callModel", "microcompact", "autocompact"} <= keys
            and value is not None
            and (value.type == "identifier")
        ):
            return _name(fn), _text(value)
    return None, None


def _object_with_key(r: _Reader, needle: bytes) -> tuple[dict[str, Any], str] | None:
    """The first constant object literal holding ``needle`` (a ``key:``), evaluated."""
    for hit in jsparse.iter_find(r.data, needle):
        if hit == 0 or r.data[hit - 1] not in b"{,":
            continue
        start = r.data.rfind(b"{", max(0, hit - 400), hit)
        if start < 0:
            continue
        expr = _expression_at(r.data, start)
        if expr is None:
            continue
        try:
            value = r.eval(_parse_expr(expr), 0)
        except Unresolved:
            continue
        if isinstance(value, dict):
            fn = r.enclosing(hit)
            return value, _name(fn) if fn is not None else "module"
    return None


def _image_and_divisor(
    r: _Reader, start: ParsedFunction, depth: int
) -> tuple[Constant | None, Constant | None]:
    """Image tokens (``type==="image"`` branch) and the chars-per-token divisor
    (``s.length/N``), in ``start`` or the functions it calls (breadth first, ``depth`` levels)."""
    img: Constant | None = None
    div: Constant | None = None
    queue = [(start, 0)]
    seen = {start.start}
    while queue and (img is None or div is None) and len(seen) <= _MAX_VISITS:
        fn, level = queue.pop(0)
        scope = r.scope(fn)
        callees: list[str] = []
        for node in _walk(fn.node, nested=True):  # callbacks too: content.reduce((n,b)=>...)
            if (
                img is None
                and node.type == "binary_expression"
                and _op(node) == "==="
                and (_text(node.child_by_field_name("right")) == '"image"')
            ):
                img = _image_branch(r, fn, node)
            elif div is None and node.type == "binary_expression" and _op(node) == "/":
                left = node.child_by_field_name("left")
                if (
                    left is not None
                    and left.type == "member_expression"
                    and _text(left.child_by_field_name("property")) == "length"
                ):
                    with contextlib.suppress(Unresolved):
                        div = r.const(node.child_by_field_name("right"), fn, "chars per token")
            elif node.type == "call_expression":
                callee = node.child_by_field_name("function")
                if (
                    callee is not None
                    and callee.type == "identifier"
                    and _text(callee) not in (scope.locals)
                    and _text(callee) not in scope.params
                ):
                    callees.append(_text(callee))
        if level < depth:
            for name in dict.fromkeys(callees):
                f = r.function(name)
                if f is not None and f.start not in seen and f.end - f.start < 6000:
                    seen.add(f.start)
                    queue.append((f, level + 1))
    return img, div


def _compares_type(r: _Reader, fn: ParsedFunction, value: str, depth: int) -> bool:
    """Whether ``fn`` (or a function it calls, ``depth`` levels) tests ``x.type==="<value>"``."""
    return _type_comparison(r, fn, value, depth) is not None


def _renders_attachments(r: _Reader, est: ParsedFunction) -> bool | None:
    """How the newer estimate counts an attachment record (``None``: no attachment branch).

    2.1.33-2.1.44: ``if(x.type==="attachment"&&x.attachment)return COUNT(JSON(x.attachment))``;
    2.1.45+: ``{let ms=RENDER(x.attachment),n=0;for(let m of ms)n+=COUNT(m.message.content)}``:
    the branch loops over the messages the attachment is rendered to and counts their content.
    """
    cmp = _type_comparison(r, est, "attachment", depth=1)
    if cmp is None:
        return None
    cur: Node | None = cmp
    while cur is not None and cur.type != "if_statement":
        if cur.type in FUNCTION_TYPES:
            return False
        cur = cur.parent
    body = cur.child_by_field_name("consequence") if cur is not None else None
    if body is None:
        return False
    loops = [n for n in _walk(body) if n.type == "for_in_statement"]
    return any(
        n.type == "member_expression" and _text(n).endswith(".message.content")
        for loop in loops
        for n in _walk(loop)
    )


def _counts_all_blocks(r: _Reader, est: ParsedFunction) -> bool | str:
    """Whether the newer estimate counts every content block (profile ``newer_counts_all_blocks``).

    Its block function is the one testing ``x.type==="image"``. Up to 2.1.73 it counts text,
    tool_result and images and ends in ``return 0``; from 2.1.74 it also has ``"tool_use"`` and
    ``"thinking"`` branches and ends by counting the block's JSON. A string: why it is unclear.
    """
    found = _type_comparison(r, est, "image", depth=4, with_function=True)
    if found is None:
        return "no image branch in the estimator"
    fn = found[1]
    tool_use = _type_comparison(r, fn, "tool_use", depth=0) is not None
    thinking = _type_comparison(r, fn, "thinking", depth=0) is not None
    last = _last_return(fn)
    zero = last is not None and last.type == "number" and _number(_text(last)) == 0
    if tool_use and thinking and not zero:
        return True
    if not (tool_use or thinking) and zero:
        return False
    return (
        f"{_name(fn)}: tool_use branch {tool_use}, thinking branch {thinking}, "
        f"other blocks {'0' if zero else 'counted'}"
    )


def _type_comparison(
    r: _Reader, fn: ParsedFunction, value: str, depth: int, with_function: bool = False
) -> Any:
    """The first ``x.type==="<value>"`` in ``fn`` or a function it calls (``depth`` levels);
    with ``with_function``, ``(node, the function holding it)``."""
    needle = f'"{value}"'
    queue, seen = [(fn, 0)], {fn.start}
    while queue and len(seen) <= _MAX_VISITS:
        cur, level = queue.pop(0)
        scope = r.scope(cur)
        for node in _walk(cur.node, nested=True):
            if (
                node.type == "binary_expression"
                and _op(node) == "==="
                and _text(node.child_by_field_name("right")) == needle
            ):
                left = node.child_by_field_name("left")
                if left is not None and _text(left.child_by_field_name("property")) == "type":
                    return (node, cur) if with_function else node
            if level < depth and node.type == "call_expression":
                name = _callee(node)
                if name and name not in scope.locals and name not in scope.params:
                    f = r.function(name)
                    if f is not None and f.start not in seen and f.end - f.start < 6000:
                        seen.add(f.start)
                        queue.append((f, level + 1))
    return None


def _image_branch(r: _Reader, fn: ParsedFunction, cmp: Node) -> Constant | None:
    """The constant counted when ``x.type==="image"``: in an if's consequence or a ternary."""
    cur: Node | None = cmp
    while cur is not None and cur.type not in ("if_statement", "ternary_expression"):
        if cur.type in FUNCTION_TYPES:
            return None
        cur = cur.parent
    if cur is None:
        return None
    branch = cur.child_by_field_name("consequence")
    if branch is None:
        return None
    for node in [branch, *_walk(branch)]:
        candidates: list[Node | None] = []
        if node.type in ("number", "identifier") and node == branch:
            candidates = [node]
        elif node.type == "return_statement" and node.named_child_count == 1:
            candidates = [node.named_children[0]]
        elif node.type == "augmented_assignment_expression" or (
            node.type == "binary_expression" and _op(node) == "+"
        ):
            candidates = [node.child_by_field_name("right")]
        for c in candidates:
            try:
                k = r.const(c, fn, "image tokens")
            except Unresolved:
                continue
            if isinstance(k, Constant) and isinstance(k.value, (int, float)):
                return k
    return None


def _walk(root: Node, nested: bool = False):
    """Descendants of ``root`` in source order, not entering nested functions unless ``nested``."""
    stack = list(reversed(root.children))
    while stack:
        node = stack.pop()
        yield node
        if node.type in FUNCTION_TYPES and not nested:
            continue
        stack.extend(reversed(node.children))


def _expression_at(data: bytes, start: int) -> bytes | None:
    """The bytes of the expression beginning at ``start``, up to a top-level , ; ) ] }."""
    depth = 0
    i = start
    end = min(len(data), start + _MAX_EXPR)
    quote = 0
    while i < end:
        b = data[i]
        if quote:
            if b == 0x5C:  # backslash
                i += 2
                continue
            if b == quote:
                quote = 0
        elif b in b"\"'`":
            quote = b
        elif b in b"([{":
            depth += 1
        elif b in b")]}":
            if depth == 0:
                return data[start:i]
            depth -= 1
            if depth == 0 and b == ord("}") and data[start] == ord("{"):
                return data[start : i + 1]
        elif b in b",;\n" and depth == 0:
            return data[start:i]
        i += 1
    return None


def _parse_expr(expr: bytes) -> Node:
    root = jsparse.parser().parse(b"(" + expr + b")").root_node
    if jsparse.has_error(root) or root.named_child_count != 1:
        raise Unresolved(f"not an expression: {expr[:60]!r}")
    stmt = root.named_children[0]
    if stmt.type != "expression_statement" or stmt.named_child_count != 1:
        raise Unresolved(f"not an expression: {expr[:60]!r}")
    node = stmt.named_children[0]
    if node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _env_read(data: bytes, name: str) -> bool:
    needle = b"process.env." + name.encode()
    for hit in jsparse.iter_find(data, needle):
        after = hit + len(needle)
        if after >= len(data) or not jsparse.is_ident_byte(data[after]):
            return True
    return False


def _callee(node: Node | None) -> str | None:
    if node is None or node.type != "call_expression":
        return None
    f = node.child_by_field_name("function")
    return _text(f) if f is not None and f.type == "identifier" else None


def _op(node: Node | None) -> str:
    if node is None or node.type != "binary_expression":
        return ""
    return _text(node.child_by_field_name("operator"))


def _name(fn: ParsedFunction | None) -> str:
    if fn is None:
        return "?"
    n = fn.node.child_by_field_name("name")
    return _text(n) or "<anonymous>"


def _text(node: Node | None) -> str:
    return (
        node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""
    )


def _number(s: str) -> int | float:
    s = s.replace("_", "")
    if not _NUMBER.match(s):
        raise Unresolved(f"number {s!r}")
    if s[:2] in ("0x", "0X"):
        return int(s, 16)
    return _clean(float(s))


def _clean(v: float) -> int | float:
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def _string(node: Node) -> str:
    raw = _text(node)
    if len(raw) < 2:
        raise Unresolved("string")
    body = raw[1:-1]
    if "\\" in body:
        try:
            body = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError as e:
            raise Unresolved("string escape") from e
    return body


# ------------------------------------------------------------------------------ comparison

#: report key -> (Profile field, how to read the report). Fields only compared when resolved.
_CHECKS: tuple[tuple[str, str], ...] = (
    ("autocompact_offset", "autocompact_offset"),
    ("warning_offset", "warning_offset"),
    ("error_offset", "error_offset"),
    ("blocking_offset", "blocking_offset"),
    ("reserve_cap", "reserve_cap"),
    ("image_tokens", "image_tokens"),
)


def compare(rep: Report) -> None:
    """Fill ``profile``/``drift``/``compared`` from the engine's profile for ``rep.version``."""
    from engine.profiles import profile_for  # engine never imports patcher; patcher may read it

    rep.drift.clear()
    rep.compared.clear()
    if rep.version is None:
        rep.profile_problem = "unknown version: no profile to compare with"
        return
    if rep.era == "ratio":
        rep.profile_problem = (
            "ratio-era auto-compaction (before 1.0.80): the engine does not model it"
        )
        return
    try:
        p = profile_for(rep.version)
    except ValueError as e:
        rep.profile_problem = str(e)
        return
    rep.profile, rep.profile_range = p.name, p.range

    def check(name: str, file_value: Any, profile_value: Any) -> None:
        rep.compared.append(name)
        if file_value != profile_value:
            rep.drift.append(Drift(name, file_value, profile_value))

    for key, attr in _CHECKS:
        if key == "blocking_offset" and "blocking_offset" not in rep.constants:
            if rep.features.get("blocking_base") is None and rep.functions.get("warning_state"):
                check("blocking_offset", None, p.blocking_offset)  # no isAtBlockingLimit at all
            continue
        if key in rep.constants:
            check(attr, rep.constants[key].value, getattr(p, attr))
    if rep.value("blocking_offset") is not None and rep.features.get("blocking_base"):
        check("blocking_base", rep.features["blocking_base"], p.blocking_base)
    if rep.functions.get("threshold"):
        check(
            "has_pct_override",
            bool(rep.features.get("pct_override_in_threshold")),
            p.has_pct_override,
        )
    if rep.functions.get("autocompact_enabled"):
        check(
            "has_disable_compact",
            bool(
                rep.features.get("disable_compact_in_enabled")
                or rep.features.get("disable_compact_in_dispatcher")
            ),
            p.has_disable_compact,
        )
        if rep.features.get("disable_compact_in_dispatcher") or rep.features.get(
            "disable_compact_in_enabled"
        ):
            scope = "enabled" if rep.features.get("disable_compact_in_enabled") else "dispatcher"
            check("disable_compact_scope", scope, p.disable_compact_scope)
        check(
            "has_disable_auto_compact",
            bool(rep.features.get("disable_auto_compact_in_enabled")),
            p.has_disable_auto_compact,
        )
    if rep.functions.get("warning_state"):
        check(
            "has_blocking_override",
            bool(rep.features.get("blocking_override_in_warning_state")),
            p.has_blocking_override,
        )
    check(
        "estimate_factor_4_3", bool(rep.features.get("estimate_factor_4_3")), p.estimate_factor_4_3
    )
    if "estimate_counts_documents" in rep.features:
        check(
            "estimate_counts_documents",
            rep.features["estimate_counts_documents"],
            p.estimate_counts_documents,
        )
    if "estimate_counts_block_text" in rep.features:
        check(
            "estimate_counts_block_text",
            rep.features["estimate_counts_block_text"],
            p.estimate_counts_block_text,
        )
    check("session_memory", bool(rep.features.get("session_memory")), p.session_memory)
    for key in ("sm_min_tokens", "sm_min_text_messages", "sm_max_tokens"):
        if key in rep.constants:
            check(key, rep.constants[key].value, getattr(p, key))
    if rep.features.get("count_mode"):
        check("count_mode", rep.features["count_mode"], p.count_mode)
        if rep.features["count_mode"] == "usage+newer" and "newer_image_tokens" in rep.constants:
            check("newer_image_tokens", rep.value("newer_image_tokens"), p.newer_image_tokens)
        if (
            rep.features["count_mode"] == "usage+newer"
            and "newer_counts_attachments" in rep.features
        ):
            check(
                "newer_counts_attachments",
                rep.features["newer_counts_attachments"],
                p.newer_counts_attachments,
            )
        if rep.features["count_mode"] == "usage+newer" and "newer_renders_attachments" in (
            rep.features
        ):
            check(
                "newer_renders_attachments",
                rep.features["newer_renders_attachments"],
                p.newer_renders_attachments,
            )
        if rep.features["count_mode"] == "usage+newer" and "newer_from_message_start" in (
            rep.features
        ):
            check(
                "newer_from_message_start",
                rep.features["newer_from_message_start"],
                p.newer_from_message_start,
            )
        if rep.features["count_mode"] == "usage+newer" and "newer_counts_all_blocks" in (
            rep.features
        ):
            check(
                "newer_counts_all_blocks",
                rep.features["newer_counts_all_blocks"],
                p.newer_counts_all_blocks,
            )
    kind = rep.features.get("microcompact")
    check("microcompact", kind, p.microcompact)
    for key in ("chars_per_token", "mc_chars_per_token", "newer_chars_per_token"):
        if key in rep.constants:  # the engine counts chars/4 everywhere (engine/tokens.py)
            check(key, rep.constants[key].value, 4)
    if kind == "legacy" and p.microcompact == "legacy":
        check("mc_has_env_gate", bool(rep.features.get("mc_env_gate")), p.mc_has_env_gate)
        check(
            "mc_remote_kill_switch",
            bool(rep.features.get("mc_remote_kill_switch")),
            p.mc_remote_kill_switch,
        )
        check("mc_replacement", rep.features.get("mc_replacement"), p.mc_replacement)
        check("mc_clears_images", bool(rep.features.get("mc_clears_images")), p.mc_clears_images)
        for key, attr in (
            ("mc_target", "mc_target"),
            ("mc_keep", "mc_keep"),
            ("mc_min_saving", "mc_min_saving"),
        ):
            if key in rep.constants:
                check(attr, rep.constants[key].value, getattr(p, attr))
        if "mc_tools" in rep.constants:
            check("mc_tools", sorted(rep.constants["mc_tools"].value), sorted(p.mc_tools))
        if "mc_image_tokens" in rep.constants:
            check("mc_image_tokens", rep.constants["mc_image_tokens"].value, p.image_tokens)
    elif kind == "time-based" and p.microcompact == "time-based" and "mc_keep" in rep.constants:
        check("mc_keep", rep.constants["mc_keep"].value, p.mc_keep)
    if kind != "legacy" and p.microcompact != "legacy":
        check("mc_has_env_gate", bool(rep.features.get("mc_env_gate")), p.mc_has_env_gate)


# ------------------------------------------------------------------------------ rendering


def _first(rep: Report, *keys: str) -> str:
    return next((k for k in keys if k in rep.constants), keys[0])


def render(rep: Report) -> str:
    """A human-readable report (what ``ctxpatch inspect`` prints)."""
    lines = [
        (
            f"Claude Code {rep.version or '(unknown version)'}   sha256 {rep.sha256[:16]}…   "
            f"{rep.size:,} bytes"
        ),
        f"call site:   {rep.shape or '-'}"
        + (
            f"  ({rep.call_site['callee']} in {rep.call_site['generator']}, byte "
            f"{rep.call_site['byte']})"
            if rep.call_site
            else f"  ({rep.locate_problem})"
        ),
        f"thresholds:  {rep.era} era",
    ]

    def c(key: str) -> str:
        k = rep.constants.get(key)
        if k is None:
            return "?"
        if k.value is None:
            return f"none ({k.via})"
        return f"{k.value} ({k.via})" if k.via != "literal" else str(k.value)

    if rep.era == "ratio":
        lines.append(
            f"  auto-compact ratio {c('autocompact_ratio')}, warning {c('warning_ratio')},"
            f" error {c('error_ratio')}"
        )
    else:
        lines += [
            f"  auto-compact offset   {c('autocompact_offset')}",
            f"  warning / error       {c('warning_offset')} / {c('error_offset')}",
            "  blocking offset       "
            + (c("blocking_offset") if "blocking_offset" in rep.constants else "none")
            + (
                {
                    "window": " from the raw context window",
                    "effective": " from the effective window",
                }.get(rep.features.get("blocking_base") or "", "")
            ),
            f"  output-reserve cap    {c('reserve_cap')}",
        ]
    lines += [
        "token estimate:",
        f"  x4/3 factor           {'yes' if rep.features.get('estimate_factor_4_3') else 'no'}"
        + (f" ({rep.functions['estimator']})" if rep.functions.get("estimator") else ""),
        f"  chars per token       {c(_first(rep, 'chars_per_token', 'mc_chars_per_token', 'newer_chars_per_token'))}",
        f"  image tokens          {c(_first(rep, 'image_tokens', 'mc_image_tokens'))}",
        f"  auto-compact count    {rep.features.get('count_mode') or '?'}"
        + (
            f" (newer messages: images {c('newer_image_tokens')}, chars/"
            f"{c('newer_chars_per_token')}"
            + {True: ", every block", False: ", text/tool_result/images only"}.get(
                rep.features.get("newer_counts_all_blocks"), ""
            )
            + ")"
            if rep.features.get("count_mode") == "usage+newer"
            else ""
        ),
        f"micro-compaction: {rep.features.get('microcompact') or 'none'}"
        + (f" ({rep.functions['microcompact']})" if rep.functions.get("microcompact") else ""),
    ]
    if rep.features.get("microcompact") == "legacy":
        tools = rep.value("mc_tools")
        lines += [
            f"  target / keep / min saving  {c('mc_target')} / {c('mc_keep')} / {c('mc_min_saving')}",
            f"  tools                 {', '.join(tools) if tools else '?'}",
            f"  replacement           {rep.features.get('mc_replacement')}"
            + (
                "; remote kill-switch tengu_cache_plum_violet"
                if rep.features.get("mc_remote_kill_switch")
                else ""
            ),
        ]
    elif rep.features.get("microcompact") == "time-based":
        lines.append(
            f"  keep recent {c('mc_keep')}, gap {c('mc_gap_minutes')} min "
            f"(default enabled: {rep.features.get('time_based_default_enabled')})"
        )
    sm = rep.features.get("session_memory")
    lines.append(
        f"session memory: {'yes' if sm else 'no'}"
        + (
            f" (min {c('sm_min_tokens')}, min text messages {c('sm_min_text_messages')}, "
            f"max {c('sm_max_tokens')})"
            if "sm_min_tokens" in rep.constants
            else ""
        )
    )
    present = [k for k, v in rep.env_vars.items() if v]
    lines.append("env vars: " + (", ".join(present) if present else "none"))
    if rep.profile:
        lines.append(
            f"engine profile {rep.profile} ({rep.profile_range}): "
            f"{len(rep.compared)} fields compared, "
            + ("no drift" if not rep.drift else f"{len(rep.drift)} DRIFT")
        )
        lines += [f"  drift {d}" for d in rep.drift]
    else:
        lines.append(f"engine profile: none ({rep.profile_problem})")
    if rep.unresolved:
        lines.append("unresolved:")
        lines += [f"  {u}" for u in rep.unresolved]
    return "\n".join(lines)
