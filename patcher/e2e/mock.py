"""A loopback mock of the Anthropic Messages API, in-process, for the real ``cli.js``.

Routes (any path prefix, any query string such as ``?beta=true``):

* ``POST .../v1/messages``: streaming SSE when the body says ``"stream": true`` (every call the
  CLI makes), else a plain JSON message. The reply depends on the request's :func:`classify`
  kind: *main* requests take the next scripted :class:`Step` (then ``default_main``),
  *compact* requests get ``compact_reply`` (a ``<summary>``), *side* requests get a short text.
* ``POST .../v1/messages/count_tokens``: ``{"input_tokens": count_tokens}``.
* anything else: ``200 {}``, logged.

Every request is logged (method, path, headers without ``x-api-key``/``authorization``, parsed
body, kind). The server binds 127.0.0.1 only, serves from daemon threads and is stopped by
:meth:`MockServer.close` (also on ``with`` exit), so a failing test never leaves it running.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

from patcher.e2e.session import usage_of

Kind = Literal["main", "compact", "side", "count_tokens", "other"]

COMPACT_MARKERS = (
    "Your task is to create a detailed summary of the conversation so far",
    "summary of the conversation",
)
"""Text that only the summarisation prompt holds (2.0.76-2.1.112)."""

HIDDEN_HEADERS = frozenset({"x-api-key", "authorization"})
DEFAULT_SUMMARY = "<analysis>mock analysis</analysis>\n<summary>MOCK SUMMARY</summary>"


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text") or "" for b in content if isinstance(b, Mapping))
    return ""


def is_compaction_request(body: Mapping[str, Any]) -> bool:
    """The summarisation request: its last user message asks for the summary."""
    msgs = body.get("messages") or []
    if not msgs or not isinstance(msgs[-1], Mapping) or msgs[-1].get("role") != "user":
        return False
    text = _texts(msgs[-1].get("content"))
    return any(m in text for m in COMPACT_MARKERS)


def classify(path: str, body: Mapping[str, Any] | None) -> Kind:
    """``main`` | ``compact`` | ``side`` | ``count_tokens`` | ``other``.

    * compact: the summarisation request (:func:`is_compaction_request`), checked first because
      it also carries a tool list in some versions.
    * main: the query loop's request; it carries the full tool list (``len(tools) > 1``), or
      only ``ToolSearch`` when the tools are deferred (2.1.69).
      Side requests (2.0.76 sub-agent ``Warmup`` with ``tools: []``, the Bash command-prefix and
      file-path helpers, title generation, haiku quota probes) carry no tools or a single one.
    * side: any other ``/v1/messages`` call.
    """
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/v1/messages/count_tokens"):
        return "count_tokens"
    if not p.endswith("/v1/messages") or not isinstance(body, Mapping):
        return "other"
    if is_compaction_request(body):
        return "compact"
    tools = body.get("tools") or []
    if isinstance(tools, list) and len(tools) > 1:
        return "main"
    if isinstance(tools, list) and any(
        isinstance(t, Mapping) and t.get("name") == "ToolSearch" for t in tools
    ):
        return "main"  # 2.1.69: tools deferred behind ToolSearch, the only tool sent
    return "side"


@dataclass
class Step:
    """One scripted reply to a main-loop request.

    ``content`` holds API blocks: ``{"type": "text", "text": ...}`` or
    ``{"type": "tool_use", "id": ..., "name": ..., "input": {...}}``. ``usage`` overrides the
    mock's default usage for this reply (input, cache and output tokens, as the API reports).
    """

    content: list[dict] = field(default_factory=lambda: [{"type": "text", "text": "OK"}])
    stop_reason: str = "end_turn"
    usage: dict[str, int] | None = None

    @classmethod
    def text(cls, text: str = "OK", usage: Mapping[str, int] | None = None) -> Step:
        return cls([{"type": "text", "text": text}], "end_turn", dict(usage) if usage else None)


def make_usage(total: int = 1000, output: int = 1, cache_read: int = 0) -> dict[str, int]:
    """A usage whose sum (input + cache + output, what the thresholds use) is ``total``."""
    return usage_of(total, output, cache_read)


@dataclass
class MockConfig:
    script: list[Step] = field(default_factory=list)
    default_main: Step = field(default_factory=Step)
    usage: dict[str, int] = field(default_factory=lambda: make_usage(1000))
    compact_reply: str = DEFAULT_SUMMARY
    compact_usage: dict[str, int] = field(default_factory=lambda: make_usage(2000, output=500))
    side_reply: str = "OK"
    count_tokens: int = 1000


@dataclass(frozen=True)
class Logged:
    """One request as the mock saw it."""

    seq: int
    time: float
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    kind: Kind

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "kind": self.kind,
        }


class MockServer:
    """``with MockServer(config) as mock: ... mock.base_url ... mock.requests("main")``."""

    def __init__(self, config: MockConfig | None = None) -> None:
        self.config = config or MockConfig()
        self._lock = threading.Lock()
        self._log: list[Logged] = []
        self._script_pos = 0
        self._msg_seq = 0
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="ctxpatch-mock",
            daemon=True,
        )
        self._thread.start()
        self._closed = False

    # --- public ------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self, config: MockConfig | None = None) -> None:
        """Clear the log and restart the script (optionally with a new config)."""
        with self._lock:
            if config is not None:
                self.config = config
            self._log.clear()
            self._script_pos = 0

    def requests(self, kind: Kind | None = None) -> list[Logged]:
        with self._lock:
            return [r for r in self._log if kind is None or r.kind == kind]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- used by the handler ---------------------------------------------------------------

    def _record(
        self, method: str, path: str, headers: Mapping[str, str], body: Any, kind: Kind
    ) -> None:
        with self._lock:
            self._log.append(
                Logged(
                    len(self._log),
                    time.time(),
                    method,
                    path,
                    {k.lower(): v for k, v in headers.items() if k.lower() not in HIDDEN_HEADERS},
                    body,
                    kind,
                )
            )

    def _reply(self, kind: Kind) -> tuple[list[dict], str, dict[str, int], str]:
        with self._lock:
            cfg = self.config
            self._msg_seq += 1
            mid = f"msg_mock_{self._msg_seq:04d}"
            if kind == "compact":
                return (
                    [{"type": "text", "text": cfg.compact_reply}],
                    "end_turn",
                    dict(cfg.compact_usage),
                    mid,
                )
            if kind == "main":
                if self._script_pos < len(cfg.script):
                    step = cfg.script[self._script_pos]
                    self._script_pos += 1
                else:
                    step = cfg.default_main
                return (
                    json.loads(json.dumps(step.content)),
                    step.stop_reason,
                    dict(step.usage or cfg.usage),
                    mid,
                )
            return ([{"type": "text", "text": cfg.side_reply}], "end_turn", make_usage(100, 5), mid)


def _make_handler(server: MockServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "ctxpatch-mock/1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _read_body(self) -> Any:
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n) if n else b""
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError:
                return {"_raw": raw.decode("utf-8", "replace")[:2000]}

        def _json(self, obj: Any, status: int = 200) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", "req_mock")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            server._record("GET", self.path, dict(self.headers), None, "other")
            self._json({})

        def do_POST(self) -> None:
            body = self._read_body()
            kind = classify(self.path, body)
            server._record("POST", self.path, dict(self.headers), body, kind)
            if kind == "count_tokens":
                return self._json({"input_tokens": server.config.count_tokens})
            if kind == "other":
                return self._json({})
            content, stop, usage, mid = server._reply(kind)
            model = (body or {}).get("model") or "claude-sonnet-4-5-20250929"
            if not (body or {}).get("stream"):
                return self._json(
                    {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": content,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": usage,
                    }
                )
            self._stream(mid, model, content, stop, usage)

        def _stream(
            self, mid: str, model: str, content: Sequence[dict], stop: str, usage: Mapping[str, int]
        ) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("request-id", "req_mock")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            chunks: list[bytes] = []

            def ev(name: str, data: Mapping[str, Any]) -> None:
                chunks.append(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

            start_usage = {**usage, "output_tokens": 1}
            ev(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": start_usage,
                    },
                },
            )
            for i, b in enumerate(content):
                if b.get("type") == "tool_use":
                    ev(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {
                                "type": "tool_use",
                                "id": b["id"],
                                "name": b["name"],
                                "input": {},
                            },
                        },
                    )
                    ev(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {
                                "type": "input_json_delta",
                                "partial_json": json.dumps(b.get("input") or {}),
                            },
                        },
                    )
                else:
                    ev(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                    ev(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": b.get("text") or ""},
                        },
                    )
                ev("content_block_stop", {"type": "content_block_stop", "index": i})
            ev(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage.get("output_tokens", 1)},
                },
            )
            ev("message_stop", {"type": "message_stop"})
            try:
                self.wfile.write(b"".join(chunks))
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):  # the CLI exited mid-stream
                pass

    return Handler
