"""The harness itself: mock, classification, offline guard, sandbox clean-up, session writer, diff.

Fast (no real cli.js); the guard and sandbox tests need node.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path

import pytest
from mock_http import events, post

from lab.mock import MockConfig, MockServer, Step, classify, make_usage
from lab.predict import first_difference, strip_volatile
from lab.sandbox import Sandbox, project_dir_name
from lab.session import SessionWriter, filler, usage_of

TOOLS = [{"name": "Read"}, {"name": "Bash"}]


def test_classify() -> None:
    def user(t):
        return {"role": "user", "content": t}

    assert classify("/v1/messages?beta=true", {"tools": TOOLS, "messages": [user("hi")]}) == "main"
    assert classify("/v1/messages", {"tools": [], "messages": [user("Warmup")]}) == "side"
    assert classify("/v1/messages", {"messages": [user("Extract any file paths")]}) == "side"
    compact = [
        user(
            [
                {
                    "type": "text",
                    "text": "Your task is to create a detailed summary of the "
                    "conversation so far, paying close attention",
                }
            ]
        )
    ]
    assert classify("/v1/messages", {"tools": TOOLS, "messages": compact}) == "compact"
    assert classify("/v1/messages/count_tokens", {"messages": []}) == "count_tokens"
    assert classify("/api/event_logging/batch", {}) == "other"


def test_mock_streams_scripted_replies_and_logs_without_secrets() -> None:
    script = [
        Step(
            [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
            "tool_use",
            make_usage(140000, 50),
        )
    ]
    with MockServer(MockConfig(script=script)) as mock:
        body = {
            "model": "m",
            "stream": True,
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "go"}],
        }
        status, ctype, data = post(mock.port, "/v1/messages?beta=true", body)
        assert (status, ctype) == (200, "text/event-stream")
        ev = events(data)
        assert [n for n, _ in ev] == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        assert ev[0][1]["message"]["usage"]["input_tokens"] == 140000 - 50
        assert json.loads(ev[2][1]["delta"]["partial_json"]) == {"command": "ls"}
        assert ev[4][1]["delta"]["stop_reason"] == "tool_use"
        assert ev[4][1]["usage"]["output_tokens"] == 50
        # script exhausted: the default text reply, as plain JSON when not streaming
        status, ctype, data = post(mock.port, "/v1/messages", {**body, "stream": False})
        reply = json.loads(data)
        assert reply["content"] == [{"type": "text", "text": "OK"}]
        assert reply["usage"] == make_usage(1000)
        status, _, data = post(mock.port, "/v1/messages/count_tokens", {"messages": []})
        assert json.loads(data) == {"input_tokens": 1000}
        logged = mock.requests()
        assert [r.kind for r in logged] == ["main", "main", "count_tokens"]
        assert all("x-api-key" not in r.headers for r in logged)
        assert logged[0].body == body
        mock.reset()
        assert mock.requests() == []
    with pytest.raises(OSError):  # closed: nothing listens any more
        post(mock.port, "/v1/messages", body)


def test_mock_answers_the_summarisation_request() -> None:
    with MockServer(MockConfig(compact_reply="<summary>S</summary>")) as mock:
        body = {
            "stream": False,
            "tools": TOOLS,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": "Your task is to create a detailed summary of the "
                            "conversation so far",
                        }
                    ],
                }
            ],
        }
        _, _, data = post(mock.port, "/v1/messages", body)
        assert json.loads(data)["content"][0]["text"] == "<summary>S</summary>"
        assert mock.requests("compact")


GUARD_PROBE = r"""
const dns = require('dns'), net = require('net');
const t0 = Date.now(), out = {};
const done = () => { if (Object.keys(out).length === 4) { out.ms = Date.now() - t0; console.log(JSON.stringify(out)); process.exit(0); } };
dns.lookup('example.com', (e) => { out.dns = e && e.code; done(); });
const s = net.connect(443, '93.184.215.14'); s.on('error', (e) => { out.ip = e.code; done(); });
fetch('https://api.anthropic.com/v1/messages').then(() => { out.fetch = 'reached'; done(); },
  (e) => { out.fetch = (e.cause && e.cause.code) || String(e); done(); });
const l = net.connect(Number(process.env.PORT), '127.0.0.1');
l.on('connect', () => { out.loopback = 'ok'; l.destroy(); done(); });
l.on('error', (e) => { out.loopback = e.code; done(); });
"""


@pytest.mark.node
def test_guard_refuses_every_non_loopback_connection_at_once(tmp_path: Path, node: str) -> None:
    fake = tmp_path / "pkg-src" / "cli.js"
    fake.parent.mkdir()
    fake.write_text(
        GUARD_PROBE.replace(
            "require(", "(await import('node:module')).createRequire(import.meta.url)("
        )
    )
    sb = Sandbox(tmp_path / "sb", fake, node)
    with MockServer() as mock:
        res = sb.run([], mock.base_url, {"PORT": str(mock.port)}, timeout=30)
    assert res.returncode == 0, res.describe()
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["dns"] == "ENOTFOUND" and out["ip"] == "ECONNREFUSED", out
    assert out["fetch"] in ("ENOTFOUND", "ECONNREFUSED"), out
    assert out["loopback"] == "ok" and out["ms"] < 1000, out
    blocked = {e["host"] for e in sb.net_events() if e["event"] == "blocked"}
    assert {"example.com", "93.184.215.14", "api.anthropic.com"} <= blocked


def _gone(pid: int) -> bool:
    """Dead, or a zombie waiting for an init that does not reap (containers)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")


@pytest.mark.node
def test_sandbox_kills_what_the_run_started(tmp_path: Path, node: str) -> None:
    fake = tmp_path / "src" / "cli.js"
    fake.parent.mkdir()
    fake.write_text(
        "import {spawn} from 'node:child_process';\n"
        "const c = spawn('sleep', ['60'], {stdio: 'ignore'});\n"
        "console.log(c.pid);\nsetInterval(() => {}, 1000);\n"
    )
    sb = Sandbox(tmp_path / "sb", fake, node)
    t0 = time.monotonic()
    res = sb.run([], "http://127.0.0.1:9", timeout=2)
    assert time.monotonic() - t0 < 10
    assert "killed after 2" in res.stderr
    child = int(res.stdout.split()[0])
    time.sleep(0.2)
    assert _gone(child), f"pid {child} (started by the run) still alive"
    # the sandbox environment is built from PATH alone
    env = sb.env("http://127.0.0.1:9")
    assert env["HOME"] == str(sb.home) and env["TMPDIR"] == str(sb.tmp)
    assert not any(k.startswith("CLAUDE_TEXT_PRUNE_") for k in env)
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_session_writer_chains_lines_deterministically(tmp_path: Path) -> None:
    def make() -> SessionWriter:
        s = SessionWriter(cwd="/w/p", seed=7)
        s.prompt("hello")
        s.tool_round("Read", {"file_path": "/w/p/a"}, filler(1000, "a"))
        s.reply("done", usage_total=135000)
        return s

    a, b = make(), make()
    assert a.jsonl() == b.jsonl()
    recs = a.records
    assert recs[0]["parentUuid"] is None
    assert all(r["parentUuid"] == p["uuid"] for p, r in itertools.pairwise(recs))
    assert all(r["timestamp"].endswith("Z") for r in recs)
    assert sum(recs[-1]["message"]["usage"].values()) == 135000
    path = a.write(tmp_path / project_dir_name("/w/p"))
    assert path.name == f"{a.session_id}.jsonl" and path.parent.name == "-w-p"
    assert len(filler(16000, "x")) == 16000
    assert sum(usage_of(155000).values()) == 155000


def test_first_difference_names_message_and_block() -> None:
    exp = [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "b"},
                {"type": "tool_use", "id": "t", "input": {}},
            ],
        },
    ]
    same = json.loads(json.dumps(exp))
    assert first_difference(exp, same) is None
    other = json.loads(json.dumps(exp))
    other[1]["content"][1]["input"] = {"x": 1}
    diff = first_difference(exp, other)
    assert diff is not None and diff.startswith("message 1 (role 'assistant'") and "block 1" in diff
    reordered = json.loads(json.dumps(exp))
    reordered[1]["content"][0] = {"text": "b", "type": "text"}
    assert "different key order" in (first_difference(exp, reordered) or "")
    assert "2 messages expected, 1 sent" in (first_difference(exp, exp[:1]) or "")


def test_strip_volatile() -> None:
    sent = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\ndate</system-reminder>"},
                {"type": "text", "text": "continue", "cache_control": {"type": "ephemeral"}},
            ],
        }
    ]
    assert strip_volatile(sent) == [
        {"role": "user", "content": [{"type": "text", "text": "continue"}]}
    ]
    assert "cache_control" in sent[0]["content"][1]  # the input is not changed


def test_chain_helpers_read_what_was_sent() -> None:
    from lab.chain import Turns, _pruned_upto, stream_json_prompts
    from lab.mock import Logged
    from lab.sandbox import RunResult

    lines = stream_json_prompts(["a", 'b "q"']).splitlines()
    assert [json.loads(x)["message"]["content"] for x in lines] == ["a", 'b "q"']

    def req(texts: list[str], status: int = 200) -> Logged:
        msgs = [{"role": "user", "content": [{"type": "text", "text": t}]} for t in texts]
        return Logged(0, 0.0, "POST", "/v1/messages", {}, {"messages": msgs}, "main", status)

    pruned = "Turn 1\n[earlier context pruned]"
    assert _pruned_upto({"messages": []}) == 0
    reqs = [
        req(["a", "b"]),
        req([pruned, "b"]),
        req([pruned, "b", "c"]),
        req([pruned, pruned, "c"], 400),
    ]
    t = Turns(RunResult([], 0, "", "", 0.0), reqs)
    assert [t.pruned_upto(r) for r in reqs] == [0, 1, 1, 2]
    assert t.cutoff_moves == 2 and t.first_rejected == 3 and len(t.rejected) == 1
