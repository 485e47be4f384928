"""A pure twin of the API's server-side context editing (beta ``context-management-2025-06-27``).

The request field ``context_management: {"edits": [...]}`` asks the server to edit its own copy
of the prompt before the model sees it (the client's history is never touched). Two edits:

``clear_tool_uses_20250919`` (:class:`ClearToolUses`)
    * Runs only when the trigger is reached: ``input_tokens`` -> ``count(messages) >= value``;
      ``tool_uses`` -> the number of ``tool_use`` blocks in the messages ``>= value``.
    * The most recent ``keep`` tool uses are kept (``keep`` counts every tool use, excluded
      tools included, like Anthropic's own SDK twin of this edit); every older one whose tool is
      not in ``exclude_tools`` is cleared, oldest first: its ``tool_result`` content becomes
      :data:`PLACEHOLDER` (one constant; the API documents only "placeholder text that tells
      the model the result was removed", not its exact words), other keys (``tool_use_id``,
      ``is_error``, ``cache_control``) stay. With ``clear_tool_inputs`` (``True``, or the names
      of the tools concerned) the cleared ``tool_use`` blocks also get ``input`` :data:`CLEARED_INPUT`.
      No block is ever removed, so every ``tool_use`` keeps its ``tool_result``.
    * ``clear_at_least``: when clearing everything it may clear frees fewer input tokens than
      that (``count(before) - count(after)``), nothing is cleared at all.
    * A tool use whose result is already the placeholder (and, where inputs are cleared, whose
      input is already empty) is not cleared again: applying the edits to their own output
      changes nothing.
``clear_thinking_20251015`` (:class:`ClearThinking`)
    * ``keep`` = the number of most recent *thinking turns* whose ``thinking`` /
      ``redacted_thinking`` blocks stay, or ``"all"``. A turn is everything the assistant says
      between two human messages (a user message with any block other than ``tool_result``),
      so a tool loop in progress is one turn; a thinking turn is a turn holding a thinking block.
      Thinking blocks of older turns are removed (the only blocks this module ever removes).
    * With thinking on and no such edit the API keeps only the last assistant turn's thinking:
      :func:`default_thinking_clearing` (and ``apply_edits(..., thinking_enabled=True)``).

Order (assumption, from Anthropic's context-editing page): when both edits are sent,
``clear_thinking_20251015`` must come first in ``edits``; :func:`parse_edits` rejects the other
order, a repeated edit type, unknown types or fields and out-of-range values with
:class:`EditError`, whose message is written in the API's 400 style (``<path>: <reason>``);
the exact wording of these 400s is not documented, except the real
"`clear_thinking_20251015` strategy requires `thinking` to be enabled or adaptive" and
":func:`unsupported_model_message`". Edits apply in list order, each on the previous one's
output; each reports ``cleared_input_tokens = count(before it) - count(after it)``, and an edit
that changed nothing is not listed in ``applied_edits``.

The CLAUDE_CTX_CLEAR_* knobs the injected JavaScript reads on every request are parsed by
:func:`knobs_from_env`, the twin of that JavaScript (defaults: ``DEFAULT_*`` below).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

BETA = "context-management-2025-06-27"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
PLACEHOLDER = "[Tool result cleared by context editing]"
CLEARED_INPUT: dict[str, Any] = {}
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
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


@dataclass(frozen=True)
class Applied:
    messages: list[dict]  # new list; the input is never mutated
    applied_edits: list[dict]  # the response's context_management.applied_edits


def unsupported_model_message(model: str, edit_type: str = CLEAR_TOOL_USES) -> str:
    """The API's 400 text for a model without this edit (2.1.330 recognises it)."""
    return f"{model} does not support the {edit_type} context management strategy"


# --- parsing -----------------------------------------------------------------------------------


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


# --- applying ----------------------------------------------------------------------------------


def _blocks(msg: Mapping[str, Any]) -> list[Any]:
    content = msg.get("content")
    return content if isinstance(content, list) else []


def _is_type(block: Any, kind: str) -> bool:
    return isinstance(block, Mapping) and block.get("type") == kind


def tool_uses(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int, Mapping[str, Any]]]:
    """``(message index, block index, block)`` of every ``tool_use``, oldest first."""
    return [
        (i, j, b)
        for i, m in enumerate(messages)
        if m.get("role") == "assistant"
        for j, b in enumerate(_blocks(m))
        if _is_type(b, "tool_use")
    ]


def _results(messages: Sequence[Mapping[str, Any]]) -> dict[Any, tuple[int, int]]:
    return {
        b.get("tool_use_id"): (i, j)
        for i, m in enumerate(messages)
        if m.get("role") == "user"
        for j, b in enumerate(_blocks(m))
        if _is_type(b, "tool_result")
    }


def _clears_input(edit: ClearToolUses, name: Any) -> bool:
    ci = edit.clear_tool_inputs
    return ci if isinstance(ci, bool) else name in ci


def _clear_tool_uses(
    messages: list[dict], edit: ClearToolUses, count: Callable[[Sequence[Mapping]], int]
) -> tuple[list[dict], int]:
    uses = tool_uses(messages)
    if edit.trigger_type == "tool_uses":
        reached = len(uses) >= edit.trigger_value
    else:
        reached = count(messages) >= edit.trigger_value
    if not reached:
        return messages, 0
    results = _results(messages)
    out = list(messages)
    copied: set[int] = set()

    def block_copy(i: int, j: int) -> dict:
        if i not in copied:
            out[i] = {**out[i], "content": list(_blocks(out[i]))}
            copied.add(i)
        block = dict(out[i]["content"][j])
        out[i]["content"][j] = block
        return block

    cleared = 0
    older = uses[: max(0, len(uses) - edit.keep)]
    for i, j, use in older:
        if use.get("name") in edit.exclude_tools:
            continue
        changed = False
        where = results.get(use.get("id"))
        if where is not None:
            result = messages[where[0]]["content"][where[1]]
            if result.get("content") != PLACEHOLDER:
                block_copy(*where)["content"] = PLACEHOLDER
                changed = True
        if _clears_input(edit, use.get("name")) and use.get("input") != CLEARED_INPUT:
            block_copy(i, j)["input"] = dict(CLEARED_INPUT)
            changed = True
        cleared += changed
    if not cleared:
        return messages, 0
    if edit.clear_at_least is not None and count(messages) - count(out) < edit.clear_at_least:
        return messages, 0
    return out, cleared


def _is_human(msg: Mapping[str, Any]) -> bool:
    if msg.get("role") != "user":
        return False
    content = msg.get("content")
    if not isinstance(content, list):
        return True
    return not content or any(not _is_type(b, "tool_result") for b in content)


def assistant_turns(messages: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """Indices of the assistant messages of each turn (a turn ends at a human message)."""
    turns: list[list[int]] = [[]]
    for i, m in enumerate(messages):
        if _is_human(m):
            if turns[-1]:
                turns.append([])
        elif m.get("role") == "assistant":
            turns[-1].append(i)
    return [t for t in turns if t]


def _clear_thinking(messages: list[dict], keep: int | str) -> tuple[list[dict], int]:
    if keep == "all":
        return messages, 0
    thinking_turns = [
        t for t in assistant_turns(messages) if any(_has_thinking(messages[i]) for i in t)
    ]
    older = thinking_turns[: max(0, len(thinking_turns) - int(keep))]
    if not older:
        return messages, 0
    out = list(messages)
    for turn in older:
        for i in turn:
            content = messages[i].get("content")
            if isinstance(content, list):
                out[i] = {**messages[i], "content": [b for b in content if not _thinking(b)]}
    return out, len(older)


def _thinking(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in THINKING_TYPES


def _has_thinking(msg: Mapping[str, Any]) -> bool:
    return any(_thinking(b) for b in _blocks(msg))


def default_thinking_clearing(messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    """What the API does with thinking on and no ``clear_thinking_20251015`` edit: only the
    last assistant turn's thinking stays (``keep`` 1 thinking turn). A new list."""
    return _clear_thinking([dict(m) for m in messages], 1)[0]


def apply_edits(
    messages: Sequence[Mapping[str, Any]],
    edits: Sequence[Edit],
    count: Callable[[Sequence[Mapping]], int],
    *,
    thinking_enabled: bool = False,
) -> Applied:
    """The server's copy of ``messages`` after ``edits`` (in order), and ``applied_edits``.

    ``count`` is the server's token counter over a message list (add the system prompt and
    tools inside it when they should count toward an ``input_tokens`` trigger). With
    ``thinking_enabled`` and no :class:`ClearThinking` edit the implicit default (keep the last
    thinking turn) runs first; it is not reported, as the API reports only requested edits.
    """
    current = [dict(m) for m in messages]
    applied: list[dict] = []
    if thinking_enabled and not any(isinstance(e, ClearThinking) for e in edits):
        current = _clear_thinking(current, 1)[0]
    for edit in edits:
        before = count(current)
        if isinstance(edit, ClearThinking):
            current, n = _clear_thinking(current, edit.keep)
            key, kind = "cleared_thinking_turns", CLEAR_THINKING
        else:
            current, n = _clear_tool_uses(current, edit, count)
            key, kind = "cleared_tool_uses", CLEAR_TOOL_USES
        if n:
            applied.append({"type": kind, key: n, "cleared_input_tokens": before - count(current)})
    return Applied(current, applied)


# --- the CLAUDE_CTX_CLEAR_* knobs (twin of the injected JavaScript) ------------------------------

ENV_TRIGGER = "CLAUDE_CTX_CLEAR_TRIGGER"
ENV_KEEP = "CLAUDE_CTX_CLEAR_KEEP"
ENV_AT_LEAST = "CLAUDE_CTX_CLEAR_AT_LEAST"
ENV_EXCLUDE = "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS"
ENV_INPUTS = "CLAUDE_CTX_CLEAR_TOOL_INPUTS"
ENV_DISABLE = "CLAUDE_CTX_CLEAR_DISABLE"
ENV_STEP = "CLAUDE_CTX_CLEAR_STEP"
ENV_NAMES = (ENV_TRIGGER, ENV_KEEP, ENV_AT_LEAST, ENV_EXCLUDE, ENV_INPUTS, ENV_DISABLE, ENV_STEP)

# Chosen by bench/clearing_sweep.py over the shared real sessions (README, "Server-side
# clearing"); the injected JavaScript (patcher/snippets/context_clear.js) has the same ones, a
# differential test holds the two together.
DEFAULT_TRIGGER = 50_000  # input tokens
DEFAULT_KEEP = 3  # tool uses
DEFAULT_AT_LEAST: int | None = None  # input tokens; None = no minimum
DEFAULT_EXCLUDE: tuple[str, ...] = ()
DEFAULT_TOOL_INPUTS: bool | tuple[str, ...] = True
DEFAULT_STEP = 20  # tool uses between two moves of the cleared boundary (see edit_for_request)


def _env_int(env: Mapping[str, str], name: str, minimum: int) -> int | None:
    """The knob as an integer >= minimum; ``None`` when unset, blank or invalid.

    Valid: 1 to 9 ASCII digits once blanks around and ``_`` separators are dropped, like the
    injected JavaScript (``str.isdigit`` alone takes "²", on which ``int`` raises, and
    arbitrarily long numbers, which JavaScript would round)."""
    raw = (env.get(name) or "").strip().replace("_", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9):
        return None
    value = int(raw)
    return value if value >= minimum else None


def _env_names(raw: str) -> tuple[str, ...]:
    return tuple(n for n in (p.strip() for p in raw.split(",")) if n)


def knob_errors(env: Mapping[str, str]) -> list[str]:
    """What is wrong with the set knobs (each is then ignored and its default used)."""
    errors = []
    for name, minimum in ((ENV_TRIGGER, 1), (ENV_KEEP, 0), (ENV_AT_LEAST, 0), (ENV_STEP, 1)):
        raw = env.get(name)
        if raw is not None and raw.strip() and _env_int(env, name, minimum) is None:
            errors.append(f"{name}={raw!r} is not an integer >= {minimum}; the default is used")
    return errors


def knobs_from_env(env: Mapping[str, str]) -> ClearToolUses | None:
    """The ``clear_tool_uses_20250919`` edit the injected JavaScript sends, from the knobs.

    * ``CLAUDE_CTX_CLEAR_DISABLE=1`` -> ``None`` (no edit, no beta added).
    * ``CLAUDE_CTX_CLEAR_TRIGGER`` input tokens (integer >= 1), ``CLAUDE_CTX_CLEAR_KEEP`` tool
      uses (>= 0), ``CLAUDE_CTX_CLEAR_AT_LEAST`` input tokens (>= 0; 0 = no minimum). Digits
      with optional ``_`` separators; anything else is ignored (the default is used) so that a
      typo never makes a request the API rejects (:func:`knob_errors` says which).
    * ``CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS`` comma list of tool names (blanks dropped).
    * ``CLAUDE_CTX_CLEAR_TOOL_INPUTS``: ``1``/``true`` -> all cleared uses, ``0``/``false``/empty
      -> none, anything else -> a comma list of tool names.
    """
    if (env.get(ENV_DISABLE) or "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    trigger = _env_int(env, ENV_TRIGGER, 1) or DEFAULT_TRIGGER
    keep = _env_int(env, ENV_KEEP, 0)
    at_least = _env_int(env, ENV_AT_LEAST, 0)
    if at_least is None:
        at_least = DEFAULT_AT_LEAST
    exclude = _env_names(env.get(ENV_EXCLUDE) or "") or DEFAULT_EXCLUDE
    raw_inputs = (env.get(ENV_INPUTS) or "").strip()
    inputs: bool | tuple[str, ...]
    if raw_inputs.lower() in ("1", "true"):
        inputs = True
    elif raw_inputs.lower() in ("0", "false"):
        inputs = False
    else:
        inputs = _env_names(raw_inputs) or DEFAULT_TOOL_INPUTS
    return ClearToolUses(
        trigger_value=trigger,
        keep=DEFAULT_KEEP if keep is None else keep,
        clear_at_least=at_least or None,
        exclude_tools=exclude,
        clear_tool_inputs=inputs,
    )


def trailing_results(messages: Sequence[Mapping[str, Any]]) -> int:
    """``tool_result`` blocks after the last assistant message: the round the model is about to
    read for the first time."""
    n = 0
    for m in reversed(messages):
        if m.get("role") == "assistant":
            break
        n += sum(1 for b in _blocks(m) if _is_type(b, "tool_result"))
    return n


def step_from_env(env: Mapping[str, str]) -> int:
    """``CLAUDE_CTX_CLEAR_STEP`` (integer >= 1, else :data:`DEFAULT_STEP`)."""
    return _env_int(env, ENV_STEP, 1) or DEFAULT_STEP


def edit_for_request(
    edit: ClearToolUses, messages: Sequence[Mapping[str, Any]], step: int = 1
) -> ClearToolUses:
    """The edit the injected JavaScript sends with ``messages``.

    * ``step`` (``CLAUDE_CTX_CLEAR_STEP``): the server keeps no state and clears every tool use
      but the last ``keep`` on every request, so with a plain ``keep`` one more result is
      cleared per new tool use and the prompt changes before every earlier cache breakpoint:
      each request rewrites the whole cache. With ``n`` tool uses the edit keeps ``n - c`` where
      ``c = floor((n - keep) / step) * step``: between ``keep`` and ``keep + step - 1`` uses
      are kept and the cleared set grows only every ``step`` tool uses (one cache rewrite per
      ``step`` uses; ``step=1`` is the plain API ``keep``).
    * ``keep`` is raised to the results of the round in progress (:func:`trailing_results`)
      when that round has more parallel tool uses, so the server never replaces a result the
      model has not seen yet. Either way the uses kept are the newest, so what is cleared only
      grows from one request to the next.
    """
    keep = edit.keep
    if step > 1:
        n = len(tool_uses(messages))
        if n > keep:
            keep = n - (n - keep) // step * step
    keep = max(keep, trailing_results(messages))
    return edit if keep == edit.keep else replace(edit, keep=keep)
