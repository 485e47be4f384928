"""Session-memory compaction (2.0.60-2.1.104; ``mZ6``/``TFY``/``_SA`` in 2.1.39, ``sF1``/``m97``
in 2.1.7). It replaces the history by the cached session-memory summary plus the newest messages.

Gate (``BZ6``): ``ENABLE_CLAUDE_CODE_SM_COMPACT`` on, or not ``DISABLE_CLAUDE_CODE_SM_COMPACT``
and both remote flags ``tengu_session_memory`` and ``tengu_sm_compact`` (off offline).
Kept messages (``TFY``): start after the last summarized message; if that tail already holds
``maxTokens`` (40000), or ``minTokens`` (10000) and ``minTextBlockMessages`` (5) text messages,
keep it; else walk back one message at a time until one of those holds. Then (``_SA``) move the
start back so no ``tool_result`` loses its ``tool_use`` and no ``message.id`` is split.
Give up (→ full compaction) when the post-compaction estimate reaches the auto-compact threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.claude_code.thresholds import env_true
from engine.profiles import Profile
from engine.tokens import estimate_messages


def sm_enabled(env: Mapping[str, str], remote_flags: bool = False) -> bool:
    if env_true(env.get("ENABLE_CLAUDE_CODE_SM_COMPACT")):
        return True
    if env_true(env.get("DISABLE_CLAUDE_CODE_SM_COMPACT")):
        return False
    return remote_flags


def has_text(m: Mapping[str, Any]) -> bool:
    """``gs4``: an assistant with a text block, or a user with text / non-empty string."""
    content = (m.get("message") or {}).get("content")
    if m.get("type") == "assistant":
        return isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "text" for b in content
        )
    if m.get("type") == "user":
        if isinstance(content, str):
            return len(content) > 0
        return isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "text" for b in content
        )
    return False


def _blocks(m: Mapping[str, Any]) -> list:
    c = (m.get("message") or {}).get("content")
    return [b for b in c if isinstance(b, Mapping)] if isinstance(c, list) else []


def adjust_start(messages: Sequence[Mapping[str, Any]], start: int) -> int:
    """``_SA``: move ``start`` back over orphaned tool_use pairs and split message ids."""
    n = len(messages)
    if start <= 0 or start >= n:
        return start
    k = start
    results = [
        b.get("tool_use_id")
        for m in messages[start:]
        if m.get("type") == "user"
        for b in _blocks(m)
        if b.get("type") == "tool_result"
    ]
    if results:
        uses = {
            b.get("id")
            for m in messages[k:]
            if m.get("type") == "assistant"
            for b in _blocks(m)
            if b.get("type") == "tool_use"
        }
        missing = {r for r in results if r not in uses}
        j = k - 1
        while j >= 0 and missing:
            m = messages[j]
            if m.get("type") == "assistant" and any(
                b.get("type") == "tool_use" and b.get("id") in missing for b in _blocks(m)
            ):
                k = j
                for b in _blocks(m):
                    if b.get("type") == "tool_use":
                        missing.discard(b.get("id"))
            j -= 1
    ids = {
        (m.get("message") or {}).get("id")
        for m in messages[k:]
        if m.get("type") == "assistant" and (m.get("message") or {}).get("id")
    }
    for j in range(k - 1, -1, -1):
        m = messages[j]
        if m.get("type") == "assistant" and (m.get("message") or {}).get("id") in ids:
            k = j
    return k


def keep_start(
    messages: Sequence[Mapping[str, Any]], last_summarized: int, profile: Profile
) -> int:
    """``TFY``: index of the first kept message."""
    if not messages:
        return 0
    start = last_summarized + 1 if last_summarized >= 0 else len(messages)
    tokens = texts = 0
    for m in messages[start:]:
        tokens += estimate_messages([m], profile)
        texts += has_text(m)
    if tokens >= profile.sm_max_tokens or (
        tokens >= profile.sm_min_tokens and texts >= profile.sm_min_text_messages
    ):
        return adjust_start(messages, start)
    for j in range(start - 1, -1, -1):
        tokens += estimate_messages([messages[j]], profile)
        texts += has_text(messages[j])
        start = j
        if tokens >= profile.sm_max_tokens:
            break
        if tokens >= profile.sm_min_tokens and texts >= profile.sm_min_text_messages:
            break
    return adjust_start(messages, start)


@dataclass(frozen=True)
class SessionMemoryResult:
    messages: list
    kept_from: int
    post_tokens: int


def session_memory_compact(
    messages: Sequence[Mapping[str, Any]],
    summary: str,
    last_summarized: int,
    profile: Profile,
    threshold: int | None,
) -> SessionMemoryResult | None:
    """The compacted list, or ``None`` when cli.js would fall back to the full summary."""
    if not profile.session_memory or not summary.strip():
        return None
    k = keep_start(messages, last_summarized, profile)
    kept = [m for m in messages[k:] if m.get("type") != "progress"]
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "compactMetadata": {"trigger": "auto"},
    }
    summ = {
        "type": "user",
        "isCompactSummary": True,
        "message": {"role": "user", "content": summary},
    }
    out: list[Mapping[str, Any]] = [boundary, summ, *kept]
    post = estimate_messages(out, profile)  # $t(J) then SU1 in 2.1.39
    if threshold is not None and post >= threshold:
        return None
    return SessionMemoryResult(out, k, post)
