"""The gateway never forges or strips an attestation field.

A request shaped like the one the real native 2.1.330 sends first-party (measured in
``tests/e2e/test_base_url.py``; the values here are made up): the ``x-anthropic-billing-header``
system text with ``cch=`` and the ``cc_*`` fields, the globally scoped cache block,
``diagnostics``, ``metadata`` and the first-party headers. Through the gateway every header
arrives with the client's value and every byte of the body outside the ``context_management``
value is the client's, in place.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.api.context_management import BETA, CLEAR_THINKING, ClearToolUses, to_json
from gateway.server import ThreadedGateway

EDIT = ClearToolUses(trigger_value=50, keep=1)
BILLING = (
    "x-anthropic-billing-header: cc_version=2.1.330.2cb; cc_entrypoint=sdk-cli; cch=3f0a1; "
    "cc_prev_req=req_011CabcDEF; cc_prompt_id=8e19ad57-0664-44af-a2a4-0d8e859dc3e2; "
    "cc_turn_origin=sdk;"
)
HEADERS = {
    "content-type": "application/json",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,"
    f"{BETA},prompt-caching-scope-2026-01-05,thinking-binding-controls-2026-08-01",
    "x-api-key": "sk-ant-e2e-test",
    "user-agent": "claude-cli/2.1.330 (external, sdk-cli)",
    "x-app": "cli",
    "x-client-request-id": "0b5e2f9c-1111-4222-8333-944455556666",
    "x-claude-code-session-id": "cd613e30-d8f1-4adf-91b7-584a2265b1f5",
    "x-claude-code-prompt-id": "8e19ad57-0664-44af-a2a4-0d8e859dc3e2",
    "x-claude-1p-request-class": "main",
    "x-claude-code-request-class": "main",
    "x-stainless-retry-count": "0",
}


def first_party_body() -> bytes:
    body = {
        "model": "claude-opus-4-7",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "start é \u2028"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            {"role": "user", "content": "continue"},
        ],
        "system": [
            {"type": "text", "text": BILLING},
            {"type": "text", "text": "You are Claude Code."},
            {
                "type": "text",
                "text": "static prompt",
                "cache_control": {"type": "ephemeral", "scope": "global"},
            },
            {"type": "text", "text": "dynamic prompt", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "metadata": {"user_id": '{"device_id":"ab","account_uuid":"","session_id":"cd"}'},
        "max_tokens": 64000,
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": CLEAR_THINKING, "keep": "all"}]},
        "diagnostics": {"previous_message_id": "msg_011CabcDEF"},
        "output_config": {"effort": "xhigh"},
        "stream": False,
    }
    # the CLI's own separators, non-ASCII kept as UTF-8
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class Recorder:
    """An upstream on 127.0.0.1 that keeps each request's raw bytes and headers."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[tuple[str, str]], bytes]] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                rec.seen.append((self.path, list(self.headers.items()), raw))
                out = b'{"type":"message","content":[],"usage":{"input_tokens":1}}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def forwarded() -> Iterator[tuple[bytes, list[tuple[str, str]], bytes]]:
    raw = first_party_body()
    with Recorder() as up, ThreadedGateway(upstream=up.url, edit=EDIT) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request("POST", "/v1/messages?beta=true", body=raw, headers=HEADERS)
            assert conn.getresponse().status == 200
        finally:
            conn.close()
        ((path, headers, sent),) = up.seen
        assert path == "/v1/messages?beta=true"
        yield raw, headers, sent


def value_span(raw: bytes, key: str) -> tuple[int, int]:
    """Where the JSON value of top-level ``key`` lies in ``raw`` (start, end)."""
    text = raw.decode()
    start = text.index(f'"{key}":') + len(key) + 3
    _, end = json.JSONDecoder().raw_decode(text, start)
    return len(text[:start].encode()), len(text[:end].encode())


def test_headers_arrive_as_the_client_sent_them(forwarded) -> None:
    _, headers, _ = forwarded
    got = {k.lower(): v for k, v in headers if k.lower() not in ("host", "content-length")}
    # the beta was already there: even anthropic-beta is the client's, byte for byte
    # http.client's own, and the gateway's loop mark (the upstream is on this machine)
    assert got == HEADERS | {"accept-encoding": "identity", "x-ctxpatch-hop": got["x-ctxpatch-hop"]}


def test_attestation_text_and_every_byte_outside_the_edit_are_the_clients(forwarded) -> None:
    raw, _, sent = forwarded
    assert BILLING.encode() in sent and b"cch=3f0a1;" in sent
    a0, a1 = value_span(raw, "context_management")
    b0, b1 = value_span(sent, "context_management")
    assert sent[:b0] == raw[:a0]  # model, messages, system (billing text), tools, metadata ...
    assert sent[b1:] == raw[a1:]  # diagnostics, output_config, stream
    assert json.loads(sent[b0:b1]) == {
        "edits": [{"type": CLEAR_THINKING, "keep": "all"}, to_json(EDIT)]
    }
