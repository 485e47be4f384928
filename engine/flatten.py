"""Flattening Claude Code messages to API messages (what ``messages`` of the request holds).

Mirrors the normalisation before ``POST /v1/messages`` (2.1.7 spec §7): progress, system and
file-history records are dropped; attachments are not API messages; consecutive messages of the
same role are merged (a user message's string content becomes one text block when merged);
assistant lines sharing one ``message.id`` become one assistant message; only ``role`` and
``content`` are kept. Tool pairs are kept as they are: ``validate_tool_pairs`` reports any
``tool_result`` without its ``tool_use`` (or the reverse).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _as_blocks(content: Any) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def flatten(messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    out: list[dict] = []
    for m in messages:
        t = m.get("type")
        if t not in ("user", "assistant"):
            continue
        inner = m.get("message") or {}
        role = inner.get("role") or t
        content = inner.get("content")
        if out and out[-1]["role"] == role:
            prev = out[-1]
            prev["content"] = _as_blocks(prev["content"]) + _as_blocks(content)
        else:
            out.append({"role": role, "content": content if isinstance(content, str)
                        else list(content or [])})
    return out


def validate_tool_pairs(api_messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Problems: results without a preceding use, uses never answered."""
    problems: list[str] = []
    open_uses: dict[str, int] = {}
    for i, m in enumerate(api_messages):
        for b in _as_blocks(m.get("content")):
            if not isinstance(b, Mapping):
                continue
            if b.get("type") == "tool_use":
                open_uses[str(b.get("id"))] = i
            elif b.get("type") == "tool_result":
                if str(b.get("tool_use_id")) not in open_uses:
                    problems.append(
                        f"message {i}: tool_result {b.get('tool_use_id')} has no tool_use")
                else:
                    open_uses.pop(str(b.get("tool_use_id")))
    problems += [f"message {i}: tool_use {u} has no tool_result" for u, i in open_uses.items()]
    return problems
