"""An index of a session's tool uses and results, built from Claude Code's own transcript.

``open_index(transcript)`` gives an :class:`Index`; ``refresh()`` reads what was appended since
the last call (by byte offset; a last line without its newline is left for later, as Claude Code
may be writing it), ``search(query)`` ranks calls by bm25, ``get(tool_use_id)`` reads the
result back from the transcript itself, so its content is the transcript's own, byte for byte.

The store is SQLite FTS5 from the standard library, *contentless* (``content=''``): it holds
the inverted index, tool names, short input summaries and where each line is (file, offset,
length), never a second copy of the results. The transcript stays the one truth: the index is
rebuilt, never trusted, when the file is shorter than the recorded offset, its head or the bytes
before the offset changed, it is another file (inode), or the index is from another schema
version or damaged; ``get`` re-checks the line it reads and rebuilds once if it does not hold
the id.

Files read: the session ``<dir>/<session>.jsonl`` (``.jsonl.xz`` too, read whole: tests), the
sub-agent transcripts newer builds write to ``<dir>/<session>/subagents/**/agent-*.jsonl``
(older ones keep ``isSidechain`` lines in the session file), and for a result Claude Code
stored apart, ``<dir>/<session>/tool-results/<tool_use_id>.txt|.json`` (indexed, and returned by
``get`` as ``full_output``).
"""

from __future__ import annotations

import contextlib
import hashlib
import lzma
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from ctxpatch.errors import TranscriptError
from recall import extract
from recall.extract import Content, JsonValue
from recall.store import index_path, private_file

SCHEMA = 4  # PRAGMA user_version: an index of another version is rebuilt
HEAD_BYTES = 4096  # the head compared to tell the same file from another one
TAIL_BYTES = 256  # the bytes before the offset compared before appending
SNIPPET_CHARS = 200
BM25_WEIGHTS = (1.0, 2.0, 1.0)  # name, input, body

_DDL = """
CREATE TABLE files(
  id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, sidechain INTEGER NOT NULL,
  offset INTEGER NOT NULL, lines INTEGER NOT NULL, head TEXT NOT NULL, tail TEXT NOT NULL,
  inode TEXT NOT NULL);
CREATE TABLE calls(
  id INTEGER PRIMARY KEY, tool_use_id TEXT UNIQUE NOT NULL, name TEXT, summary TEXT,
  sidechain INTEGER NOT NULL DEFAULT 0,
  use_file INTEGER, use_off INTEGER, use_len INTEGER, use_line INTEGER,
  res_file INTEGER, res_off INTEGER, res_len INTEGER, res_line INTEGER,
  is_error INTEGER, persisted TEXT, own INTEGER NOT NULL DEFAULT 0);
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5(name, input, body, content='',
  tokenize='unicode61 remove_diacritics 2');
"""


@dataclass(frozen=True)
class Hit:
    """One search result: enough to decide whether to ``get`` it."""

    tool_use_id: str
    tool: str
    summary: str  # e.g. "Bash: pytest -q"
    snippet: str  # the result's text around the first match
    score: float  # bm25: lower is better
    line: int | None  # 1-based line of the result in its file
    sidechain: bool
    is_error: bool


@dataclass(frozen=True)
class Result:
    """One tool call and its result, read back from the transcript."""

    tool_use_id: str
    tool: str
    summary: str
    input: JsonValue
    answered: bool  # False: the call has no result in the transcript (yet)
    content: Content  # exactly the tool_result's content (string, list of blocks, or None)
    is_error: bool
    file: str  # the transcript file holding the result
    line: int | None
    sidechain: bool
    persisted_path: str | None  # where Claude Code said it saved the full output
    full_output: Content  # that file's content when it is readable (.txt: str, .json: blocks)


@dataclass(frozen=True)
class _Source:
    """One transcript file of the session: the main one or a sub-agent's."""

    path: Path
    sidechain: bool


class Index:
    """The index of one session transcript (and its sub-agents). Not thread-safe; processes may
    share one index file (writes take SQLite's lock)."""

    def __init__(self, transcript: Path, db_path: Path) -> None:
        self.transcript = transcript
        self.db_path = db_path
        self._xz_cache: tuple[tuple[int, int, int], bytes] | None = None
        self.db = self._connect()
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ the store

    def _connect(self) -> sqlite3.Connection:
        private_file(self.db_path)
        try:
            db = self._open_checked()
        except sqlite3.DatabaseError:  # damaged, or not SQLite at all: it is only a cache
            with contextlib.suppress(FileNotFoundError):
                self.db_path.unlink()
            private_file(self.db_path)
            db = self._open_checked()
        return db

    def _open_checked(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, timeout=10.0, isolation_level=None)
        try:
            db.execute("PRAGMA busy_timeout=10000")
            # a cache of the transcript: WAL without an fsync per commit (an append costs
            # ~3 ms instead of ~15 on a busy disk); a crash may lose the last refresh, not
            # the file's consistency, and what is lost is read again from the offset
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            path = None
            if version == SCHEMA:
                row = db.execute("SELECT value FROM meta WHERE key='transcript'").fetchone()
                path = row[0] if row else None
            if version != SCHEMA or path != str(self.transcript):
                self._create(db)
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _create(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'fts_%'"
                " AND name NOT LIKE 'sqlite_%'"
            ).fetchall():
                db.execute(f'DROP TABLE IF EXISTS "{name}"')
            for stmt in _DDL.strip().split(";"):
                if stmt.strip():
                    db.execute(stmt)
            db.execute("INSERT INTO meta VALUES('transcript', ?)", (str(self.transcript),))
            db.execute(f"PRAGMA user_version={SCHEMA}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def rebuild(self) -> None:
        """Forget everything and index the transcript again."""
        self._create(self.db)
        self.refresh()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading files

    def session_dir(self) -> Path:
        """``<dir>/<session>``: where Claude Code keeps the session's sub-agents and outputs."""
        name = self.transcript.name
        for suffix in (".jsonl.xz", ".jsonl"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        return self.transcript.parent / name

    def _sources(self) -> list[_Source]:
        out = [_Source(self.transcript, False)]
        sub = self.session_dir() / "subagents"
        if sub.is_dir():
            out.extend(_Source(p, True) for p in sorted(sub.rglob("*.jsonl")) if p.is_file())
        return out

    def _read_all(self, path: Path) -> bytes:
        """A whole ``.xz`` file, decompressed (kept while its stat does not change)."""
        st = path.stat()
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self._xz_cache and self._xz_cache[0] == key:
            return self._xz_cache[1]
        try:
            data = lzma.decompress(path.read_bytes())
        except lzma.LZMAError as e:
            raise TranscriptError(
                f"cannot read {path}", f"not a valid .xz file ({e})", "decompress it with xz -d"
            ) from e
        self._xz_cache = (key, data)
        return data

    def _read(self, path: Path, offset: int, length: int | None = None) -> bytes:
        if path.suffix == ".xz":
            data = self._read_all(path)
            return data[offset : None if length is None else offset + length]
        with path.open("rb") as f:
            f.seek(offset)
            return f.read() if length is None else f.read(length)

    def _size(self, path: Path) -> int:
        return len(self._read_all(path)) if path.suffix == ".xz" else path.stat().st_size

    @staticmethod
    def _inode(path: Path) -> str:
        st = path.stat()
        return f"{st.st_dev}:{st.st_ino}"

    # ------------------------------------------------------------------ refresh

    def refresh(self) -> int:
        """Index what was appended since the last refresh; the number of lines read.

        Rebuilds from scratch when any file is not the one indexed any more."""
        if not self.transcript.is_file():
            why = "it is a folder" if self.transcript.is_dir() else "no such file"
            raise TranscriptError(
                f"cannot read {self.transcript}",
                why,
                "pass the path of a Claude Code session transcript (.jsonl or .jsonl.xz)",
            )
        try:
            return self._refresh()
        except _Stale:
            self._create(self.db)
            return self._refresh()

    def _refresh(self) -> int:
        read = 0
        self.db.execute("BEGIN IMMEDIATE")
        try:
            known = {
                row[1]: row
                for row in self.db.execute(
                    "SELECT id, path, offset, lines, head, tail, inode FROM files"
                )
            }
            sources = self._sources()
            if set(known) - {str(s.path) for s in sources}:
                raise _Stale  # a file indexed before is gone
            for src in sources:
                read += self._refresh_file(src, known.get(str(src.path)))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return read

    def _refresh_file(self, src: _Source, row: tuple[object, ...] | None) -> int:
        path = src.path
        inode = self._inode(path)
        size = self._size(path)
        if row is None:
            cur = self.db.execute(
                "INSERT INTO files(path, sidechain, offset, lines, head, tail, inode)"
                " VALUES(?, ?, 0, 0, '', '', ?)",
                (str(path), int(src.sidechain), inode),
            )
            file_id, offset, lines = int(cur.lastrowid or 0), 0, 0
        else:
            file_id, offset, lines = int(row[0]), int(row[2]), int(row[3])  # type: ignore[call-overload]
            head, tail, old_inode = row[4], row[5], row[6]
            if old_inode != inode or size < offset:
                raise _Stale
            if offset and (
                _digest(self._read(path, 0, min(HEAD_BYTES, offset))) != head
                or _digest(
                    self._read(
                        path, max(0, offset - TAIL_BYTES), offset - max(0, offset - TAIL_BYTES)
                    )
                )
                != tail
            ):
                raise _Stale
        if size == offset:
            return 0
        data = self._read(path, offset)
        if path.suffix == ".xz" and not data.endswith(b"\n"):
            data += b"\n"  # a static test file: its end is the end of its last line
        end = data.rfind(b"\n") + 1  # a last line without its newline is still being written
        if offset == 0 and end and not src.sidechain:  # a sub-agent file: lines skipped
            _check_transcript(path, data[:end])
        n = self._index_lines(file_id, src.sidechain, data[:end], offset, lines)
        new_offset = offset + end
        head = _digest(self._read(path, 0, min(HEAD_BYTES, new_offset)))
        tail_start = max(0, new_offset - TAIL_BYTES)
        tail = _digest(self._read(path, tail_start, new_offset - tail_start))
        if path.suffix == ".xz":
            new_offset = min(new_offset, size)
        self.db.execute(
            "UPDATE files SET offset=?, lines=?, head=?, tail=? WHERE id=?",
            (new_offset, lines + n, head, tail, file_id),
        )
        return n

    def _index_lines(
        self, file_id: int, sidechain: bool, data: bytes, offset: int, first_line: int
    ) -> int:
        pos, n = 0, 0
        while pos < len(data):
            nl = data.index(b"\n", pos)
            raw = data[pos:nl]
            n += 1
            if raw.strip() and extract.might_hold_tools(raw):
                rec = extract.parse_line(raw)
                if rec is None:
                    self.warnings.append(f"{file_id}:{first_line + n}: not a JSON object, skipped")
                else:
                    side = int(sidechain or bool(rec.get("isSidechain")))
                    where = (file_id, offset + pos, nl - pos, first_line + n)
                    for use in extract.tool_uses(rec):
                        self._add_use(use, side, where)
                    for res in extract.tool_results(rec):
                        self._add_result(res, side, where)
            pos = nl + 1
        return n

    def _call_id(self, tool_use_id: str, side: int) -> tuple[int, bool, bool]:
        row = self.db.execute(
            "SELECT id, use_off IS NOT NULL, res_off IS NOT NULL FROM calls WHERE tool_use_id=?",
            (tool_use_id,),
        ).fetchone()
        if row:
            return int(row[0]), bool(row[1]), bool(row[2])
        cur = self.db.execute(
            "INSERT INTO calls(tool_use_id, sidechain) VALUES(?, ?)", (_utf8(tool_use_id), side)
        )
        return int(cur.lastrowid or 0), False, False

    def _add_use(self, use: extract.ToolUse, side: int, where: tuple[int, int, int, int]) -> None:
        cid, has_use, _ = self._call_id(use.tool_use_id, side)
        if has_use:
            return  # a repeated line (a resumed session's copy): the first one stays
        self.db.execute(
            "UPDATE calls SET name=?, summary=?, use_file=?, use_off=?, use_len=?, use_line=?,"
            " own=? WHERE id=?",
            (
                _utf8(use.name),
                _utf8(use.summary),
                *where,
                int(extract.is_recall_tool(use.name)),
                cid,
            ),
        )
        self.db.execute(
            "INSERT INTO fts(rowid, name, input, body) VALUES(?, ?, ?, '')",
            (cid * 2, _utf8(use.name), _utf8(use.text)),
        )

    def _add_result(
        self, res: extract.ToolResult, side: int, where: tuple[int, int, int, int]
    ) -> None:
        cid, _, has_result = self._call_id(res.tool_use_id, side)
        if has_result:
            return
        self.db.execute(
            "UPDATE calls SET res_file=?, res_off=?, res_len=?, res_line=?, is_error=?,"
            " persisted=? WHERE id=?",
            (*where, int(res.is_error), _utf8(res.persisted_path or "") or None, cid),
        )
        body = res.text
        if res.persisted_path:
            full = self._full_output(res.tool_use_id, res.persisted_path)
            if full is not None:
                body = f"{body}\n{extract.content_text(full)}"
        self.db.execute(
            "INSERT INTO fts(rowid, name, input, body) VALUES(?, '', '', ?)",
            (cid * 2 + 1, _utf8(body)),
        )

    # ------------------------------------------------------------------ full outputs

    def _full_output(self, tool_use_id: str, said: str) -> Content:
        """The file Claude Code saved a large result to: in this session's folder first (the
        transcript may have moved), then where the line says; None when neither is readable.
        Only a file named for this tool use is read (never another session's)."""
        name = said.replace("\\", "/").rsplit("/", 1)[-1]
        if name not in (f"{tool_use_id}.txt", f"{tool_use_id}.json"):
            return None
        for cand in (self.session_dir() / "tool-results" / name, Path(said)):
            try:
                text = cand.read_text(encoding="utf-8", errors="surrogateescape")
            except (OSError, ValueError):
                continue
            if name.endswith(".json"):
                try:
                    blocks = orjson.loads(text)
                except orjson.JSONDecodeError:
                    return text
                return blocks if isinstance(blocks, list) else text
            return text
        return None

    # ------------------------------------------------------------------ queries

    def _line(self, file_id: int, off: int, length: int) -> dict[str, JsonValue] | None:
        row = self.db.execute("SELECT path FROM files WHERE id=?", (file_id,)).fetchone()
        if row is None:
            return None
        try:
            raw = self._read(Path(row[0]), off, length)
        except OSError:
            return None
        return extract.parse_line(raw)

    def get(self, tool_use_id: str) -> Result | None:
        """The call ``tool_use_id`` and its result as the transcript holds it; None when the
        session has no such call. Refreshes first."""
        self.refresh()
        result = self._get(tool_use_id)
        if result is _STALE:  # the line at the recorded place is not that call's: rebuild once
            self.rebuild()
            result = self._get(tool_use_id)
            if result is _STALE:
                raise TranscriptError(
                    f"cannot read the result of {tool_use_id} in {self.transcript}",
                    "the transcript changed while it was read",
                    "run the command again",
                )
        assert result is not _STALE
        return result  # type: ignore[return-value]

    def _get(self, tool_use_id: str) -> Result | object | None:
        row = self.db.execute(
            "SELECT name, summary, sidechain, use_file, use_off, use_len, res_file, res_off,"
            " res_len, res_line, is_error, persisted FROM calls WHERE tool_use_id=?",
            (tool_use_id,),
        ).fetchone()
        if row is None:
            return None
        name, summary, side, uf, uo, ul, rf, ro, rl, rline, is_error, persisted = row
        inp: JsonValue = None
        if uf is not None:
            use_rec = self._line(uf, uo, ul)
            if use_rec is None:
                return _STALE
            inp = extract.tool_use_input(use_rec, tool_use_id)
        content: Content = None
        answered, file = False, ""
        if rf is not None:
            rec = self._line(rf, ro, rl)
            if rec is None:
                return _STALE
            found, content, _ = extract.result_content(rec, tool_use_id)
            if not found:
                return _STALE
            answered = True
            file = self.db.execute("SELECT path FROM files WHERE id=?", (rf,)).fetchone()[0]
        full = self._full_output(tool_use_id, persisted) if persisted else None
        return Result(
            tool_use_id=tool_use_id,
            tool=name or "?",
            summary=summary or (name or "?"),
            input=inp,
            answered=answered,
            content=content,
            is_error=bool(is_error),
            file=file,
            line=rline,
            sidechain=bool(side),
            persisted_path=persisted,
            full_output=full,
        )

    def search(self, query: str, *, limit: int = 10, tool: str | None = None) -> list[Hit]:
        """Calls matching ``query`` (words of the result, the input, the tool's name), best
        first: the words as one phrase, then all of them anywhere, then any of them."""
        words = _words(query)
        if not words:
            return []
        self.refresh()
        seen: dict[int, float] = {}
        for expr in _expressions(words):
            for cid, score in self._match(expr, limit, tool):
                if cid not in seen:
                    seen[cid] = score
            if len(seen) >= limit:
                break
        return [h for h in (self._hit(cid, score, words) for cid, score in seen.items()) if h][
            :limit
        ]

    def _match(self, expr: str, limit: int, tool: str | None) -> list[tuple[int, float]]:
        w = ", ".join(str(x) for x in BM25_WEIGHTS)
        # recall's own calls hold the query itself (their tool_use line is written before
        # the tool runs): never an answer
        where, args = (
            "fts MATCH ? AND fts.rowid / 2 NOT IN (SELECT id FROM calls WHERE own)",
            [expr],
        )
        if tool:  # the tool filter by name: the calls of that tool
            where += " AND fts.rowid / 2 IN (SELECT id FROM calls WHERE name = ?)"
            args.append(tool)
        # bm25 is not allowed under GROUP BY: rank the rows, then keep each call's best
        sql = (
            f"SELECT rowid / 2 AS cid, min(score) AS best FROM (SELECT fts.rowid AS rowid,"
            f" bm25(fts, {w}) AS score FROM fts WHERE {where} ORDER BY score LIMIT ?)"
            " GROUP BY cid ORDER BY best, cid DESC LIMIT ?"
        )
        params: list[object] = [*args, limit * 2, limit]
        try:
            return [(int(a), float(b)) for a, b in self.db.execute(sql, params)]
        except sqlite3.OperationalError:
            return []

    def _hit(self, cid: int, score: float, words: list[str]) -> Hit | None:
        row = self.db.execute(
            "SELECT tool_use_id, name, summary, sidechain, res_file, res_off, res_len, res_line,"
            " is_error, persisted FROM calls WHERE id=?",
            (cid,),
        ).fetchone()
        if row is None:
            return None
        tid, name, summary, side, rf, ro, rl, rline, is_error, persisted = row
        text = ""
        if rf is not None:
            rec = self._line(rf, ro, rl)
            if rec is not None:
                text = extract.content_text(extract.result_content(rec, tid)[1])
        snippet = _snippet(text, words)
        if snippet is None and persisted:
            snippet = _snippet(extract.content_text(self._full_output(tid, persisted)), words)
        if snippet is None:
            snippet = _snippet(text, []) or ""
        return Hit(
            tool_use_id=tid,
            tool=name or "?",
            summary=summary or (name or "?"),
            snippet=snippet,
            score=score,
            line=rline,
            sidechain=bool(side),
            is_error=bool(is_error),
        )

    def stats(self) -> dict[str, int]:
        calls, answered = self.db.execute("SELECT count(*), count(res_off) FROM calls").fetchone()
        files, lines = self.db.execute(
            "SELECT count(*), coalesce(sum(lines), 0) FROM files"
        ).fetchone()
        return {"calls": calls, "results": answered, "files": files, "lines": lines}


class _Stale(Exception):
    """A file is not the one indexed: rebuild."""


_STALE = object()
_WORD = re.compile(r"\w+", re.UNICODE)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")  # colours, controls


SNIFF_LINES = 20


def _check_transcript(path: Path, data: bytes) -> None:
    """Refuse a file that is not a JSONL transcript (binary, or none of its first lines a JSON
    object); a few damaged lines are skipped as Claude Code skips them."""
    if b"\x00" in data[:4096]:
        raise TranscriptError(
            f"cannot read {path}", "it is a binary file", "pass a Claude Code JSONL transcript"
        )
    lines = [ln for ln in data.split(b"\n", SNIFF_LINES * 4)[: SNIFF_LINES * 4] if ln.strip()]
    sample = lines[:SNIFF_LINES]
    if sample and all(extract.parse_line(ln) is None for ln in sample):
        raise TranscriptError(
            f"not a Claude Code session transcript: {path}",
            f"none of its first {len(sample)} line(s) is a JSON object",
            "pass a session file from ~/.claude/projects/<dir>/<session>.jsonl",
        )


def _utf8(text: str) -> str:
    """``text`` as SQLite can hold it: a lone surrogate (JSON allows it) becomes U+FFFD. Only
    the words the index matches are touched; results are read back from the transcript."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _words(query: str) -> list[str]:
    return _WORD.findall(query)


def _expressions(words: list[str]) -> Iterator[str]:
    quoted = [f'"{w}"' for w in words]
    if len(words) > 1:
        yield '"' + " ".join(words) + '"'  # the words as one phrase
    yield " AND ".join(quoted)
    if len(words) > 1:
        yield " OR ".join(quoted)


def _snippet(text: str, words: list[str]) -> str | None:
    """About ``SNIPPET_CHARS`` of ``text`` around the first of ``words`` (the start when
    ``words`` is empty); None when none of them is in it."""
    if not text:
        return "" if not words else None
    start = 0
    if words:
        low = text.lower()
        found = [i for w in words if (i := low.find(w.lower())) >= 0]
        if not found:
            return None
        start = max(0, min(found) - SNIPPET_CHARS // 3)
    piece = " ".join(_ANSI.sub("", text[start : start + SNIPPET_CHARS]).split())
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")


def open_index(transcript: Path) -> Index:
    """The index of ``transcript`` (a ``.jsonl`` or ``.jsonl.xz`` session file), refreshed."""
    transcript = Path(transcript).absolute()
    if not transcript.exists():
        raise TranscriptError(
            f"cannot read {transcript}",
            "no such file",
            "pass the path of a Claude Code session transcript (.jsonl or .jsonl.xz)",
        )
    if transcript.is_dir():
        raise TranscriptError(
            f"cannot read {transcript}",
            "it is a folder",
            "pass one session file, e.g. ~/.claude/projects/<dir>/<session>.jsonl",
        )
    index = Index(transcript, index_path(transcript))
    try:
        index.refresh()
    except BaseException:
        index.close()
        raise
    return index
