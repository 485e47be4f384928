"""The request field ``context_management`` (beta ``context-management-2025-06-27``): its edits.

``{"edits": [...]}`` asks the server to edit its own copy of the prompt before the model sees it
(what the server does: :mod:`engine.api.context_editing`). This module holds the two edits as
types (:class:`ClearToolUses`, :class:`ClearThinking`, the API's defaults), reads a request's
field as the API validates it (:func:`parse_edits`) and writes an edit back (:func:`to_json`).

Order (assumption, from Anthropic's context-editing page): when both edits are sent,
``clear_thinking_20251015`` must come first in ``edits``; :func:`parse_edits` rejects the other
order, a repeated edit type, unknown types or fields and out-of-range values with
:class:`EditError`, whose message is written in the API's 400 style (``<path>: <reason>``);
the exact wording of these 400s is not documented, except the real
"`clear_thinking_20251015` strategy requires `thinking` to be enabled or adaptive" and
":func:`unsupported_model_message`".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BETA = "context-management-2025-06-27"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
THINKING_REQUIRED = (
    "`clear_thinking_20251015` strategy requires `thinking` to be enabled or adaptive"
)


class EditError(ValueError):
    """A malformed ``context_management``; the message is the API's 400 text for it."""


@dataclass(frozen=True)
class ClearToolUses:
    """``clear_tool_uses_20250919``; the defaults are the API's."""

    trigger_type: str = "input_tokens"  # or "tool_uses"
    trigger_value: int = 100_000
    keep: int = 3  # tool uses kept (most recent)
    clear_at_least: int | None = None  # input tokens
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool | tuple[str, ...] = False


@dataclass(frozen=True)
class ClearThinking:
    """``clear_thinking_20251015``; ``keep`` thinking turns, or ``"all"``."""

    keep: int | str = 1


Edit = ClearToolUses | ClearThinking


def unsupported_model_message(model: str, edit_type: str = CLEAR_TOOL_USES) -> str:
    """The API's 400 text for a model without this edit (2.1.330 recognises it)."""
    return f"{model} does not support the {edit_type} context management strategy"


# --- parsing ----------------------------------------------------------------------------------


def _int_at(obj: Mapping[str, Any], path: str, unit: str, minimum: int) -> int:
    if not isinstance(obj, Mapping):
        raise EditError(f"{path}: Input should be an object")
    extra = sorted(set(obj) - {"type", "value"})
    if extra:
        raise EditError(f"{path}.{extra[0]}: Extra inputs are not permitted")
    if obj.get("type") != unit:
        raise EditError(f"{path}.type: Input should be '{unit}'")
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise EditError(f"{path}.value: Input should be a valid integer")
    if value < minimum:
        raise EditError(f"{path}.value: Input should be greater than or equal to {minimum}")
    return value


def _names(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EditError(f"{path}: Input should be a valid list of strings")
    return tuple(value)


def _parse_tool_uses(raw: Mapping[str, Any], path: str) -> ClearToolUses:
    allowed = {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}
    extra = sorted(set(raw) - allowed)
    if extra:
        raise EditError(f"{path}.{extra[0]}: Extra inputs are not permitted")
    base = ClearToolUses()
    trigger_type, trigger_value = base.trigger_type, base.trigger_value
    if raw.get("trigger") is not None:
        trig = raw["trigger"]
        ttype = trig.get("type") if isinstance(trig, Mapping) else None
        if ttype not in ("input_tokens", "tool_uses"):
            raise EditError(f"{path}.trigger.type: Input should be 'input_tokens' or 'tool_uses'")
        trigger_type = ttype
        trigger_value = _int_at(trig, f"{path}.trigger", ttype, 1)
    keep = base.keep
    if raw.get("keep") is not None:
        keep = _int_at(raw["keep"], f"{path}.keep", "tool_uses", 0)
    at_least = None
    if raw.get("clear_at_least") is not None:
        at_least = _int_at(raw["clear_at_least"], f"{path}.clear_at_least", "input_tokens", 0)
    exclude: tuple[str, ...] = ()
    if raw.get("exclude_tools") is not None:
        exclude = _names(raw["exclude_tools"], f"{path}.exclude_tools")
    inputs: bool | tuple[str, ...] = False
    if raw.get("clear_tool_inputs") is not None:
        ci = raw["clear_tool_inputs"]
        inputs = ci if isinstance(ci, bool) else _names(ci, f"{path}.clear_tool_inputs")
    return ClearToolUses(trigger_type, trigger_value, keep, at_least, exclude, inputs)


def _parse_thinking(raw: Mapping[str, Any], path: str) -> ClearThinking:
    extra = sorted(set(raw) - {"type", "keep"})
    if extra:
        raise EditError(f"{path}.{extra[0]}: Extra inputs are not permitted")
    keep = raw.get("keep")
    if keep is None:
        return ClearThinking()
    if keep == "all":
        return ClearThinking("all")
    if isinstance(keep, str):
        raise EditError(f"{path}.keep: Input should be 'all' or an object")
    return ClearThinking(_int_at(keep, f"{path}.keep", "thinking_turns", 1))


def parse_edits(
    context_management: Mapping[str, Any], *, thinking_enabled: bool | None = None
) -> list[Edit]:
    """The edits of a request's ``context_management`` field, or :class:`EditError`.

    ``thinking_enabled=False`` also rejects ``clear_thinking_20251015`` as the API does when the
    request has no (enabled or adaptive) ``thinking``; ``None`` skips that check.
    """
    if not isinstance(context_management, Mapping):
        raise EditError("context_management: Input should be an object")
    extra = sorted(set(context_management) - {"edits"})
    if extra:
        raise EditError(f"context_management.{extra[0]}: Extra inputs are not permitted")
    raw_edits = context_management.get("edits", [])
    if not isinstance(raw_edits, list):
        raise EditError("context_management.edits: Input should be a valid list")
    edits: list[Edit] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_edits):
        path = f"context_management.edits.{i}"
        kind = raw.get("type") if isinstance(raw, Mapping) else None
        if kind == CLEAR_TOOL_USES:
            edits.append(_parse_tool_uses(raw, path))
        elif kind == CLEAR_THINKING:
            if seen:
                raise EditError(
                    f"{path}: `{CLEAR_THINKING}` must be the first strategy in "
                    "`context_management.edits` when combined with other strategies"
                )
            if thinking_enabled is False:
                raise EditError(THINKING_REQUIRED)
            edits.append(_parse_thinking(raw, path))
        else:
            raise EditError(
                f"{path}: Input tag {kind!r} found using 'type' does not match any of the "
                f"expected tags: '{CLEAR_TOOL_USES}', '{CLEAR_THINKING}'"
            )
        if kind in seen:
            raise EditError(f"{path}: duplicate strategy `{kind}`")
        seen.add(kind)
    return edits


def to_json(edit: Edit) -> dict[str, Any]:
    """The API request form of one edit (every field explicit except absent optional ones)."""
    if isinstance(edit, ClearThinking):
        keep: Any = "all" if edit.keep == "all" else {"type": "thinking_turns", "value": edit.keep}
        return {"type": CLEAR_THINKING, "keep": keep}
    out: dict[str, Any] = {
        "type": CLEAR_TOOL_USES,
        "trigger": {"type": edit.trigger_type, "value": edit.trigger_value},
        "keep": {"type": "tool_uses", "value": edit.keep},
    }
    if edit.clear_at_least is not None:
        out["clear_at_least"] = {"type": "input_tokens", "value": edit.clear_at_least}
    if edit.exclude_tools:
        out["exclude_tools"] = list(edit.exclude_tools)
    ci = edit.clear_tool_inputs
    out["clear_tool_inputs"] = ci if isinstance(ci, bool) else list(ci)
    return out
