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
