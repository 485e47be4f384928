"""A client of the e2e mock (:mod:`lab.mock`) for the tests: one POST, the SSE events
of a streamed reply, and the reply's content blocks rebuilt from them as a client does."""

from __future__ import annotations

import http.client
import json


def post(
    port: int, path: str, body: dict, betas: str = "", *, key: str = "sk-secret"
) -> tuple[int, str, str]:
    """``POST path`` on 127.0.0.1:``port``: (status, content-type, body text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"content-type": "application/json", "x-api-key": key}
    if betas:
        headers["anthropic-beta"] = betas
    conn.request("POST", path, json.dumps(body), headers)
    r = conn.getresponse()
    data = r.read().decode()
    conn.close()
    return r.status, r.getheader("content-type") or "", data


def events(sse: str) -> list[tuple[str, dict]]:
    """(event name, data) of each event of a server-sent-events body."""
    out = []
    for chunk in sse.strip().split("\n\n"):
        name, data = chunk.split("\n", 1)
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def assemble(sse: str) -> list[dict]:
    """The reply's content blocks, rebuilt from the stream as a client does."""
    blocks: list[dict] = []
    for name, d in events(sse):
        if name == "content_block_start":
            blocks.append(dict(d["content_block"]))
        elif name == "content_block_delta":
            b, delta = blocks[d["index"]], d["delta"]
            if delta["type"] == "thinking_delta":
                b["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                b["signature"] += delta["signature"]
            elif delta["type"] == "text_delta":
                b["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                b["input"] = json.loads(delta["partial_json"])
    return blocks
