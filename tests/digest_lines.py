"""Transcript records (parsed lines, the shapes Claude Code 2.1.x writes) for the digest and hook tests."""

from __future__ import annotations

from typing import Any

CWD = "/home/u/proj"


def use(tid: str, name: str, sidechain: bool = False, **inp: Any) -> dict[str, Any]:
    return {
        "type": "assistant",
        "isSidechain": sidechain,
        "cwd": CWD,
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tid, "name": name, "input": inp}],
        },
    }


def result(tid: str, content: Any, is_error: bool = False) -> dict[str, Any]:
    return {
        "type": "user",
        "cwd": CWD,
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tid,
                    "content": content,
                    "is_error": is_error,
                }
            ],
        },
    }


def prompt(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "cwd": CWD, "message": {"role": "user", "content": text}, **extra}


def session() -> list[dict[str, Any]]:
    """A small session: read, edit, a failing then passing test, a failing push, a fetch."""
    return [
        prompt("Fix the parser. #keep the public API of parse() must not change"),
        use("toolu_read1", "Read", file_path=f"{CWD}/src/parse.py"),
        result("toolu_read1", "def parse(): ..."),
        use("toolu_test1", "Bash", command="pytest tests/test_parse.py -q"),
        result(
            "toolu_test1",
            "Exit code 1\n..F\nFAILED tests/test_parse.py::test_empty - AssertionError: 0 != 1\n1 failed",
            is_error=True,
        ),
        use("toolu_edit1", "Edit", file_path=f"{CWD}/src/parse.py", old_string="a", new_string="b"),
        result("toolu_edit1", "The file src/parse.py has been updated."),
        use("toolu_edit2", "Edit", file_path=f"{CWD}/src/parse.py", old_string="b", new_string="c"),
        result("toolu_edit2", "The file src/parse.py has been updated."),
        use("toolu_sub", "Bash", sidechain=True, command="ls secret-subagent-dir"),
        use("toolu_test2", "Bash", command="pytest tests/test_parse.py -q"),
        result("toolu_test2", "3 passed"),
        use("toolu_push", "Bash", command="git push"),
        result("toolu_push", "Exit code 128\nfatal: no upstream branch", is_error=True),
        use("toolu_web", "WebFetch", url="https://example.org/spec", prompt="the grammar"),
        result("toolu_web", [{"type": "text", "text": "grammar: ..."}]),
        use("toolu_mcp", "mcp__ctxpatch__get", tool_use_id="toolu_read1"),
        result("toolu_mcp", "def parse(): ..."),
        prompt("<command-name>/compact</command-name> #keep", isMeta=True),
        prompt("Also #keep: write the changelog entry last."),
    ]
