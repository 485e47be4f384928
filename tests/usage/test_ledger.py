"""usage.ledger: the SSE tap, the file (mode, rotation, cut lines, off switch), the session id,
and the gateway's lines through the project's mock of the Messages API."""

from __future__ import annotations

import http.client
import json
import os
import queue
import stat

import pytest
from gateway_bodies import EDIT, MODEL, body_of, compact

from gateway.server import ThreadedGateway
from lab.mock import MockConfig, MockServer
from usage import ledger as L

SID = "0b5e0f43-1a2b-4c3d-8e9f-0123456789ab"


def sse(*events: dict) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


START = {
    "type": "message_start",
    "message": {
        "usage": {
            "input_tokens": 11,
            "cache_creation_input_tokens": 300,
            "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
            "cache_read_input_tokens": 4000,
            "output_tokens": 1,
        }
    },
}
BIG = {
    "type": "content_block_delta",
    "index": 0,
    "delta": {"type": "text_delta", "text": "x" * 600_000},
}
DELTA = {
    "type": "message_delta",
    "usage": {"output_tokens": 77},
    "context_management": {
        "applied_edits": [
            {
                "type": "clear_tool_uses_20250919",
                "cleared_tool_uses": 3,
                "cleared_input_tokens": 999,
            }
        ]
    },
}


@pytest.mark.parametrize("size", [1, 3, 17, 64, 4096, 10**7])
def test_sse_tap_reads_usage_in_any_chunking_without_keeping_the_stream(size):
    stream = sse(START, BIG, DELTA, {"type": "message_stop"})
    out = L.ReplyUsage()
    tap = L.SSETap(out)
    most = 0
    for i in range(0, len(stream), size):
        tap.feed(stream[i : i + size])
        most = max(most, len(tap._tail) + len(tap._line or b""))
    assert out.usage == {
        "input": 11,
        "cache_write_5m": 100,
        "cache_write_1h": 200,
        "cache_read": 4000,
        "output": 77,
    }
    assert (out.cleared_tool_uses, out.cleared_input_tokens, out.delta_seen) == (3, 999, True)
    assert most < 2_000  # the 600 KB text line was never held


def test_sse_tap_survives_garbage():
    out = L.ReplyUsage()
    tap = L.SSETap(out)
    for junk in (
        b"data: {not json\n",
        b"\xff\xfe\n",
        b"data: [1,2]\n",
        b'data: {"type":"message_delta","usage":7}\n',
    ):
        tap.feed(junk)
    assert out.usage == {} and out.delta_seen


def test_session_id_from_header_then_metadata():
    assert L.session_id({L.SESSION_HEADER: SID}, b"{}") == SID
    new = json.dumps({"metadata": {"user_id": json.dumps({"device_id": "d", "session_id": SID})}})
    assert L.session_id({}, new.encode()) == SID
    old = json.dumps({"metadata": {"user_id": f"user_abc_account_x_session_{SID}"}})
    assert L.session_id({}, old.encode()) == SID
    assert L.session_id({L.SESSION_HEADER: "bad id; rm -rf"}, b"{}") is None


def rec(n: int = 1) -> L.RequestRecord:
    r = L.RequestRecord(t=1700000000.0 + n, session=SID, model=MODEL, edit="added", status=200)
    r.reply.take_usage({"input_tokens": n, "output_tokens": 2})
    r.reply.delta_seen = True
    return r


def test_file_modes_lines_and_a_cut_last_line(tmp_path):
    d = tmp_path / "state" / "ledger"
    led = L.Ledger(d)
    for n in range(3):
        led.record(rec(n))
    assert led.flush() and led.errors == 0
    f = d / L.NAME
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    with open(f, "ab") as h:
        h.write(b'{"t": 17000, "inp')  # a crash mid-line
    got = L.read_ledger(d)
    assert [e["input"] for e in got.entries] == [0, 1, 2] and got.skipped == 1
    line = got.entries[1]
    assert line["session"] == SID and line["edit"] == "added" and "cut" not in line
    assert set(line) <= {
        "t",
        "src",
        "session",
        "model",
        "status",
        "request_id",
        *L.USAGE_KEYS,
        "cleared_tool_uses",
        "cleared_input_tokens",
        "edit",
        "why",
        "cut",
    }


def test_rotation_bounds_the_files(tmp_path):
    led = L.Ledger(tmp_path, max_bytes=2_000)
    for n in range(200):
        led.record(rec(n))
    assert led.flush()
    files = L.ledger_files(tmp_path)
    assert len(files) == L.KEEP + 1
    assert all(p.stat().st_size <= 2_000 for p in files)
    entries = L.read_ledger(tmp_path).entries
    nums = [e["input"] for e in entries]
    assert nums == sorted(nums) and nums[-1] == 199  # oldest first, the newest kept


def test_lines_recorded_together_go_out_in_one_write_in_order(tmp_path, monkeypatch):
    writes: list[bytes] = []
    write = L.Ledger._write

    def counted(self: L.Ledger, data: bytes) -> None:
        writes.append(data)
        write(self, data)

    monkeypatch.setattr(L.Ledger, "_write", counted)
    monkeypatch.setattr(L, "BATCH_WAIT", 0.5)  # a loaded machine still records 50 within it
    led = L.Ledger(tmp_path)
    for n in range(50):  # well within BATCH_WAIT: one batch, not 50 wake-ups and writes
        led.record(rec(n))
    assert led.flush() and led.written == 50 and led.errors == 0
    assert len(writes) == 1 and writes[0].count(b"\n") == 50
    assert [e["input"] for e in L.read_ledger(tmp_path).entries] == list(range(50))


def test_errors_are_swallowed(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    led = L.Ledger(blocker / "ledger")  # a directory that cannot exist
    led.record(rec())
    assert led.flush() and led.errors == 1 and led.written == 0


def test_switched_off(monkeypatch):
    monkeypatch.setenv(L.ENV, "0")
    assert L.default_ledger() is None
    monkeypatch.setenv(L.ENV, "1")
    assert L.enabled()


def test_xdg_state_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert L.ledger_dir() == tmp_path / "ctxpatch" / "ledger"


# --- through the gateway --------------------------------------------------------------------


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/v1/messages", body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


HEADERS = {
    "content-type": "application/json",
    "x-api-key": "sk-ant-SECRET-KEY-123",
    L.SESSION_HEADER: SID,
}


@pytest.mark.parametrize("stream", [True, False])
def test_gateway_lines_hold_exactly_the_mock_numbers(tmp_path, stream):
    usage = {
        "input_tokens": 1234,
        "cache_creation_input_tokens": 50,
        "cache_read_input_tokens": 7000,
        "output_tokens": 321,
    }
    led = L.Ledger(tmp_path)
    # the plain edit (policy=None): on this short body the default policy (paid) rightly moves
    # nothing, and the test needs an edit the mock applies
    with (
        MockServer(MockConfig(usage=usage)) as mock,
        ThreadedGateway(upstream=mock.base_url, edit=EDIT, ledger=led, policy=None) as gw,
    ):
        tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("Read", "Bash")]
        status, reply = post(gw.url, compact(body_of(stream=stream, tools=tools)), HEADERS)
        assert status == 200
        (req,) = mock.requests()
    assert led.flush()
    (line,) = L.read_ledger(tmp_path).entries
    applied = req.applied_edits[0]
    assert applied["cleared_tool_uses"] > 0
    assert line["session"] == SID and line["model"] == MODEL and line["status"] == 200
    assert (line["input"], line["cache_write_5m"], line["cache_read"], line["output"]) == (
        1234,
        50,
        7000,
        321,
    )
    assert line["cleared_tool_uses"] == applied["cleared_tool_uses"]
    assert line["cleared_input_tokens"] == applied["cleared_input_tokens"]
    assert line["edit"] == "added" and "cut" not in line
    raw = (tmp_path / L.NAME).read_bytes()
    assert b"SECRET" not in raw and b"tool_result" not in raw and b"content" not in raw
    assert reply  # the client got its reply, unchanged by the tap


def test_gateway_refusal_is_lost_and_a_skip_says_why(tmp_path):
    led = L.Ledger(tmp_path)
    cfg = MockConfig(unsupported_models=("claude-opus-4-*",))
    with (
        MockServer(cfg) as mock,
        ThreadedGateway(upstream=mock.base_url, edit=EDIT, ledger=led) as gw,
    ):
        post(gw.url, compact(body_of()), HEADERS)  # refused, sent again unchanged
        post(gw.url, compact(body_of()), HEADERS)  # the model is remembered: not added
        assert len(mock.requests()) == 3
    assert led.flush()
    first, second = L.read_ledger(tmp_path).entries
    assert first["edit"] == "lost" and "refused" in first["why"] and first["status"] == 200
    assert second["edit"] == "skipped" and second["why"]


def test_gateway_unreachable_upstream_is_recorded(tmp_path):
    led = L.Ledger(tmp_path)
    with ThreadedGateway(upstream="http://127.0.0.1:9", edit=EDIT, ledger=led) as gw:
        status, _ = post(gw.url, compact(body_of()), HEADERS)
    assert status == 502 and led.flush()
    (line,) = L.read_ledger(tmp_path).entries
    assert (line["status"], line["edit"], line["why"]) == (502, "lost", "upstream unreachable")


def test_ledger_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv(L.ENV, "0")
    with MockServer(MockConfig()) as mock, ThreadedGateway(upstream=mock.base_url, edit=EDIT) as gw:
        assert gw.gateway.ledger is None
        post(gw.url, compact(body_of()), HEADERS)
    assert not os.path.exists(tmp_path / "ctxpatch")


# --- off the request's path: what the reply said is parsed when the line is made --------------


def test_the_tap_keeps_the_two_lines_and_parses_them_only_when_read(monkeypatch):
    calls: list[int] = []
    loads = L._loads
    monkeypatch.setattr(L, "_loads", lambda raw: calls.append(len(raw)) or loads(raw))
    rec = L.RequestRecord(t=1.0, session=SID, model=MODEL, edit="added")
    tap = rec.tap({"Content-Type": "text/event-stream"})
    assert tap is not None
    stream = sse(START, BIG, DELTA, {"type": "message_stop"})
    for i in range(0, len(stream), 4096):
        tap.feed(stream[i : i + 4096])
    assert calls == []  # nothing parsed while the reply passed
    L.finish(rec, 200, True, "")
    line = rec.line()
    assert len(calls) == 2  # message_start and message_delta, nothing else
    assert (line["input"], line["cache_write_1h"], line["output"]) == (11, 200, 77)
    assert (line["cleared_tool_uses"], line["cleared_input_tokens"]) == (3, 999)
    assert "cut" not in line


def test_what_waits_unparsed_is_bounded():
    out = L.ReplyUsage()
    tap = L.SSETap(out)
    delta = sse({"type": "message_delta", "usage": {"output_tokens": 5}})
    for _ in range(10 * L._RAW_MAX):
        tap.feed(delta)
    assert out._raw is None or len(out._raw) < L._RAW_MAX  # parsed as it went past the bound
    assert out.usage == {"output": 5} and out.delta_seen


def test_a_json_reply_is_kept_without_a_copy_then_read_like_json_loads():
    reply = json.dumps(
        {"type": "message", "usage": {"input_tokens": 7, "output_tokens": 2**64 + 1}}
    ).encode()  # an integer past 64 bits: orjson refuses it, json reads it
    rec = L.RequestRecord(t=1.0, session=SID, model=MODEL, edit="skipped", why="x")
    tap = rec.tap({"Content-Type": "application/json"})
    assert isinstance(tap, L.JsonTap)
    tap.feed(reply)
    rec.close_tap()
    assert rec.reply._raw is not None and rec.reply._raw[0][1] is reply  # the same bytes
    L.finish(rec, 200, False, "x")
    line = rec.line()
    assert (line["input"], line["output"]) == (7, 2**64 + 1) and "cut" not in line
    assert json.loads(L._dumps(line)) == line  # written though orjson refuses it


def test_a_large_json_reply_is_read_at_once():
    reply = json.dumps({"usage": {"input_tokens": 3}, "pad": "x" * L._RAW_BYTES}).encode()
    out = L.ReplyUsage()
    tap = L.JsonTap(out)
    for i in range(0, len(reply), 1000):
        tap.feed(reply[i : i + 1000])
    tap.close()
    assert out._raw is None and out.usage == {"input": 3} and out.delta_seen


def test_while_records_keep_coming_the_writer_is_woken_once(tmp_path, monkeypatch):
    import time

    monkeypatch.setattr(L, "BATCH_WAIT", 0.05)
    writes: list[bytes] = []
    write = L.Ledger._write
    monkeypatch.setattr(L.Ledger, "_write", lambda self, d: (writes.append(d), write(self, d)))
    led = L.Ledger(tmp_path)
    wakes: list[None] = []

    class Counted(queue.Queue):
        def put(self, item: None, block: bool = True, timeout: float | None = None) -> None:
            wakes.append(item)
            super().put(item, block, timeout)

    led._wake = Counted()  # type: ignore[assignment]
    for n in range(40):  # 0.2 s of records 5 ms apart: the thread polls, nobody wakes it
        led.record(rec(n))
        time.sleep(0.005)
    deadline = time.monotonic() + 5
    while led.written < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert led.written == 40 and led.errors == 0 and len(wakes) == 1
    assert 1 < len(writes) < 40  # batches, not a write per line
    time.sleep(L.BATCH_WAIT * 4)  # a batch time with no record: the thread sleeps
    assert led._asleep
    led.record(rec(40))  # and the next record wakes it: no flush needed
    while led.written < 41 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert led.written == 41 and len(wakes) == 2
    assert [e["input"] for e in L.read_ledger(tmp_path).entries] == list(range(41))


def test_nothing_is_made_while_recording(tmp_path, monkeypatch):
    made: list[int] = []
    line = L.RequestRecord.line
    monkeypatch.setattr(L.RequestRecord, "line", lambda self: (made.append(1), line(self))[1])
    monkeypatch.setattr(L, "BATCH_WAIT", 5.0)
    led = L.Ledger(tmp_path)
    for n in range(20):
        led.record(rec(n))
    assert made == []  # record only keeps it
    assert led.flush() and len(made) == 20 and led.written == 20


def test_records_past_the_bound_are_dropped_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(L, "MAX_WAITING", 5)
    monkeypatch.setattr(L, "BATCH_WAIT", 5.0)
    led = L.Ledger(tmp_path)
    for n in range(8):
        led.record(rec(n))
    assert len(led._recs) == 5 and led.errors == 3
    assert led.flush() and led.written == 5


def test_gateway_a_reply_cut_short_is_recorded_cut_with_what_came(tmp_path):
    """The upstream sends message_start, then hangs up mid-stream: the line says cut, with the
    usage message_start gave."""
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))
    event = sse(START)

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"request-id: req_cut\r\ntransfer-encoding: chunked\r\n\r\n"
                + f"{len(event):x}\r\n".encode()
                + event
                + b"\r\n"
            )  # and no last chunk: the connection ends mid-reply

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    led = L.Ledger(tmp_path)
    url = f"http://127.0.0.1:{srv.getsockname()[1]}"
    with ThreadedGateway(upstream=url, edit=EDIT, ledger=led, policy=None) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("POST", "/v1/messages", body=compact(body_of(stream=True)), headers=HEADERS)
        r = conn.getresponse()
        with pytest.raises(http.client.IncompleteRead):  # the client sees it end early
            r.read()
        conn.close()
    t.join(5)
    srv.close()
    assert r.status == 200 and led.flush()
    (line,) = L.read_ledger(tmp_path).entries
    assert line["cut"] is True and line["request_id"] == "req_cut"
    assert (line["input"], line["cache_read"], line["output"]) == (11, 4000, 1)


# --- the reply's chunks held while it passes, read when the line is made -----------------------


def _line_via(kind: str, stream: bytes, size: int) -> tuple[dict, int]:
    """The line a record makes of ``stream`` fed in ``size``-byte chunks, through the gateway's
    holder (``hold``) or straight through an SSETap (``tap``, read as the chunks pass); and the
    most bytes the holder held at once."""
    rec = L.RequestRecord(t=1.0, session=SID, model=MODEL, edit="added")
    most = 0
    if kind == "hold":
        tap = rec.tap({"Content-Type": "text/event-stream"})
        assert isinstance(tap, L.SSEHold)
        for i in range(0, len(stream), size):
            tap.feed(stream[i : i + size])
            most = max(most, tap.held)
    else:
        direct = L.SSETap(rec.reply)
        for i in range(0, len(stream), size):
            direct.feed(stream[i : i + size])
    L.finish(rec, 200, True, "", {"request-id": "req_1"})
    return rec.line(), most


@pytest.mark.parametrize("size", [13, 64, 1000, 4096, 70_000, 10**7])
@pytest.mark.parametrize("cut_at", [None, 0.5, 0.9999])
def test_held_chunks_read_later_give_the_taps_numbers(size, cut_at):
    """Whatever the chunking, and for a reply cut anywhere: the line made from the held chunks
    is the line the tap made reading them as they passed; at most _HOLD bytes and a chunk held."""
    stream = sse(START, BIG, DELTA, {"type": "message_stop"})
    if cut_at is not None:
        stream = stream[: int(len(stream) * cut_at)]
    held, most = _line_via("hold", stream, size)
    direct, _ = _line_via("tap", stream, size)
    assert held == direct
    assert most <= L._HOLD + min(size, len(stream))
    if cut_at is None:
        assert (held["input"], held["output"], held["cleared_input_tokens"]) == (11, 77, 999)
        assert "cut" not in held
    else:
        assert held["cut"] is True and held["input"] == 11


def test_the_gateway_holds_the_chunks_themselves_and_reads_nothing_while_they_pass(monkeypatch):
    scanned: list[int] = []
    feed = L.SSETap.feed
    monkeypatch.setattr(L.SSETap, "feed", lambda self, c: (scanned.append(len(c)), feed(self, c)))
    stream = sse(START, DELTA, {"type": "message_stop"})
    chunks = [stream[:100], stream[100:]]
    rec = L.RequestRecord(t=1.0, session=SID, model=MODEL, edit="added")
    tap = rec.tap({"Content-Type": "text/event-stream"})
    assert tap is not None
    for c in chunks:
        tap.feed(c)
    assert scanned == [] and tap._chunks[0] is chunks[0] and tap._chunks[1] is chunks[1]
    line = rec.line()
    assert scanned == [len(stream)] and line["output"] == 77  # held whole: read in one search


def test_a_chunk_its_owner_may_reuse_is_held_as_a_copy():
    stream = bytearray(sse(START, DELTA))
    rec = L.RequestRecord(t=1.0, session=SID, model=MODEL, edit="added")
    tap = rec.tap({"Content-Type": "text/event-stream"})
    assert tap is not None
    tap.feed(stream)
    stream[:] = b"x" * len(stream)  # the buffer reused after the write
    assert rec.line()["input"] == 11


def test_past_hold_waiting_records_a_reply_is_read_as_it_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(L, "BATCH_WAIT", 5.0)
    monkeypatch.setattr(L, "HOLD_WAITING", 3)
    led = L.Ledger(tmp_path)
    stream = sse(START, DELTA)
    recs = []
    for _ in range(5):
        r = L.RequestRecord(t=1.0, session=SID, model=MODEL, edit="added")
        tap = r.tap({"Content-Type": "text/event-stream"})
        assert tap is not None
        tap.feed(stream)
        L.finish(r, 200, True, "")
        led.record(r)
        recs.append(r)
    assert [r._tap.held for r in recs] == [len(stream)] * 3 + [0, 0]  # type: ignore[union-attr]
    assert recs[3]._reply is not None and recs[3]._reply._raw is None  # read, parsed
    assert led.flush() and led.written == 5
    assert [e["output"] for e in L.read_ledger(tmp_path).entries] == [77] * 5


def test_ids_are_checked_when_the_line_is_made():
    rec = L.begin({}, b"{}", "claude-opus-4-6; rm -rf /", True, "")
    L.finish(rec, 200, True, "", {"request-id": "req\n1"})
    line = rec.line()
    assert line["model"] is None and line["request_id"] is None and line["session"] is None
    bad = L.begin({L.SESSION_HEADER: "not an id!"}, b"{}", MODEL, False, "why")
    assert bad.session is None and bad.line()["model"] == MODEL and bad.line()["why"] == "why"


def test_a_json_reply_in_parts_is_joined_only_when_read():
    reply = json.dumps({"type": "message", "usage": {"input_tokens": 7, "output_tokens": 2}})
    parts = [reply[:10].encode(), reply[10:].encode()]
    rec = L.RequestRecord(t=1.0, session=SID, model=MODEL, edit="added")
    tap = rec.tap({"Content-Type": "application/json"})
    assert isinstance(tap, L.JsonTap)
    for p in parts:
        tap.feed(p)
    rec.close_tap()
    assert rec.reply._raw is not None and rec.reply._raw[0][1] == parts  # not joined yet
    L.finish(rec, 200, True, "")
    assert (rec.line()["input"], rec.line()["output"]) == (7, 2)


def test_records_from_many_threads_are_all_written_once(tmp_path, monkeypatch):
    """record takes no lock: records appended from several threads while the writer takes
    batches are each written once, in each thread's order."""
    import threading

    monkeypatch.setattr(L, "BATCH_WAIT", 0.001)
    led = L.Ledger(tmp_path)

    def run(k: int) -> None:
        for n in range(400):
            led.record(rec(k * 1000 + n))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert led.flush()
    got = [e["input"] for e in L.read_ledger(tmp_path).entries]
    assert led.errors == 0 and len(got) == 1600
    for k in range(4):
        assert [n for n in got if n // 1000 == k] == [k * 1000 + n for n in range(400)]


@pytest.mark.parametrize("every", [0.0, 1.0])
def test_the_writer_lets_the_gil_go_between_lines(tmp_path, monkeypatch, every):
    """Past YIELD_AFTER making lines, the writer calls sleep(0), which lets the GIL go: the
    gateway's loop thread, waiting for it, runs then, not after the switch interval."""
    monkeypatch.setattr(L, "YIELD_AFTER", every)
    led = L.Ledger(tmp_path)
    led._asleep = False  # no writer thread: flush makes the lines here
    for n in range(5):
        led.record(rec(n))
    pauses: list[float] = []
    sleep = L.time.sleep
    monkeypatch.setattr(L.time, "sleep", lambda s: (pauses.append(s), sleep(s)))
    assert led.flush() and led.written == 5
    assert pauses == ([0] * 5 if every == 0.0 else [])
