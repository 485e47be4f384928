"""Full compaction: what the message list looks like after ``/compact`` or an auto-compaction.

Mirrors the post-compaction list of ``MW1`` (2.1.39) / ``cF1`` (2.1.7): a ``compact_boundary``
system message with ``compactMetadata {trigger, preTokens}``, the summary as a user message with
``isCompactSummary``, then attachments: up to 5 recently read files (50000 tokens in all, 5000
each; the transcript, the plan file and ``CLAUDE.md`` files excluded), the todo list and the plan.
The summary text comes from a pluggable ``Summarizer``; the default, ``offline_summary``, is
deterministic and needs no network (it is not the model's summary, only its size class).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.profiles import Profile
from engine.tokens import count_text, estimate_messages

Summarizer = Callable[[Sequence[Mapping[str, Any]]], str]

SUMMARY_PREFIX = (
    "This session is being continued from a previous conversation that ran out of "
    "context. The summary below covers the earlier portion of the conversation.\n\n"
)


def _texts(m: Mapping[str, Any]) -> list[str]:
    c = (m.get("message") or {}).get("content")
    if isinstance(c, str):
        return [c]
    if isinstance(c, list):
        return [
            b.get("text") or "" for b in c if isinstance(b, Mapping) and b.get("type") == "text"
        ]
    return []


def offline_summary(messages: Sequence[Mapping[str, Any]], max_chars: int = 16000) -> str:
    """Deterministic stand-in: the typed prompts, tools used and the last assistant text."""
    prompts: list[str] = []
    tools: dict[str, int] = {}
    for m in messages:
        kind = m.get("type")
        if kind == "user" and not m.get("isMeta") and not m.get("isCompactSummary"):
            # a text's first line, at most 200 characters: the first line of its first 200
            # (a line break past them cannot shorten it), without splitting the whole text
            prompts.extend(t[:200].splitlines()[0] for t in _texts(m) if t.strip())
        elif kind == "assistant":
            c = (m.get("message") or {}).get("content")
            for b in c if isinstance(c, list) else []:
                if isinstance(b, Mapping) and b.get("type") == "tool_use":
                    tools[str(b.get("name"))] = tools.get(str(b.get("name")), 0) + 1
    # the last assistant message with text: from the end, rather than joining every one's
    last_text = ""
    for m in reversed(messages):
        if m.get("type") == "assistant":
            last_text = "\n".join(_texts(m)).strip()
            if last_text:
                break
    return summary_text(prompts, tools, last_text, max_chars)


def summary_text(
    prompts: Sequence[str], tools: Mapping[str, int], last_text: str, max_chars: int
) -> str:
    """The stand-in summary's text from what :func:`offline_summary` gathered."""
    parts = [SUMMARY_PREFIX, "1. Primary Request and Intent:\n"]
    parts += [f"   - {p}\n" for p in prompts]
    used = ", ".join(f"{k}×{v}" for k, v in sorted(tools.items()))
    parts.append(f"2. Tools used: {used}\n")
    parts.append("3. Current Work:\n" + last_text[:2000] + "\n")
    return "".join(parts)[:max_chars]


def excluded_from_restore(path: str, transcript_path: str = "", plan_path: str = "") -> bool:
    """``U97``: the transcript, the plan file and CLAUDE.md files are never restored."""
    return path in (transcript_path, plan_path) or path.endswith("/CLAUDE.md")


def files_to_restore(
    read_files: Sequence[tuple[str, str, float]],
    profile: Profile,
    transcript_path: str = "",
    plan_path: str = "",
) -> list[tuple[str, int]]:
    """``E97``: (path, tokens) of the most recent reads, 5 files, ≤5000 each, ≤50000 in all."""
    chosen: list[tuple[str, int]] = []
    total = 0
    recent = sorted(
        (f for f in read_files if not excluded_from_restore(f[0], transcript_path, plan_path)),
        key=lambda f: -f[2],
    )
    for path, content, _ts in recent[: profile.restore_max_files]:
        tokens = min(count_text(content), profile.restore_file_tokens)
        if total + tokens > profile.restore_total_tokens:
            break
        total += tokens
        chosen.append((path, tokens))
    return chosen


@dataclass(frozen=True)
class CompactResult:
    messages: list
    pre_tokens: int
    post_tokens: int
    summary: str


def full_compact(
    messages: Sequence[Mapping[str, Any]],
    profile: Profile,
    pre_tokens: int,
    trigger: str = "auto",
    summarizer: Summarizer = offline_summary,
    restored: Sequence[tuple[str, str]] = (),
    todos: Sequence[Mapping] = (),
    plan: str | None = None,
) -> CompactResult:
    """The post-compaction list: boundary, summary, restored files, todo list, plan."""
    summary = summarizer(messages)
    out: list[dict] = [
        {
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": trigger, "preTokens": pre_tokens},
        },
        {
            "type": "user",
            "isCompactSummary": True,
            "isVisibleInTranscriptOnly": True,
            "message": {"role": "user", "content": summary},
        },
    ]
    for path, content in restored:
        out.append(
            {
                "type": "attachment",
                "attachment": {"type": "file", "filename": path, "content": content},
            }
        )
    if todos:
        out.append(
            {
                "type": "attachment",
                "attachment": {"type": "todo", "content": list(todos), "context": "post-compact"},
            }
        )
    if plan:
        out.append(
            {
                "type": "attachment",
                "attachment": {"type": "plan_file_reference", "planContent": plan},
            }
        )
    return CompactResult(out, pre_tokens, estimate_messages(out[1:2], profile), summary)
