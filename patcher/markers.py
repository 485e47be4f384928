"""The marked edits ctxpatch makes, and reading them back without any parsing.

A patched ``cli.js`` carries exactly two marked edits:

* right after the shebang line (and a byte-order mark), one block::

    /*ctxpatch:begin v=0.1.0 snippet=<sha256> original=<sha256> shape=S6*/function _aggressiveTextPrune(messages){...}/*ctxpatch:end*/\\n

  ``snippet`` is the sha256 of the exact bytes between the two markers, ``original`` the sha256
  of the file before the patch;
* at the call site, a wrap of the messages value::

    U=/*ctxpatch:wrap*/_aggressiveTextPrune((await H.microcompact(U,v,w)).messages)/*ctxpatch:/wrap*/

Removing both marked insertions gives back the original bytes, which the recorded sha proves.
Everything here is a pure function over bytes: ``check`` runs at every start and must stay fast.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from enum import StrEnum

BEGIN = b"/*ctxpatch:begin "
END = b"/*ctxpatch:end*/\n"
WRAP_OPEN = b"/*ctxpatch:wrap*/_aggressiveTextPrune("
WRAP_CLOSE = b")/*ctxpatch:/wrap*/"
FUNCTION_NAME = b"_aggressiveTextPrune"
MARK = b"/*ctxpatch:"  # the start of every ctxpatch marker
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark

# The original ruflo patch-aggressive-prune.mjs (see shared/research/anchors.md §1).
RUFLO_BEGIN = b"\n/*AGGRESSIVE_TEXT_PRUNE_PATCH*/\n"
RUFLO_END = b"/*END_AGGRESSIVE_TEXT_PRUNE_PATCH*/\n"
RUFLO_MARKER = b"/*AGGRESSIVE_TEXT_PRUNE_PATCH*/"
_RUFLO_WRAP = re.compile(rb"_aggressiveTextPrune\(([A-Za-z_$][\w$]*\.messages)\)")

_HEADER = re.compile(
    rb"/\*ctxpatch:begin v=(?P<v>[^ *]+) snippet=(?P<snippet>[0-9a-f]{64}) "
    rb"original=(?P<original>[0-9a-f]{64}) shape=(?P<shape>[^ *]+)\*/"
)


class State(StrEnum):
    UNPATCHED = "UNPATCHED"
    PATCHED = "PATCHED"
    OUTDATED = "OUTDATED"
    FOREIGN = "FOREIGN"
    UNSUPPORTED = "UNSUPPORTED"


@dataclass(frozen=True)
class Header:
    ctxpatch_version: str
    snippet_sha: str
    original_sha: str
    shape: str


@dataclass(frozen=True)
class Marks:
    """What the markers say about a file. ``state`` is never UNSUPPORTED here (that needs a
    search for the call site, which ``patcher.plan`` does)."""

    state: State
    header: Header | None = None
    reason: str = ""  # for FOREIGN: what is wrong
    foreign_kind: str = ""  # "ruflo" | "damaged" | "name-clash"
    # PATCHED / OUTDATED: the file with both marked edits removed, proved by the recorded sha
    original: bytes | None = field(default=None, repr=False)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def insertion_point(data: bytes) -> int:
    """Where the head block goes: after a UTF-8 byte-order mark, then after a shebang line.

    Node's ESM loader drops a leading BOM, then skips a ``#!`` line; both must stay first, or
    they become text in the middle of the file (a SyntaxError).
    """
    at = len(BOM) if data.startswith(BOM) else 0
    if data.startswith(b"#!", at):
        nl = data.find(b"\n", at)
        return len(data) if nl < 0 else nl + 1
    return at


def render_block(snippet: bytes, *, version: str, original_sha: str, shape: str) -> bytes:
    head = f"v={version} snippet={sha256(snippet)} original={original_sha} shape={shape}*/"
    return BEGIN + head.encode() + snippet + END


def read(data: bytes, current_snippet_sha: str) -> Marks:
    """Classify ``data`` by its markers alone (no parse).

    A marker counts only where a patcher puts it: the text of one elsewhere (in a comment or a
    string of an unpatched file) is not a patch. A ctxpatch patch has its head block at the
    insertion point or, when that was damaged, still its wrap."""
    if _ruflo_at_head(data):
        return Marks(
            State.FOREIGN,
            reason="patched by the original ruflo patch-aggressive-prune.mjs",
            foreign_kind="ruflo",
        )
    ours = data.startswith(BEGIN, insertion_point(data)) or WRAP_OPEN in data
    counts = [data.count(m) for m in (BEGIN, END, WRAP_OPEN, WRAP_CLOSE)] if ours else [0] * 4
    if counts == [0, 0, 0, 0]:
        if FUNCTION_NAME in data:
            return Marks(
                State.FOREIGN,
                reason="it already defines or calls _aggressiveTextPrune without ctxpatch markers",
                foreign_kind="name-clash",
            )
        return Marks(State.UNPATCHED)
    if counts != [1, 1, 1, 1]:
        return _damaged(
            f"marker counts begin/end/wrap/unwrap are {counts}, expected 1 each", _header(data)
        )
    header = _header(data)
    if header is None:
        return _damaged("the ctxpatch:begin marker is malformed")
    stripped = strip(data)
    if stripped is None:
        return _damaged("the marked edits are not in the places ctxpatch puts them")
    snippet = _snippet_bytes(data)
    if snippet is None or sha256(snippet) != header.snippet_sha:
        return _damaged("the injected function was edited after ctxpatch wrote it", header)
    if sha256(stripped) != header.original_sha:
        return _damaged(
            "removing the marked edits does not give back the recorded original", header
        )
    state = State.PATCHED if header.snippet_sha == current_snippet_sha else State.OUTDATED
    return Marks(state, header, original=stripped)


def _ruflo_at_head(data: bytes) -> bool:
    """The ruflo patcher's block sits right after the first line (see ``strip_ruflo``)."""
    nl = data.find(b"\n")
    return nl >= 0 and data.startswith(RUFLO_BEGIN, nl + 1)


def _damaged(reason: str, header: Header | None = None) -> Marks:
    return Marks(State.FOREIGN, header, reason=reason, foreign_kind="damaged")


def _header(data: bytes) -> Header | None:
    at = data.find(BEGIN)
    m = _HEADER.match(data, at)
    if at != insertion_point(data) or m is None:
        return None
    return Header(
        m["v"].decode(), m["snippet"].decode(), m["original"].decode(), m["shape"].decode()
    )


def _snippet_bytes(data: bytes) -> bytes | None:
    at = data.find(BEGIN)
    m = _HEADER.match(data, at)
    end = data.find(END)
    if m is None or end < m.end():
        return None
    return data[m.end() : end]


def strip(data: bytes) -> bytes | None:
    """Remove both marked edits; None when they are not exactly where ctxpatch puts them."""
    at = data.find(BEGIN)
    end = data.find(END)
    if at != insertion_point(data) or end < at:
        return None
    out = data[:at] + data[end + len(END) :]
    open_at = out.find(WRAP_OPEN)
    close_at = out.find(WRAP_CLOSE)
    if open_at < 0 or close_at < open_at:
        return None
    return (
        out[:open_at] + out[open_at + len(WRAP_OPEN) : close_at] + out[close_at + len(WRAP_CLOSE) :]
    )


def strip_ruflo(data: bytes) -> bytes | None:
    """Undo the original ruflo patch: its block after the first line and its call-site wrap."""
    nl = data.find(b"\n")
    if nl < 0 or not data.startswith(RUFLO_BEGIN, nl + 1):
        return None
    end = data.find(RUFLO_END, nl)
    if end < 0:
        return None
    out = data[: nl + 1] + data[end + len(RUFLO_END) :]
    out, n = _RUFLO_WRAP.subn(rb"\1", out, count=1)
    return out if n == 1 and FUNCTION_NAME not in out else None
