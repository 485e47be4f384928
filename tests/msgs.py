"""Builders for Claude Code message objects, shared by the text-prune tests."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, settings

MAX_EXAMPLES = int(os.environ.get("CTXPATCH_MAX_EXAMPLES", "200"))


def properties(
    max_examples: int = MAX_EXAMPLES, *, health: Iterable[HealthCheck] = tuple(HealthCheck)
) -> settings:
    """The hypothesis settings of the text-prune property tests: the same examples on every run
    (derandomized), ``CTXPATCH_MAX_EXAMPLES`` of them by default, no deadline, ``health``
    checks suppressed (all by default)."""
    return settings(
        derandomize=True,
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=list(health),
    )


def user(content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": content}, **extra}


def assistant(content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "assistant", "message": {"role": "assistant", "content": content}, **extra}


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


# Prune everything it can: one turn kept, cutoff moves turn by turn, no threshold.
EAGER = {
    "CLAUDE_TEXT_PRUNE_KEEP": "1",
    "CLAUDE_TEXT_PRUNE_STEP": "1",
    "CLAUDE_TEXT_PRUNE_THRESHOLD": "0",
    "CLAUDE_TEXT_PRUNE_MAX_CHARS": "10",
    # the cases written for 0.1.0 (thinking blocks stay where they are); the thinking-safe
    # rule has its own tests
    "CLAUDE_TEXT_PRUNE_THINKING": "ignore",
}


# --- text-prune test builders (test_textprune, test_textprune_turns, test_textprune_estimate) ---

# 40 units: at MAX_CHARS=10 its shortened form (10 units + MARKER, 35 units) is shorter
LONG = "0123456789abcdefghij" * 2


def env(**overrides: str) -> dict[str, str]:
    out = dict(EAGER)
    for key, value in overrides.items():
        out["CLAUDE_TEXT_PRUNE_" + key.upper()] = value
    return out


def tool_result(content: Any, tool_use_id: str = "toolu_1") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}


def conversation(turns: int, body: str = LONG) -> list[dict[str, Any]]:
    """`turns` typed user messages, each answered by an assistant text block."""
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append(user(f"question {i}: {body}", uuid=f"u{i}"))
        out.append(assistant([text(f"answer {i}: {body}")], uuid=f"a{i}"))
    return out


def changed_indices(before: list[Any], after: list[Any]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a is not b]
