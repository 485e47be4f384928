"""Write session transcripts that the real ``cli.js`` resumes with ``--resume <id>``.

What resuming needs (shared/research/e2e.md §5, checked on 2.0.76-2.1.112):

* the file is ``$HOME/.claude/projects/<cwd, non-alphanumerics as "-">/<session id>.jsonl`` and
  the process runs in that ``cwd``;
* every line has ``type``, ``uuid``, ``parentUuid`` (chaining the lines; ``null`` on the first),
  ``timestamp`` (2.0.76 crashes without it, 2.1.7 silently drops the history) and ``message``;
* the newest assistant line's ``usage`` (input + cache creation + cache read + output) is the
  number every compaction threshold is compared with on the first request after resuming.

The records built here are also exactly what the engine reads (``engine.claude_code.microcompact``,
``engine.twins.textprune``, ``engine.claude_code.flatten`` take ``{type, message: {role, content}, ...}``), so one
list is both the file written and the engine's input. UUIDs and timestamps are deterministic
(derived from ``seed``), so two runs of a scenario write the same bytes.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "claude-sonnet-4-5-20250929"


def usage_of(total: int, output: int = 200, cache_read: int = 0) -> dict[str, int]:
    """A usage whose threshold sum is exactly ``total``."""
    if total < output + cache_read:
        output = min(output, total)
        cache_read = 0
    return {
        "input_tokens": total - output - cache_read,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cache_read,
    }


@dataclass
class SessionWriter:
    """Builds a main-chain transcript line by line.

    >>> s = SessionWriter(cwd="/tmp/p", seed=1)
    >>> s.prompt("Please look at a.py")          # a typed prompt (a turn start)
    >>> s.tool_round("Read", {"file_path": "/tmp/p/a.py"}, "x" * 16000)
    >>> s.reply("Done.", usage_total=135000)     # the usage every threshold looks at
    >>> s.write(home)                            # → path of the .jsonl
    """

    cwd: str
    seed: int = 0
    session_id: str = ""
    version: str = "2.0.76"
    model: str = DEFAULT_MODEL
    start: datetime = field(default_factory=lambda: datetime(2025, 12, 1, 10, 0, 0, tzinfo=UTC))
    records: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        if not self.session_id:
            self.session_id = self._uuid()
        self._clock = self.start
        self._n_msg = 0
        self._n_tool = 0

    # --- ids -------------------------------------------------------------------------------

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _ts(self) -> str:
        self._clock += timedelta(seconds=5)
        return self._clock.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def next_tool_id(self) -> str:
        self._n_tool += 1
        return f"toolu_e2e_{self.seed:03d}_{self._n_tool:03d}"

    @property
    def last_uuid(self) -> str | None:
        return self.records[-1]["uuid"] if self.records else None

    # --- lines -----------------------------------------------------------------------------

    def _line(self, typ: str, message: dict, **extra: Any) -> dict:
        rec = {
            "parentUuid": self.last_uuid,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": "",
            "type": typ,
            "uuid": self._uuid(),
            "timestamp": self._ts(),
            "message": message,
            **extra,
        }
        self.records.append(rec)
        return rec

    def prompt(self, text: str | Sequence[Mapping[str, Any]]) -> dict:
        """A typed user prompt: string content, or a list of text blocks."""
        content = text if isinstance(text, str) else [dict(b) for b in text]
        return self._line("user", {"role": "user", "content": content})

    def assistant(
        self,
        blocks: Sequence[Mapping[str, Any]],
        usage_total: int = 5000,
        stop_reason: str | None = None,
        output: int = 200,
    ) -> dict:
        """One assistant line holding ``blocks`` (one API reply)."""
        self._n_msg += 1
        blocks = [dict(b) for b in blocks]
        if stop_reason is None:
            stop_reason = (
                "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
            )
        return self._line(
            "assistant",
            {
                "id": f"msg_e2e_{self.seed:03d}_{self._n_msg:03d}",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": blocks,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": usage_of(usage_total, output),
            },
            requestId=f"req_e2e_{self._n_msg:03d}",
        )

    def reply(self, text: str, usage_total: int = 5000) -> dict:
        return self.assistant([{"type": "text", "text": text}], usage_total)

    def tool_result(self, tool_use_id: str, text: str, tool: str = "Read") -> dict:
        extra: dict[str, Any]
        if tool == "Bash":
            extra = {
                "toolUseResult": {
                    "stdout": text,
                    "stderr": "",
                    "interrupted": False,
                    "isImage": False,
                }
            }
        else:
            extra = {
                "toolUseResult": {
                    "type": "text",
                    "file": {
                        "filePath": "",
                        "content": text[:200],
                        "numLines": 1,
                        "startLine": 1,
                        "totalLines": 1,
                    },
                }
            }
        return self._line(
            "user",
            {
                "role": "user",
                "content": [
                    {
                        "tool_use_id": tool_use_id,
                        "type": "tool_result",
                        "content": text,
                        "is_error": False,
                    }
                ],
            },
            **extra,
        )

    def tool_round(
        self,
        tool: str,
        tool_input: Mapping[str, Any],
        result: str,
        usage_total: int = 5000,
        text: str | None = None,
    ) -> str:
        """An assistant ``tool_use`` (optionally after a text block) and its ``tool_result``."""
        tid = self.next_tool_id()
        blocks: list[dict] = []
        if text is not None:
            blocks.append({"type": "text", "text": text})
        blocks.append({"type": "tool_use", "id": tid, "name": tool, "input": dict(tool_input)})
        self.assistant(blocks, usage_total)
        self.tool_result(tid, result, tool)
        return tid

    def set_last_usage(self, total: int, output: int = 200, cache_read: int = 0) -> None:
        """Make the newest assistant line's usage sum exactly ``total``."""
        for rec in reversed(self.records):
            if rec["type"] == "assistant":
                rec["message"]["usage"] = usage_of(total, output, cache_read)
                return
        raise ValueError("no assistant line yet")

    # --- output ----------------------------------------------------------------------------

    def jsonl(self) -> str:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records)

    def write(self, projects_dir: Path) -> Path:
        """Write ``<projects_dir>/<session id>.jsonl`` (creating the folder)."""
        projects_dir.mkdir(parents=True, exist_ok=True)
        path = projects_dir / f"{self.session_id}.jsonl"
        path.write_text(self.jsonl(), encoding="utf-8")
        return path

    def copy(self) -> list[dict]:
        """A deep copy of the records (what the engine reads)."""
        return json.loads(json.dumps(self.records))


def filler(n_chars: int, tag: str, seed: int = 0) -> str:
    """Deterministic, line-structured text of exactly ``n_chars`` characters (ASCII)."""
    rng = random.Random(f"{tag}:{seed}")
    words = (
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
    )
    out: list[str] = []
    size = 0
    line = f"{tag}:"
    while size < n_chars:
        w = rng.choice(words)
        if len(line) + len(w) + 1 > 72:
            out.append(line + "\n")
            size += len(line) + 1
            line = w
        else:
            line += " " + w
    text = "".join(out)
    return (text + line + "\n" + "x" * n_chars)[:n_chars]
