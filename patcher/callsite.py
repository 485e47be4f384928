"""Find the micro-compaction call of the query loop, by meaning, never by minified names.

Meaning, in order:

1. *The micro-compaction function*: a named ``async function`` whose body reads
   ``process.env.DISABLE_MICROCOMPACT`` or passes the string ``"tengu_microcompact"``
   (Claude Code 1.0.60-2.1.68), or the ``microcompact`` slot of the query-deps object
   ``{callModel, microcompact, autocompact, ...}`` that the loop calls as
   ``deps.microcompact(...)`` (2.1.63 on, where the function itself became a stub).
2. *Its call inside the query loop*: an awaited call whose nearest enclosing function is an
   ``async function*`` (the query-loop generator). Other call sites (``/compact``,
   ``/context``) live in plain async functions and are ignored.
3. *The messages variable*: the identifier passed as the call's first argument that then
   receives ``.messages`` of the call's result, either ``M=(await MC(M,...)).messages`` (S6)
   or ``R=await MC(M,...); ... M=R.messages`` (S0-S5).

The site is the byte range of the ``.messages`` expression that is assigned to the messages
variable; the patch wraps exactly that expression with ``_aggressiveTextPrune(...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from patcher import jsparse
from patcher.jsparse import ParsedFunction

MC_ENV = b"DISABLE_MICROCOMPACT"
MC_EVENT = b'"tengu_microcompact"'
DEPS_CALL = b".microcompact("

_GENERATOR = frozenset({"generator_function_declaration"})
_DECLARATION = frozenset({"function_declaration"})

_MESSAGES_ASSIGN = """
(assignment_expression
  left: (identifier) @var
  right: (member_expression
    object: (identifier) @result
    property: (property_identifier) @prop (#eq? @prop "messages")) @value) @assign
"""


@dataclass(frozen=True)
class Candidate:
    """One awaited micro-compaction call inside an async generator."""

    call_start: int  # byte offset of the call expression
    call_end: int
    callee: str  # "Vd" or "H.microcompact": for messages only, never for matching
    generator: str  # name of the enclosing async generator
    messages_var: str
    wrap_start: int  # the `.messages` expression to wrap
    wrap_end: int
    shape: str
    excerpt: str


@dataclass(frozen=True)
class Site:
    candidate: Candidate
    mc_functions: tuple[str, ...]  # names of functions carrying the MC literals

    @property
    def shape(self) -> str:
        return self.candidate.shape


@dataclass(frozen=True)
class Search:
    """Everything the search saw: what the error messages and ``inspect`` report."""

    mc_functions: tuple[str, ...]
    deps_calls: int
    candidates: tuple[Candidate, ...]
    rejected: tuple[str, ...]  # call sites seen and why they were not the loop call


def search(data: bytes) -> Search:
    """Collect every candidate site in ``data`` (pure; no I/O)."""
    index = jsparse.FunctionIndex(data)
    mc_names = _mc_function_names(index)
    candidates: list[Candidate] = []
    rejected: list[str] = []
    seen: set[int] = set()
    for name in mc_names:
        needle = name.encode() + b"("
        for hit in jsparse.iter_find(data, needle):
            if hit > 0 and (jsparse.is_ident_byte(data[hit - 1]) or data[hit - 1] == ord(".")):
                continue
            _examine(index, hit, len(name), "identifier", candidates, rejected, seen)
    deps_calls = 0
    for hit in jsparse.iter_find(data, DEPS_CALL):
        deps_calls += 1
        _examine(index, hit + 1, len("microcompact"), "member", candidates, rejected, seen)
    return Search(tuple(mc_names), deps_calls, tuple(candidates), tuple(rejected))


def _mc_function_names(index: jsparse.FunctionIndex) -> list[str]:
    """Names of the named functions that read DISABLE_MICROCOMPACT or emit tengu_microcompact."""
    data = index.data
    names: list[str] = []
    for needle, check in ((MC_ENV, _is_env_read), (MC_EVENT, _is_event_string)):
        for hit in jsparse.iter_find(data, needle):
            fn = index.enclosing(hit, b"function", _DECLARATION)
            if fn is None:
                continue
            node = fn.node_at(hit, hit + len(needle))
            if node is None or not check(node):
                continue
            name_node = fn.node.child_by_field_name("name")
            if name_node is None or name_node.text is None:
                continue
            if fn.node.children[0].type != "async":
                continue
            name = name_node.text.decode()
            if name not in names:
                names.append(name)
    return names


def _is_env_read(node: Node) -> bool:
    """``process.env.DISABLE_MICROCOMPACT`` (a member read, not a mention in a string)."""
    parent = node.parent
    if node.type != "property_identifier" or parent is None or parent.type != "member_expression":
        return False
    obj = parent.child_by_field_name("object")
    return obj is not None and obj.text == b"process.env"


def _is_event_string(node: Node) -> bool:
    """The string literal ``"tengu_microcompact"`` itself (not inside a longer string)."""
    current: Node | None = node
    while current is not None and current.type != "string":
        current = current.parent
    return current is not None and current.text == MC_EVENT


def _examine(
    index: jsparse.FunctionIndex,
    hit: int,
    length: int,
    kind: str,
    out: list[Candidate],
    rejected: list[str],
    seen: set[int],
) -> None:
    data = index.data
    where = f"byte {hit}: {_context(data, hit)}"
    gen = index.enclosing(hit, b"async function*", _GENERATOR)
    if gen is None:
        rejected.append(f"{where} (not inside an async generator)")
        return
    ident = gen.node_at(hit, hit + length)
    call = _call_of(ident, kind)
    if call is None:
        rejected.append(f"{where} (not a call of the micro-compaction function)")
        return
    if jsparse.nearest_function(call) != gen.node:
        rejected.append(f"{where} (inside a nested function of the generator)")
        return
    start, _ = gen.abs(call)
    if start in seen:
        return
    seen.add(start)
    cand = _candidate(data, gen, call)
    if cand is None:
        rejected.append(f"{where} (its result's .messages is not assigned to its first argument)")
        return
    out.append(cand)


def _call_of(ident: Node | None, kind: str) -> Node | None:
    if ident is None:
        return None
    if kind == "identifier":
        if ident.type != "identifier":
            return None
        call = ident.parent
        if call is None or call.type != "call_expression":
            return None
        return call if call.child_by_field_name("function") == ident else None
    if ident.type != "property_identifier" or ident.text != b"microcompact":
        return None
    member = ident.parent
    call = member.parent if member is not None else None
    if member is None or member.type != "member_expression" or call is None:
        return None
    if call.type != "call_expression" or call.child_by_field_name("function") != member:
        return None
    return call


def _candidate(data: bytes, gen: ParsedFunction, call: Node) -> Candidate | None:
    awaited = call.parent
    if awaited is None or awaited.type != "await_expression":
        return None
    args = [a for a in (call.child_by_field_name("arguments") or call).named_children]
    if not args or args[0].type != "identifier" or args[0].text is None:
        return None
    messages_var = args[0].text.decode()
    target = _direct_messages(awaited, messages_var) or _later_messages(
        gen, call, awaited, messages_var
    )
    if target is None:
        return None
    call_start, call_end = gen.abs(call)
    wrap_start, wrap_end = gen.abs(target)
    name_node = gen.node.child_by_field_name("name")
    callee = call.child_by_field_name("function")
    return Candidate(
        call_start=call_start,
        call_end=call_end,
        callee=_text(callee),
        generator=_text(name_node),
        messages_var=messages_var,
        wrap_start=wrap_start,
        wrap_end=wrap_end,
        shape=_shape(data, gen, callee, args, awaited),
        excerpt=_context(data, call_start, before=40, after=160),
    )


def _direct_messages(awaited: Node, messages_var: str) -> Node | None:
    """S6: ``M=(await deps.microcompact(M,...)).messages``."""
    paren = awaited.parent
    member = paren.parent if paren is not None else None
    if paren is None or paren.type != "parenthesized_expression" or member is None:
        return None
    if member.type != "member_expression" or _text(member.child_by_field_name("property")) != (
        "messages"
    ):
        return None
    assign = member.parent
    if assign is None or assign.type != "assignment_expression":
        return None
    if assign.child_by_field_name("right") != member:
        return None
    return member if _text(assign.child_by_field_name("left")) == messages_var else None


def _later_messages(
    gen: ParsedFunction, call: Node, awaited: Node, messages_var: str
) -> Node | None:
    """S0-S5: ``R=await MC(M,...)`` then, later in the same function, ``M=R.messages``."""
    holder = awaited.parent
    if holder is None:
        return None
    if holder.type == "variable_declarator" and holder.child_by_field_name("value") == awaited:
        result = _text(holder.child_by_field_name("name"))
    elif holder.type == "assignment_expression" and holder.child_by_field_name("right") == awaited:
        result = _text(holder.child_by_field_name("left"))
    else:
        return None
    q = jsparse.query(_MESSAGES_ASSIGN)
    found = jsparse.matches(q, gen.node, call.end_byte, gen.node.end_byte)
    for caps in sorted(found, key=lambda c: c["assign"][0].start_byte):
        assign = caps["assign"][0]
        if assign.start_byte < call.end_byte or jsparse.nearest_function(assign) != gen.node:
            continue
        if _text(caps["result"][0]) != result:
            continue
        # The first use of R.messages decides: it must go to the messages variable.
        return caps["value"][0] if _text(caps["var"][0]) == messages_var else None
    return None


def _shape(
    data: bytes,
    gen: ParsedFunction,
    callee: Node | None,
    args: list[Node],
    awaited: Node,
) -> str:
    """The call-site shape label of ``versions.md`` §4 (informational)."""
    if callee is not None and callee.type == "member_expression":
        # S6: M=(await deps.microcompact(...)).messages; S5: R=await deps.microcompact(...)
        parent = awaited.parent
        return "S6" if parent is not None and parent.type == "parenthesized_expression" else "S5"
    void0 = len(args) > 1 and args[1].type == "unary_expression" and args[1].text == b"void 0"
    body = data[gen.start : gen.end]
    if len(args) == 1:
        return "S0"
    if void0 and len(args) == 3:
        if b"compactionInfo?.boundaryMessage" in body:
            return "S1''"
        return "S1'" if b'"query_microcompact_start"' in body else "S1"
    if void0 and len(args) == 4:
        return "S3"
    if not void0 and len(args) == 3:
        return "S4"
    return "other"


def _text(node: Node | None) -> str:
    return node.text.decode() if node is not None and node.text is not None else ""


def _context(data: bytes, at: int, before: int = 30, after: int = 60) -> str:
    s = data[max(0, at - before) : at + after].decode("utf-8", "replace")
    return s.replace("\n", "\\n")
