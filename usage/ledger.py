"""The ledger: one JSON line per API request, numbers and ids only.

Two writers, one file and one line format: the gateway (``gateway.server``, this module's
:class:`Ledger`) records every ``POST /v1/messages`` it forwards, and the JavaScript ``ctxpatch
apply`` injects into a ``cli.js`` (``patcher/snippets/context_clear.js``) records every request
of Claude Code's query loop, with no gateway. Each line holds:

``t``             Unix time of the request (seconds, 3 decimals)
``src``           who wrote it: ``gateway`` | ``cli.js``
``session``       Claude Code's session id: the ``X-Claude-Code-Session-Id`` request header
                  (cli.js 2.1.x and the native builds send it), else the ``session_id`` inside
                  the request's ``metadata.user_id`` (a JSON string in 2.1.x, the
                  ``user_<hash>_account_<uuid>_session_<uuid>`` form in older builds), read from
                  the last bytes of the body only; ``null`` when neither is there. The cli.js
                  writer reads ``metadata.user_id`` (the header is the same id, set where the
                  injected code does not see it)
``model``         the request's model
``status``        the HTTP status the client got
``request_id``    the API's ``request-id`` response header
``input`` ``cache_write_5m`` ``cache_write_1h`` ``cache_read`` ``output``
                  the response's ``usage`` (streamed: ``message_start`` then ``message_delta``,
                  read as the bytes pass, never buffered nor changed; a whole JSON reply: parsed;
                  cli.js: read from a clone of the SDK's fetch Response, the SDK's parsed JSON
                  reply, or a 1.0.x MessageStream's events)
``cleared_tool_uses`` ``cleared_input_tokens``
                  the response's ``context_management.applied_edits`` (summed over edits)
``edit``          ``added`` (ctxpatch's edit went in), ``skipped`` (not added: ``why``) or
                  ``lost`` (added, then not applied: the API refused the strategy for this model
                  and the request went again unchanged, or the upstream failed: ``why``)
``why``           the reason, one of the gateway's fixed texts (never request content)
``cut``           true when the reply broke off before its ``message_delta`` (usage partial;
                  cli.js: also when Claude Code exited before the copy was read to it)

Never content, never headers other than the two ids, never credentials.

Where: ``<XDG state dir>/ctxpatch/ledger/ledger.jsonl`` (platformdirs; ``XDG_STATE_HOME``),
directory mode 700, files mode 600. Bounded: past :data:`MAX_BYTES` the file is renamed
``ledger.1.jsonl`` (older ones shift, :data:`KEEP` are kept). Crash-safe: each line is one
``write`` on an ``O_APPEND`` descriptor, so lines of concurrent gateways never interleave, and a
reader skips a line it cannot parse (a cut last line). ``CTXPATCH_LEDGER=0`` turns it off.

Writing never slows nor fails a request: while the reply passes, the gateway only holds its
chunks (references to the bytes it forwards, :class:`SSEHold`, at most :data:`_HOLD` bytes a
reply; past that they are read as they pass) or the JSON body (bounded); the request's own path
does a few appends (:func:`begin`, :func:`finish`, :meth:`Ledger.record`, no lock). A daemon
thread reads the held chunks for the two SSE lines that hold the numbers, parses them, makes the
lines and writes them, a batch every :data:`BATCH_WAIT`, on its own clock while requests keep
coming (:class:`Ledger`); past :data:`HOLD_WAITING` records waiting, a reply is read as it is
recorded, so the bytes held wait bounded. Every error is swallowed into :attr:`Ledger.errors`
and one debug log line. The cli.js writer queues its lines to its debug log's asynchronous
appender (one ``O_APPEND`` write per batch of whole lines, rotation like :class:`Ledger`'s) and
writes what is left synchronously when Claude Code calls ``process.exit``; it copies
:data:`MAX_BYTES`, :data:`KEEP` and :data:`USAGE_KEYS` (tests/patcher/test_ledger_js.py holds them
equal, and its path to :func:`ledger_dir`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("ctxpatch.usage")

ENV = "CTXPATCH_LEDGER"
MAX_BYTES = 8 * 1024 * 1024
KEEP = 4  # rotated files kept beside the current one (ledger.1.jsonl .. ledger.4.jsonl)
NAME = "ledger.jsonl"
BATCH_WAIT = 0.25  # s: the lines recorded meanwhile are made and written in one batch
WRITE_MAX = 64 * 1024  # bytes of lines per write
MAX_WAITING = 10_000  # records kept while the writer cannot keep up; past it, dropped (errors)
# records waiting with their replies unread; past it a record's reply is read as it is recorded
# (bounds the reply bytes waiting: HOLD_WAITING x (SSEHold's _HOLD or _RAW_BYTES))
HOLD_WAITING = 64
YIELD_AFTER = 0.0002  # s: the writer thread lets the GIL go after making lines this long
USAGE_KEYS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
SESSION_HEADER = "X-Claude-Code-Session-Id"
_UUID = rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_USER_ID_SESSION = re.compile(
    rb'"user_id"\s*:\s*"(?:[^"\\]|\\.){0,2000}?(?:session_|\\"session_id\\"\s*:\s*\\")('
    + _UUID
    + rb")"
)
_SESSION_TAIL = 16 * 1024
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")


def enabled(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return (env.get(ENV) or "").strip().lower() not in ("0", "false", "no", "off")


_DIR_FROM: tuple[tuple[str | None, str | None], Path] | None = None  # (env it came from, dir)


def ledger_dir() -> Path:
    """``<XDG state>/ctxpatch/ledger`` (platformdirs: ``$XDG_STATE_HOME`` or ~/.local/state);
    kept while ``XDG_STATE_HOME`` and ``HOME`` stay as they were (the writer asks per write)."""
    global _DIR_FROM
    env = (os.environ.get("XDG_STATE_HOME"), os.environ.get("HOME"))
    if _DIR_FROM is not None and _DIR_FROM[0] == env:
        return _DIR_FROM[1]
    import platformdirs

    d = Path(platformdirs.user_state_dir("ctxpatch", appauthor=False)) / "ledger"
    _DIR_FROM = (env, d)
    return d


def safe_id(value: Any) -> str | None:
    """An id as it may go in the ledger (letters, digits, ``_.:-``), else ``None``."""
    return value if isinstance(value, str) and _SAFE_ID.match(value) else None


def session_id(headers: Mapping[str, str], body: bytes) -> str | None:
    """Claude Code's session id of a request (see the module docstring for where)."""
    sid = safe_id(headers.get(SESSION_HEADER))
    if sid:
        return sid
    at = body.rfind(b'"user_id"', max(0, len(body) - _SESSION_TAIL))
    m = _USER_ID_SESSION.match(body, at) if at >= 0 else None
    return m.group(1).decode() if m else None


# --- reading the usage off a reply as it passes ----------------------------------------------


def _int(v: Any) -> int | None:
    if type(v) is int:  # what JSON gives: the common case first
        return v if v >= 0 else None
    if type(v) is float and v >= _WIDE:
        raise _Wide  # json.loads may have read an int here (ReplyUsage.resolve)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _mapping(v: Any) -> bool:
    return type(v) is dict or isinstance(v, Mapping)  # a dict first: no ABC check


def _dumps(line: dict[str, Any]) -> bytes:
    """One ledger line: compact JSON and a newline (orjson; ``json`` for what it refuses)."""
    try:
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits
        return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def _loads(raw: bytes | memoryview) -> Any:
    """JSON, by orjson; where it refuses what ``json`` reads (NaN, bad UTF-8 ...), ``json``."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(bytes(raw))


class _Wide(Exception):
    """orjson read an integer past 64 bits as a float: read that piece again with ``json``."""


_WIDE = float(2**64)


_USAGE_API = (
    ("input_tokens", "input"),
    ("cache_read_input_tokens", "cache_read"),
    ("output_tokens", "output"),
)
_RAW_MAX = 8  # reply pieces kept unparsed per reply; past it (or _RAW_BYTES) they are parsed
_RAW_BYTES = 64 * 1024


class ReplyUsage:
    """What a reply said: usage and applied edits.

    The reply's own bytes that say it (the SSE ``message_start`` / ``message_delta`` lines, a
    JSON body) are kept as they pass (:meth:`keep`) and parsed when first read, in the order
    they came: when the ledger writes the line, off the request's path. At most
    :data:`_RAW_MAX` pieces / :data:`_RAW_BYTES` bytes wait; past that they are parsed at once."""

    __slots__ = ("_delta", "_edits_tokens", "_edits_tools", "_raw", "_raw_bytes", "_usage")

    def __init__(self) -> None:
        self._usage: dict[str, int] = {}
        self._edits_tools = 0
        self._edits_tokens = 0
        self._delta = False
        # (a JSON body?, bytes or a JSON body's parts), in order
        self._raw: list[tuple[bool, Any]] | None = None
        self._raw_bytes = 0

    @property
    def usage(self) -> dict[str, int]:
        self.resolve()
        return self._usage

    @property
    def cleared_tool_uses(self) -> int:
        self.resolve()
        return self._edits_tools

    @property
    def cleared_input_tokens(self) -> int:
        self.resolve()
        return self._edits_tokens

    @property
    def delta_seen(self) -> bool:
        self.resolve()
        return self._delta

    @delta_seen.setter
    def delta_seen(self, value: bool) -> None:
        self.resolve()
        self._delta = value

    def keep(
        self, raw: bytes | list[bytes], whole_json: bool = False, size: int | None = None
    ) -> None:
        """An SSE ``data:`` line of ``message_start`` / ``message_delta`` (or, ``whole_json``,
        a whole JSON reply: its bytes, or the list of its parts, ``size`` bytes in all), parsed
        later (:meth:`resolve`)."""
        if self._raw is None:
            self._raw = []
        self._raw.append((whole_json, raw))
        self._raw_bytes += len(raw) if size is None else size
        if len(self._raw) >= _RAW_MAX or self._raw_bytes > _RAW_BYTES:
            self.resolve()

    def resolve(self) -> None:
        """Parse what :meth:`keep` kept, in order (each piece as it would have been at once)."""
        raw = self._raw
        if raw is None:
            return
        self._raw, self._raw_bytes = None, 0
        for whole, piece in raw:
            if whole:
                if type(piece) is list:  # a JSON reply's parts, joined here, off the path
                    piece = piece[0] if len(piece) == 1 else b"".join(piece)
                read_json_reply(piece, self)
            else:
                try:
                    self._take_line(piece, _loads)
                except _Wide:
                    self._take_line(piece, json.loads)

    def _take_line(self, line: bytes, loads: Callable[[bytes], Any]) -> None:
        try:
            data = loads(line[5:])
        except Exception:  # whatever the stream holds (not JSON, nested past the limits)
            return
        if type(data) is not dict:
            return
        kind = data.get("type")
        if kind == "message_start":
            self.take_message(data.get("message"))
        elif kind == "message_delta":
            self._delta = True
            self.take_usage(data.get("usage"))
            self.take_edits(data.get("context_management"))

    def take_usage(self, u: Any) -> None:
        if not _mapping(u):
            return
        usage = self._usage
        for api, key in _USAGE_API:
            v = _int(u.get(api))
            if v is not None:
                usage[key] = v
        split = u.get("cache_creation")
        if _mapping(split):
            w5 = _int(split.get("ephemeral_5m_input_tokens"))
            w1 = _int(split.get("ephemeral_1h_input_tokens"))
        else:
            w5 = w1 = None
        if w5 is not None or w1 is not None:
            usage["cache_write_5m"] = w5 or 0
            usage["cache_write_1h"] = w1 or 0
        else:
            total = _int(u.get("cache_creation_input_tokens"))
            if total is not None:
                usage["cache_write_5m"] = total
                usage.setdefault("cache_write_1h", 0)

    def take_edits(self, cm: Any) -> None:
        edits = cm.get("applied_edits") if _mapping(cm) else None
        if type(edits) is not list and not isinstance(edits, list):
            return
        tools = tokens = 0
        for e in edits:
            if _mapping(e):
                tools += _int(e.get("cleared_tool_uses")) or 0
                tokens += _int(e.get("cleared_input_tokens")) or 0
        self._edits_tools, self._edits_tokens = tools, tokens

    def take_message(self, msg: Any) -> None:
        if _mapping(msg):
            self.take_usage(msg.get("usage"))
            self.take_edits(msg.get("context_management"))


_MAX_LINE = 256 * 1024  # a message_start/message_delta line is far smaller; others are skipped
_MARK = b'"message_'  # of "message_start" and "message_delta": one search for both
_KINDS = (b'start"', b'delta"')
_TAIL = 64  # bytes kept across chunks: a marker and its line start may straddle two chunks
_EDGE = len(_MARK) - 1  # bytes each side of a chunk's edge a straddling marker lies in
_HEAD = 48  # the marker is the value of the first key: within this many bytes of "data:"


class SSETap:
    """Reads ``message_start`` / ``message_delta`` off an SSE stream, chunk by chunk, as it
    passes: two byte searches per chunk for the event names, then only those two lines are
    kept (bounded), to be parsed off the request's path (:meth:`ReplyUsage.keep`); the rest of
    the stream is never copied."""

    def __init__(self, out: ReplyUsage) -> None:
        self.out = out
        self._tail = b""
        self._line: bytearray | None = None  # inside one of our lines, not ended yet

    def feed(self, chunk: bytes) -> None:
        try:
            # most chunks hold none of our event names and end none of our lines: then only
            # the tail _feed would keep is kept (a marker may straddle the next chunk)
            if self._line is None and len(chunk) >= _TAIL and chunk.find(_MARK) < 0:
                tail = self._tail
                if not tail or (
                    tail.find(_MARK) < 0 and (tail[-_EDGE:] + chunk[:_EDGE]).find(_MARK) < 0
                ):
                    self._tail = chunk[-_TAIL:]
                    return
            self._feed(chunk)
        except Exception:  # whatever the stream holds, the request goes on
            self._line, self._tail = None, b""

    def _feed(self, chunk: bytes) -> None:
        if self._line is not None:
            nl = chunk.find(b"\n")
            if nl < 0:
                self._line += chunk
                if len(self._line) > _MAX_LINE:
                    self._line = None
                return
            self._line += chunk[:nl]
            self.out.keep(bytes(self._line))
            self._line = None
            chunk = chunk[nl + 1 :]
            self._tail = b""
        buf = self._tail + chunk if self._tail else chunk
        pos = 0
        while True:
            p = buf.find(_MARK, pos)
            if p < 0:
                break
            ls = buf.rfind(b"\n", 0, p) + 1
            if p + len(_MARK) + 6 > len(buf):  # the event name goes on in the next chunk
                pos = min(ls, p) if p - ls <= _HEAD else p
                self._tail = buf[pos:]
                return
            if (
                p - ls > _HEAD
                or not buf.startswith(b"data:", ls)
                or not buf.startswith(_KINDS, p + len(_MARK))
            ):
                pos = p + 1
                continue
            nl = buf.find(b"\n", p)
            if nl < 0:
                self._line = bytearray(buf[ls:])
                self._tail = b""
                return
            self.out.keep(buf[ls:nl])
            pos = nl + 1
        self._tail = buf[max(pos, len(buf) - _TAIL) :]


_HOLD = 64 * 1024  # bytes of an SSE reply held unread per request; past it they are read


class SSEHold:
    """What the gateway feeds an SSE reply to, chunk by chunk: the chunks themselves are held
    (references, no copy, no search) and read by an :class:`SSETap` when the ledger makes the
    line, off the request's path. Past :data:`_HOLD` bytes the chunks held are read at once (on
    the request's path, as the tap read every chunk before): at most ``_HOLD`` bytes and a chunk
    wait per reply. The tap reads the same chunks in the same order whenever it reads them, so
    the numbers are the tap's to the token (any chunking reads alike: tests/usage). They go to
    ``rec``'s :attr:`RequestRecord.reply`, made when first read."""

    __slots__ = ("_chunks", "_rec", "_size", "_tap")

    def __init__(self, rec: RequestRecord) -> None:
        self._rec = rec
        self._tap: SSETap | None = None
        self._chunks: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> None:
        if type(chunk) is not bytes:
            chunk = bytes(chunk)  # a buffer its owner may reuse: held as a copy
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._size > _HOLD:
            self.drain()

    def drain(self) -> None:
        """Read what is held, in order (:class:`SSETap`)."""
        chunks, size = self._chunks, self._size
        if not chunks:
            return
        self._chunks, self._size = [], 0
        if self._tap is None:
            self._tap = SSETap(self._rec.reply)
            if len(chunks) > 1 and size <= _HOLD:
                # a reply held whole from its start (at most _HOLD bytes, so no line in it
                # reaches the tap's _MAX_LINE): read in one search, as any chunking reads
                self._tap.feed(b"".join(chunks))
                return
        feed = self._tap.feed
        for c in chunks:
            feed(c)

    @property
    def held(self) -> int:
        return self._size


_MAX_JSON = 8 * 1024 * 1024


class JsonTap:
    """A whole JSON reply streamed in chunks: kept up to :data:`_MAX_JSON` (the chunks
    themselves, not a copy), read at the end: later, off the request's path, when it is no
    larger than :data:`_RAW_BYTES` (then only is it held past the reply), else at once."""

    def __init__(self, out: ReplyUsage) -> None:
        self.out = out
        self._parts: list[bytes] | None = []
        self._size = 0

    def feed(self, chunk: bytes) -> None:
        if self._parts is not None:
            self._size += len(chunk)
            if self._size > _MAX_JSON:
                self._parts = None
            else:
                self._parts.append(chunk if type(chunk) is bytes else bytes(chunk))

    def close(self) -> None:
        parts, self._parts = self._parts, None
        if parts is None:
            return
        if self._size <= _RAW_BYTES:  # joined when read (ReplyUsage.resolve)
            self.out.keep(parts[0] if len(parts) == 1 else parts, whole_json=True, size=self._size)
        else:
            read_json_reply(parts[0] if len(parts) == 1 else b"".join(parts), self.out)


def read_json_reply(payload: bytes, out: ReplyUsage) -> None:
    """A whole (non-streamed) JSON reply's usage and applied edits."""
    if len(payload) > _MAX_JSON:
        return
    out.resolve()  # what came before, first
    try:
        try:
            out.take_message(_loads(payload))
        except _Wide:
            out.take_message(json.loads(payload))
    except Exception:  # whatever the body is, the request goes on
        return
    out.delta_seen = True


# --- one request ------------------------------------------------------------------------------


class RequestRecord:
    """The ledger line of one request, filled in as the request goes. On the request's path it
    only takes what it is given (the model and the request-id unchecked, the reply's chunks
    held); the ids are checked and the reply read when the line is made (:meth:`line`, on the
    ledger's writer thread)."""

    __slots__ = (
        "_reply",
        "_tap",
        "cut",
        "edit",
        "model",
        "request_id",
        "session",
        "src",
        "status",
        "t",
        "unread",
        "why",
    )

    def __init__(
        self,
        t: float,
        session: str | None,
        model: str | None,
        edit: str,  # added | skipped | lost
        why: str = "",
        status: int | None = None,
        request_id: str | None = None,
        reply: ReplyUsage | None = None,
        src: str = "gateway",
        cut: bool = False,
        unread: bool = False,
    ) -> None:
        self.t = t
        self.session = session
        self.model = model
        self.edit = edit
        self.why = why
        self.status = status
        self.request_id = request_id
        self._reply = reply
        self.src = src
        self.cut = cut
        self.unread = unread
        self._tap: SSEHold | JsonTap | None = None

    @property
    def reply(self) -> ReplyUsage:
        r = self._reply
        if r is None:
            r = self._reply = ReplyUsage()
        return r

    def tap(self, headers: Mapping[str, str]) -> SSEHold | JsonTap | None:
        """What this reply's chunks are fed to as they pass: SSE events (held, read later), a
        JSON body (bounded), or nothing for a compressed body (its usage stays unread)."""
        enc = headers.get("Content-Encoding")
        if enc is not None and enc.lower() != "identity":
            self.unread = True
            return None
        if "json" in (headers.get("Content-Type") or "").lower():
            tap: SSEHold | JsonTap = JsonTap(self.reply)
        else:
            tap = SSEHold(self)
        self._tap = tap
        return tap

    def close_tap(self) -> None:
        if type(self._tap) is JsonTap:
            self._tap.close()

    def settle(self) -> None:
        """Read what the reply said (the chunks held, the lines kept): :meth:`line` does it."""
        tap = self._tap
        if type(tap) is SSEHold:
            tap.drain()
        if self._reply is not None:
            self._reply.resolve()

    def line(self) -> dict[str, Any]:
        self.settle()
        r = self.reply
        u = r._usage
        d: dict[str, Any] = {
            "t": round(self.t, 3),
            "src": self.src,
            "session": self.session,
            "model": safe_id(self.model),
            "status": self.status,
            "request_id": safe_id(self.request_id),
            "input": u.get("input", 0),
            "cache_write_5m": u.get("cache_write_5m", 0),
            "cache_write_1h": u.get("cache_write_1h", 0),
            "cache_read": u.get("cache_read", 0),
            "output": u.get("output", 0),
            "cleared_tool_uses": r._edits_tools,
            "cleared_input_tokens": r._edits_tokens,
            "edit": self.edit,
        }
        if self.why:
            d["why"] = self.why
        if self.unread:
            d["unread"] = True
        elif self.cut or (self.status == 200 and not r._delta):
            d["cut"] = True
        return d


# --- writing ----------------------------------------------------------------------------------


class Ledger:
    """Appends lines to the ledger; ``record`` never blocks nor raises.

    ``record`` appends the record to a deque (no lock: the writer thread takes from the other
    end); a daemon thread makes the lines (reads the replies' chunks, parses what they said,
    encodes the lines) and writes them, a batch every :data:`BATCH_WAIT`. While
    records keep coming the thread wakes on its own clock: a request never wakes it (a
    wake-up from the gateway's loop thread is a thread switch and a fight for the GIL that the
    request in flight pays: measured ~0.1 ms of CPU each, and on a loaded machine the loop
    thread's turn on a core lost for milliseconds). After a batch time with none, the thread
    sleeps until the next ``record`` wakes it: one wake-up per busy stretch."""

    def __init__(self, directory: Path | None = None, max_bytes: int = MAX_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.errors = 0
        self.written = 0
        self._wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None
        self._lock = threading.Lock()  # _asleep's change and the thread's start
        # recorded, not yet made into lines: appended on the right by record, taken from the
        # left by _batch (deque's append and popleft are atomic)
        self._recs: collections.deque[RequestRecord] = collections.deque()
        self._asleep = True  # the writer thread waits for a wake-up, not for its clock
        # held while a batch is taken, made and written: batches leave in the order recorded
        self._writing = threading.Lock()

    def record(self, rec: RequestRecord) -> None:
        """Keep ``rec``: its line is made and written within about :data:`BATCH_WAIT`."""
        try:
            recs = self._recs
            waiting = len(recs)
            if waiting >= MAX_WAITING:  # the writer is stuck (a hung disk)
                raise OSError(f"{MAX_WAITING} lines wait to be written")
            if waiting >= HOLD_WAITING:
                rec.settle()  # many wait: read its reply now, hold none of its bytes
            recs.append(rec)
            if self._asleep:
                self._wake_writer()
        except Exception as exc:  # never fail a request
            self._failed(exc)

    def _wake_writer(self) -> None:
        with self._lock:
            if not self._asleep:  # another thread's record woke it
                return
            self._asleep = False
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ctxpatch-ledger", daemon=True
                )
                self._thread.start()
        self._wake.put(None)

    def flush(self, timeout: float = 5.0) -> bool:
        """Make and write every line recorded so far, now (tests, shutdown); False when a write
        under way on the writer thread did not end within ``timeout``."""
        if not self._writing.acquire(timeout=timeout):
            return False
        try:
            self._batch()
        finally:
            self._writing.release()
        return True

    def close(self) -> None:
        self.flush()
        with self._writing:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None

    def _failed(self, exc: BaseException) -> None:
        self.errors += 1
        if self.errors == 1:
            log.debug("ledger: cannot write (%s); requests go on unrecorded", exc)

    def _run(self) -> None:
        while True:
            self._wake.get()
            while True:
                time.sleep(BATCH_WAIT)  # the lines of a busy stretch go out together
                with self._writing:
                    if self._batch():
                        continue
                with self._lock:
                    # a batch time with no record: wait for the next. A record appended before
                    # this check is seen here; one after it sees _asleep and wakes the thread
                    self._asleep = True
                    if self._recs:
                        self._asleep = False
                        continue
                break

    def _batch(self) -> bool:
        """Take the recorded lines, make them and write them, in writes of at most
        ``max_bytes`` (so rotation still bounds each file); each counted as written or failed.
        False when there were none. Hold ``_writing``."""
        waiting = self._recs
        pop = waiting.popleft
        recs = [pop() for _ in range(len(waiting))]
        if not recs:
            return False
        chunk: list[bytes] = []
        size = 0
        limit = min(self.max_bytes, WRITE_MAX)

        def write() -> None:
            try:
                self._write(b"".join(chunk))
                self.written += len(chunk)
            except Exception as exc:
                for _ in chunk:
                    self._failed(exc)
            chunk.clear()

        clock = time.perf_counter
        held = clock()
        for rec in recs:
            # the GIL let go every YIELD_AFTER: a thread that waits for it (the gateway's loop, a
            # reply coming in) takes it then, not after the switch interval (5 ms, and on a busy
            # machine measured tens of ms waiting behind a thread that keeps it)
            if clock() - held > YIELD_AFTER:
                time.sleep(0)
                held = clock()
            try:
                line = _dumps(rec.line())
            except Exception as exc:
                self._failed(exc)
                continue
            if chunk and size + len(line) > limit:
                write()
                size = 0
            chunk.append(line)
            size += len(line)
        if chunk:
            write()
        return True

    def _write(self, data: bytes) -> None:
        d = self.directory or ledger_dir()
        path = d / NAME
        if self._fd is not None:
            try:
                now = os.stat(path)
                mine = os.fstat(self._fd)
                if (now.st_ino, now.st_dev) != (mine.st_ino, mine.st_dev):
                    raise FileNotFoundError  # another gateway rotated it: reopen
                if mine.st_size + len(data) > self.max_bytes:
                    self._rotate(d)
                    raise FileNotFoundError
            except OSError:
                os.close(self._fd)
                self._fd = None
        if self._fd is None:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            if os.fstat(self._fd).st_mode & 0o077:
                os.fchmod(self._fd, 0o600)
        os.write(self._fd, data)

    def _rotate(self, d: Path) -> None:
        for k in range(KEEP, 0, -1):
            src = d / (NAME if k == 1 else f"ledger.{k - 1}.jsonl")
            with contextlib.suppress(FileNotFoundError):
                os.replace(src, d / f"ledger.{k}.jsonl")


# --- reading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerRead:
    entries: list[dict[str, Any]]
    skipped: int  # lines that were not a ledger entry (a cut last line, garbage)
    files: list[Path]


def ledger_files(directory: Path | None = None) -> list[Path]:
    """Oldest first: ledger.KEEP.jsonl ... ledger.1.jsonl, ledger.jsonl."""
    d = directory or ledger_dir()
    rotated = [d / f"ledger.{k}.jsonl" for k in range(KEEP, 0, -1)]
    return [p for p in [*rotated, d / NAME] if p.is_file()]


def iter_lines(path: Path) -> Iterator[dict[str, Any] | None]:
    with open(path, "rb") as f:
        for raw in f:
            try:
                d = json.loads(raw)
            except ValueError:
                yield None
                continue
            yield d if isinstance(d, dict) and isinstance(d.get("t"), int | float) else None


def read_ledger(directory: Path | None = None) -> LedgerRead:
    entries: list[dict[str, Any]] = []
    skipped = 0
    files = ledger_files(directory)
    for p in files:
        try:
            for d in iter_lines(p):
                if d is None:
                    skipped += 1
                else:
                    entries.append(d)
        except OSError:
            skipped += 1
    return LedgerRead(entries, skipped, files)


_default: Ledger | None = None


def default_ledger() -> Ledger | None:
    """The process's ledger, or ``None`` when ``CTXPATCH_LEDGER=0``."""
    global _default
    if not enabled():
        return None
    if _default is None:
        _default = Ledger()
    return _default


# --- the gateway's hook -----------------------------------------------------------------------


def begin(
    headers: Mapping[str, str], body: bytes, model: str | None, added: bool, why: str
) -> RequestRecord:
    """The record of a ``/v1/messages`` request as the gateway decided it (on the request's
    path: the session header checked, the body read only without it; the model is checked
    when the line is made)."""
    sid = headers.get(SESSION_HEADER)
    if not (isinstance(sid, str) and _SAFE_ID.match(sid)):
        sid = session_id(headers, body)
    if added:
        return RequestRecord(time.time(), sid, model, "added")
    return RequestRecord(time.time(), sid, model, "skipped", why)


def finish(
    rec: RequestRecord,
    status: int,
    added: bool,
    why: str,
    headers: Mapping[str, str] | None = None,
    cut: bool = False,
) -> RequestRecord:
    """Status and outcome: an edit added at :func:`begin` but not in the request that got this
    reply (the API refused the strategy; the upstream failed) is ``lost``."""
    rec.status = status
    if rec.edit == "added" and not added:
        rec.edit, rec.why = "lost", why
    if headers is not None:
        rec.request_id = headers.get("request-id")  # checked when the line is made
    rec.cut = cut
    return rec
