"""The tool uses and tool results of Claude Code transcript lines (pure functions, no I/O).

Where they are (checked on the public and spotter sessions, Claude Code 1.0.x-2.1.217, and in
cli.js 2.1.112 / the 2.1.332 native build):

* a tool use is a ``tool_use`` block of an assistant line's ``message.content`` (one line per
  content block in 2.x); ``isSidechain`` marks a sub-agent's line in the session file (older
  builds), newer builds write sub-agents to ``<session>/subagents/agent-*.jsonl``;
* a tool result is a ``tool_result`` block of a user line: ``content`` is a string, a list of
  blocks (``text``, ``image``, ``tool_reference``) or absent; ``is_error`` may be set;
* a result larger than the tool's limit is stored by Claude Code in
  ``<session>/tool-results/<tool_use_id>.txt`` (``.json`` when the content was a list of text
  blocks, written as ``JSON.stringify(blocks, null, 2)``) and the transcript holds
  ``<persisted-output>\\nOutput too large (N). Full output saved to: PATH\\n\\nPreview ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

import orjson

JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"
Content: TypeAlias = (
    "str | list[JsonValue] | None"  # a tool_result's content, as the transcript holds it
)

PERSISTED_PREFIX = "<persisted-output>"
_SAVED_TO = re.compile(r"Full output saved to: (.+?)\n")
SUMMARY_CHARS = 160

# the input field that says what a call did, per tool; others: the first short string fields
_SUMMARY_KEYS: dict[str, tuple[str, ...]] = {
    "Bash": ("command",),
    "BashOutput": ("bash_id",),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "Glob": ("pattern", "path"),
    "Grep": ("pattern", "path", "glob"),
    "LS": ("path",),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
    "Task": ("description", "subagent_type"),
    "Agent": ("description", "subagent_type"),
    "Skill": ("skill",),
}


@dataclass(frozen=True)
class ToolUse:
    """A ``tool_use`` block: who called what."""

    tool_use_id: str
    name: str
    summary: str  # a short line: the command, the file, the pattern...
    text: str  # what search matches: every string of the input


@dataclass(frozen=True)
class ToolResult:
    """A ``tool_result`` block (its content is read back from the transcript, not kept here)."""

    tool_use_id: str
    text: str  # what search matches: the text of the content
    is_error: bool
    persisted_path: str | None  # where Claude Code saved the full output, as the line says


def parse_line(raw: bytes) -> dict[str, JsonValue] | None:
    """One transcript line as a JSON object, or None when it is not one (Claude Code skips
    such lines when it reads a session back)."""
    try:
        rec = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # orjson refuses lone surrogates that json (and JavaScript) accept
            rec = json.loads(raw.decode("utf-8", "surrogatepass"))
        except (ValueError, UnicodeDecodeError):
            return None
    return rec if isinstance(rec, dict) else None


def might_hold_tools(raw: bytes) -> bool:
    """A cheap test before parsing: lines without tool blocks are most of a transcript."""
    return b'"tool_use"' in raw or b'"tool_result"' in raw


def blocks_of(rec: Mapping[str, JsonValue]) -> list[Mapping[str, JsonValue]]:
    msg = rec.get("message")
    if not isinstance(msg, dict):
        return []
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def tool_uses(rec: Mapping[str, JsonValue]) -> list[ToolUse]:
    if rec.get("type") != "assistant":
        return []
    out = []
    for b in blocks_of(rec):
        tid = b.get("id")
        if b.get("type") != "tool_use" or not isinstance(tid, str) or not tid:
            continue
        name = b.get("name")
        name = name if isinstance(name, str) else "?"
        inp = b.get("input")
        out.append(ToolUse(tid, name, summarize(name, inp), " ".join(_strings(inp)) if inp else ""))
    return out


def tool_results(rec: Mapping[str, JsonValue]) -> list[ToolResult]:
    if rec.get("type") != "user":
        return []
    out = []
    for b in blocks_of(rec):
        tid = b.get("tool_use_id")
        if b.get("type") != "tool_result" or not isinstance(tid, str) or not tid:
            continue
        content = b.get("content")
        text = content_text(content)  # type: ignore[arg-type]
        out.append(ToolResult(tid, text, bool(b.get("is_error")), persisted_path(text)))
    return out


def result_content(rec: Mapping[str, JsonValue], tool_use_id: str) -> tuple[bool, Content, bool]:
    """``(found, content, is_error)`` of the ``tool_result`` for ``tool_use_id`` in ``rec``."""
    for b in blocks_of(rec):
        if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id:
            content = b.get("content")
            if content is not None and not isinstance(content, str | list):
                content = None
            return True, content, bool(b.get("is_error"))
    return False, None, False


def tool_use_input(rec: Mapping[str, JsonValue], tool_use_id: str) -> JsonValue:
    for b in blocks_of(rec):
        if b.get("type") == "tool_use" and b.get("id") == tool_use_id:
            return b.get("input")
    return None


def content_text(content: Content, other: str | None = None) -> str:
    """The text of a tool_result's content. Other blocks (images ...) are left out, or, with
    ``other``, shown as ``other`` formatted with their ``kind`` (for a reader: a terminal, the
    model)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
            parts.append(str(b["text"]))
        elif other is not None:
            parts.append(other.format(kind=b.get("type", "?") if isinstance(b, dict) else "?"))
    return "\n".join(parts)


def persisted_path(text: str) -> str | None:
    """The file a ``<persisted-output>`` preview names, else None."""
    if not text.startswith(PERSISTED_PREFIX):
        return None
    m = _SAVED_TO.search(text, 0, 4096)
    return m.group(1).strip() if m else None


_RECALL_TOOL = re.compile(r"mcp__ctxpatch[\w-]*__(search|get)")


def is_recall_tool(name: str) -> bool:
    """A call of recall's own MCP tools (``mcp__ctxpatch__search`` and the like)."""
    return _RECALL_TOOL.fullmatch(name) is not None


def summarize(name: str, inp: JsonValue) -> str:
    """One short line saying what the call did: ``Bash: pytest -q``, ``Read: src/a.py``."""
    if not isinstance(inp, dict):
        return name
    keys = _SUMMARY_KEYS.get(name)
    values = (
        [str(inp[k]) for k in keys if isinstance(inp.get(k), str | int) and inp.get(k) != ""]
        if keys
        else [v for v in inp.values() if isinstance(v, str) and v][:2]
    )
    if name == "TodoWrite" and isinstance(inp.get("todos"), list):
        values = [f"{len(inp['todos'])} todos"]  # type: ignore[arg-type]
    line = " ".join(" ".join(values).split())
    if len(line) > SUMMARY_CHARS:
        line = line[: SUMMARY_CHARS - 1] + "…"
    return f"{name}: {line}" if line else name


def _strings(value: JsonValue) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
