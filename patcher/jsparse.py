"""tree-sitter set-up and windowed parsing of single functions.

A full tree-sitter parse of a 13.7 MB ``cli.js`` takes ~2.5 s and ~560 MB. ctxpatch never does
that: it finds byte anchors with ``bytes.find`` and parses only the function that encloses an
anchor, starting at the function's own ``function`` keyword and growing the window until the
function's node is complete. All offsets are UTF-8 byte offsets into the original file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import tree_sitter_javascript as tsjs
from tree_sitter import Language, Node, Parser, Query, QueryCursor

FUNCTION_TYPES = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_expression",
        "function",
        "generator_function",
        "arrow_function",
        "method_definition",
    }
)

_FIRST_WINDOW = 16 * 1024
_MAX_WINDOW = 4 * 1024 * 1024
_MAX_CANDIDATES = 24
_MAX_LOOKBACK = 3 * 1024 * 1024
_TRUNCATED = frozenset({"async", "function"})


@cache
def language() -> Language:
    return Language(tsjs.language())


def parser() -> Parser:
    return Parser(language())


@cache
def query(source: str) -> Query:
    return Query(language(), source)


def has_error(node: Node) -> bool:
    return node.has_error or node.is_missing


@dataclass(frozen=True)
class ParsedFunction:
    """One function parsed on its own. ``base`` is its first byte in the whole file."""

    node: Node
    base: int

    @property
    def start(self) -> int:
        return self.base + self.node.start_byte

    @property
    def end(self) -> int:
        return self.base + self.node.end_byte

    def node_at(self, start: int, end: int) -> Node | None:
        """The smallest node covering file bytes [start, end), or None if outside."""
        if start < self.start or end > self.end:
            return None
        return self.node.descendant_for_byte_range(start - self.base, end - self.base)

    def abs(self, node: Node) -> tuple[int, int]:
        return self.base + node.start_byte, self.base + node.end_byte


def parse_function_at(data: bytes, start: int, types: frozenset[str]) -> ParsedFunction | None:
    """Parse the function declaration that begins at byte ``start`` (its ``async``/``function``).

    Returns None when the bytes there do not begin a complete, error-free function of one of
    ``types`` (for example ``async function*`` inside a string literal).
    """
    size = _FIRST_WINDOW
    p = parser()
    while True:
        window = data[start : start + size]
        root = p.parse(window).root_node
        first = root.children[0] if root.child_count else None
        if first is None:
            return None
        if first.type not in types:
            # A window that cuts a long function short can make tree-sitter's error recovery
            # flatten the declaration into bare tokens (``async``, ``function``, ``*``, ...):
            # grow and retry. (A keyword inside a string gives an ERROR node instead.)
            # Or it makes one node (ERROR, expression_statement) of everything up to the
            # window's end. Either way the window cut the function short.
            truncated = not first.is_named and first.type in _TRUNCATED
            truncated = truncated or first.end_byte >= len(window)
            if truncated and root.has_error and start + size < len(data):
                if size >= _MAX_WINDOW:
                    return None
                size *= 2
                continue
            return None
        complete = not has_error(first) and first.end_byte < len(window)
        if complete or start + size >= len(data):
            if not complete and has_error(first):
                return None
            # Confirm on its own: the exact bytes of the function re-parse without error.
            own = p.parse(data[start : start + first.end_byte]).root_node
            if has_error(own) or own.child_count != 1:
                return None
            return ParsedFunction(own.children[0], start)
        if size >= _MAX_WINDOW:
            return None
        size *= 2


class FunctionIndex:
    """Finds enclosing functions in one file, parsing each candidate function at most once."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._parsed: dict[tuple[int, frozenset[str]], ParsedFunction | None] = {}

    def at(self, start: int, types: frozenset[str]) -> ParsedFunction | None:
        key = (start, types)
        if key not in self._parsed:
            self._parsed[key] = parse_function_at(self.data, start, types)
        return self._parsed[key]

    def enclosing(
        self,
        offset: int,
        keyword: bytes,
        types: frozenset[str],
        lookback: int = _MAX_LOOKBACK,
    ) -> ParsedFunction | None:
        """The innermost function of ``types``, found by ``keyword``, that encloses ``offset``.

        ``keyword`` is searched backwards from ``offset``; an ``async `` right before it is
        included, so ``b"function"`` finds both plain and async declarations. Only functions
        that start at most ``lookback`` bytes before ``offset`` are tried.
        """
        data = self.data
        lo = max(0, offset - lookback)
        pos = offset
        for _ in range(_MAX_CANDIDATES):
            pos = data.rfind(keyword, lo, pos)
            if pos < 0:
                return None
            if pos > 0 and is_ident_byte(data[pos - 1]):
                continue
            start = pos - 6 if data[max(0, pos - 6) : pos] == b"async " else pos
            fn = self.at(start, types)
            if fn is not None and fn.start <= offset < fn.end:
                return fn
        return None


def nearest_function(node: Node) -> Node | None:
    cur = node.parent
    while cur is not None and cur.type not in FUNCTION_TYPES:
        cur = cur.parent
    return cur


def iter_find(data: bytes, needle: bytes, start: int = 0, end: int | None = None) -> Iterator[int]:
    end = len(data) if end is None else end
    i = data.find(needle, start, end)
    while i >= 0:
        yield i
        i = data.find(needle, i + 1, end)


_IDENT_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


def is_ident_byte(b: int) -> bool:
    """Can this byte be part of a (minified, ASCII) JavaScript identifier?"""
    return b in _IDENT_BYTES


def matches(q: Query, node: Node, start: int, end: int) -> list[dict[str, list[Node]]]:
    cursor = QueryCursor(q)
    cursor.set_byte_range(start, end)
    return [caps for _, caps in cursor.matches(node)]


def error_free(source: bytes) -> bool:
    """True when ``source`` parses as a program with no ERROR or MISSING node."""
    return not has_error(parser().parse(source).root_node)
