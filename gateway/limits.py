"""What a client (or a neighbour on this machine) can make the gateway hold, and for how long.

The limits follow the API's own, so the gateway never refuses a request the API would take:

* **Body**: the Messages and Token Counting APIs take at most 32 MB per request (Anthropic's
  "Request size limits"; over it the API answers ``413 request_too_large``, from its front
  proxy). :data:`MAX_BODY` is 32 MiB, the larger reading of "MB", and a refusal is the API's own
  413 JSON. A ``Content-Length`` over it is refused before one byte is read; a chunked body is
  read in pieces and refused at the limit (the connection is then closed, the rest unread), so a
  refused body costs at most the limit, once, and nothing stays allocated after it.
* **Headers**: the API documents no header count. Claude Code sends about 20 headers of at most
  a few hundred bytes; the SDKs fewer. :data:`MAX_HEADERS` (128) and :data:`MAX_FIELD_SIZE`
  (16 KiB a line, Node's whole-header default) leave a wide margin and bound one connection's
  headers to 2 MiB. Over either: aiohttp answers 400 and closes.
* **Time**: a connection with no request under way (a half-open one, one that sends nothing or
  never finishes its headers) is closed after :data:`IDLE_TIMEOUT`; a body that stops arriving
  for :data:`BODY_TIMEOUT` is dropped (the connection closed). Replies are not timed: a model
  may think for minutes, and the upstream's SSE pings keep a stream alive. After a refusal
  the rest of a body is read and dropped for at most :data:`LINGER` (so the client can read
  the 413 instead of a reset), then the connection is closed.
* **Memory after a large body**: glibc keeps the freed pages of a large body resident (32 MB
  after one refused body); after a body over :data:`TRIM_AFTER` (or a refused one) the
  gateway asks it to give them back (``malloc_trim``), so RSS returns to where it was.
* **The clearing policy's memory** (:mod:`gateway.policy`): the last body of at most
  :data:`MEMO_CONVERSATIONS` conversations, :data:`MEMO_BYTES` in all (least recently used
  dropped first; a body over half of it is not kept), and the policy's state after each of
  their messages (with the free move's fingerprint entry: a role and a size), counted at ``gateway.policy.PER_MESSAGE`` bytes a message (so a list of
  millions of tiny messages is bounded by its count, not only by its bytes). Claude Code runs a main conversation and a few
  subagents at a time, each under ~1 MB of JSON before it compacts.
"""

from __future__ import annotations

MAX_BODY = 32 * 1024 * 1024
MAX_HEADERS = 128
MAX_FIELD_SIZE = 16 * 1024
MAX_LINE_SIZE = 16 * 1024  # the request line: method, path and query string
IDLE_TIMEOUT = 60.0
BODY_TIMEOUT = 60.0
LINGER = 1.0
TRIM_AFTER = 4 * 1024 * 1024
MEMO_CONVERSATIONS = 16
MEMO_BYTES = 48 * 1024 * 1024
