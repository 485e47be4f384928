"""Constant evaluation over a minified ``cli.js``: function lookup, local dataflow, module constants.

:class:`Reader` finds ``function NAME(`` declarations (windowed parses, :mod:`patcher.jsparse`),
follows single-assignment locals of one function (:class:`Scope`) and evaluates compile-time
expressions: number/string/boolean literals, ``+ - * /``, unary ``- + ! void``, arrays (with
spreads of constant lists), ``new Set([...])``, ``[...].filter(...)`` of constants, object
literals, and module-level ``NAME=<expr>`` declarations (every declaration of ``NAME`` in the
file must agree). Anything else raises :class:`Unresolved`, with what could not be read.

The small tree-sitter helpers the extractors share (``walk``, ``text``, ``op``, ``callee``...)
live here too: they are the vocabulary of this evaluator.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from patcher import jsparse
from patcher.jsparse import FUNCTION_TYPES, ParsedFunction

DECLARATIONS = frozenset({"function_declaration", "generator_function_declaration"})
_MAX_FOLLOW = 12
_MAX_EXPR = 4096
_MAX_DECLARATIONS = 24  # more `NAME=` than this: a local name, not a module constant
_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)$")


class Unresolved(Exception):
    """An expression that is not a compile-time constant (or too far away to follow)."""


@dataclass(frozen=True)
class Constant:
    """One resolved number or list, and how it was reached."""

    value: Any
    via: str  # the identifier it was declared as, or "literal"
    fn: str  # the anchor function it was read in

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "via": self.via, "fn": self.fn}


class Reader:
    """Function lookup, local dataflow and constant evaluation over one file."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.index = jsparse.FunctionIndex(data)
        self._functions: dict[str, ParsedFunction | None] = {}
        self._globals: dict[str, Any] = {}
        self._scopes: dict[int, Scope] = {}

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
            found = self.index.at(start, DECLARATIONS)
            if found is not None:
                break
        self._functions[name] = found
        return found

    def enclosing(self, offset: int) -> ParsedFunction | None:
        return self.index.enclosing(offset, b"function", DECLARATIONS)

    def body(self, fn: ParsedFunction) -> bytes:
        return self.data[fn.start : fn.end]

    def scope(self, fn: ParsedFunction) -> Scope:
        key = fn.start
        if key not in self._scopes:
            self._scopes[key] = Scope(fn)
        return self._scopes[key]

    # --- constants ---------------------------------------------------------------------

    def const(self, node: Node | None, fn: ParsedFunction, role: str) -> Constant:
        """The constant value of ``node`` (a literal, or a chain of locals ending in one, or a
        module-level ``NAME=value``)."""
        if node is None:
            raise Unresolved(f"{role}: nothing to read")
        scope = self.scope(fn)
        node = scope.follow(node)
        where = name(fn)
        if node.type == "identifier":
            ident = text(node)
            if ident in scope.defaults:
                return Constant(self.eval(scope.defaults[ident], 0), f"default of {ident}", where)
            if ident in scope.params or ident in scope.locals:
                raise Unresolved(
                    f"{role}: {ident} is a parameter or a non-constant local in {where}"
                )
            return Constant(self.global_value(ident, 0), ident, where)
        return Constant(self.eval(node, 0), "literal", where)

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
            expr = expression_at(self.data, after)
            if expr is None:
                problems.append("an expression too long to read")
                continue
            try:
                v = self.eval(parse_expr(expr), depth + 1)
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

    def eval(self, node: Node | None, depth: int) -> Any:
        """The value of a constant expression (see the module docstring for what is read)."""
        if node is None:
            raise Unresolved("nothing to read")
        t = node.type
        if t == "parenthesized_expression":
            inner = [c for c in node.named_children if c.type != "comment"]
            if len(inner) != 1:
                raise Unresolved(text(node)[:60])
            return self.eval(inner[0], depth)
        if t == "number":
            return number(text(node))
        if t == "string":
            return string(node)
        if t in ("true", "false"):
            return t == "true"
        if t in ("null", "undefined"):
            return None
        if t == "identifier":
            if text(node) == "undefined":
                return None
            return self.global_value(text(node), depth + 1)
        if t == "unary_expression":
            return self._unary(node, depth)
        if t == "binary_expression":
            return self._binary(node, depth)
        if t == "array":
            return self._array(node, depth)
        if t == "new_expression":
            ctor = text(node.child_by_field_name("constructor"))
            args = node.child_by_field_name("arguments")
            if ctor in ("Set", "Map") and args is not None:
                items = [a for a in args.named_children if a.type != "comment"]
                return self.eval(items[0], depth) if items else []
            raise Unresolved(text(node)[:60])
        if t == "call_expression":
            fn = node.child_by_field_name("function")
            if fn is not None and fn.type == "member_expression":
                prop = text(fn.child_by_field_name("property"))
                obj = self.eval(fn.child_by_field_name("object"), depth)
                if prop == "filter" and isinstance(obj, list):
                    return [x for x in obj if x is not None and x is not False]
            raise Unresolved(text(node)[:60])
        if t == "object":
            out: dict[str, Any] = {}
            for pair in node.named_children:
                if pair.type != "pair":
                    raise Unresolved(text(node)[:60])
                key = pair.child_by_field_name("key")
                k = string(key) if key is not None and key.type == "string" else text(key)
                out[k] = self.eval(pair.child_by_field_name("value"), depth)
            return out
        raise Unresolved(text(node)[:60])

    def _unary(self, node: Node, depth: int) -> Any:
        operator = text(node.child_by_field_name("operator"))
        if operator == "void":
            return None
        v = self.eval(node.child_by_field_name("argument"), depth)
        if operator == "!":
            return not v
        if operator == "-" and isinstance(v, (int, float)):
            return -v
        if operator == "+" and isinstance(v, (int, float)):
            return v
        raise Unresolved(text(node)[:60])

    def _binary(self, node: Node, depth: int) -> Any:
        operator = op(node)
        a = self.eval(node.child_by_field_name("left"), depth)
        b = self.eval(node.child_by_field_name("right"), depth)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if operator == "+":
                return clean(a + b)
            if operator == "-":
                return clean(a - b)
            if operator == "*":
                return clean(a * b)
            if operator == "/":
                return clean(a / b if b else math.inf)
        raise Unresolved(text(node)[:60])

    def _array(self, node: Node, depth: int) -> list[Any]:
        out: list[Any] = []
        for el in node.named_children:
            if el.type == "spread_element":
                inner = self.eval(el.named_children[0], depth)
                if not isinstance(inner, list):
                    raise Unresolved(text(el)[:60])
                out.extend(inner)
            elif el.type != "comment":
                out.append(self.eval(el, depth))
        return out


class Scope:
    """The parameters and single-assignment locals of one function (not of nested ones)."""

    def __init__(self, fn: ParsedFunction) -> None:
        self.fn = fn
        self.params: set[str] = set()
        self.defaults: dict[str, Node] = {}
        self.locals: dict[str, Node | None] = {}
        params = fn.node.child_by_field_name("parameters")
        for p in params.named_children if params is not None else []:
            if p.type == "identifier":
                self.params.add(text(p))
            elif p.type == "assignment_pattern":
                left = p.child_by_field_name("left")
                right = p.child_by_field_name("right")
                if left is not None and left.type == "identifier":
                    self.params.add(text(left))
                    if right is not None:
                        self.defaults[text(left)] = right
        for node in walk(fn.node):
            if node.type == "variable_declarator":
                ident = node.child_by_field_name("name")
                if ident is None or ident.type != "identifier":
                    continue
                key = text(ident)
                value = node.child_by_field_name("value")
                self.locals[key] = value if key not in self.locals else None  # None: reassigned
        for node in walk(fn.node):
            if node.type in ("assignment_expression", "augmented_assignment_expression"):
                left = node.child_by_field_name("left")
                if left is not None and left.type == "identifier" and text(left) in self.locals:
                    self.locals[text(left)] = None

    def knows(self, ident: str) -> bool:
        """Whether ``ident`` is a parameter or a local of this function (not a module name)."""
        return ident in self.locals or ident in self.params

    def follow(self, node: Node) -> Node:
        """Strip parentheses and follow single-assignment locals to their initialiser."""
        for _ in range(_MAX_FOLLOW):
            while node.type == "parenthesized_expression" and node.named_child_count == 1:
                node = node.named_children[0]
            if node.type != "identifier":
                return node
            value = self.locals.get(text(node))
            if value is None:
                return node
            node = value
        return node

    def follow_field(self, node: Node, field: str) -> Node | None:
        """``follow`` applied to ``node``'s child ``field`` (None when it has none)."""
        child = node.child_by_field_name(field)
        return None if child is None else self.follow(child)


# ------------------------------------------------------------------------------ syntax helpers


def walk(root: Node, nested: bool = False) -> Iterator[Node]:
    """Descendants of ``root`` in source order, not entering nested functions unless ``nested``."""
    stack = list(reversed(root.children))
    while stack:
        node = stack.pop()
        yield node
        if node.type in FUNCTION_TYPES and not nested:
            continue
        stack.extend(reversed(node.children))


def expression_at(data: bytes, start: int) -> bytes | None:
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


def parse_expr(expr: bytes) -> Node:
    """The tree of one expression (``Unresolved`` when the bytes are not exactly one)."""
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


def env_read(data: bytes, var: str) -> bool:
    """Whether ``data`` reads ``process.env.<var>`` (the whole name, not a longer one)."""
    needle = b"process.env." + var.encode()
    for hit in jsparse.iter_find(data, needle):
        after = hit + len(needle)
        if after >= len(data) or not jsparse.is_ident_byte(data[after]):
            return True
    return False


def callee(node: Node | None) -> str | None:
    """``NAME`` of a call ``NAME(...)`` (None for anything else, member calls included)."""
    if node is None or node.type != "call_expression":
        return None
    f = node.child_by_field_name("function")
    return text(f) if f is not None and f.type == "identifier" else None


def member_call(node: Node, props: tuple[str, ...]) -> bool:
    """Whether ``node`` is a call ``x.PROP(...)`` with PROP one of ``props``."""
    if node.type != "call_expression":
        return False
    f = node.child_by_field_name("function")
    return (
        f is not None
        and f.type == "member_expression"
        and text(f.child_by_field_name("property")) in props
    )


def arguments(node: Node) -> list[Node]:
    """The named arguments of a call (comments left out)."""
    args = node.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def op(node: Node | None) -> str:
    """The operator of a binary expression ("" for anything else)."""
    if node is None or node.type != "binary_expression":
        return ""
    return text(node.child_by_field_name("operator"))


def name(fn: ParsedFunction | None) -> str:
    """The declared name of a function ("?" for none, "<anonymous>" when it has no name)."""
    if fn is None:
        return "?"
    n = fn.node.child_by_field_name("name")
    return text(n) or "<anonymous>"


def text(node: Node | None) -> str:
    return (
        node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""
    )


def number(s: str) -> int | float:
    """A JavaScript numeric literal (decimal, exponent or hex), integral values as ``int``."""
    s = s.replace("_", "")
    if not _NUMBER.match(s):
        raise Unresolved(f"number {s!r}")
    if s[:2] in ("0x", "0X"):
        return int(s, 16)
    return clean(float(s))


def clean(v: int | float) -> int | float:
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def string(node: Node) -> str:
    raw = text(node)
    if len(raw) < 2:
        raise Unresolved("string")
    body = raw[1:-1]
    if "\\" in body:
        try:
            body = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError as e:
            raise Unresolved("string escape") from e
    return body
