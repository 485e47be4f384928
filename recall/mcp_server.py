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

import os
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from ctxpatch.errors import CtxpatchError, UsageError, from_exception

if TYPE_CHECKING:
    from recall.index import Index

NAME = "ctxpatch-recall"
PAGE_CHARS = 30_000  # ~8K tokens a page: under Claude Code's MCP output warning (10K tokens)
SEARCH_LIMIT = 8
# The server's instructions (its ``initialize`` answer): where Claude Code's tool search sends
# only the tools' names (2.1.69 on, the native builds), what says what they are for. Claude Code
# puts them before the model on every request (instructions_as_sent), so they are short.
INSTRUCTIONS = (
    "Tool results cleared from context (context editing, micro-compaction) or from before a "
    "compaction stay in this session's transcript: search finds them (output text, command, "
    "path, tool), get returns one whole by its tool_use_id."
)

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


def definitions_as_sent(server: str) -> list[dict[str, object]]:
    """``TOOLS`` as Claude Code puts them in a request's ``tools`` (``mcp__<server>__<name>``,
    ``input_schema``): what ``engine.replay.recall_tools`` counts on every request."""
    return [
        {
            "name": f"mcp__{server}__{t['name']}",
            "description": t["description"],
            "input_schema": t["inputSchema"],
        }
        for t in TOOLS
    ]


# Claude Code's heading over every MCP server's instructions (2.0.76-2.1.332; tests/e2e)
INSTRUCTIONS_HEADER = (
    "# MCP Server Instructions\n\nThe following MCP servers have provided instructions for how "
    "to use their tools and resources:\n\n"
)


def instructions_as_sent(server: str) -> str:
    """``INSTRUCTIONS`` as Claude Code puts them before the model: under its heading, in a
    section named by the server's key; in the system prompt up to 2.1.69 at least, in a
    ``<system-reminder>`` of the conversation's first message in 2.1.112 and the native builds
    (tests/e2e/test_recall_first_party.py, test_recall_real.py). What
    ``engine.replay.recall_tools`` counts on every request besides the tools."""
    return f"{INSTRUCTIONS_HEADER}## {server}\n{INSTRUCTIONS}"


def current_transcript() -> Path:
    """``recall.sessions.current_transcript``, imported when a tool call needs it (not on the
    handshake's path: it pulls subprocess, uuid and datetime)."""
    from recall.sessions import current_transcript as current

    return current()


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
        from recall import extract

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


class _Loader(threading.Thread):
    """Imports the SDK, and indexes the session in a second thread meanwhile (its own SQLite
    connection: SQLite objects stay in the thread that made them), so the first tool call only
    reads what was appended since. A failure to index is the first call's to report."""

    def __init__(self, transcript: Callable[[], Path]) -> None:
        super().__init__(name="recall-sdk-import", daemon=True)
        self.error: BaseException | None = None
        self._warm = threading.Thread(
            target=self._prewarm, args=(transcript,), name="recall-prewarm", daemon=True
        )

    def start(self) -> None:
        super().start()
        self._warm.start()

    def run(self) -> None:
        try:
            import anyio  # noqa: F401
            import mcp_types  # noqa: F401
            from mcp.server.lowlevel import Server  # noqa: F401
            from mcp.server.stdio import stdio_server  # noqa: F401
        except BaseException as exc:  # re-raised in the main thread by wait()
            self.error = exc

    @staticmethod
    def _prewarm(transcript: Callable[[], Path]) -> None:
        from recall.index import open_index

        try:
            open_index(transcript()).close()
        except Exception:  # reported by the first call that needs it, as a tool error
            return

    def wait(self) -> None:
        self.join()
        self._warm.join()
        if self.error is not None:
            raise self.error


def _claim_stdio() -> tuple[BinaryIO, BinaryIO, Callable[[], None]]:
    """The wire on private descriptors, fd 0 on the null device and fd 1 on stderr while we
    serve (as the SDK's own stdio_server does), so stray output never corrupts the protocol."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def restore() -> None:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)

    return os.fdopen(wire_in, "rb"), os.fdopen(wire_out, "wb"), restore


def serve(transcript: Callable[[], Path] = current_transcript) -> int:
    """Serve on stdin/stdout until the client closes it: the handshake from ``recall.mcp_early``
    while the SDK loads, then the SDK."""
    from ctxpatch import __version__
    from recall.mcp_early import Front

    loader = _Loader(transcript)
    loader.start()
    wire_in, wire_out, restore = _claim_stdio()
    try:
        front = Front(NAME, __version__, TOOLS, INSTRUCTIONS)
        while True:
            line = wire_in.readline()
            if not line:
                return 0  # closed before anything needed the SDK
            answer = front.take(line)
            if answer is None:
                break
            if answer:
                wire_out.write(answer)
                wire_out.flush()
        loader.wait()
        shown = _instructions_for(front.initialize or line)
        return _serve_sdk(
            transcript, [*front.replay(), line], wire_in, wire_out, __version__, shown
        )
    finally:
        restore()


def _instructions_for(initialize: Mapping[str, Any] | bytes) -> str | None:
    """``INSTRUCTIONS`` unless the client's ``initialize`` (the one the front answered, else the
    line it handed over, when that is one) says it needs none
    (``recall.mcp_early.wants_instructions``). A client whose first line is not its initialize
    (never Claude Code) gets them: the SDK answers that initialize itself."""
    import json

    from recall.mcp_early import wants_instructions

    msg: object = initialize
    if isinstance(initialize, bytes):
        try:
            msg = json.loads(initialize)
        except ValueError:
            return INSTRUCTIONS
    if isinstance(msg, Mapping) and msg.get("method") == "initialize":
        return INSTRUCTIONS if wants_instructions(msg.get("params")) else None
    return INSTRUCTIONS


def _serve_sdk(
    transcript: Callable[[], Path],
    first: list[bytes],
    wire_in: BinaryIO,
    wire_out: BinaryIO,
    version: str,
    instructions: str | None,
) -> int:
    """The official SDK's low-level server on the wire: ``first`` lines, then the client's."""
    import anyio
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from recall.mcp_early import is_replay_answer

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
        # in the loop's thread (SQLite connections stay in theirs); a call takes milliseconds
        text, is_error = recall.call(params.name, params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=is_error
        )

    server = Server(
        NAME,
        version=version,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

    class Source:  # what stdio_server iterates: the replayed lines, then the client's
        async def __aiter__(self) -> AsyncIterator[str]:
            for line in first:
                yield line.decode("utf-8", "replace")
            while True:
                line = await anyio.to_thread.run_sync(wire_in.readline)
                if not line:
                    return
                yield line.decode("utf-8", "replace")

    class Sink:  # what stdio_server writes to: the wire, less the answer to the replay
        async def write(self, text: str) -> None:
            if not is_replay_answer(text):
                await anyio.to_thread.run_sync(wire_out.write, text.encode("utf-8"))

        async def flush(self) -> None:
            await anyio.to_thread.run_sync(wire_out.flush)

    async def main() -> None:
        streams = stdio_server(stdin=cast("Any", Source()), stdout=cast("Any", Sink()))
        async with streams as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        recall.close()
    return 0
