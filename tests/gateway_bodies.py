"""Request bodies shared by the gateway tests (``test_gateway_rewrite``, ``test_gateway_http``)."""

from __future__ import annotations

import json

from engine.api.context_management import CLEAR_THINKING, ClearToolUses

EDIT = ClearToolUses(trigger_value=50, keep=1)
MODEL = "claude-opus-4-6"
THINKING_EDIT = {"type": CLEAR_THINKING, "keep": "all"}


def messages(n_tools: int = 4) -> list[dict]:
    """A user turn, then ``n_tools`` tool uses with long results (ASCII and not)."""
    out: list[dict] = [{"role": "user", "content": "start é ✓ \u2028"}]
    for i in range(n_tools):
        out.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"i": i}}],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x " * 400 + "ü"}
                ],
            }
        )
    return out


def body_of(**extra: object) -> dict:
    return {"model": MODEL, "max_tokens": 100, "messages": messages(), "stream": False, **extra}


def compact(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
