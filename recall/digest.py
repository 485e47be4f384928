"""What a compaction's summary dropped, told back to the model in a few lines (pure: no I/O).

After a real compaction Claude Code keeps only its summary; the tool results are gone for the
model but still in the session's transcript, where ``ctxpatch recall`` finds them. The digest
is the bridge: built from the transcript's records (parsed JSON lines, in order) it lists, most
recent first and within a token budget,

* what the user marked to keep (:data:`KEEP_TAG` in a typed prompt, see :func:`marked`);
* failing tests and errors: the last run of each command or tool call whose last result was an
  error, with its exit status and the error's telling line;
* commands and their exit status (the last run of each distinct command);
* files edited and files read (the last call on each path);
* other tool calls (fetches, searches, sub-agents);

each with the ``tool_use_id`` that fetches the original bytes (``mcp__ctxpatch__get``), and a
header saying how to recall them. :func:`compact_instructions` is the ``PreCompact`` side: the
marked prompts, asked to be kept verbatim in the summary. Sub-agent lines (``isSidechain``) are
left out: the main model never saw them. The budget is estimated at one token per
:data:`BYTES_PER_TOKEN` bytes of UTF-8, a conservative rate for ids, paths and commands (they
tokenize worse than prose).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MCP_SERVER = "ctxpatch"
SEARCH_TOOL = f"mcp__{MCP_SERVER}__search"
GET_TOOL = f"mcp__{MCP_SERVER}__get"
KEEP_TAG = "#keep"
DEFAULT_BUDGET = 2000  # tokens (CTXPATCH_RECALL_DIGEST_TOKENS)
BYTES_PER_TOKEN = 3
MARKS_SHARE = 0.4  # at most this share of the budget goes to the marked prompts
MARK_CHARS = 600  # one marked prompt, at most
INSTRUCTIONS_CHARS = 4000  # PreCompact output (2.1.332 cuts it at 10 000 characters)
LINE_CHARS = 160

EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
READ_TOOLS = frozenset({"Read", "NotebookRead"})
SHELL_TOOLS = frozenset({"Bash", "PowerShell"})
TEST_COMMAND = re.compile(
    r"\b(pytest|py\.test|unittest|tox|nox|jest|vitest|mocha|ava|karma|playwright test|"
    r"(npm|yarn|pnpm|bun)( run)? test|go test|cargo (test|nextest)|mix test|rspec|phpunit|"
    r"ctest|dotnet test|gradle(w)? test|mvn test|make (test|check))\b"
)
EXIT_LINE = re.compile(r"^(?:Error: )?Exit code (-?\d+)")
STRONG = re.compile(r"^(FAILED|ERROR|FAIL:|fatal:|error\b|E {2,}|\S*(Error|Exception)\b)", re.I)
TELLING = re.compile(r"error|fail|exception|assert|traceback|panic|denied|not found", re.I)
KEEP = re.compile(re.escape(KEEP_TAG) + r"\b", re.I)


@dataclass(frozen=True)
class Call:
    """One tool use of the main conversation and what its result said."""

    id: str
    name: str
    order: int
    path: str | None = None
    command: str | None = None
    summary: str = ""
    answered: bool = False
    is_error: bool = False
    exit_status: int | None = None  # shell tools: 0, the "Exit code N", None if unknown
    error_line: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """What makes two calls "the same thing run again" (any edit of one file is one)."""
        if self.name in EDIT_TOOLS and self.path:
            return ("edit", self.path)
        return (self.name, self.command or self.path or self.summary)

    @property
    def is_test(self) -> bool:
        return self.command is not None and TEST_COMMAND.search(self.command) is not None


@dataclass(frozen=True)
class Digest:
    text: str
    tokens: int  # the estimate the budget was held to
    listed: int  # tool calls named in the text
    left_out: int  # tool calls that did not fit
    marks: int


@dataclass
class _Budget:
    tokens: int
    used: int = 0
    lines: list[str] = field(default_factory=list)

    def add(self, line: str, limit: int | None = None) -> bool:
        cost = estimate(line + "\n")
        cap = self.tokens if limit is None else min(self.tokens, limit)
        if self.used + cost > cap:
            return False
        self.used += cost
        self.lines.append(line)
        return True


def estimate(text: str) -> int:
    """Tokens of ``text`` as the budget counts them (rounded up)."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def _one_line(text: str, limit: int = LINE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "")
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return ""


def _content(rec: Mapping[str, Any]) -> Any:
    msg = rec.get("message")
    return msg.get("content") if isinstance(msg, Mapping) else None


def _main_chain(records: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for rec in records:
        if isinstance(rec, Mapping) and not rec.get("isSidechain"):
            yield rec


def _describe(name: str, inp: Mapping[str, Any]) -> tuple[str | None, str | None, str]:
    """(path, command, short summary) of a tool call's input."""
    path = inp.get("file_path") or inp.get("notebook_path") or inp.get("path")
    path = path if isinstance(path, str) else None
    command = inp.get("command") if name in SHELL_TOOLS else None
    command = command if isinstance(command, str) else None
    if command is not None:
        return path, command, _one_line(command, 120)
    for key in ("url", "pattern", "query", "description", "prompt", "skill"):
        value = inp.get(key)
        if isinstance(value, str) and value:
            return path, None, _one_line(value, 100)
    return path, None, path or ""


def _error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    body = [ln for ln in lines if not EXIT_LINE.match(ln)]
    strong = [ln for ln in body if STRONG.match(ln)]
    telling = [ln for ln in body if TELLING.search(ln)]
    pick = strong[0] if strong else telling[-1] if telling else body[0] if body else ""
    return _one_line(pick.removeprefix("<tool_use_error>").removesuffix("</tool_use_error>"))


def calls(records: Iterable[Any]) -> list[Call]:
    """The main conversation's tool calls, in order, with their results' outcome.

    The recall tools' own calls (``mcp__ctxpatch__*``) are left out."""
    found: dict[str, Call] = {}
    for rec in _main_chain(records):
        content = _content(rec)
        if not isinstance(content, list):
            continue
        kind = rec.get("type")
        for block in content:
            if not isinstance(block, Mapping):
                continue
            if kind == "assistant" and block.get("type") == "tool_use":
                tid, name = block.get("id"), block.get("name")
                if not isinstance(tid, str) or not isinstance(name, str) or tid in found:
                    continue
                if name.startswith(f"mcp__{MCP_SERVER}__"):
                    continue
                inp = block.get("input")
                path, command, summary = _describe(name, inp if isinstance(inp, Mapping) else {})
                found[tid] = Call(tid, name, len(found), path, command, summary)
            elif kind == "user" and block.get("type") == "tool_result":
                rid = block.get("tool_use_id")
                call = found.get(rid) if isinstance(rid, str) else None
                if call is None:
                    continue
                text = _text_of(block.get("content"))
                is_error = bool(block.get("is_error"))
                status: int | None = None
                if call.name in SHELL_TOOLS:
                    m = EXIT_LINE.match(text)
                    status = int(m.group(1)) if m else (None if is_error else 0)
                found[call.id] = _replace(
                    call,
                    answered=True,
                    is_error=is_error,
                    exit_status=status,
                    error_line=_error_line(text) if is_error else "",
                )
    return sorted(found.values(), key=lambda c: c.order)


def _replace(call: Call, **changes: Any) -> Call:
    from dataclasses import replace

    return replace(call, **changes)


def marked(records: Iterable[Any]) -> list[str]:
    """The user's typed prompts that carry :data:`KEEP_TAG` (in order), each cut to
    :data:`MARK_CHARS`. A prompt is typed when it is a user line that is neither meta (system
    reminders, command output), a compaction summary, nor a tool result."""
    out: list[str] = []
    for rec in _main_chain(records):
        if rec.get("type") != "user" or rec.get("isMeta") or rec.get("isCompactSummary"):
            continue
        content = _content(rec)
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
        ):
            continue
        text = _text_of(content).strip()
        if text and KEEP.search(text):
            out.append(text if len(text) <= MARK_CHARS else text[: MARK_CHARS - 1] + "…")
    return out


def _last_of_each(found: Sequence[Call]) -> list[Call]:
    """The last call of each :attr:`Call.key`, most recent first."""
    seen: set[tuple[str, str]] = set()
    out: list[Call] = []
    for call in reversed(found):
        if call.key not in seen:
            seen.add(call.key)
            out.append(call)
    return out


def _cwd(records: Sequence[Any]) -> str:
    """The session's working folder (the last line that names one)."""
    for rec in reversed(records):
        if isinstance(rec, Mapping) and isinstance(rec.get("cwd"), str):
            return str(rec["cwd"])
    return ""


def _rel(path: str | None, cwd: str) -> str:
    """``path`` relative to the working folder when under it (shorter: fewer tokens)."""
    if path and cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path or ""


def _failure(c: Call) -> str:
    what = f"{'test ' if c.is_test else ''}{c.name} `{c.summary}` -> {_status(c)}"
    return f"{what}: {c.error_line}" if c.error_line else what


def _status(call: Call) -> str:
    if not call.answered:
        return "no result"
    if call.exit_status is not None:
        return f"exit {call.exit_status}"
    return "error" if call.is_error else "ok"


HEADER = (
    "[ctxpatch recall] This conversation was compacted: the summary above dropped the tool "
    "results listed here. Each [id] fetches the original output: call {get} with "
    '{{"tool_use_id": "<id>"}}; {search} finds others by words, a file path or a command. '
    "Use them before redoing work."
)


def build(records: Sequence[Any], budget: int = DEFAULT_BUDGET) -> Digest:
    """The digest of ``records`` (a transcript's parsed lines) within ``budget`` tokens.

    Empty (``text == ""``) when the budget is 0 or the conversation has neither tool calls nor
    marked prompts."""
    found = calls(records)
    marks = marked(records)
    if budget <= 0 or (not found and not marks):
        return Digest("", 0, 0, len(found), 0)
    b = _Budget(budget)
    footer = f"(+{len(found)} more tool results not listed: {SEARCH_TOOL} finds them)"
    b.tokens -= estimate("\n" + footer)  # kept free for the footer
    if not b.add(HEADER.format(get=GET_TOOL, search=SEARCH_TOOL)):
        return Digest("", 0, 0, len(found), 0)
    n_marks = 0
    if marks:
        cap = b.used + int(budget * MARKS_SHARE)
        if b.add(f"\nMarked by the user ({KEEP_TAG}), newest first:", cap):
            for text in reversed(marks):
                if not b.add(f"- {_one_line(text, MARK_CHARS)}", cap):
                    break
                n_marks += 1
    named: set[str] = set()
    last = _last_of_each(found)
    cwd = _cwd(records)
    edits_per_path: dict[str, int] = {}
    for c in found:
        if c.name in EDIT_TOOLS and c.path:
            edits_per_path[c.path] = edits_per_path.get(c.path, 0) + 1
    edited = [c for c in last if c.name in EDIT_TOOLS and c.path]
    edited_paths = {c.path for c in edited}
    failing = [c for c in last if c.is_error]
    sections: list[tuple[str, float, list[tuple[Call, str]]]] = [
        (
            "Failing tests and errors, newest first",
            0.3,
            [(c, _failure(c)) for c in failing],
        ),
        (
            "Commands (last run of each) and exit status",
            0.25,
            [(c, f"`{c.summary}` -> {_status(c)}") for c in last if c.command is not None],
        ),
        (
            "Files edited (last edit of each)",
            0.2,
            [(c, f"{_rel(c.path, cwd)} ({edits_per_path[c.path or '']}x)") for c in edited],
        ),
        (
            "Files read (last read of each)",
            0.15,
            [
                (c, _rel(c.path, cwd))
                for c in last
                if c.name in READ_TOOLS and c.path not in edited_paths
            ],
        ),
        (
            "Other tool calls",
            0.1,
            [
                (c, f"{c.name} `{c.summary}`" + (" -> error" if c.is_error else ""))
                for c in last
                if c.command is None and c.name not in EDIT_TOOLS and c.name not in READ_TOOLS
            ],
        ),
    ]
    for i, (title, share, items) in enumerate(sections):
        items = [(c, line) for c, line in items if c.id not in named]
        if not items:
            continue
        # this section's fair share of what is left; what it does not use flows to the next
        shares = sum(s for _, s, rest in sections[i:] if rest)
        cap = b.used + int((b.tokens - b.used) * share / shares)
        lines = [f"- {line} [{c.id}]" for c, line in items]
        if not b.add(f"\n{title}:\n{lines[0]}", cap):
            continue
        named.add(items[0][0].id)
        for (call, _), line in zip(items[1:], lines[1:], strict=True):
            if not b.add(line, cap):
                break
            named.add(call.id)
    left_out = len(found) - len(named)
    if left_out:
        b.lines.append(f"(+{left_out} more tool results not listed: {SEARCH_TOOL} finds them)")
    text = "\n".join(b.lines)
    return Digest(text, estimate(text), len(named), left_out, n_marks)


def compact_instructions(records: Sequence[Any], limit: int = INSTRUCTIONS_CHARS) -> str:
    """What a ``PreCompact`` hook prints (Claude Code appends it to the summary's instructions):
    the marked prompts, to be kept verbatim; ``""`` when the user marked nothing."""
    marks = marked(records)
    if not marks:
        return ""
    lines = [
        f"The user marked these messages with {KEEP_TAG}: keep each of them verbatim in the "
        "summary, newest first."
    ]
    used = len(lines[0])
    for text in reversed(marks):
        line = f"- {_one_line(text, MARK_CHARS)}"
        if used + len(line) + 1 > limit:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines) if len(lines) > 1 else ""
