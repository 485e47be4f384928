"""Small Claude Code transcripts written line by line, as the real program writes them."""

from __future__ import annotations

import json
from pathlib import Path

from recall.extract import JsonValue


def use_line(tid: str, name: str, inp: dict[str, JsonValue], *, side: bool = False) -> bytes:
    rec = {
        "type": "assistant",
        "isSidechain": side,
        "sessionId": "s",
        "version": "2.1.100",
        "message": {
            "id": f"msg_{tid}",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [{"type": "tool_use", "id": tid, "name": name, "input": inp}],
            "usage": {"input_tokens": 1, "output_tokens": 5},
        },
    }
    return json.dumps(rec).encode() + b"\n"


def result_line(tid: str, content: JsonValue, *, is_error: bool = False) -> bytes:
    block: dict[str, JsonValue] = {"type": "tool_result", "tool_use_id": tid, "content": content}
    if is_error:
        block["is_error"] = True
    rec = {"type": "user", "sessionId": "s", "message": {"role": "user", "content": [block]}}
    return json.dumps(rec, ensure_ascii=False).encode() + b"\n"


def prompt_line(text: str) -> bytes:
    return (
        json.dumps({"type": "user", "message": {"role": "user", "content": text}}).encode() + b"\n"
    )


def call(tid: str, command: str, output: JsonValue) -> bytes:
    return use_line(tid, "Bash", {"command": command}) + result_line(tid, output)


def write(path: Path, *chunks: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(chunks))
    return path


def append(path: Path, *chunks: bytes) -> None:
    with path.open("ab") as f:
        f.write(b"".join(chunks))
