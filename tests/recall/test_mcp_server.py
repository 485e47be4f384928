"""``ctxpatch mcp`` as Claude Code runs it: a real subprocess, spoken to by the mcp SDK's client."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from transcript_lines import call, result_line, use_line, write

from recall.mcp_server import PAGE_CHARS, TOOLS, Recall

ROOT = Path(__file__).resolve().parents[2]
BIG = "".join(f"row {i:06d} of the long build log\n" for i in range(3000))  # ~100K chars


def session(tmp_path: Path) -> Path:
    return write(
        tmp_path / "proj" / "sess.jsonl",
        call("toolu_A", "npm test", "FAIL src/cart.test.ts: expected 4, received 3"),
        use_line("toolu_BIG", "Bash", {"command": "make all"}),
        result_line("toolu_BIG", BIG),
    )


async def _talk(env: dict[str, str], args: list[str]) -> dict[str, object]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxpatch", *args], env=env)
    out: dict[str, object] = {}
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        out["tools"] = [(t.name, t.input_schema) for t in (await s.list_tools()).tools]
        res = await s.call_tool("search", {"query": "expected 4 received 3"})
        out["search"] = (res.content[0].text, res.is_error)
        res = await s.call_tool("get", {"tool_use_id": "toolu_A"})
        out["get"] = (res.content[0].text, res.is_error)
        pages, offset = [], 0
        while True:
            res = await s.call_tool("get", {"tool_use_id": "toolu_BIG", "offset": offset})
            text = res.content[0].text
            head, _, body = text.partition("\n")
            pages.append(body)
            if "next page: offset=" not in head:
                break
            offset = int(head.rsplit("offset=", 1)[1].rstrip("]"))
        out["pages"] = pages
        res = await s.call_tool("get", {"tool_use_id": "toolu_unknown"})
        out["unknown"] = (res.content[0].text, res.is_error)
    return out


def test_the_model_gets_search_and_get_over_stdio(tmp_path: Path, state_dir: Path) -> None:
    path = session(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CTXPATCH_STATE_DIR": str(state_dir)}
    env["CTXPATCH_RECALL_TRANSCRIPT"] = str(path)  # the session, as the hooks would record it
    out = anyio.run(_talk, env, ["mcp"])
    assert [n for n, _ in out["tools"]] == ["search", "get"]  # type: ignore[union-attr]
    text, err = out["search"]  # type: ignore[misc]
    assert not err and text.startswith("toolu_A | Bash: npm test")
    text, err = out["get"]  # type: ignore[misc]
    assert (
        not err
        and text == "toolu_A | Bash: npm test\nFAIL src/cart.test.ts: expected 4, received 3"
    )
    pages = out["pages"]
    assert len(pages) == -(-len(BIG) // PAGE_CHARS) and "".join(pages) == BIG  # type: ignore[arg-type]
    text, err = out["unknown"]  # type: ignore[misc]
    assert not err and "No tool call toolu_unknown" in text


def test_without_a_session_the_tools_say_so(tmp_path: Path, state_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CTXPATCH_STATE_DIR": str(state_dir)}
    for var in ("CTXPATCH_RECALL_TRANSCRIPT", "CLAUDE_CODE_SESSION_ID"):
        env.pop(var, None)

    async def talk() -> tuple[str, bool]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "ctxpatch", "mcp"], env=env
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("search", {"query": "anything"})
            return res.content[0].text, bool(res.is_error)

    text, err = anyio.run(talk)
    assert err and "no current Claude Code session" in text and "hint:" in text


def test_tool_errors_are_results_not_crashes(tmp_path: Path) -> None:
    r = Recall(lambda: session(tmp_path))
    assert r.call("search", {"query": "  "})[1] is True
    assert r.call("get", {"tool_use_id": "toolu_A", "offset": -1})[1] is True
    assert r.call("rm", {}) == ("unknown tool 'rm': use search or get", True)
    gone = Recall(lambda: tmp_path / "gone.jsonl")
    text, err = gone.call("get", {"tool_use_id": "x"})
    assert err and "no such file" in text
    r.close()


def test_the_definitions_stay_small() -> None:
    import json

    assert len(json.dumps(TOOLS)) < 1200  # what rides on every request; counted by the bench


def test_bad_transcripts_are_tool_errors_with_a_hint(tmp_path: Path) -> None:
    """A cut .xz, a folder, a binary file: the model gets what/why/hint, never a traceback."""
    xz = tmp_path / "cut.jsonl.xz"
    xz.write_bytes(b"\xfd7zXZ\x00 truncated")
    blob = tmp_path / "blob.jsonl"
    blob.write_bytes(b"\x7fELF\x00\x00\x01\n" * 10)
    for path in (xz, tmp_path, blob):
        r = Recall(lambda p=path: p)  # type: ignore[misc]
        for name, args in (("search", {"query": "x"}), ("get", {"tool_use_id": "toolu_A"})):
            text, err = r.call(name, args)
            assert err and "why:" in text and "hint:" in text, (path, text)
            assert "Traceback" not in text
        r.close()
