"""The marked edits ctxpatch makes, and reading them back without any parsing.

A patched ``cli.js`` carries two marker pairs.

The text prune (every patched file):

* right after the shebang line (and a byte-order mark), one block::

    /*ctxpatch:begin v=0.2.0 snippet=<sha256> original=<sha256> shape=S6 clear=create/cm*/function _aggressiveTextPrune(messages){...}/*ctxpatch:end*/\\n

  ``snippet`` is the sha256 of the exact bytes between the two markers, ``original`` the sha256
  of the file before the patch, ``clear`` the request-builder shape of the clearing injection
  or ``none`` where it does not apply (ctxpatch 0.1.0 wrote no ``clear`` field);
* at the call site, a wrap of the messages value::

    U=/*ctxpatch:wrap*/_aggressiveTextPrune((await H.microcompact(U,v,w)).messages)/*ctxpatch:/wrap*/

The server-side clearing (where ``clear`` is not ``none``):

* right after the text-prune block::

    /*ctxpatch:clear:begin snippet=<sha256>*/function _ctxpatchContextClearing(value, mode){...}/*ctxpatch:clear:end*/\\n

* a wrap of the request object the loop's builder returns, and a wrap of each request call
  that sends it::

    return/*ctxpatch:clear*/_ctxpatchContextClearing({model:...,betas:G8,...})/*ctxpatch:/clear*/
    await /*ctxpatch:watch*/_ctxpatchContextClearing(w6.beta.messages.create({...F6,stream:!0},{...}),"watch")/*ctxpatch:/watch*/.withResponse()

Removing every marked insertion gives back the original bytes, which the recorded sha proves.
Everything here is a pure function over bytes: ``check`` runs at every start and must stay fast.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import NamedTuple

BEGIN = b"/*ctxpatch:begin "
END = b"/*ctxpatch:end*/\n"
WRAP_OPEN = b"/*ctxpatch:wrap*/_aggressiveTextPrune("
WRAP_CLOSE = b")/*ctxpatch:/wrap*/"
FUNCTION_NAME = b"_aggressiveTextPrune"
MARK = b"/*ctxpatch:"  # the start of every ctxpatch marker
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark

CLEAR_BEGIN = b"/*ctxpatch:clear:begin "
CLEAR_END = b"/*ctxpatch:clear:end*/\n"
CLEAR_FUNCTION = b"_ctxpatchContextClearing"
CLEAR_OPEN = b"/*ctxpatch:clear*/_ctxpatchContextClearing("
CLEAR_CLOSE = b")/*ctxpatch:/clear*/"
WATCH_OPEN = b"/*ctxpatch:watch*/_ctxpatchContextClearing("
WATCH_CLOSE = b',"watch")/*ctxpatch:/watch*/'
NO_CLEARING = "none"

# The original ruflo patch-aggressive-prune.mjs (see shared/research/anchors.md §1).
RUFLO_BEGIN = b"\n/*AGGRESSIVE_TEXT_PRUNE_PATCH*/\n"
RUFLO_END = b"/*END_AGGRESSIVE_TEXT_PRUNE_PATCH*/\n"
RUFLO_MARKER = b"/*AGGRESSIVE_TEXT_PRUNE_PATCH*/"
_RUFLO_WRAP = re.compile(rb"_aggressiveTextPrune\(([A-Za-z_$][\w$]*\.messages)\)")

_HEADER = re.compile(
    rb"/\*ctxpatch:begin v=(?P<v>[^ *]+) snippet=(?P<snippet>[0-9a-f]{64}) "
    rb"original=(?P<original>[0-9a-f]{64}) shape=(?P<shape>[^ *]+)(?: clear=(?P<clear>[^ *]+))?\*/"
)
_CLEAR_HEADER = re.compile(rb"/\*ctxpatch:clear:begin snippet=(?P<snippet>[0-9a-f]{64})\*/")


class State(StrEnum):
    UNPATCHED = "UNPATCHED"
    PATCHED = "PATCHED"
    OUTDATED = "OUTDATED"
    FOREIGN = "FOREIGN"
    UNSUPPORTED = "UNSUPPORTED"


# The records here and in backup/bundle/discover/result are NamedTuples or plain classes, not
# dataclasses: importing dataclasses (inspect, ast, dis, tokenize) and building each class cost
# `check`, which runs at every start, ~10 ms of its 100.


class Header(NamedTuple):
    ctxpatch_version: str
    snippet_sha: str
    original_sha: str
    shape: str
    clear: str | None = None  # request-builder shape, "none", or None (written by 0.1.0)
    clear_snippet_sha: str | None = None  # of the clearing block, when there is one


class Original(NamedTuple):
    """A file as byte ranges of ``data``: a patched file's original is the patched bytes minus
    the marked edits. Hashed and compared piece by piece, without the 13.7 MB copy a join
    makes (``check`` runs at every start); joined only when the bytes are needed."""

    data: bytes
    ranges: tuple[tuple[int, int], ...]

    def __repr__(self) -> str:
        return f"Original(<{len(self.data)} bytes>, ranges={self.ranges!r})"

    @classmethod
    def whole(cls, data: bytes) -> Original:
        return cls(data, ((0, len(data)),))

    def pieces(self) -> list[memoryview]:
        view = memoryview(self.data)  # slices of a view are not copies
        return [view[a:b] for a, b in self.ranges]

    def size(self) -> int:
        return sum(b - a for a, b in self.ranges)

    def sha256(self) -> str:
        h = hashlib.sha256()
        for piece in self.pieces():
            h.update(piece)
        return h.hexdigest()

    def same_as(self, other: bytes) -> bool:
        """``other == self.join()``, byte for byte, without joining."""
        if len(other) != self.size():
            return False
        at = 0
        for piece in self.pieces():
            if not other.startswith(piece, at):  # a memcmp at ``at``, no copy
                return False
            at += len(piece)
        return True

    def join(self) -> bytes:
        return b"".join(self.pieces())  # the one copy

    def head(self, n: int) -> bytes:
        """The first ``n`` bytes (``join()[:n]`` without the whole copy)."""
        out, left = [], n
        for piece in self.pieces():
            if left <= 0:
                break
            out.append(piece[:left])
            left -= len(piece[:left])
        return b"".join(out)


class Marks(NamedTuple):
    """What the markers say about a file. ``state`` is never UNSUPPORTED here (that needs a
    search for the call site, which ``patcher.plan`` does)."""

    state: State
    header: Header | None = None
    reason: str = ""  # for FOREIGN: what is wrong
    foreign_kind: str = ""  # "ruflo" | "damaged" | "name-clash"
    # PATCHED / OUTDATED: the file with both marked edits removed, proved by the recorded sha
    unpatched: Original | None = None

    @property
    def original(self) -> bytes | None:
        """The bytes of ``unpatched`` (a 13.7 MB copy on each use: take it once)."""
        return None if self.unpatched is None else self.unpatched.join()


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


def render_block(
    snippet: bytes,
    *,
    version: str,
    original_sha: str,
    shape: str,
    clear_snippet: bytes | None = None,
    clear_shape: str = NO_CLEARING,
) -> bytes:
    """The text-prune block, followed by the clearing block when ``clear_snippet`` is given."""
    clear = clear_shape if clear_snippet is not None else NO_CLEARING
    head = (
        f"v={version} snippet={sha256(snippet)} original={original_sha} shape={shape} "
        f"clear={clear}*/"
    )
    block = BEGIN + head.encode() + snippet + END
    if clear_snippet is not None:
        block += CLEAR_BEGIN + f"snippet={sha256(clear_snippet)}*/".encode() + clear_snippet
        block += CLEAR_END
    return block


def read(data: bytes, current_snippet_sha: str, current_clear_sha: str | None = None) -> Marks:
    """Classify ``data`` by its markers alone (no parse).

    A marker counts only where a patcher puts it: the text of one elsewhere (in a comment or a
    string of an unpatched file) is not a patch. A ctxpatch patch has its head block at the
    insertion point or, when that was damaged, still its wrap. PATCHED needs the current
    text-prune snippet, a ``clear`` field in the header, and, where clearing was injected, the
    clearing snippet ``current_clear_sha`` (not compared when None).
    """
    if _ruflo_at_head(data):
        return Marks(
            State.FOREIGN,
            reason="patched by the original ruflo patch-aggressive-prune.mjs",
            foreign_kind="ruflo",
        )
    ours = data.startswith(BEGIN, insertion_point(data)) or WRAP_OPEN in data
    at = _scan(data) if ours else {m: [] for m in _ALL}
    counts = [len(at[m]) for m in (BEGIN, END, WRAP_OPEN, WRAP_CLOSE)]
    clear_counts = [len(at[m]) for m in (CLEAR_BEGIN, CLEAR_END, CLEAR_OPEN, CLEAR_CLOSE)]
    watches = [len(at[WATCH_OPEN]), len(at[WATCH_CLOSE])]
    if counts == [0, 0, 0, 0] and not any(clear_counts) and not any(watches):
        for name in (FUNCTION_NAME, CLEAR_FUNCTION):
            if name in data:
                return Marks(
                    State.FOREIGN,
                    reason=f"it already defines or calls {name.decode()} without ctxpatch markers",
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
    cleared = header.clear not in (None, NO_CLEARING)
    expected = [1, 1, 1, 1] if cleared else [0, 0, 0, 0]
    if clear_counts != expected or watches[0] != watches[1] or (watches[0] > 0) != cleared:
        return _damaged(
            f"clearing marker counts begin/end/wrap/unwrap/watch are {clear_counts + watches}, "
            f"which do not match clear={header.clear or 'absent'} in the header",
            header,
        )
    kept = _kept(data, at)
    if kept is None:
        return _damaged("the marked edits are not in the places ctxpatch puts them")
    snippet = _snippet_bytes(data)
    if snippet is None or sha256(snippet) != header.snippet_sha:
        return _damaged("the injected function was edited after ctxpatch wrote it", header)
    if cleared:
        clear_snippet = _clear_snippet_bytes(data)
        if clear_snippet is None or sha256(clear_snippet) != header.clear_snippet_sha:
            return _damaged("the injected clearing function was edited after ctxpatch wrote it")
    if kept.sha256() != header.original_sha:
        return _damaged(
            "removing the marked edits does not give back the recorded original", header
        )
    current = header.snippet_sha == current_snippet_sha and header.clear is not None
    if cleared and current_clear_sha is not None:
        current = current and header.clear_snippet_sha == current_clear_sha
    return Marks(State.PATCHED if current else State.OUTDATED, header, unpatched=kept)


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
    clear = m["clear"].decode() if m["clear"] else None
    clear_sha = None
    end = data.find(END, m.end())
    if end >= 0:
        c = _CLEAR_HEADER.match(data, end + len(END))
        clear_sha = c["snippet"].decode() if c else None
    return Header(
        m["v"].decode(),
        m["snippet"].decode(),
        m["original"].decode(),
        m["shape"].decode(),
        clear,
        clear_sha,
    )


def _snippet_bytes(data: bytes) -> bytes | None:
    at = data.find(BEGIN)
    m = _HEADER.match(data, at)
    end = data.find(END)
    if m is None or end < m.end():
        return None
    return data[m.end() : end]


def _clear_snippet_bytes(data: bytes) -> bytes | None:
    at = data.find(CLEAR_BEGIN)
    m = _CLEAR_HEADER.match(data, at)
    end = data.find(CLEAR_END)
    if at < 0 or m is None or end < m.end():
        return None
    return data[m.end() : end]


_ALL = (
    BEGIN,
    END,
    WRAP_OPEN,
    WRAP_CLOSE,
    CLEAR_BEGIN,
    CLEAR_END,
    CLEAR_OPEN,
    CLEAR_CLOSE,
    WATCH_OPEN,
    WATCH_CLOSE,
)


# Every MARK in a file: no proper prefix of MARK is also its suffix, so two occurrences never
# overlap and finditer's (non-overlapping) matches are all of them; ~15% faster than a
# bytes.find loop on 13.7 MB.
_MARK_AT = re.compile(re.escape(MARK))


def _scan(data: bytes) -> dict[bytes, list[int]]:
    """Where each marker starts, in one pass over ``data`` (check runs at every start)."""
    found: dict[bytes, list[int]] = {m: [] for m in _ALL}
    offsets = [(m, m.index(MARK)) for m in _ALL]
    for match in _MARK_AT.finditer(data):
        hit = match.start()
        for m, off in offsets:
            if hit >= off and data.startswith(m, hit - off):
                found[m].append(hit - off)
                break
    return found


def strip(data: bytes) -> bytes | None:
    """Remove every marked edit; None when they are not exactly where ctxpatch puts them."""
    kept = _kept(data, _scan(data))
    return None if kept is None else kept.join()


def _kept(data: bytes, at: dict[bytes, list[int]]) -> Original | None:
    """``data`` without the marked edits at ``at``; None when they are not exactly where
    ctxpatch puts them."""
    cut: list[tuple[int, int]] = []  # byte ranges to remove
    if len(at[BEGIN]) != 1 or len(at[END]) != 1:
        return None
    begin, end = at[BEGIN][0], at[END][0] + len(END)
    if begin != insertion_point(data) or end <= begin:
        return None
    if at[CLEAR_BEGIN] or at[CLEAR_END]:
        if at[CLEAR_BEGIN] != [end] or len(at[CLEAR_END]) != 1 or at[CLEAR_END][0] < end:
            return None
        end = at[CLEAR_END][0] + len(CLEAR_END)
    cut.append((begin, end))
    for open_, close in (
        (WRAP_OPEN, WRAP_CLOSE),
        (CLEAR_OPEN, CLEAR_CLOSE),
        (WATCH_OPEN, WATCH_CLOSE),
    ):
        opens, closes = at[open_], at[close]
        if len(opens) != len(closes):
            return None
        bounds = [*opens[1:], len(data)][: len(opens)]
        for o, c, nxt in zip(opens, closes, bounds, strict=True):
            # each close after its own open, and before the next open of the same kind
            if not o + len(open_) <= c <= nxt - len(close):
                return None
            cut += [(o, o + len(open_)), (c, c + len(close))]
    cut.sort()
    kept, pos = [], 0
    for a, b in cut:
        if a < pos:
            return None  # overlapping marked edits
        kept.append((pos, a))
        pos = b
    kept.append((pos, len(data)))
    return Original(data, tuple(kept))


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
