"""Byte-preserving edits of a JSON file that may hold comments and trailing commas (pure).

Claude Code's settings are JSON that people edit by hand; ctxpatch adds its entries and takes
them away without touching any other byte. The text is parsed with tree-sitter's JavaScript
grammar (already a dependency: JSON with comments and trailing commas is a JavaScript
expression), which gives every member's byte span; an edit splices bytes at those spans:

* :func:`insert_member` / :func:`append_element` add after the container's last item, in the
  container's own layout (its members' indentation, a trailing comma kept where there was one,
  one line for a one-line container);
* :func:`remove_item` takes away one member or element and the separator before it (the one
  :func:`insert_member` added), so inserting then removing gives the original bytes back.

Values are read with :func:`to_python` (strings, numbers, literals, objects, arrays).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from ctxpatch.errors import CtxpatchError


class BadJson(CtxpatchError, code="bad_settings"):
    """A settings file ctxpatch cannot edit safely (it writes nothing then)."""


@dataclass(frozen=True)
class Doc:
    """A parsed file: its bytes and the root object's node (offsets are into ``data``)."""

    data: bytes
    root: Node
    _shift: int = 1  # the "(" parsed before the text

    def text(self, node: Node) -> bytes:
        return self.data[self.start(node) : self.end(node)]

    def start(self, node: Node) -> int:
        return node.start_byte - self._shift

    def end(self, node: Node) -> int:
        return node.end_byte - self._shift


def load(data: bytes, what: str = "the settings file") -> Doc:
    """Parse ``data``; refuse (:class:`BadJson`) anything but one object, without errors."""
    from patcher.jsparse import parser

    tree = parser().parse(b"(" + data + b"\n)")
    prog = tree.root_node
    stmts = [c for c in prog.named_children if c.type != "comment"]
    node = stmts[0] if len(stmts) == 1 else None
    if node is not None and node.type == "expression_statement":
        inner = [c for c in node.named_children if c.type != "comment"]
        node = inner[0] if len(inner) == 1 else None
    if node is not None and node.type == "parenthesized_expression":
        inner = [c for c in node.named_children if c.type != "comment"]
        node = inner[0] if len(inner) == 1 else None
    if node is None or node.type != "object" or prog.has_error or _has_error(node):
        raise BadJson(
            f"{what} is not a JSON object ctxpatch can edit",
            why="it does not parse as one object (JSON, comments and trailing commas allowed)",
            hint="fix the file (or move it away), then run the command again; nothing was written",
        )
    return Doc(data, node)


def _has_error(node: Node) -> bool:
    return node.has_error or node.is_missing


def items(container: Node) -> list[Node]:
    """An object's ``pair`` nodes or an array's elements, comments left out."""
    return [c for c in container.named_children if c.type != "comment"]


def key_of(doc: Doc, pair: Node) -> str | None:
    key = pair.child_by_field_name("key")
    if key is None or key.type != "string":
        return None
    try:
        value = json.loads(doc.text(key))
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def value_of(pair: Node) -> Node:
    node = pair.child_by_field_name("value")
    assert node is not None  # a pair without a value does not parse
    return node


def member(doc: Doc, obj: Node, key: str) -> Node | None:
    """The last ``pair`` named ``key`` (the one JSON.parse keeps), or None."""
    found = [p for p in items(obj) if p.type == "pair" and key_of(doc, p) == key]
    return found[-1] if found else None


def to_python(doc: Doc, node: Node) -> Any:
    """The JSON value of ``node`` (an object, array, string, number, true/false/null)."""
    t = node.type
    if t == "object":
        return {
            key_of(doc, p): to_python(doc, value_of(p)) for p in items(node) if p.type == "pair"
        }
    if t == "array":
        return [to_python(doc, e) for e in items(node)]
    if t in ("string", "number"):
        return json.loads(doc.text(node))
    if t in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[t]
    if t == "unary_expression":  # -1
        return json.loads(doc.text(node))
    raise BadJson(f"a value ctxpatch cannot read: {doc.text(node)[:40]!r}")


def _line_indent(data: bytes, offset: int) -> bytes:
    """The whitespace that starts the line holding ``offset``."""
    start = data.rfind(b"\n", 0, offset) + 1
    end = start
    while end < len(data) and data[end : end + 1] in (b" ", b"\t"):
        end += 1
    return data[start:end]


def indent_unit(doc: Doc) -> bytes:
    """One level of indentation in this file (its root's first member's), default 2 spaces."""
    first = items(doc.root)
    if first:
        unit = _line_indent(doc.data, doc.start(first[0]))
        if unit and unit.strip() == b"" and b"\n" in doc.data[: doc.start(first[0])]:
            return unit
    return b"  "


def _dump(value: Any, unit: bytes, indent: bytes) -> bytes:
    text = json.dumps(value, indent=unit.decode(), ensure_ascii=False).encode()
    return text.replace(b"\n", b"\n" + indent)


def _after_last(doc: Doc, container: Node, last: Node) -> tuple[int, bool]:
    """Where to insert after ``last``: (offset, True) right after a trailing comma, or
    (offset, False) right after the item."""
    for child in container.children:
        if child.start_byte >= last.end_byte and child.type == ",":
            return doc.end(child), True
    return doc.end(last), False


def _insert(doc: Doc, container: Node, item: bytes, unit: bytes) -> bytes:
    data = doc.data
    existing = items(container)
    open_end = doc.start(container) + 1
    close_start = doc.end(container) - 1
    own = _line_indent(data, doc.start(container))
    if not existing:
        inner = data[open_end:close_start]
        if b"\n" not in inner and inner.strip() == b"":
            piece = b"\n" + own + unit + item + b"\n" + own
            return data[:open_end] + piece + data[close_start:]
        piece = b"\n" + own + unit + item
        return data[:open_end] + piece + data[open_end:]
    last = existing[-1]
    offset, trailing = _after_last(doc, container, last)
    multiline = b"\n" in data[open_end : doc.start(existing[0])]
    if not multiline:
        piece = b" " + item + b"," if trailing else b", " + item
        return data[:offset] + piece + data[offset:]
    indent = _line_indent(data, doc.start(last))
    piece = b"\n" + indent + item + b"," if trailing else b",\n" + indent + item
    return data[:offset] + piece + data[offset:]


def _item_indent(doc: Doc, container: Node, unit: bytes) -> tuple[bytes, bool]:
    existing = items(container)
    open_end = doc.start(container) + 1
    if existing and b"\n" in doc.data[open_end : doc.start(existing[0])]:
        return _line_indent(doc.data, doc.start(existing[-1])), True
    if existing:
        return b"", False  # a one-line container: the value on one line too
    return _line_indent(doc.data, doc.start(container)) + unit, True


def insert_member(doc: Doc, obj: Node, key: str, value: Any) -> bytes:
    """``doc``'s bytes with ``"key": value`` added as ``obj``'s last member."""
    unit = indent_unit(doc)
    indent, multiline = _item_indent(doc, obj, unit)
    dumped = _dump(value, unit, indent) if multiline else json.dumps(value).encode()
    item = json.dumps(key, ensure_ascii=False).encode() + b": " + dumped
    return _insert(doc, obj, item, unit)


def append_element(doc: Doc, arr: Node, value: Any) -> bytes:
    """``doc``'s bytes with ``value`` added as ``arr``'s last element."""
    unit = indent_unit(doc)
    indent, multiline = _item_indent(doc, arr, unit)
    dumped = _dump(value, unit, indent) if multiline else json.dumps(value).encode()
    return _insert(doc, arr, dumped, unit)


def remove_item(doc: Doc, container: Node, item: Node) -> bytes:
    """``doc``'s bytes without ``item`` (a member or element of ``container``) and the
    separator before it (after it, for the first of several)."""
    data = doc.data
    existing = items(container)
    i = next(n for n, x in enumerate(existing) if x.id == item.id)
    if i > 0:
        return data[: doc.end(existing[i - 1])] + data[doc.end(item) :]
    if len(existing) > 1:
        return data[: doc.start(item)] + data[doc.start(existing[1]) :]
    return data[: doc.start(container) + 1] + data[doc.end(container) - 1 :]
