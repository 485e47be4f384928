"""``ctxpatch mcp``: a stdio MCP server (the official ``mcp`` SDK) with two tools for the model,
``search`` and ``get``, over the current session's transcript (``recall.sessions``).

The two definitions ride on every request Claude Code sends, so they are short and
hand-written (the SDK's decorator would add pydantic titles): ``TOOLS`` is the whole of what
the model sees; ``bench/bench_recall.py`` counts its tokens. Every call resolves the current
session again, as ``/clear`` and ``/resume`` change it under a running server; indexes stay
open per transcript. The tools answer in text; a failure (no session known, a bad transcript)
is a tool result with ``isError`` and the what/why/hint of ``ctxpatch.errors``, never a crash.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ctxpatch.errors import CtxpatchError, UsageError, from_exception
from recall import extract
from recall.sessions import current_transcript

if TYPE_CHECKING:
    from recall.index import Index

NAME = "ctxpatch-recall"
PAGE_CHARS = 30_000  # ~8K tokens a page: under Claude Code's MCP output warning (10K tokens)
SEARCH_LIMIT = 8

TOOLS: tuple[dict[str, object], ...] = (
    {
        "name": "search",
        "description": "Find earlier tool calls of this session and their full results, also "
        "those cleared from context ('[Old tool result content cleared]', or cleared by "
        "context editing) or from before a compaction. Matches output text, commands, file "
        "paths, tool names. Gives tool_use_ids for get.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "tool": {"type": "string", "description": "only this tool, e.g. Bash"},
            },
            "required": ["query"],
        },
    },
    {
        "name": "get",
        "description": "The original result of one earlier tool call by tool_use_id (e.g. one "
        "now cleared). Long results come in pages: pass offset.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "tool_use_id": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0},
            },
            "required": ["tool_use_id"],
        },
    },
)


class Recall:
    """The tools' logic, without the protocol: arguments in, text out."""

    def __init__(self, transcript: Callable[[], Path] = current_transcript) -> None:
        self._transcript = transcript
        self._indexes: dict[Path, Index] = {}

    def index(self) -> Index:
        from recall.index import open_index

        path = self._transcript()
        ix = self._indexes.get(path)
        if ix is None:
            ix = self._indexes[path] = open_index(path)
        return ix

    def search(self, args: Mapping[str, object]) -> str:
        query = args.get("query")
        tool = args.get("tool")
        if not isinstance(query, str) or not query.strip():
            raise UsageError("search needs a query", "query is empty", 'e.g. {"query": "pytest"}')
        hits = self.index().search(
            query, limit=SEARCH_LIMIT, tool=tool if isinstance(tool, str) and tool else None
        )
        if not hits:
            return f"No earlier tool call matches {query!r}."
        lines = []
        for h in hits:
            flag = " [error]" if h.is_error else ""
            lines.append(f"{h.tool_use_id} | {h.summary}{flag}\n  {h.snippet}")
        return "\n".join(lines)

    def get(self, args: Mapping[str, object]) -> str:
        tid = args.get("tool_use_id")
        offset = args.get("offset", 0)
        if not isinstance(tid, str) or not tid.strip():
            raise UsageError("get needs a tool_use_id", "it is empty", "take one from search")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise UsageError("bad offset", f"{offset!r} is not a number >= 0", "omit it or pass 0")
        result = self.index().get(tid.strip())
        if result is None:
            return f"No tool call {tid} in this session (search for it by its output or command)."
        head = f"{result.tool_use_id} | {result.summary}" + (" [error]" if result.is_error else "")
        if not result.answered:
            return f"{head}\n(no result recorded yet)"
        text = extract.content_text(
            result.full_output if result.full_output is not None else result.content,
            "[{kind} block: see `ctxpatch recall get <id> --json`]",
        )
        page = text[offset : offset + PAGE_CHARS]
        end = offset + len(page)
        if offset == 0 and end >= len(text):
            return f"{head}\n{page}"
        more = f"; next page: offset={end}" if end < len(text) else ""
        return f"{head} [chars {offset}-{end} of {len(text)}{more}]\n{page}"

    def call(self, name: str, args: Mapping[str, object]) -> tuple[str, bool]:
        """``(text, is_error)`` of one tool call."""
        try:
            if name == "search":
                return self.search(args), False
            if name == "get":
                return self.get(args), False
            return f"unknown tool {name!r}: use search or get", True
        except Exception as exc:
            err: CtxpatchError = from_exception(exc)
            return err.render(), True

    def close(self) -> None:
        for ix in self._indexes.values():
            ix.close()
        self._indexes.clear()


def _prewarm(transcript: Callable[[], Path]) -> threading.Thread:
    """Index the session while the SDK imports (its own connection: SQLite objects stay in the
    thread that made them); the first call then only reads what was appended since."""

    def work() -> None:
        from recall.index import open_index

        try:
            open_index(transcript()).close()
        except Exception:  # reported by the first call that needs it, as a tool error
            return

    thread = threading.Thread(target=work, name="recall-prewarm", daemon=True)
    thread.start()
    return thread


def serve(transcript: Callable[[], Path] = current_transcript) -> int:
    """Serve on stdin/stdout until the client closes it."""
    warm = _prewarm(transcript)
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    recall = Recall(transcript)
    tools = [
        types.Tool(
            name=str(t["name"]),
            description=str(t["description"]),
            input_schema=cast("dict[str, Any]", t["inputSchema"]),
        )
        for t in TOOLS
    ]

    async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        warm.join()
        # in the loop's thread (SQLite connections stay in theirs); a call takes milliseconds
        text, is_error = recall.call(params.name, params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=is_error
        )

    server = Server(NAME, on_list_tools=list_tools, on_call_tool=call_tool)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        recall.close()
    return 0
