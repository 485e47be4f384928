"""The MCP handshake answered before the SDK is loaded, so ``ctxpatch mcp`` is listed fast.

Importing the official ``mcp`` SDK takes ~1 s (its pydantic models of two protocol eras are
built at import: ``mcp_types`` alone is most of it; ``bench/bench_recall.py`` prints the split),
and Claude Code waits for a server's ``initialize`` and ``tools/list`` before it can put the
tools in a request. So ``recall.mcp_server.serve`` starts the SDK's import in a thread and, until
a message needs the SDK, this module answers the three messages whose answers are fixed:
``initialize`` (the version negotiated as the SDK's runner does, our capabilities and name, the
instructions where :func:`wants_instructions`),
``tools/list`` (``TOOLS``) and ``ping``. The first other message (a ``tools/call``, anything
unexpected, a line that is not JSON, a message of the newer per-request era) hands the
connection to the SDK: the client's ``initialize`` (under ``REPLAYED_ID``, its answer dropped)
and ``notifications/initialized`` are replayed to it first, so the SDK's session is in the state
the client believes, then every line goes to the SDK unchanged. tests/recall/test_mcp_early.py
checks that these answers are the SDK's own, message for message.

Pure: messages in, answers out; the streams are ``recall.mcp_server``'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS of the pinned SDK (importing it loads the SDK's
# models: the point of this module is not to); tests/recall/test_mcp_early.py compares them.
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
REPLAYED_ID = "ctxpatch-replayed-initialize"  # the client's initialize, replayed to the SDK


def capabilities() -> dict[str, object]:
    """What a server with only list/call tool handlers advertises (the SDK's get_capabilities)."""
    return {"tools": {"listChanged": False}}


def negotiate(requested: str) -> str:
    """The protocol version the SDK's runner answers an ``initialize`` asking for ``requested``."""
    return requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def _is_plain_initialize(params: object) -> bool:
    """An ``initialize`` whose params the SDK accepts for sure (else it answers, not us)."""
    if not isinstance(params, Mapping):
        return False
    info = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), Mapping)
        and isinstance(info, Mapping)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    )


def wants_instructions(params: object) -> bool:
    """Whether the client of an ``initialize`` with these params gets the server's instructions:
    every one but a Claude Code before ``FIRST_TOOL_SEARCH``, which sends the tools' whole
    definitions, whose descriptions already say it (the instructions would only add tokens to
    every request there)."""
    from engine.versions import FIRST_TOOL_SEARCH, parse_version

    info = params.get("clientInfo") if isinstance(params, Mapping) else None
    if not isinstance(info, Mapping) or info.get("name") != "claude-code":
        return True
    try:
        return parse_version(str(info.get("version"))) >= parse_version(FIRST_TOOL_SEARCH)
    except ValueError:
        return True


def _request_id(msg: Mapping[str, object]) -> object:
    rid = msg.get("id")
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


class Front:
    """The connection until the SDK takes over: ``take(line)`` gives the answer to write, or
    None once ``handed_over`` (then ``replay()`` + that line go to the SDK). A plain class:
    ``dataclasses`` imports ``inspect``, tens of milliseconds on the handshake's path."""

    def __init__(
        self,
        name: str,
        version: str,
        tools: Sequence[Mapping[str, object]],
        instructions: str | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.tools = tools
        self.instructions = instructions
        self.initialize: dict[str, object] | None = None  # the client's, once answered here
        self.initialized = False  # the client's notifications/initialized arrived
        self.handed_over = False
        self.answered: list[str] = []  # the methods answered here, in order

    def take(self, line: bytes) -> bytes | None:
        """The answer (a JSON line) to ``line`` when this front can give it, else hand over.
        A notification this front understands (``initialized``) gives ``b""``."""
        if self.handed_over:
            return None
        answer = self._answer(line)
        if answer is None:
            self.handed_over = True
        return answer

    def _answer(self, line: bytes) -> bytes | None:
        if not line.strip():
            return b""  # the SDK's reader skips blank lines too (a validation error, no answer)
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return None
        method = msg.get("method")
        params = msg.get("params")
        rid = _request_id(msg)
        if "id" not in msg:  # a notification
            if (
                method == "notifications/initialized"
                and self.initialize is not None
                and params in (None, {})
            ):
                self.initialized = True
                return b""
            return None
        if rid is None:
            return None
        if method == "ping" and (params is None or params == {}):
            result: dict[str, object] = {}
        elif method == "initialize" and self.initialize is None and _is_plain_initialize(params):
            assert isinstance(params, Mapping)
            self.initialize = msg
            result = {
                "capabilities": capabilities(),
                "protocolVersion": negotiate(str(params["protocolVersion"])),
                "serverInfo": {"name": self.name, "version": self.version},
            }
            if self.instructions is not None and wants_instructions(params):
                result["instructions"] = self.instructions
        elif method == "tools/list" and self.initialize is not None and params in (None, {}):
            result = {"tools": [dict(t) for t in self.tools]}
        else:
            return None
        self.answered.append(str(method))
        return _line({"jsonrpc": "2.0", "id": rid, "result": result})

    def replay(self) -> list[bytes]:
        """What the SDK reads before the client's next line: the handshake the client made."""
        if self.initialize is None:
            return []
        lines = [_line({**self.initialize, "id": REPLAYED_ID})]
        if self.initialized:
            lines.append(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return lines


def is_replay_answer(line: str) -> bool:
    """Whether the SDK's output ``line`` answers the replayed ``initialize`` (not the client's)."""
    if REPLAYED_ID not in line:
        return False
    try:
        doc = json.loads(line)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("id") == REPLAYED_ID and "method" not in doc


def _line(doc: Mapping[str, object]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
