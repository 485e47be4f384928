"""Find where the query loop builds its API request, by meaning, never by minified names.

The server-side clearing edit must join every request of the query loop. Every Claude Code
with a ``cli.js`` (1.0.x to 2.1.112) builds those requests the same way: a small function,
bound to a local of the query-loop generator, returns the request parameters as an object
literal, and the generator (inside its retry callback) sends its result with the SDK's
``client.beta.messages.create(...)`` or ``.stream(...)``. Meaning, in order:

1. *The request calls*: ``.beta.messages.create(`` and ``.beta.messages.stream(`` (the public
   SDK method names, stable across releases), each inside an ``async function*``.
2. *The request object*: in such a generator, an object literal with the keys ``model``,
   ``messages``, ``system`` and ``max_tokens``, and ``betas`` (directly or in a conditional
   spread such as ``...W?{betas:I}:{}`` or ``...S&&{betas:G}``: the list the SDK turns into
   the ``anthropic-beta`` header).
3. *The builder*: that object is the value a function returns (``return{...}``,
   ``return a=b,{...}`` or ``=>({...})``) and the function is bound to a name
   (``H=(y)=>{...}``). Objects built inline in a call (side queries) are rejected.
4. *Sent by the loop*: in the same generator, the builder's result (``r=H(u)``) is passed to a
   request call, as the first argument itself (``.stream(r,...)``) or spread into it
   (``.create({...r,stream:!0},...)``). Those calls are watched for a 400 that refuses the
   edit.

Exactly one builder, or no clearing injection and the candidates with the reasons. Only the
generators around the byte anchors are parsed (windowed, like :mod:`patcher.callsite`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from patcher import jsparse
from patcher.jsparse import ParsedFunction

REQUEST_CALLS = (b".beta.messages.create(", b".beta.messages.stream(")
REQUIRED_KEYS = frozenset({"model", "messages", "system", "max_tokens"})
BETAS_KEY = "betas"
CM_KEY = "context_management"

# What a request call that sends a builder's result starts with: ``(r,`` or ``({...r``.
_FIRST_ARG = re.compile(rb"[A-Za-z_$][\w$]*[,)]|\{\.\.\.[A-Za-z_$]")
# The request generator is 5-21 KB in every release; its start is searched this far back.
LOOKBACK = 256 * 1024
_GENERATOR = frozenset({"generator_function_declaration"})
_BUILDERS = frozenset({"arrow_function", "function_expression", "function"})

_MAX_TOKENS_PAIR = """
(pair key: (property_identifier) @key (#eq? @key "max_tokens")) @pair
"""
_CALLS = """
(call_expression function: (identifier) @fn) @call
"""
_REQUESTS = """
(call_expression
  function: (member_expression
    object: (member_expression property: (property_identifier) @msgs (#eq? @msgs "messages"))
    property: (property_identifier) @method (#match? @method "^(create|stream)$"))) @call
"""


@dataclass(frozen=True)
class Watch:
    """One request call that sends the builder's result (byte range of the call)."""

    start: int
    end: int
    method: str  # "create" | "stream"


@dataclass(frozen=True)
class Builder:
    """The request object of the loop's builder and the calls that send it."""

    object_start: int  # the object literal to wrap
    object_end: int
    name: str  # the builder's local name: for messages only, never for matching
    generator: str
    watches: tuple[Watch, ...]
    has_context_management: bool
    shape: str
    excerpt: str


@dataclass(frozen=True)
class Search:
    generators: tuple[str, ...]  # names of the generators that make request calls
    candidates: tuple[Builder, ...]
    rejected: tuple[str, ...]


@dataclass(frozen=True)
class Found:
    """The outcome: ``builder`` when exactly one, else ``reason`` says why not."""

    builder: Builder | None
    reason: str
    search: Search

    @property
    def shape(self) -> str:
        return self.builder.shape if self.builder else "none"


def search(data: bytes) -> Search:
    """Every candidate builder in ``data`` (pure; no I/O)."""
    index = jsparse.FunctionIndex(data)
    gens: dict[int, ParsedFunction] = {}
    for needle in REQUEST_CALLS:
        for hit in jsparse.iter_find(data, needle):
            if _FIRST_ARG.match(data, hit + len(needle)) is None:
                continue  # step 4 on bytes: the first argument is not a name or a spread
            gen = index.enclosing(hit, b"async function*", _GENERATOR, LOOKBACK)
            if gen is not None:
                gens.setdefault(gen.start, gen)
    candidates: list[Builder] = []
    rejected: list[str] = []
    for gen in gens.values():
        _examine(data, gen, candidates, rejected)
    names = tuple(_text(g.node.child_by_field_name("name")) for g in gens.values())
    return Search(names, tuple(candidates), tuple(rejected))


def locate(data: bytes) -> Found:
    """Exactly one builder, or None with the reason (never raises for a missing site)."""
    found = search(data)
    if len(found.candidates) == 1:
        return Found(found.candidates[0], "", found)
    if found.candidates:
        listing = "; ".join(
            f"byte {c.object_start} ({c.name} in {c.generator}): {c.excerpt}"
            for c in found.candidates
        )
        return Found(
            None,
            f"{len(found.candidates)} request builders found, expected exactly one; "
            f"ctxpatch refuses to guess: {listing}",
            found,
        )
    if not found.generators:
        why = "no .beta.messages.create/stream call inside an async generator (the query loop)"
    else:
        why = "no request builder whose result the loop sends: " + (
            "; ".join(found.rejected[:6])
            or "no request object with model, messages, system, max_tokens and betas in "
            + ", ".join(found.generators)
        )
    return Found(None, why, found)


def _examine(data: bytes, gen: ParsedFunction, out: list[Builder], rejected: list[str]) -> None:
    gname = _text(gen.node.child_by_field_name("name")) or "an anonymous generator"
    for caps in jsparse.matches(jsparse.query(_MAX_TOKENS_PAIR), gen.node, 0, gen.node.end_byte):
        obj = caps["pair"][0].parent
        if obj is None or obj.type != "object":
            continue
        direct, spread = _keys(obj)
        where = f"byte {gen.abs(obj)[0]} in {gname}"
        if not direct >= REQUIRED_KEYS or BETAS_KEY not in direct | spread:
            continue
        fn = _returned_by(obj)
        if fn is None:
            rejected.append(f"{where} (a request object not returned by a builder function)")
            continue
        name = _bound_name(fn)
        if name is None:
            rejected.append(f"{where} (its builder function is not bound to a name)")
            continue
        watches = _sent_by(gen, name)
        if not watches:
            rejected.append(f"{where} (the result of {name}(...) is never sent by a request call)")
            continue
        start, end = gen.abs(obj)
        cm = CM_KEY in direct | spread
        methods = sorted({w.method for w in watches}, reverse=True)
        out.append(
            Builder(
                object_start=start,
                object_end=end,
                name=name,
                generator=gname,
                watches=tuple(watches),
                has_context_management=cm,
                shape="+".join(methods) + ("/cm" if cm else ""),
                excerpt=_context(data, start, before=30, after=120),
            )
        )


def _key(pair: Node) -> str:
    key = pair.child_by_field_name("key")
    text = _text(key)
    if key is not None and key.type == "string":
        return text[1:-1]
    return text


def _keys(obj: Node) -> tuple[set[str], set[str]]:
    """Direct keys of ``obj``, and keys of objects spread into it conditionally."""
    direct: set[str] = set()
    spread: set[str] = set()
    for child in obj.named_children:
        if child.type == "pair":
            direct.add(_key(child))
        elif child.type == "shorthand_property_identifier":
            direct.add(_text(child))
        elif child.type == "spread_element":
            for inner in _spread_objects(child.named_children[0] if child.named_children else None):
                spread |= {_key(p) for p in inner.named_children if p.type == "pair"}
    return direct, spread


def _spread_objects(node: Node | None) -> list[Node]:
    """Objects a spread may yield: ``c?{..}:{..}``, ``a&&{..}``, ``({..})``."""
    if node is None:
        return []
    if node.type == "object":
        return [node]
    if node.type == "parenthesized_expression":
        return [o for c in node.named_children for o in _spread_objects(c)]
    if node.type == "ternary_expression":
        return _spread_objects(node.child_by_field_name("consequence")) + _spread_objects(
            node.child_by_field_name("alternative")
        )
    if node.type == "binary_expression":
        return _spread_objects(node.child_by_field_name("right"))
    return []


def _returned_by(obj: Node) -> Node | None:
    """The function that returns ``obj`` as its value, or None."""
    cur = obj
    parent = cur.parent
    while parent is not None and parent.type == "sequence_expression":
        if parent.named_children[-1] != cur:
            return None
        cur, parent = parent, parent.parent
    if parent is None:
        return None
    if parent.type == "return_statement":
        fn = jsparse.nearest_function(parent)
    elif parent.type == "parenthesized_expression" and cur == obj:
        arrow = parent.parent
        if arrow is None or arrow.type != "arrow_function":
            return None
        if arrow.child_by_field_name("body") != parent:
            return None
        fn = arrow
    else:
        return None
    return fn if fn is not None and fn.type in _BUILDERS else None


def _bound_name(fn: Node) -> str | None:
    holder = fn.parent
    if holder is None:
        return None
    if holder.type == "variable_declarator" and holder.child_by_field_name("value") == fn:
        name = holder.child_by_field_name("name")
    elif holder.type == "assignment_expression" and holder.child_by_field_name("right") == fn:
        name = holder.child_by_field_name("left")
    else:
        return None
    return _text(name) if name is not None and name.type == "identifier" else None


def _sent_by(gen: ParsedFunction, builder: str) -> list[Watch]:
    """Request calls of ``gen`` whose first argument is (a spread of) ``builder``'s result."""
    results: set[str] = set()
    for caps in jsparse.matches(jsparse.query(_CALLS), gen.node, 0, gen.node.end_byte):
        if _text(caps["fn"][0]) != builder:
            continue
        holder = caps["call"][0].parent
        if holder is None:
            continue
        if holder.type == "variable_declarator":
            name = holder.child_by_field_name("name")
        elif holder.type == "assignment_expression":
            name = holder.child_by_field_name("left")
        else:
            continue
        if name is not None and name.type == "identifier":
            results.add(_text(name))
    watches: list[Watch] = []
    for caps in jsparse.matches(jsparse.query(_REQUESTS), gen.node, 0, gen.node.end_byte):
        call = caps["call"][0]
        member = call.child_by_field_name("function")
        inner = member.child_by_field_name("object") if member is not None else None
        beta = inner.child_by_field_name("object") if inner is not None else None
        if beta is None or beta.type != "member_expression":
            continue
        if _text(beta.child_by_field_name("property")) != "beta":
            continue
        args = call.child_by_field_name("arguments")
        first = args.named_children[0] if args is not None and args.named_children else None
        if first is None or not _carries(first, results):
            continue
        start, end = gen.abs(call)
        watches.append(Watch(start, end, _text(caps["method"][0])))
    return watches


def _carries(arg: Node, results: set[str]) -> bool:
    if arg.type == "identifier":
        return _text(arg) in results
    if arg.type != "object":
        return False
    for child in arg.named_children:
        if child.type == "spread_element" and child.named_children:
            inner = child.named_children[0]
            if inner.type == "identifier" and _text(inner) in results:
                return True
    return False


def _text(node: Node | None) -> str:
    return node.text.decode() if node is not None and node.text is not None else ""


def _context(data: bytes, at: int, before: int = 30, after: int = 60) -> str:
    s = data[max(0, at - before) : at + after].decode("utf-8", "replace")
    return s.replace("\n", "\\n")
