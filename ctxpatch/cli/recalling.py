"""``ctxpatch recall search|get``: what clearing or compaction removed, found in the session's
own transcript (the ``recall`` package); printing and exit codes go through
``ctxpatch.cli.output``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ctxpatch.cli.options import JsonOpt
from ctxpatch.cli.output import emit_json, envelope, handle, help_codes, out
from ctxpatch.errors import TranscriptError, UnknownToolUse, UsageError

if TYPE_CHECKING:
    from recall.index import Hit, Result

recall_app = typer.Typer(
    name="recall",
    no_args_is_help=True,
    add_completion=False,
    help="Find again what clearing or compaction removed from the model's context: the "
    "session's tool results, read back from Claude Code's own transcript (indexed in the state "
    "dir). The model has the same through `ctxpatch mcp`.\n\n" + help_codes("recall"),
)

TranscriptOpt = Annotated[
    Path | None,
    typer.Option(
        "--transcript",
        "-t",
        help="A session transcript (.jsonl or .jsonl.xz). Default: the current session "
        "(recorded by the recall hook; CTXPATCH_RECALL_TRANSCRIPT overrides).",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    """Add the ``recall`` group to ``app``."""
    app.add_typer(recall_app)
    app.command("mcp")(mcp)


def _transcript(given: Path | None) -> Path:
    from recall.sessions import current_transcript

    if given is None:
        return current_transcript()
    _refuse_non_transcript(given)
    return given


_HEAD = 65536  # what is read of a given file to tell a transcript from something else


def _refuse_non_transcript(path: Path) -> None:
    """A plain file none of whose first lines is a JSON object is no transcript: refused (3),
    as ``simulate`` refuses it, rather than searched and found empty (a missing file, a folder
    and a bad .xz are refused by the index itself)."""
    if path.suffix == ".xz" or not path.is_file():
        return
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return  # the index reports it with its reason
    cut = head.splitlines()[:-1] if len(head) == _HEAD else head.splitlines()  # whole lines
    lines = [line.strip() for line in cut if line.strip()]
    if lines and not any(line.startswith(b"{") for line in lines):
        raise TranscriptError(
            f"cannot read {path}",
            f"none of its first {len(lines)} non-blank line(s) is a JSON object: not a Claude "
            "Code session transcript",
            "pass a session transcript (~/.claude/projects/<project>/<id>.jsonl or .jsonl.xz)",
        )


def hit_json(h: Hit) -> dict[str, object]:
    return {
        "tool_use_id": h.tool_use_id,
        "tool": h.tool,
        "summary": h.summary,
        "snippet": h.snippet,
        "score": round(h.score, 4),
        "line": h.line,
        "sidechain": h.sidechain,
        "is_error": h.is_error,
    }


def result_json(r: Result) -> dict[str, object]:
    return {
        "tool_use_id": r.tool_use_id,
        "tool": r.tool,
        "summary": r.summary,
        "input": r.input,
        "answered": r.answered,
        "content": r.content,
        "is_error": r.is_error,
        "file": r.file,
        "line": r.line,
        "sidechain": r.sidechain,
        "persisted_path": r.persisted_path,
        "full_output": r.full_output,
    }


@recall_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words of the result, a command, a file path.")],
    transcript: TranscriptOpt = None,
    tool: Annotated[
        str | None, typer.Option("--tool", help="Only calls of this tool (e.g. Bash, Read).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=100)] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Search the session's tool calls and results, best match first (bm25).

    Example: ctxpatch recall search "AssertionError test_login" --tool Bash
    """

    def body() -> int:
        from recall.index import open_index

        path = _transcript(transcript)
        if not query.strip():
            raise UsageError("empty query", "search needs words", 'e.g. recall search "pytest"')
        with open_index(path) as index:
            hits = index.search(query, limit=limit, tool=tool)
        if as_json:
            emit_json(envelope(0, [hit_json(h) for h in hits], transcript=str(path), query=query))
            return 0
        if not hits:
            out(f"no match for {query!r} in {path}")
        for h in hits:
            where = f"line {h.line}" if h.line else "no result yet"
            flags = " [error]" if h.is_error else ""
            out(f"{h.tool_use_id}  {h.summary}  ({where}){flags}\n    {h.snippet}")
        return 0

    raise typer.Exit(handle(body, as_json))


@recall_app.command("get")
def get(
    tool_use_id: Annotated[str, typer.Argument(help="The tool_use_id, e.g. toolu_01AbC...")],
    transcript: TranscriptOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print one tool result as the transcript holds it (the full output where Claude Code saved it apart). --json: results[0].content is the tool_result's content exactly (a string or a list of blocks), full_output the saved file's.

    Example: ctxpatch recall get toolu_01AbCdEf --json
    """

    def body() -> int:
        from recall import extract
        from recall.index import open_index

        path = _transcript(transcript)
        with open_index(path) as index:
            result = index.get(tool_use_id.strip())
        if result is None:
            raise UnknownToolUse(
                f"no tool call {tool_use_id} in {path}",
                "the session's transcript (and its sub-agents) holds no tool_use or "
                "tool_result with that id",
                "copy the id from `ctxpatch recall search` or from the cleared result; "
                "is it another session's? pass --transcript",
            )
        if as_json:
            emit_json(envelope(0, [result_json(result)], transcript=str(path)))
            return 0
        out(f"{result.tool_use_id}  {result.summary}" + ("  [error]" if result.is_error else ""))
        if not result.answered:
            out("(no result in the transcript yet)")
        elif result.full_output is not None:
            out(extract.content_text(result.full_output, "[{kind} block]"))
        else:
            out(extract.content_text(result.content, "[{kind} block]"))
        return 0

    raise typer.Exit(handle(body, as_json))


def mcp(transcript: TranscriptOpt = None) -> None:
    """Serve recall to the model: a stdio MCP server with the tools search and get over the current session's transcript (Claude Code starts it; `ctxpatch apply` registers it). Exits 0 when the client closes stdin.

    Example: claude mcp add ctxpatch-recall -- ctxpatch mcp
    """

    def body() -> int:
        from recall.mcp_server import serve

        if transcript is not None:
            fixed = transcript.absolute()
            return serve(lambda: fixed)
        return serve()

    raise typer.Exit(handle(body, as_json=False))


@recall_app.command("hook")
def hook() -> None:
    """The command Claude Code runs for its hooks (apply registers it): reads the hook's JSON
    on stdin. SessionStart records the session; after a compaction (source "compact") it
    prints the digest of what the summary dropped as additional context
    (CTXPATCH_RECALL_DIGEST_TOKENS, default 2000); PreCompact prints the prompts marked #keep.
    Always exits 0, prints nothing on any failure (logged in the state dir's hook.log).

    (``ctxpatch recall hook`` with no option is answered without loading the option parser.)
    """
    from recall.hook import run

    raise typer.Exit(run())
