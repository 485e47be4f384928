"""The ledger written by the injected clearing JavaScript (src ``cli.js``), in node: one line per
watched request, equal to what a fake reply said to the token (SSE in arbitrary chunks, a whole
JSON reply, a 1.0.x-style MessageStream), the same line the gateway's reader (usage.ledger) makes
of the same bytes; a cut reply, the off switch, a directory that cannot be made, rotation,
modes, the path against platformdirs, and the input and the reply Claude Code reads untouched."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from conftest import run_node

from patcher import snippet
from usage import ledger as L

pytestmark = pytest.mark.node

SID = "0b6f3e2a-1c4d-4e5f-8a9b-0c1d2e3f4a5b"
USER_ID = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": SID})
MODEL = "claude-sonnet-4-5"
START_USAGE = {
    "input_tokens": 3_210,
    "cache_creation_input_tokens": 1_634,
    "cache_creation": {"ephemeral_5m_input_tokens": 1_234, "ephemeral_1h_input_tokens": 400},
    "cache_read_input_tokens": 45_678,
    "output_tokens": 1,
}
EDITS = {
    "applied_edits": [
        {"type": "clear_thinking_20251015", "cleared_thinking_turns": 1, "cleared_input_tokens": 7},
        {
            "type": "clear_tool_uses_20250919",
            "cleared_tool_uses": 9,
            "cleared_input_tokens": 23_456,
        },
    ]
}
WANT = {
    "input": 3_210,
    "cache_write_5m": 1_234,
    "cache_write_1h": 400,
    "cache_read": 45_678,
    "output": 321,
    "cleared_tool_uses": 9,
    "cleared_input_tokens": 23_463,
}


def _events() -> list[dict[str, Any]]:
    return [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "usage": START_USAGE,
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": 'é\u2028 message_delta "message_start" '},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 321},
            "context_management": EDITS,
        },
        {"type": "message_stop"},
    ]


def sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def json_reply() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "hi"}],
        "usage": {**START_USAGE, "output_tokens": 321},
        "context_management": EDITS,
    }


# The driver: the snippet, a fake of the SDK's APIPromise (its asResponse / parse / withResponse /
# then, the stream read lazily as the SDK does) or MessageStream, and Claude Code's side reading
# the reply to its end. Prints what Claude Code read and whether the request was left as it was.
DRIVER = r"""
const fn = SNIPPET;
const cfg = JSON.parse(process.argv[1]);
const freeze = (o) => { if (o && typeof o === "object") { Object.values(o).forEach(freeze); Object.freeze(o); } return o; };
const request = freeze({model: cfg.model, max_tokens: 9, betas: [],
  messages: [{role: "user", content: "hi"}], metadata: {user_id: cfg.user_id}});
const before = JSON.stringify(request);
const sent = fn(request);
const enc = new TextEncoder();
function body(text, chunks, breakAfter) {
  const bytes = enc.encode(text);
  let at = 0, k = 0;
  return new ReadableStream({async pull(c) {
    if (cfg.delay) await new Promise((r) => setTimeout(r, cfg.delay));  // a network's pace
    if (breakAfter !== null && at >= breakAfter) { c.error(new TypeError("terminated")); return; }
    if (at >= bytes.length) { c.close(); return; }
    const n = chunks[k++ % chunks.length];
    c.enqueue(bytes.slice(at, at + n)); at += n;
  }});
}
class FakeAPIPromise extends Promise {
  constructor(responsePromise, stream) {
    super((r) => r(null));
    this.responsePromise = responsePromise; this.stream = stream;
  }
  static get [Symbol.species]() { return Promise; }
  asResponse() { return this.responsePromise.then((p) => p.response); }
  parse() {
    if (!this.parsed) this.parsed = this.responsePromise.then((p) => {
      if (this.stream) return {async *[Symbol.asyncIterator]() {
        const reader = p.response.body.getReader(); const dec = new TextDecoder(); let text = "";
        for (;;) { const {done, value} = await reader.read(); if (done) break; text += dec.decode(value, {stream: true}); }
        yield text;
      }};
      return p.response.json();
    });
    return this.parsed;
  }
  async withResponse() { const [data, response] = await Promise.all([this.parse(), this.asResponse()]);
    return {data, response, request_id: response.headers.get("request-id")}; }
  then(a, b) { return this.parse().then(a, b); }
}
class FakeMessageStream {
  constructor() { this.listeners = {}; }
  on(ev, f) { (this.listeners[ev] = this.listeners[ev] || []).push(f); return this; }
  emit(ev, ...args) { for (const f of this.listeners[ev] || []) f(...args); }
  get response() { return this._response; }
  get request_id() { return this._rid; }
}
const out = {unchanged: JSON.stringify(request) === before, added: sent !== request};
try {
  if (cfg.kind === "stream") {
    const ms = new FakeMessageStream();
    if (fn(ms, "watch") !== ms) throw new Error("watch returned something else");
    ms._response = {status: 200, headers: new Headers({"request-id": cfg.request_id})};
    ms._rid = cfg.request_id;
    ms.emit("connect");
    for (const ev of cfg.events) ms.emit("streamEvent", ev, {});
    if (cfg.abort) ms.emit("abort", new Error("aborted"));
    ms.emit("end");
    out.read = "events";
  } else {
    let responsePromise;
    if (cfg.status >= 400) {
      const err = Object.assign(new Error(cfg.status + " " + cfg.text), {status: cfg.status,
        request_id: cfg.request_id, headers: new Headers({"request-id": cfg.request_id}),
        error: JSON.parse(cfg.text)});
      responsePromise = Promise.reject(err);
    } else {
      const response = new Response(body(cfg.text, cfg.chunks, cfg.break_after), {status: cfg.status,
        headers: {"content-type": cfg.type, "request-id": cfg.request_id}});
      responsePromise = Promise.resolve({response});
    }
    const pending = new FakeAPIPromise(responsePromise, cfg.type.includes("event-stream"));
    if (fn(pending, "watch") !== pending) throw new Error("watch returned something else");
    try {
      const {data} = await pending.withResponse();
      if (cfg.type.includes("event-stream")) { for await (const text of data) out.read = text; }
      else out.read = JSON.stringify(data);
    } catch (e) { out.error = String(e.message); }
  }
} catch (e) { out.threw = String(e.stack); }
process.stdout.write(JSON.stringify(out));
// as Claude Code ends: no callback runs after process.exit(); "io": it wrote its transcript first
if (cfg.exit === "io") await new Promise((r) => setImmediate(r));
if (cfg.exit) process.exit(0);
"""


def _drive(node: str, cfg: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    js = DRIVER.replace("SNIPPET", snippet.clear_source().decode().strip())
    base = {
        "model": MODEL,
        "user_id": USER_ID,
        "request_id": "req_011CabcDEF",
        "status": 200,
        "type": "text/event-stream; charset=utf-8",
        "chunks": [1000000],
        "break_after": None,
        "kind": "promise",
    }
    res = run_node(
        node,
        ["--input-type=module", "-e", js, json.dumps({**base, **cfg})],
        env={"CLAUDE_CTX_CLEAR_POLICY": "fixed", **env},
    )
    assert res.returncode == 0 and res.stderr == b"", res.stderr.decode()
    out = json.loads(res.stdout)
    assert "threw" not in out, out["threw"]
    assert out["unchanged"], "the request was mutated"
    return out


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _lines(state: Path) -> list[dict[str, Any]]:
    path = state / "ctxpatch" / "ledger" / "ledger.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _numbers(line: dict[str, Any]) -> dict[str, Any]:
    return {k: line[k] for k in WANT}


def _gateway_line(payload: bytes, content_type: str, status: int = 200) -> dict[str, Any]:
    """What the gateway's reader (usage.ledger) makes of the same reply bytes."""
    rec = L.RequestRecord(t=0.0, session=SID, model=MODEL, edit="added")
    tap = rec.tap({"Content-Type": content_type})
    assert tap is not None
    for i in range(0, len(payload), 7):
        tap.feed(payload[i : i + 7])
    rec.close_tap()
    L.finish(rec, status, True, "", {"request-id": "req_011CabcDEF"})
    return rec.line()


def _same_as_gateway(line: dict[str, Any], gateway: dict[str, Any]) -> None:
    assert line["src"] == "cli.js" and gateway["src"] == "gateway"
    assert isinstance(line["t"], float) and abs(line["t"] - __import__("time").time()) < 120
    assert list(line) == list(gateway)  # the same keys in the same order
    strip = ("t", "src")
    assert {k: v for k, v in line.items() if k not in strip} == {
        k: v for k, v in gateway.items() if k not in strip
    }


@pytest.mark.parametrize("chunks", [[1000000], [1], [7, 13, 1, 64], [3, 500]])
def test_an_sse_reply_gives_its_numbers_to_the_token(
    node: str, state: Path, chunks: list[int]
) -> None:
    text = sse(_events())
    out = _drive(node, {"text": text, "chunks": chunks}, {"XDG_STATE_HOME": str(state)})
    assert out["read"] == text and out["added"]  # Claude Code read every byte, unchanged
    (line,) = _lines(state)
    assert _numbers(line) == WANT
    assert line["session"] == SID and line["model"] == MODEL and line["status"] == 200
    assert line["request_id"] == "req_011CabcDEF" and line["edit"] == "added"
    assert "cut" not in line and "why" not in line
    _same_as_gateway(line, _gateway_line(text.encode(), "text/event-stream"))


def test_a_json_reply_gives_its_numbers(node: str, state: Path) -> None:
    text = json.dumps(json_reply())
    out = _drive(node, {"text": text, "type": "application/json"}, {"XDG_STATE_HOME": str(state)})
    assert json.loads(out["read"]) == json_reply()
    (line,) = _lines(state)
    assert _numbers(line) == WANT and "cut" not in line
    _same_as_gateway(line, _gateway_line(text.encode(), "application/json"))


def test_a_message_stream_gives_its_numbers(node: str, state: Path) -> None:
    _drive(node, {"kind": "stream", "events": _events()}, {"XDG_STATE_HOME": str(state)})
    (line,) = _lines(state)
    assert _numbers(line) == WANT and line["status"] == 200 and "cut" not in line
    assert line["request_id"] == "req_011CabcDEF" and line["session"] == SID
    _same_as_gateway(line, _gateway_line(sse(_events()).encode(), "text/event-stream"))


def test_an_aborted_message_stream_is_cut(node: str, state: Path) -> None:
    _drive(
        node,
        {"kind": "stream", "events": _events()[:2], "abort": True},
        {"XDG_STATE_HOME": str(state)},
    )
    (line,) = _lines(state)
    assert line["cut"] is True and line["input"] == 3_210 and line["output"] == 1


def test_a_stream_that_breaks_off_is_cut(node: str, state: Path) -> None:
    text = sse(_events())
    at = text.index("message_delta") - 40
    out = _drive(
        node,
        {"text": text, "chunks": [50], "break_after": at, "delay": 2},
        {"XDG_STATE_HOME": str(state)},
    )
    assert out["error"] == "terminated"  # Claude Code sees the break, as it would anyway
    (line,) = _lines(state)
    assert line["cut"] is True and line["status"] == 200
    assert (line["input"], line["cache_read"], line["output"]) == (3_210, 45_678, 1)
    assert line["cleared_tool_uses"] == 0


def test_a_stream_that_ends_before_message_delta_is_cut(node: str, state: Path) -> None:
    text = sse(_events()[:3])
    _drive(node, {"text": text}, {"XDG_STATE_HOME": str(state)})
    (line,) = _lines(state)
    assert line["cut"] is True
    _same_as_gateway(line, _gateway_line(text.encode(), "text/event-stream"))


def test_a_refusal_is_a_lost_edit_with_the_status(node: str, state: Path) -> None:
    err = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"{MODEL} does not support the clear_tool_uses_20250919 strategy",
        },
    }
    out = _drive(node, {"status": 400, "text": json.dumps(err)}, {"XDG_STATE_HOME": str(state)})
    assert out["error"].startswith("400")
    (line,) = _lines(state)
    assert line["status"] == 400 and line["edit"] == "lost" and "cut" not in line
    assert line["why"] == "the API refused the edit for this model"
    assert line["request_id"] == "req_011CabcDEF" and line["input"] == 0


def test_a_skipped_edit_says_why(node: str, state: Path) -> None:
    _drive(
        node,
        {"text": sse(_events()), "model": "claude-3-5-haiku-20241022"},
        {"XDG_STATE_HOME": str(state)},
    )
    (line,) = _lines(state)
    assert line["edit"] == "skipped" and line["model"] == "claude-3-5-haiku-20241022"
    assert line["why"] == "Claude 3 models do not support context editing"
    _drive(
        node,
        {"text": sse(_events())},
        {"XDG_STATE_HOME": str(state), "CLAUDE_CTX_CLEAR_DISABLE": "1"},
    )
    assert _lines(state)[1]["why"] == "CLAUDE_CTX_CLEAR_DISABLE is set"


def test_the_older_user_id_form_names_the_session(node: str, state: Path) -> None:
    uid = f"user_{'ab' * 32}_account_11111111-2222-4333-8444-555555555555_session_{SID}"
    _drive(node, {"text": sse(_events()), "user_id": uid}, {"XDG_STATE_HOME": str(state)})
    assert _lines(state)[0]["session"] == SID
    _drive(node, {"text": sse(_events()), "user_id": "garbage"}, {"XDG_STATE_HOME": str(state)})
    assert _lines(state)[1]["session"] is None


@pytest.mark.parametrize("off", ["0", " off ", "FALSE", "no"])
def test_the_off_switch(node: str, state: Path, off: str) -> None:
    out = _drive(
        node, {"text": sse(_events())}, {"XDG_STATE_HOME": str(state), "CTXPATCH_LEDGER": off}
    )
    assert out["read"] == sse(_events()) and out["added"]
    assert not state.exists()


def test_a_directory_that_cannot_be_made_is_no_error(node: str, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = _drive(node, {"text": sse(_events())}, {"XDG_STATE_HOME": str(blocker)})
    assert out["read"] == sse(_events())  # and _drive saw no stderr, exit 0, no throw
    assert blocker.read_text() == "not a directory"


def test_modes_and_rotation_like_the_python_writer(node: str, state: Path) -> None:
    d = state / "ctxpatch" / "ledger"
    _drive(node, {"text": sse(_events())}, {"XDG_STATE_HOME": str(state)})
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / L.NAME).stat().st_mode) == 0o600
    # a file near full, opened wide by someone: rotated, the older ones shifted, KEEP kept
    first = (d / L.NAME).read_text()
    for k in range(1, L.KEEP + 1):
        (d / f"ledger.{k}.jsonl").write_text(f'{{"t":{k}}}\n')
    (d / L.NAME).write_text(first + " " * (L.MAX_BYTES - len(first) - 10) + "\n")
    _drive(node, {"text": sse(_events())}, {"XDG_STATE_HOME": str(state)})
    assert len(_lines(state)) == 1 and (d / L.NAME).stat().st_size < 1000
    assert (d / "ledger.1.jsonl").stat().st_size > L.MAX_BYTES - 20
    assert [(d / f"ledger.{k}.jsonl").read_text() for k in range(2, L.KEEP + 1)] == [
        f'{{"t":{k}}}\n' for k in range(1, L.KEEP)
    ]
    os.chmod(d / L.NAME, 0o644)
    _drive(node, {"text": sse(_events())}, {"XDG_STATE_HOME": str(state)})
    assert stat.S_IMODE((d / L.NAME).stat().st_mode) == 0o600
    read = L.read_ledger(d)
    assert [e.get("src") for e in read.entries][-2:] == ["cli.js", "cli.js"]


def test_the_constants_are_the_python_writers() -> None:
    js = snippet.clear_source().decode()
    found = dict(re.findall(r"var (LEDGER_MAX_BYTES|LEDGER_KEEP) = (\d+);", js))
    assert int(found["LEDGER_MAX_BYTES"]) == L.MAX_BYTES
    assert int(found["LEDGER_KEEP"]) == L.KEEP
    assert json.loads(re.search(r"var USAGE_KEYS = (\[.*?\]);", js).group(1)) == list(L.USAGE_KEYS)


@pytest.mark.parametrize("where", ["xdg", "xdg-slash", "home", "xdg-relative"])
def test_the_path_is_platformdirs_state_dir(
    node: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}
    if where == "xdg":
        env["XDG_STATE_HOME"] = str(tmp_path / "xdg")
    elif where == "xdg-slash":
        env["XDG_STATE_HOME"] = str(tmp_path / "xdg") + "/"
    elif where == "xdg-relative":
        env["XDG_STATE_HOME"] = "relative/state"  # platformdirs ignores it: so does the JS
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    full = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    full.update(env)
    js = DRIVER.replace("SNIPPET", snippet.clear_source().decode().strip())
    res = run_node(
        node,
        [
            "--input-type=module",
            "-e",
            js,
            json.dumps(
                {
                    "model": MODEL,
                    "user_id": USER_ID,
                    "request_id": "r",
                    "status": 200,
                    "type": "text/event-stream",
                    "chunks": [99999],
                    "break_after": None,
                    "kind": "promise",
                    "text": sse(_events()),
                }
            ),
        ],
        env={k: v for k, v in full.items()},
    )
    assert res.returncode == 0 and res.stderr == b"", res.stderr.decode()
    want = L.ledger_dir() / L.NAME
    assert want.is_file(), [str(p) for p in tmp_path.rglob("*.jsonl")]
    assert json.loads(want.read_text())["session"] == SID
    assert not Path("relative").exists()


def test_a_process_exit_right_after_the_reply_keeps_the_line(node: str, state: Path) -> None:
    """Claude Code's -p run ends with process.exit() soon after the reply (after writing its
    transcript: one turn of I/O): the line is written synchronously at exit (nothing else waits
    then). On Node < 20.16 in an ES module the fs module comes from an import() started at the
    request: a reply that takes a few network milliseconds (delay) gives it time."""
    for _ in range(3):
        _drive(
            node,
            {"text": sse(_events()), "exit": "io", "chunks": [100], "delay": 5},
            {"XDG_STATE_HOME": str(state)},
        )
    lines = _lines(state)
    assert len(lines) == 3 and all(_numbers(x) == WANT and "cut" not in x for x in lines)


def test_an_exit_before_the_copy_is_read_writes_a_cut_line(node: str, state: Path) -> None:
    """An exit in the very microtask the reply ends: the copy may not be read to its end; its
    line is then written at exit with what was read, cut unless its message_delta was (never
    lost silently)."""
    _drive(
        node,
        {"text": sse(_events()), "exit": True, "chunks": [100], "delay": 5},
        {"XDG_STATE_HOME": str(state)},
    )
    (line,) = _lines(state)
    assert line["input"] == 3_210 and line["session"] == SID
    assert _numbers(line) == WANT if "cut" not in line else line["output"] in (1, 321)


# --- the near move's prompt, read through the same reply path ----------------------------------
# Two requests of one conversation in one process: the first one's reply (SSE in chunks, a JSON
# reply, or a 1.0.x MessageStream's events) reports its prompt; the second request (the list grown
# by a round) then makes the near move when that prompt reached the level (200,000 - 33,000 -
# MARGIN). The paid rule alone never moves at this patience: it keeps every tool use. cfg.times:
# what Date.now() returns while each request is built and its reply read (the requests' times, ms;
# the expiry move's clock); none: the real clock.
NEAR_DRIVER = r"""
import { readFileSync } from "node:fs";
const fn = SNIPPET;
const cfg = JSON.parse(readFileSync(0, "utf8")); // on stdin: the lists pass argv's 128 KB
let clock = null;
if (cfg.times) Date.now = () => clock;
const freeze = (o) => { if (o && typeof o === "object") { Object.values(o).forEach(freeze); Object.freeze(o); } return o; };
const enc = new TextEncoder();
function body(text, chunks) {
  const bytes = enc.encode(text);
  let at = 0, k = 0;
  return new ReadableStream({pull(c) {
    if (at >= bytes.length) { c.close(); return; }
    const n = chunks[k++ % chunks.length];
    c.enqueue(bytes.slice(at, at + n)); at += n;
  }});
}
class FakeAPIPromise extends Promise {
  constructor(response, stream) { super((r) => r(null)); this.response = response; this.stream = stream; }
  static get [Symbol.species]() { return Promise; }
  asResponse() { return Promise.resolve(this.response); }
  parse() {
    if (!this.parsed) this.parsed = Promise.resolve().then(async () => {
      if (!this.stream) return this.response.json();
      const reader = this.response.body.getReader(); const dec = new TextDecoder(); let text = "";
      for (;;) { const {done, value} = await reader.read(); if (done) break; text += dec.decode(value, {stream: true}); }
      return text;
    });
    return this.parsed;
  }
  then(a, b) { return this.parse().then(a, b); }
}
class FakeMessageStream {
  constructor() { this.listeners = {}; }
  on(ev, f) { (this.listeners[ev] = this.listeners[ev] || []).push(f); return this; }
  emit(ev, ...args) { for (const f of this.listeners[ev] || []) f(...args); }
}
const out = {keeps: []};
const conv = () => fn.memory.conversations.length ? fn.memory.conversations.at(-1).prompt : "none";
for (const [i, messages] of cfg.lists.entries()) {
  if (cfg.times) clock = cfg.times[i];
  const request = freeze({model: cfg.model, max_tokens: 9, betas: cfg.betas, messages,
    metadata: {user_id: cfg.user_id}});
  const before = JSON.stringify(request);
  const sent = fn(request);
  if (JSON.stringify(request) !== before) throw new Error("the input was mutated");
  out.keeps.push(sent === request ? null : sent.context_management.edits.at(-1).keep.value);
  if (i === cfg.lists.length - 1) break;
  if (cfg.kind === "stream") {
    const ms = new FakeMessageStream();
    if (fn(ms, "watch") !== ms) throw new Error("watch returned something else");
    ms.emit("connect");
    for (const ev of cfg.events) ms.emit("streamEvent", ev, {});
    ms.emit("end");
  } else {
    const json = cfg.kind === "json";
    const response = new Response(body(cfg.text, cfg.chunks), {status: 200,
      headers: {"content-type": json ? "application/json" : "text/event-stream", "request-id": "req_1"}});
    const pending = new FakeAPIPromise(response, !json);
    if (fn(pending, "watch") !== pending) throw new Error("watch returned something else");
    const read = await pending;
    out.read = json ? JSON.stringify(read) : read;
  }
  await new Promise((r) => setTimeout(r, 0));
  out.prompt = conv();
}
process.stdout.write(JSON.stringify(out));
"""

NEAR_READ = 160_000  # with START_USAGE's input and cache write: a prompt of 164,844


def _near_usage(read: int) -> dict[str, Any]:
    return {**START_USAGE, "cache_read_input_tokens": read}


def _near_lists() -> list[list[dict[str, Any]]]:
    """12 tool uses, then a round more; each result 7,000 characters: a near move that clears
    12 frees 84,000 and more, past what the margins below ask (4 characters a token of it)."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the tests, please."}]
    for k in range(13):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"p": "f" * 40}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * 7_000}
        msgs += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [res]}]
    return [msgs[:-2], msgs]  # 12 tool uses; then a round more (13, the last one in progress)


def _twin_keeps(
    env: dict[str, str], prompt: int | None, times: list[int] | None = None
) -> list[int]:
    """The twin's keeps for the two requests (engine.twins.free_moves), the reply's prompt
    observed between them where the near move is on; ``times``: the requests' (ms)."""
    from engine.twins.context_clear import knobs_from_env
    from engine.twins.free_moves import (
        Conversation,
        free_edit,
        free_from_env,
        margin_from_env,
        near_level,
        near_need,
    )
    from engine.twins.policy import ceiling_from_env, paid_edit, patience_from_env

    edit = knobs_from_env(env)
    assert edit is not None
    knobs = (ceiling_from_env(env), patience_from_env(env))
    lists = _near_lists()
    if not free_from_env(env):
        return [paid_edit(edit, m, *knobs).keep for m in lists]
    margin = margin_from_env(env)
    level, need = near_level(MODEL, [], margin), near_need(margin)
    conv = Conversation()
    now = times or [None, None]
    first = free_edit(conv, edit, lists[0], *knobs, level=level, now=now[0], need=need).keep
    if prompt is not None and level > 0:
        conv.observe(prompt)
    second = free_edit(conv, edit, lists[1], *knobs, level=level, now=now[1], need=need)
    return [first, second.keep]


def _drive_near(
    node: str,
    kind: str,
    read: int,
    env: dict[str, str],
    chunks: list[int] | None = None,
    times: list[int] | None = None,
) -> dict[str, Any]:
    events = _events()
    events[0]["message"]["usage"] = _near_usage(read)
    cfg: dict[str, Any] = {
        "model": MODEL,
        "betas": [],
        "user_id": USER_ID,
        "lists": _near_lists(),
        "kind": kind,
        "chunks": chunks or [1_000_000],
        "events": events,
        "text": json.dumps({**json_reply(), "usage": _near_usage(read)})
        if kind == "json"
        else sse(events),
        "times": times,
    }
    js = NEAR_DRIVER.replace("SNIPPET", snippet.clear_source().decode().strip())
    full = {"CLAUDE_CTX_CLEAR_PATIENCE": "100000", **env}
    res = run_node(
        node, ["--input-type=module", "-e", js], env=full, input=json.dumps(cfg).encode()
    )
    assert res.returncode == 0 and res.stderr == b"", res.stderr.decode()
    out = json.loads(res.stdout)
    if kind == "sse":
        assert out["read"] == cfg["text"]  # Claude Code read every byte, unchanged
    elif kind == "json":
        assert json.loads(out["read"]) == json.loads(cfg["text"])
    prompt = sum(_near_usage(read)[k] for k in ("input_tokens", "cache_read_input_tokens"))
    prompt += _near_usage(read)["cache_creation_input_tokens"]
    assert out["keeps"] == _twin_keeps(full, prompt, times)
    return out


@pytest.mark.parametrize("ledger", ["1", "0"])
@pytest.mark.parametrize(
    ("kind", "chunks"),
    [("sse", [1_000_000]), ("sse", [7, 13, 1, 64]), ("json", None), ("stream", None)],
)
def test_a_reply_near_the_threshold_makes_the_next_request_move(
    node: str, state: Path, ledger: str, kind: str, chunks: list[int] | None
) -> None:
    env = {"XDG_STATE_HOME": str(state), "CTXPATCH_LEDGER": ledger}
    out = _drive_near(node, kind, NEAR_READ, env, chunks)
    assert out["prompt"] == 3_210 + 1_634 + NEAR_READ  # the reply's prompt, remembered
    assert out["keeps"] == [12, 1]  # the paid rule's keep (all), then the near move's
    if ledger == "1":
        (line,) = _lines(state)  # the ledger's line is the reply's, as without the near move
        assert line["cache_read"] == NEAR_READ and line["input"] == 3_210
        assert "cut" not in line and line["session"] == SID
    else:
        assert not state.exists()


def test_a_reply_under_the_level_moves_nothing(node: str, state: Path) -> None:
    for ledger in ("1", "0"):
        env = {"XDG_STATE_HOME": str(state), "CTXPATCH_LEDGER": ledger}
        # the level at the default margin (10,000): 157,000; a prompt of 156,999 is one short
        out = _drive_near(node, "sse", 156_999 - 4_844, env, [100])
        assert out["prompt"] == 156_999 and out["keeps"] == [12, 13]
        assert _drive_near(node, "sse", 157_000 - 4_844, env, [100])["keeps"] == [12, 1]


@pytest.mark.parametrize("ledger", ["1", "0"])
def test_the_margin_sets_the_level_and_the_knobs_turn_it_off(
    node: str, state: Path, ledger: str
) -> None:
    base = {"XDG_STATE_HOME": str(state), "CTXPATCH_LEDGER": ledger}
    # MARGIN 20,000: the level is 147,000; 12,000: 155,000 (a prompt of 154,844 is under)
    assert _drive_near(node, "sse", 150_000, {**base, "CLAUDE_CTX_CLEAR_MARGIN": "20_000"})[
        "keeps"
    ] == [12, 1]
    assert _drive_near(node, "sse", 150_000, {**base, "CLAUDE_CTX_CLEAR_MARGIN": " 12000 "})[
        "keeps"
    ] == [12, 13]
    # invalid: the default (10,000)
    assert _drive_near(node, "sse", NEAR_READ, {**base, "CLAUDE_CTX_CLEAR_MARGIN": "-5"})[
        "keeps"
    ] == [12, 1]
    # MARGIN=0: never, and the reply is not read for it (nothing remembered)
    off = _drive_near(node, "sse", NEAR_READ, {**base, "CLAUDE_CTX_CLEAR_MARGIN": "0"})
    assert off["keeps"] == [12, 13] and off["prompt"] is None
    # FREE=0: no memory at all, no near move
    free_off = _drive_near(node, "sse", NEAR_READ, {**base, "CLAUDE_CTX_CLEAR_FREE": "0"})
    assert free_off["keeps"] == [12, 13] and free_off["prompt"] == "none"


# --- the expiry move, through the same request path ---------------------------------------------
# The two requests with Date.now() stubbed: the first one's reply reports a prompt well under the
# near move's level, so only the time between the requests can move the second one.
T0 = 1_800_000_000_000
FAR_READ = 100_000  # a prompt of 104,844: no near move
LIFETIME = 300_000 + 10_000  # the 5-minute cache's lifetime and the slack (free_moves)


@pytest.mark.parametrize("ledger", ["1", "0"])
@pytest.mark.parametrize("kind", ["sse", "json", "stream"])
def test_a_request_after_the_cache_expired_moves(
    node: str, state: Path, ledger: str, kind: str
) -> None:
    env = {"XDG_STATE_HOME": str(state), "CTXPATCH_LEDGER": ledger}
    warm = _drive_near(node, kind, FAR_READ, env, times=[T0, T0 + LIFETIME])
    assert warm["keeps"] == [12, 13] and warm["prompt"] == FAR_READ + 4_844
    if ledger == "1":
        (line,) = _lines(state)  # the record's time is the stubbed clock's: the stub took
        assert line["t"] == T0 / 1000 and line["cache_read"] == FAR_READ
    cold = _drive_near(node, kind, FAR_READ, env, times=[T0, T0 + LIFETIME + 1])
    assert cold["keeps"] == [12, 1]  # the expiry move: all but KEEP 1 cleared
    # FREE=0: no memory, no expiry move
    off = {**env, "CLAUDE_CTX_CLEAR_FREE": "0"}
    assert _drive_near(node, kind, FAR_READ, off, times=[T0, T0 + 10 * LIFETIME])["keeps"] == [
        12,
        13,
    ]
