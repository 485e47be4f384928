"""Server-side context editing as the mock answers it (pure; the semantics live in the engine).

The edits themselves (``clear_tool_uses_20250919``, ``clear_thinking_20251015``) are
:mod:`engine.api.context_editing`, the pure twin of the documented server behaviour that the engine's
simulation uses too. This module adds what only a server does around them
(shared/research/api-2026.md, "Server-side context editing"):

* the request must carry the ``context-management-2025-06-27`` beta (``anthropic-beta``
  header, a comma list) to use ``context_management``; else 400;
* malformed edits: 400 with the engine's :class:`~engine.api.context_management.EditError` text;
* a model on the configured "unsupported" list answers 400 ``<model> does not support the
  clear_tool_uses_20250919 context management strategy`` (the documented text) when the request
  asks for that strategy (patterns as :func:`fnmatch.fnmatchcase`);
* the edits run on the server's copy, after the preserved-thinking check (which compares the
  conversation as the client sent it) and before counting; the response carries
  ``context_management.applied_edits``.

:func:`prompt_tokens` is the mock's own count of a prompt (``round(chars / 4)`` of the JSON of
``system``, ``tools`` and ``messages``), used when the mock reports usage that reflects the
edited prompt (``MockConfig.count_prompt``).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from engine.api.context_editing import apply_edits
from engine.api.context_management import EditError, parse_edits
from lab.thinking_binding import thinking_on

CONTEXT_BETA = "context-management-2025-06-27"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"


class RequestRefused(ValueError):
    """A 400 ``invalid_request_error`` the mock answers; ``str(e)`` is the API's message."""


def betas_of(headers: Mapping[str, str]) -> list[str]:
    """The ``anthropic-beta`` header as a list (comma separated, any case of the name)."""
    raw = next((v for k, v in headers.items() if k.lower() == "anthropic-beta"), "") or ""
    return [b.strip() for b in raw.split(",") if b.strip()]


def prompt_tokens(body: Mapping[str, Any], messages: Sequence[Any] | None = None) -> int:
    """The mock's count of a prompt: ``round(len(JSON) / 4)`` of system + tools + messages."""
    msgs = body.get("messages") if messages is None else messages
    text = json.dumps(
        {"system": body.get("system"), "tools": body.get("tools"), "messages": msgs},
        ensure_ascii=False,
    )
    return (len(text) + 2) // 4


def _json(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return {k: v for k, v in asdict(obj).items() if v is not None}
    to_json = getattr(obj, "to_json", None)
    return to_json() if callable(to_json) else obj


@dataclass(frozen=True)
class Edited:
    messages: list[Any]
    applied_edits: list[dict[str, Any]] = field(default_factory=list)
    original_tokens: int = 0

    def response_field(self) -> dict[str, Any]:
        return {"applied_edits": self.applied_edits}


def apply_context_management(
    body: Mapping[str, Any],
    betas: Sequence[str],
    unsupported_models: Sequence[str] = (),
) -> Edited | None:
    """Validate and apply ``body["context_management"]``; ``None`` when the request has none.

    Raises :class:`RequestRefused` with the API's message for every documented 400.
    """
    if "context_management" not in body:
        return None
    cm = body.get("context_management")
    if CONTEXT_BETA not in betas:
        raise RequestRefused(
            "context_management: Extra inputs are not permitted (the field needs the beta "
            f"header `anthropic-beta: {CONTEXT_BETA}`)"
        )
    if not isinstance(cm, Mapping):
        raise RequestRefused("context_management: Input should be a valid dictionary")
    thinking = thinking_on(body)
    try:
        edits = parse_edits(cm, thinking_enabled=thinking)
    except EditError as e:
        raise RequestRefused(str(e)) from None
    model = str(body.get("model") or "")
    wants_clear = any(
        isinstance(e, Mapping) and e.get("type") == CLEAR_TOOL_USES
        for e in (cm.get("edits") or [] if isinstance(cm.get("edits"), list) else [])
    )
    if wants_clear and any(fnmatch.fnmatchcase(model, p) for p in unsupported_models):
        raise RequestRefused(
            f"{model} does not support the {CLEAR_TOOL_USES} context management strategy"
        )
    messages = list(body.get("messages") or [])

    def count(msgs: Sequence[Any]) -> int:
        return prompt_tokens(body, msgs)

    applied = apply_edits(messages, edits, count, thinking_enabled=thinking)
    return Edited(
        list(applied.messages),
        [_json(a) for a in applied.applied_edits],
        count(messages),
    )
