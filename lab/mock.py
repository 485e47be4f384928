"""A loopback mock of the Anthropic Messages API, in-process, for the real ``cli.js``: the HTTP side.

Routes (any path prefix, any query string such as ``?beta=true``):

* ``POST .../v1/messages``: streaming SSE when the body says ``"stream": true`` (every call the
  CLI makes), else a plain JSON message;
* ``POST .../v1/messages/count_tokens``: a JSON ``{"input_tokens": ...}``;
* anything else: ``200 {}``, logged.

What each request is answered (request kinds, the scripted replies, :class:`MockConfig`'s 2026
server behaviours: preserved thinking, context editing, prompt counting) is decided in
:mod:`lab.mock_api`; its public names are re-exported here, so
``from lab.mock import MockConfig, MockServer, Step`` is the one import a test needs.
This module carries the answers on the wire: ``input_transformations`` in ``message_start`` and
``context_management`` in ``message_delta`` when streaming, in the message otherwise.

Every request is logged (method, path, headers without ``x-api-key``/``authorization``, parsed
body, kind). The server binds 127.0.0.1 only, serves from daemon threads and is stopped by
:meth:`MockServer.close` (also on ``with`` exit), so a failing test never leaves it running.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from lab.mock_api import (
    COMPACT_MARKERS,
    DEFAULT_SUMMARY,
    Answer,
    Kind,
    Logged,
    MessagesAPI,
    MockConfig,
    Step,
    classify,
    error_body,
    is_compaction_request,
    make_usage,
)

__all__ = [
    "COMPACT_MARKERS",
    "DEFAULT_SUMMARY",
    "Kind",
    "Logged",
    "MockConfig",
    "MockServer",
    "Step",
    "classify",
    "is_compaction_request",
    "make_usage",
]


class MockServer:
    """``with MockServer(config) as mock: ... mock.base_url ... mock.requests("main")``."""

    def __init__(self, config: MockConfig | None = None) -> None:
        self.api = MessagesAPI(config)
        handler = _make_handler(self.api)
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

    @property
    def config(self) -> MockConfig:
        return self.api.config

    @config.setter
    def config(self, config: MockConfig) -> None:
        self.api.config = config

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self, config: MockConfig | None = None) -> None:
        """Clear the log and restart the script (optionally with a new config)."""
        self.api.reset(config)

    def requests(self, kind: Kind | None = None) -> list[Logged]:
        return self.api.requests(kind)

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


def _make_handler(api: MessagesAPI) -> type[BaseHTTPRequestHandler]:
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
            api.record("GET", self.path, dict(self.headers), None, "other")
            self._json({})

        def do_POST(self) -> None:
            body = self._read_body()
            kind = classify(self.path, body)
            headers = dict(self.headers)
            if kind == "other":
                api.record("POST", self.path, headers, body, kind)
                return self._json({})
            a = api.answer(kind, headers, body)
            api.record("POST", self.path, headers, body, kind, a)
            if a.status != 200:
                return self._json(error_body(a.error or "invalid request"), a.status)
            if a.json_body is not None:
                return self._json(a.json_body)
            model = (body or {}).get("model") or "claude-sonnet-4-5-20250929"
            if not (body or {}).get("stream"):
                return self._json(
                    {
                        "id": a.mid,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": a.content,
                        "stop_reason": a.stop,
                        "stop_sequence": None,
                        "usage": a.usage,
                        **a.extra,
                    }
                )
            self._stream(a, model)

        def _stream(self, a: Answer, model: str) -> None:
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

            start_usage = {**a.usage, "output_tokens": 1}
            message: dict[str, Any] = {
                "id": a.mid,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            }
            if "input_transformations" in a.extra:
                message["input_transformations"] = a.extra["input_transformations"]
            ev("message_start", {"type": "message_start", "message": message})
            for i, b in enumerate(a.content):
                for name, data in _block_events(i, b):
                    ev(name, data)
                ev("content_block_stop", {"type": "content_block_stop", "index": i})
            delta: dict[str, Any] = {
                "type": "message_delta",
                "delta": {"stop_reason": a.stop, "stop_sequence": None},
                "usage": {"output_tokens": a.usage.get("output_tokens", 1)},
            }
            if "context_management" in a.extra:
                delta["context_management"] = a.extra["context_management"]
            ev("message_delta", delta)
            ev("message_stop", {"type": "message_stop"})
            try:
                self.wfile.write(b"".join(chunks))
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):  # the CLI exited mid-stream
                pass

    return Handler


def _block_events(i: int, b: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``content_block_start`` and the deltas of one reply block."""
    t = b.get("type")
    if t == "tool_use":
        start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(b.get("input") or {})}]
    elif t == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": b.get("thinking") or ""},
            {"type": "signature_delta", "signature": b.get("signature") or ""},
        ]
    else:
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": b.get("text") or ""}]
    out: list[tuple[str, dict[str, Any]]] = [
        ("content_block_start", {"type": "content_block_start", "index": i, "content_block": start})
    ]
    out += [
        ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
        for d in deltas
    ]
    return out
