"""``ctxpatch mcp`` answers the handshake before the SDK is loaded (``recall.mcp_early``): those
answers must be the SDK's own, and the SDK must take the connection over in the state the
client believes (a real subprocess, raw JSON-RPC lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from transcript_lines import call, write

from ctxpatch import __version__
from recall.mcp_early import (
    HANDSHAKE_VERSIONS,
    REPLAYED_ID,
    Front,
    negotiate,
    wants_instructions,
)
from recall.mcp_server import INSTRUCTIONS, NAME, TOOLS

ROOT = Path(__file__).resolve().parents[2]


def init(
    rid: object = 0,
    version: str = "2025-06-18",
    client: tuple[str, str] = ("claude-code", "2.1.112"),
) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"roots": {}},
            "clientInfo": {"name": client[0], "version": client[1]},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def req(rid: object, method: str, params: object = None) -> dict[str, object]:
    doc: dict[str, object] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        doc["params"] = params
    return doc


def line(doc: object) -> bytes:
    return json.dumps(doc).encode() + b"\n"


class Server:
    """``python -m ctxpatch mcp`` spoken to line by line; ``ask`` waits for the answer."""

    def __init__(self, tmp_path: Path) -> None:
        transcript = write(tmp_path / "p" / "s.jsonl", call("toolu_A", "npm test", "4 passed"))
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "CTXPATCH_STATE_DIR": str(tmp_path / "state"),
            "CTXPATCH_RECALL_TRANSCRIPT": str(transcript),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ctxpatch", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.seen: list[dict[str, object]] = []

    def tell(self, doc: object) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(doc if isinstance(doc, bytes) else line(doc))
        self.proc.stdin.flush()

    def ask(self, doc: dict[str, object]) -> dict[str, object]:
        self.tell(doc)
        assert self.proc.stdout
        while True:
            out = self.proc.stdout.readline()
            assert out, self.proc.stderr.read() if self.proc.stderr else "closed"
            answer = json.loads(out)
            self.seen.append(answer)
            if answer.get("id") == doc["id"]:
                return answer

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


HANDSHAKE = [init(0), req(1, "tools/list", {}), req(2, "tools/list"), req(3, "ping")]


def test_the_early_handshake_is_the_sdks(tmp_path: Path) -> None:
    early = Server(tmp_path / "early")
    answers_early = [early.ask(HANDSHAKE[0])]
    early.tell(INITIALIZED)
    answers_early += [early.ask(m) for m in HANDSHAKE[1:]]
    # then the SDK takes over: the session it got by the replay serves tools and lists
    called = early.ask(req(4, "tools/call", {"name": "search", "arguments": {"query": "npm"}}))
    listed = early.ask(req(5, "tools/list"))
    assert early.close() == 0

    sdk = Server(tmp_path / "sdk")  # a first line the front leaves to the SDK: the SDK answers all
    assert sdk.ask(req("first", "ping", {"_meta": {}}))["result"] == {}
    answers_sdk = [sdk.ask(HANDSHAKE[0])]
    sdk.tell(INITIALIZED)
    answers_sdk += [sdk.ask(m) for m in HANDSHAKE[1:]]
    assert sdk.close() == 0

    assert answers_early == answers_sdk  # parsed JSON: the same answers, key order aside
    assert answers_early[0]["result"] == {
        "capabilities": {"tools": {"listChanged": False}},
        "protocolVersion": "2025-06-18",
        "serverInfo": {"name": NAME, "version": __version__},
        "instructions": INSTRUCTIONS,
    }
    assert [t["name"] for t in answers_early[1]["result"]["tools"]] == ["search", "get"]  # type: ignore[index]
    content = called["result"]["content"]  # type: ignore[index]
    assert called["result"]["isError"] is False and "toolu_A | Bash: npm test" in content[0]["text"]  # type: ignore[index]
    assert listed["result"] == answers_sdk[1]["result"]
    assert REPLAYED_ID not in json.dumps(early.seen)  # the SDK's answer to the replay is dropped
    assert [a["id"] for a in early.seen] == [0, 1, 2, 3, 4, 5]


def test_a_version_the_sdk_does_not_speak_is_countered_as_it_would(tmp_path: Path) -> None:
    early = Server(tmp_path / "early")
    answer = early.ask(init(0, "2099-01-01"))
    assert early.close() == 0
    sdk = Server(tmp_path / "sdk")
    sdk.ask(req("first", "ping", {"_meta": {}}))
    assert sdk.ask(init(0, "2099-01-01")) == answer
    assert sdk.close() == 0
    assert answer["result"]["protocolVersion"] == HANDSHAKE_VERSIONS[-1]  # type: ignore[index]


def test_what_the_front_leaves_to_the_sdk(tmp_path: Path) -> None:
    srv = Server(tmp_path)
    bad = srv.ask(req(1, "tools/list"))  # before initialize: the SDK's refusal, not our list
    assert "error" in bad and "result" not in bad
    srv.tell(b"not json\n")  # the SDK's parse error, and the server carries on
    assert srv.ask(init(2))["result"]["serverInfo"]["name"] == NAME  # type: ignore[index]
    assert srv.close() == 0


def test_closed_before_a_tool_call_exits_at_once(tmp_path: Path) -> None:
    srv = Server(tmp_path)
    srv.ask(init(0))
    srv.tell(INITIALIZED)
    srv.ask(req(1, "tools/list"))
    assert srv.close() == 0
    assert srv.proc.stderr and srv.proc.stderr.read() == b""


def test_the_pinned_sdk_negotiates_these_versions() -> None:
    """(the capabilities and the rest of the answers: compared on the wire above)"""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


def test_the_front_state_machine() -> None:
    front = Front(NAME, "9", TOOLS)
    assert front.take(line(req(1, "tools/list"))) is None and front.handed_over  # no initialize
    assert front.take(line(init(0))) is None  # handed over: everything is the SDK's now
    assert front.replay() == []

    front = Front(NAME, "9", TOOLS)
    assert json.loads(front.take(line(init("a"))) or b"")["id"] == "a"
    assert front.take(line(INITIALIZED)) == b""
    assert front.take(b"\n") == b""
    assert front.take(line(init("b"))) is None  # a second initialize is the SDK's to refuse
    replay = [json.loads(x) for x in front.replay()]
    assert replay == [{**init("a"), "id": REPLAYED_ID}, INITIALIZED]
    assert front.answered == ["initialize"]

    for bad in (
        b"{",
        line([init(0)]),  # a batch
        line({**init(0), "jsonrpc": "1.0"}),
        line({**init(0), "id": True}),
        line({**init(0), "params": {"protocolVersion": "2025-06-18"}}),  # no clientInfo
    ):
        assert Front(NAME, "9", TOOLS).take(bad) is None
    assert negotiate("2024-11-05") == "2024-11-05" and negotiate("x") == HANDSHAKE_VERSIONS[-1]


def test_the_instructions_go_where_the_definitions_do_not_say_it(tmp_path: Path) -> None:
    """Claude Code before 2.1.69 sends the tools' whole definitions (their descriptions say what
    the instructions say): no instructions for it; from 2.1.69 (tool search: names only), for
    a native build, and for any other client or a version it cannot read, the instructions."""
    for client, wanted in (
        (("claude-code", "2.0.76"), False),
        (("claude-code", "2.1.68"), False),
        (("claude-code", "2.1.69"), True),
        (("claude-code", "2.1.330"), True),
        (("claude-code", "next"), True),
        (("cursor", "1.0.0"), True),
    ):
        assert wants_instructions(init(client=client)["params"]) is wanted, client
        front = Front(NAME, "9", TOOLS, INSTRUCTIONS)
        answer = json.loads(front.take(line(init(client=client))) or b"")["result"]
        assert answer.get("instructions") == (INSTRUCTIONS if wanted else None), client
    assert wants_instructions(None) and wants_instructions({"clientInfo": "x"})
    assert (
        "instructions"
        not in json.loads(Front(NAME, "9", TOOLS).take(line(init())) or b"")["result"]
    )  # a front given none sends none

    # the real server: the front answers Claude Code's initialize, by its version
    for client, wanted in ((("claude-code", "2.1.68"), False), (("claude-code", "2.1.69"), True)):
        srv = Server(tmp_path / client[1])
        got = srv.ask(init(0, client=client))["result"]
        assert srv.close() == 0
        assert isinstance(got, dict) and ("instructions" in got) is wanted, (client, got)
    # a client whose first line is not its initialize is the SDK's from the start: it gets them
    srv = Server(tmp_path / "sdk")
    srv.ask(req("first", "ping", {"_meta": {}}))
    got = srv.ask(init(0, client=("claude-code", "2.1.68")))["result"]
    assert srv.close() == 0
    assert isinstance(got, dict) and got.get("instructions") == INSTRUCTIONS
