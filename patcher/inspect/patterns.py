"""Code shapes more than one extractor looks for: ``tokens >= LIMIT``, a returned object literal,
``x.type==="<kind>"`` branches and what they count, constant object literals."""

from __future__ import annotations

import contextlib
from typing import Any

from tree_sitter import Node

from patcher import jsparse
from patcher.inspect.jsconst import (
    Constant,
    Reader,
    Scope,
    Unresolved,
    callee,
    expression_at,
    name,
    op,
    parse_expr,
    text,
    walk,
)
from patcher.jsparse import FUNCTION_TYPES, ParsedFunction

_MAX_VISITS = 48  # functions parsed while looking for an image constant / chars divisor
_MAX_CALLEE = 6000  # bytes: a bigger callee is not a token-counting helper


def return_object(fn: ParsedFunction) -> dict[str, Node]:
    """Keys and value nodes of the object literal this function returns (with percentLeft)."""
    for node in walk(fn.node):
        if node.type != "return_statement" or not node.named_children:
            continue
        arg = node.named_children[0]
        if arg.type != "object":
            continue
        pairs: dict[str, Node] = {}
        for pair in arg.named_children:
            value = pair.child_by_field_name("value") if pair.type == "pair" else None
            if value is not None:
                pairs[text(pair.child_by_field_name("key"))] = value
            elif pair.type == "shorthand_property_identifier":
                pairs[text(pair)] = pair
        if "percentLeft" in pairs:
            return pairs
    return {}


def limit(scope: Scope, value: Node | None) -> Node | None:
    """``tokens >= LIMIT`` → LIMIT (followed through locals)."""
    if value is None:
        return None
    v: Node | None = scope.follow(value)
    if v is not None and v.type == "binary_expression" and op(v) == "&&":
        v = scope.follow_field(v, "right")
    if v is None or v.type != "binary_expression" or op(v) not in (">=", ">"):
        return None
    return scope.follow_field(v, "right")


def last_return(fn: ParsedFunction) -> Node | None:
    """The value of the function's last top-level ``return`` (the last of a comma sequence)."""
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


def object_with_key(r: Reader, needle: bytes) -> tuple[dict[str, Any], str] | None:
    """The first constant object literal holding ``needle`` (a ``key:``), evaluated, and the
    function it is in ("module" at the top level)."""
    for hit in jsparse.iter_find(r.data, needle):
        if hit == 0 or r.data[hit - 1] not in b"{,":
            continue
        start = r.data.rfind(b"{", max(0, hit - 400), hit)
        if start < 0:
            continue
        expr = expression_at(r.data, start)
        if expr is None:
            continue
        try:
            value = r.eval(parse_expr(expr), 0)
        except Unresolved:
            continue
        if isinstance(value, dict):
            fn = r.enclosing(hit)
            return value, name(fn) if fn is not None else "module"
    return None


def _small_function(
    r: Reader, scope: Scope, ident: str | None, seen: set[int]
) -> ParsedFunction | None:
    """The module-level function ``ident`` names, if small and not yet seen (then marked seen)."""
    if not ident or scope.knows(ident):
        return None
    f = r.function(ident)
    if f is None or f.start in seen or f.end - f.start >= _MAX_CALLEE:
        return None
    seen.add(f.start)
    return f


def image_and_divisor(
    r: Reader, start: ParsedFunction, depth: int
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
        calls: list[str] = []
        for node in walk(fn.node, nested=True):  # callbacks too: content.reduce((n,b)=>...)
            if (
                img is None
                and node.type == "binary_expression"
                and op(node) == "==="
                and (text(node.child_by_field_name("right")) == '"image"')
            ):
                img = _image_branch(r, fn, node)
            elif div is None and node.type == "binary_expression" and op(node) == "/":
                left = node.child_by_field_name("left")
                if (
                    left is not None
                    and left.type == "member_expression"
                    and text(left.child_by_field_name("property")) == "length"
                ):
                    with contextlib.suppress(Unresolved):
                        div = r.const(node.child_by_field_name("right"), fn, "chars per token")
            elif node.type == "call_expression" and (ident := callee(node)):
                calls.append(ident)
        if level < depth:
            for ident in dict.fromkeys(calls):  # in call order, each name once
                f = _small_function(r, scope, ident, seen)
                if f is not None:
                    queue.append((f, level + 1))
    return img, div


def compares_type(r: Reader, fn: ParsedFunction, value: str, depth: int) -> bool:
    """Whether ``fn`` (or a function it calls, ``depth`` levels) tests ``x.type==="<value>"``."""
    return type_comparison(r, fn, value, depth) is not None


def type_comparison(
    r: Reader, fn: ParsedFunction, value: str, depth: int
) -> tuple[Node, ParsedFunction] | None:
    """The first ``x.type==="<value>"`` in ``fn`` or a function it calls (``depth`` levels),
    and the function holding it."""
    needle = f'"{value}"'
    queue, seen = [(fn, 0)], {fn.start}
    while queue and len(seen) <= _MAX_VISITS:
        cur, level = queue.pop(0)
        scope = r.scope(cur)
        for node in walk(cur.node, nested=True):
            if (
                node.type == "binary_expression"
                and op(node) == "==="
                and text(node.child_by_field_name("right")) == needle
            ):
                left = node.child_by_field_name("left")
                if left is not None and text(left.child_by_field_name("property")) == "type":
                    return node, cur
            if level < depth and node.type == "call_expression":
                f = _small_function(r, scope, callee(node), seen)
                if f is not None:
                    queue.append((f, level + 1))
    return None


def _image_branch(r: Reader, fn: ParsedFunction, cmp: Node) -> Constant | None:
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
    for node in [branch, *walk(branch)]:
        candidates: list[Node | None] = []
        if node.type in ("number", "identifier") and node == branch:
            candidates = [node]
        elif node.type == "return_statement" and node.named_child_count == 1:
            candidates = [node.named_children[0]]
        elif node.type == "augmented_assignment_expression" or (
            node.type == "binary_expression" and op(node) == "+"
        ):
            candidates = [node.child_by_field_name("right")]
        for c in candidates:
            try:
                k = r.const(c, fn, "image tokens")
            except Unresolved:
                continue
            if isinstance(k.value, (int, float)):
                return k
    return None
