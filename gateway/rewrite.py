"""What the gateway changes in one request: a pure function of its method, path, headers, body.

The rules are those of the injected JavaScript (``patcher/snippets/context_clear.js``), applied
to the request as it travels instead of inside Claude Code:

* only ``POST`` to a path ending in ``/v1/messages`` (any prefix, any query string);
  ``count_tokens`` and everything else pass unchanged;
* the body must be a JSON object naming a model; Claude 3 models, models the API refused the
  edit for earlier (``refused``) and a ``context_management`` of a form we do not know are left
  alone; a client that already sends ``clear_tool_uses_20250919`` keeps its own;
* otherwise ``context_management.edits`` becomes: the client's ``clear_thinking_20251015``
  edits (the API wants them first), its other edits, then ours; other keys of
  ``context_management`` stay; the beta joins ``anthropic-beta`` unless already there;
* a body that is not changed is forwarded byte for byte. A changed one is spliced: the new
  ``context_management`` value is written (compact JSON) in place of the old one, or appended
  as the last key, so every other byte (``messages`` first of all) is the client's own. Where
  the old value cannot be located unambiguously in the bytes (a ``\\u`` escape anywhere, the
  key spelt more than once), the request is re-serialised compactly instead (same keys, same
  order, same values; only the spelling of numbers and escapes may differ).

Speed (bench/bench_gateway.py): one parse per request with orjson (a 600 KB body in about a
millisecond; :mod:`json` takes three), no re-serialisation of the messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from engine.context_editing import BETA, CLEAR_THINKING, CLEAR_TOOL_USES, ClearToolUses, to_json

_MESSAGES_PATH = re.compile(r"(^|/)v1/messages/?$")


def is_messages(method: str, path: str) -> bool:
    """``POST .../v1/messages`` (any query string)."""
    return method.upper() == "POST" and bool(_MESSAGES_PATH.search(path.partition("?")[0]))


def has_beta(values: Collection[str], beta: str = BETA) -> bool:
    """Whether any ``anthropic-beta`` header value lists ``beta`` (comma-separated)."""
    return any(beta == part.strip() for v in values for part in v.split(","))


def merged_beta(values: Collection[str], beta: str = BETA) -> str:
    """The one ``anthropic-beta`` value carrying the client's betas (in order) and ``beta``."""
    parts = [p.strip() for v in values for p in v.split(",") if p.strip()]
    if beta not in parts:
        parts.append(beta)
    return ",".join(parts)


@dataclass(frozen=True)
class Decision:
    """What to do with one request: ``body`` is None when it is forwarded byte for byte."""

    body: bytes | None = None
    beta: str | None = None  # the new anthropic-beta value (None: leave the header)
    model: str | None = None
    reason: str = ""  # why nothing was added (empty when added)

    @property
    def added(self) -> bool:
        return self.body is not None


def decide(
    method: str,
    path: str,
    beta_values: Collection[str],
    body: bytes,
    edit: ClearToolUses | None,
    refused: Collection[str] = (),
) -> Decision:
    """The rewrite of one request (see the module docstring)."""
    if not is_messages(method, path):
        return Decision(reason="not POST /v1/messages")
    if edit is None:
        return Decision(reason="CLAUDE_CTX_CLEAR_DISABLE is set")
    request = _loads(body)
    if request is _NOT_JSON:
        return Decision(reason="the body is not JSON")
    if not isinstance(request, dict):
        return Decision(reason="the body is not a JSON object")
    model = request.get("model")
    if not isinstance(model, str) or not model:
        return Decision(reason="the request names no model")
    why = _skip_reason(request, model, refused)
    if why:
        return Decision(model=model, reason=why)
    out = with_edit(request, to_json(edit))
    if out is None:
        return Decision(model=model, reason="the client sends its own clear_tool_uses_20250919")
    data = spliced(body, request, out)
    beta = None if has_beta(beta_values) else merged_beta(beta_values)
    return Decision(body=data, beta=beta, model=model)


_NOT_JSON = object()
_KEY = b'"context_management"'
_MAX_OLD_VALUE = 64 * 1024
_U_ESCAPE = re.compile(rb"\\u")  # faster than `in` on bodies full of \n escapes


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass  # also lone surrogates, NaN, integers beyond 64 bits: the standard library takes them
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _NOT_JSON


def _dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:  # integers beyond 64 bits, lone surrogates
        return json.dumps(obj, separators=(",", ":")).encode()


def spliced(body: bytes, request: Mapping[str, Any], out: Mapping[str, Any]) -> bytes:
    """``body`` with its top-level ``context_management`` set to ``out``'s, every other byte
    kept; a compact re-serialisation of ``out`` where the old value is not found for sure."""
    new_value = _dumps(out["context_management"])
    if "context_management" not in request:
        head = body.rstrip()
        if head.endswith(b"}"):
            return head[:-1].rstrip() + b"," + _KEY + b":" + new_value + b"}"
        return _dumps(out)
    span = _value_span(body, request["context_management"])
    if span is None:
        return _dumps(out)
    start, end = span
    return body[:start] + new_value + body[end:]


def _value_span(body: bytes, old: Any) -> tuple[int, int] | None:
    """Where the top-level ``context_management`` value is, when that is certain: the key is
    spelt once (without escapes: no ``\\u`` in the body, the only way to escape a letter),
    followed by ``:`` and a value equal to the parsed one."""
    if _U_ESCAPE.search(body):
        return None
    found = []
    at = body.find(_KEY)
    while at >= 0:
        after = at + len(_KEY)
        rest = body[after : after + 16].lstrip()
        if rest.startswith(b":"):
            found.append(after + (len(body[after : after + 16]) - len(rest)) + 1)
        at = body.find(_KEY, after)
    if len(found) != 1:
        return None
    start = found[0]
    while start < len(body) and body[start] in b" \t\r\n":
        start += 1
    text = body[start : start + _MAX_OLD_VALUE].decode("utf-8", "replace")
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    if value != old:
        return None
    return start, start + len(text[:end].encode())


def _skip_reason(request: Mapping[str, Any], model: str, refused: Collection[str]) -> str:
    if "claude-3" in model:
        return "Claude 3 models do not support context editing"
    if model in refused:
        return "the API refused the edit for this model earlier"
    cm = request.get("context_management")
    if cm is not None and not (isinstance(cm, dict) and isinstance(cm.get("edits"), list)):
        return "context_management has a form ctxpatch does not know"
    return ""


def with_edit(request: Mapping[str, Any], edit: dict[str, Any]) -> dict[str, Any] | None:
    """A new request with ``edit`` merged into ``context_management.edits``; None when the
    request already carries a ``clear_tool_uses_20250919`` edit. ``request`` is not mutated."""
    cm = request.get("context_management")
    current = cm["edits"] if isinstance(cm, dict) else []
    first: list[Any] = []
    rest: list[Any] = []
    for e in current:
        kind = e.get("type") if isinstance(e, dict) else None
        if kind == CLEAR_TOOL_USES:
            return None
        (first if kind == CLEAR_THINKING else rest).append(e)
    new_cm = {**(cm if isinstance(cm, dict) else {}), "edits": [*first, *rest, edit]}
    if "context_management" in request:
        return {k: (new_cm if k == "context_management" else v) for k, v in request.items()}
    return {**request, "context_management": new_cm}


REFUSAL = re.compile(
    r"(?P<model>\S+) does not support the " + re.escape(CLEAR_TOOL_USES) + r" context management"
)


def refused_model(status: int, body: bytes) -> str | None:
    """The model named by the API's 400 refusing the edit, else None."""
    if status != 400:
        return None
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError):
        return None
    m = REFUSAL.search(message) if isinstance(message, str) else None
    return m.group("model").strip("`'\"") if m else None
