"""The auto-compact token count: what the should-auto-compact function hands the warning state.

``{isAboveAutoCompactThreshold:x}=warningState(COUNT(m))``: ``COUNT`` is usage only, or usage
plus an estimate of the messages newer than the last usage record (from 2.1.2). For the latter
the estimator's image constant, chars-per-token divisor, attachment and block handling, and where
the newer messages start are read (profile fields ``newer_*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tree_sitter import Node

from patcher import jsparse
from patcher.inspect.finding import Finding, Notes, present
from patcher.inspect.jsconst import (
    Reader,
    Unresolved,
    callee,
    member_call,
    name,
    number,
    op,
    text,
    walk,
)
from patcher.inspect.patterns import image_and_divisor, last_return, type_comparison
from patcher.jsparse import FUNCTION_TYPES, ParsedFunction


@dataclass(frozen=True)
class Counter(Finding):
    """None: not read."""

    mode: Literal["usage", "usage+newer"] | None = None
    from_message_start: bool | None = None
    counts_attachments: bool | None = None
    renders_attachments: bool | None = None
    counts_all_blocks: bool | None = None

    def features(self) -> dict[str, Any]:
        return present(
            count_mode=self.mode,
            newer_from_message_start=self.from_message_start,
            newer_counts_attachments=self.counts_attachments,
            newer_renders_attachments=self.renders_attachments,
            newer_counts_all_blocks=self.counts_all_blocks,
        )


def extract(r: Reader, warning_state: str | None) -> Counter:
    """The counter handed to ``warning_state`` (the function :mod:`.thresholds` found)."""
    notes = Notes()
    fields: dict[str, Any] = {}
    if warning_state:
        try:
            _read(r, notes, fields, warning_state)
        except Unresolved as e:
            notes.unresolved.append(str(e))
    return Counter(**fields, **notes.common())


def _read(r: Reader, notes: Notes, out: dict[str, Any], wname: str) -> None:
    for hit in jsparse.iter_find(r.data, b"{isAboveAutoCompactThreshold:"):
        fn = r.enclosing(hit)
        if fn is None or name(fn) == wname:
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
        if value is None or value.type != "call_expression" or callee(value) != wname:
            continue
        args = value.child_by_field_name("arguments")
        if args is None or not args.named_children:
            continue
        scope = r.scope(fn)
        count: Node | None = scope.follow(args.named_children[0])
        if count is not None and op(count) == "-":  # tokens - already-freed
            count = scope.follow_field(count, "left")
        counter_name = callee(count)
        if counter_name is None:
            continue
        notes.functions["should_autocompact"] = name(fn)
        notes.functions["autocompact_counter"] = counter_name
        counter = r.function(counter_name)
        if counter is None:
            notes.unresolved.append(f"count_mode: counter {counter_name} not found")
            return
        _newer(r, notes, out, counter)
        return


def _newer(r: Reader, notes: Notes, out: dict[str, Any], counter: ParsedFunction) -> None:
    newer = _newer_estimate(counter)
    out["mode"] = "usage+newer" if newer else "usage"
    if newer is None:
        return
    notes.functions["newer_estimate"] = newer
    start = _from_message_start(r, counter)
    if isinstance(start, bool):
        out["from_message_start"] = start
    else:
        notes.unresolved.append(f"newer_from_message_start: {start}")
    est = r.function(newer)
    if est is None:
        notes.unresolved.append(f"newer_image_tokens: estimator {newer} not found")
        return
    img, div = image_and_divisor(r, est, depth=4)
    renders = _renders_attachments(r, est)
    out["counts_attachments"] = renders is not None
    out["renders_attachments"] = renders
    blocks = _counts_all_blocks(r, est)
    if isinstance(blocks, bool):
        out["counts_all_blocks"] = blocks
    else:
        notes.unresolved.append(f"newer_counts_all_blocks: {blocks}")
    if img is not None:
        notes.constants["newer_image_tokens"] = img
    if div is not None:
        notes.constants["newer_chars_per_token"] = div


def _newer_estimate(counter: ParsedFunction) -> str | None:
    """``usage(last) + ESTIMATE(messages.slice(i+1))``: the estimator of the newer messages."""
    for node in walk(counter.node):
        if node.type != "call_expression":
            continue
        args = node.child_by_field_name("arguments")
        first = args.named_children[0] if args is not None and args.named_child_count else None
        if first is not None and member_call(first, ("slice",)):
            return callee(node)
    return None


def _from_message_start(r: Reader, counter: ParsedFunction) -> bool | str:
    """Whether the counter starts the newer messages at the first record of the last reply's
    message id (profile ``newer_from_message_start``).

    It counts ``ESTIMATE(m.slice(i+1))``; in 2.1.64 and 2.1.69+ an inner loop walks back and
    moves ``i`` to an earlier record when ``ID(m[j])===ID(m[i])``, where ``ID`` reads
    ``.message.id``. Without that loop ``i`` is only decremented. A string: why it is unclear.
    """
    index = None
    for node in walk(counter.node):
        args = node.child_by_field_name("arguments")
        if not member_call(node, ("slice",)) or args is None:
            continue
        first = args.named_children[0] if args.named_child_count else None
        left = first.child_by_field_name("left") if first is not None and op(first) == "+" else None
        if left is not None and left.type == "identifier":
            index = text(left)
            break
    if index is None:
        return f"{name(counter)}: no m.slice(i+1)"
    scope = r.scope(counter)
    for node in walk(counter.node):
        if node.type != "assignment_expression" or text(node.child_by_field_name("left")) != index:
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
        if op(cmp) != "===":
            continue
        callees = []
        for side in ("left", "right"):
            value = scope.follow_field(cmp, side)
            nodes = [value, *walk(value)] if value is not None else []
            callees.append({c for n in nodes if (c := callee(n)) is not None})
        for fname in sorted(callees[0] & callees[1]):
            fn = r.function(fname)
            if fn is not None and b".message.id" in r.body(fn):
                return True
    return False


def _renders_attachments(r: Reader, est: ParsedFunction) -> bool | None:
    """How the newer estimate counts an attachment record (``None``: no attachment branch).

    2.1.33-2.1.44: ``if(x.type==="attachment"&&x.attachment)return COUNT(JSON(x.attachment))``;
    2.1.45+: ``{let ms=RENDER(x.attachment),n=0;for(let m of ms)n+=COUNT(m.message.content)}``:
    the branch loops over the messages the attachment is rendered to and counts their content.
    """
    found = type_comparison(r, est, "attachment", depth=1)
    if found is None:
        return None
    cur: Node | None = found[0]
    while cur is not None and cur.type != "if_statement":
        if cur.type in FUNCTION_TYPES:
            return False
        cur = cur.parent
    body = cur.child_by_field_name("consequence") if cur is not None else None
    if body is None:
        return False
    loops = [n for n in walk(body) if n.type == "for_in_statement"]
    return any(
        n.type == "member_expression" and text(n).endswith(".message.content")
        for loop in loops
        for n in walk(loop)
    )


def _counts_all_blocks(r: Reader, est: ParsedFunction) -> bool | str:
    """Whether the newer estimate counts every content block (profile ``newer_counts_all_blocks``).

    Its block function is the one testing ``x.type==="image"``. Up to 2.1.73 it counts text,
    tool_result and images and ends in ``return 0``; from 2.1.74 it also has ``"tool_use"`` and
    ``"thinking"`` branches and ends by counting the block's JSON. A string: why it is unclear.
    """
    found = type_comparison(r, est, "image", depth=4)
    if found is None:
        return "no image branch in the estimator"
    fn = found[1]
    tool_use = type_comparison(r, fn, "tool_use", depth=0) is not None
    thinking = type_comparison(r, fn, "thinking", depth=0) is not None
    last = last_return(fn)
    zero = last is not None and last.type == "number" and number(text(last)) == 0
    if tool_use and thinking and not zero:
        return True
    if not (tool_use or thinking) and zero:
        return False
    return (
        f"{name(fn)}: tool_use branch {tool_use}, thinking branch {thinking}, "
        f"other blocks {'0' if zero else 'counted'}"
    )
