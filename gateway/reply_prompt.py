"""The prompt a reply reports, read on the request's path for the near move.

The near move (:mod:`engine.twins.free_moves`, ``CLAUDE_CTX_CLEAR_MARGIN``) needs, at a
conversation's next request, the prompt tokens the reply to its last request reported:
``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` of the reply's usage.
:mod:`usage.ledger` reads usage too, but later, on its own thread, and only when the ledger is
on: too late for the next request. So the gateway reads it here, as the reply passes:

* an SSE reply: its ``message_start`` event (the first one the API sends: in the first chunk,
  or the first few), whose message carries the usage. Only the bytes before that event's
  ``data:`` line ends are looked at (at most :data:`MAX_HEAD`; a first chunk holding the whole
  line is not copied), one line is parsed (orjson, a few µs), and the stream is never held
  back waiting for more: each chunk is read just before it is sent on, so that the prompt is
  the conversation's before the client can have the whole reply and send its next request;
* a JSON reply (not streamed): its ``usage``, parsed from the body when it is at most
  :data:`MAX_JSON` bytes (the chunks of one that streams in are kept as references, and
  parsed once with the last: when their sum reaches its ``Content-Length``, or before the
  end of a chunked one is sent).

A compressed reply, one that is not 200, or one whose first events or body say no usage,
tells nothing: the conversation's memory is then left without a prompt (no near move).
The prompt goes to the handle :func:`gateway.rewrite.decide` got from the clearing policy
(:meth:`gateway.policy.Kept.observe`: the conversation the request was fitted in).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import orjson

MAX_HEAD = 32 * 1024  # bytes of an SSE reply looked at for message_start, at most
MAX_JSON = 256 * 1024  # a JSON reply larger than this is not parsed for its usage
_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class Observer(Protocol):
    def observe(self, prompt: int) -> None: ...


def prompt_of(usage: Any) -> int | None:
    """``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` of a usage
    object (those present; a missing one counts 0); None when it holds none of them as a
    non-negative integer."""
    if type(usage) is not dict:
        return None
    total, seen = 0, False
    for name in _USAGE:
        v = usage.get(name)
        if type(v) is int and v >= 0:
            total += v
            seen = True
    return total if seen else None


def _message_prompt(data: Any) -> int | None:
    message = data.get("message") if type(data) is dict else None
    return prompt_of(message.get("usage")) if type(message) is dict else None


def json_prompt(payload: bytes) -> int | None:
    """The prompt a whole JSON reply reports (None: none, or over :data:`MAX_JSON`)."""
    if len(payload) > MAX_JSON:
        return None
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return prompt_of(data.get("usage")) if type(data) is dict else None


class SSEStart:
    """Reads the prompt off an SSE reply's ``message_start``: :meth:`feed` each chunk (before it
    is sent on) until it returns True (read, or given up: another event came first, or
    :data:`MAX_HEAD` bytes passed without it)."""

    __slots__ = ("_head", "_seen", "_to")

    def __init__(self, to: Observer) -> None:
        self._to = to
        self._head = b""  # the unfinished line at the end of the chunks so far
        self._seen = 0

    def feed(self, chunk: bytes) -> bool:
        try:
            return self._feed(chunk)
        except Exception:  # whatever the stream holds, the request goes on
            return True

    def _feed(self, chunk: bytes) -> bool:
        self._seen += len(chunk)
        buf = self._head + chunk if self._head else chunk  # a line across chunks: bounded
        stop = len(buf) - max(0, self._seen - MAX_HEAD)  # the stream's first MAX_HEAD bytes
        pos = 0
        while True:
            nl = buf.find(b"\n", pos, stop)
            if nl < 0:
                break
            if buf.startswith(b"data:", pos):  # event:, id:, comments, blank lines skipped
                data = orjson.loads(buf[pos + 5 : nl])
                kind = data.get("type") if type(data) is dict else None
                if kind == "message_start":
                    prompt = _message_prompt(data)
                    if prompt is not None:
                        self._to.observe(prompt)
                    return True
                if kind != "ping":
                    return True  # another event first: no message_start to read
            pos = nl + 1
        if self._seen > MAX_HEAD:
            return True
        self._head = bytes(buf[pos:]) if pos < len(buf) else b""
        return False

    def close(self) -> None:
        """The reply ended before its ``message_start`` was read: nothing to tell."""


class JsonBody:
    """A JSON reply that streams in: the chunks kept as references (up to :data:`MAX_JSON`),
    parsed once: by :meth:`feed` when they reach ``length`` (its ``Content-Length``), else by
    :meth:`close`."""

    __slots__ = ("_length", "_parts", "_size", "_to")

    def __init__(self, to: Observer, length: int | None = None) -> None:
        self._to = to
        self._length = length
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> bool:
        self._size += len(chunk)
        if self._size > MAX_JSON:
            self._parts = []
            return True
        self._parts.append(chunk if type(chunk) is bytes else bytes(chunk))
        if self._size == self._length:
            self.close()
            return True
        return False

    def close(self) -> None:
        parts, self._parts = self._parts, []
        if parts:
            prompt = json_prompt(parts[0] if len(parts) == 1 else b"".join(parts))
            if prompt is not None:
                self._to.observe(prompt)


def reader(
    to: Observer | None, status: int, headers: Mapping[str, str]
) -> SSEStart | JsonBody | None:
    """What a reply's chunks are fed to for its prompt: None for no conversation to tell
    (``to``), a status other than 200, or a compressed body."""
    if to is None or status != 200:
        return None
    enc = headers.get("Content-Encoding")
    if enc is not None and enc.lower() != "identity":
        return None
    if "json" in (headers.get("Content-Type") or "").lower():
        length = headers.get("Content-Length")
        return JsonBody(to, int(length) if length is not None and length.isdigit() else None)
    return SSEStart(to)


def observe_whole(
    to: Observer | None, status: int, headers: Mapping[str, str], payload: bytes
) -> None:
    """A reply read whole (it came with its headers): its prompt to ``to``."""
    if to is None or status != 200:
        return
    enc = headers.get("Content-Encoding")
    if enc is not None and enc.lower() != "identity":
        return
    if "json" in (headers.get("Content-Type") or "").lower():
        prompt = json_prompt(payload)
        if prompt is not None:
            to.observe(prompt)
    else:
        SSEStart(to).feed(payload)
