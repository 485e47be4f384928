"""recall.index: byte-exact results, incremental refresh, cut lines, rebuilds, isolation."""

from __future__ import annotations

import json
import lzma
import os
import sqlite3
from pathlib import Path

import pytest
from shared_data import PUBLIC, SPOTTER, missing, skip_reason
from transcript_lines import append, call, prompt_line, result_line, use_line, write

from ctxpatch.errors import TranscriptError
from recall import index as recall_index
from recall.extract import parse_line
from recall.index import open_index
from recall.store import index_path

IMAGE = [
    {"type": "text", "text": "screenshot of the login page"},
    {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    },
]


def session(tmp_path: Path, name: str = "0000-aaaa.jsonl") -> Path:
    return write(
        tmp_path / "proj" / name,
        prompt_line("run the tests"),
        call("toolu_A1", "pytest -q", "FAILED tests/test_login.py::test_expired_token - KeyError"),
        use_line("toolu_B2", "Read", {"file_path": "/src/app/login.py"}),
        result_line("toolu_B2", IMAGE),
        call("toolu_C3", "ls", 'caf\u00e9 \u2603 \U0001f600 tabs\tand\\backslashes "quoted"'),
    )


def test_get_returns_the_transcripts_own_content(tmp_path: Path) -> None:
    path = session(tmp_path)
    with open_index(path) as ix:
        a = ix.get("toolu_A1")
        b = ix.get("toolu_B2")
        c = ix.get("toolu_C3")
    assert a and a.content == "FAILED tests/test_login.py::test_expired_token - KeyError"
    assert (
        a.tool == "Bash" and a.summary == "Bash: pytest -q" and a.input == {"command": "pytest -q"}
    )
    assert a.line == 3 and a.answered and not a.is_error
    assert b and b.content == IMAGE and b.summary == "Read: /src/app/login.py"
    assert c and c.content == 'caf\u00e9 \u2603 \U0001f600 tabs\tand\\backslashes "quoted"'


def test_search_ranks_by_words_tool_and_path(tmp_path: Path) -> None:
    path = session(tmp_path)
    with open_index(path) as ix:
        assert (
            next(h.tool_use_id for h in ix.search("test_expired_token KeyError", limit=5))
            == "toolu_A1"
        )
        assert ix.search("login.py", limit=5)[0].tool_use_id in ("toolu_B2", "toolu_A1")
        assert [h.tool_use_id for h in ix.search("app login", limit=5, tool="Read")] == ["toolu_B2"]
        assert ix.search("nothing-like-this-anywhere", limit=5) == []
        hit = ix.search("KeyError", limit=1)[0]
    assert "KeyError" in hit.snippet and hit.summary == "Bash: pytest -q" and hit.line == 3


def test_incremental_append_reads_only_the_new_lines(tmp_path: Path) -> None:
    path = session(tmp_path)
    with open_index(path) as ix:
        assert ix.refresh() == 0  # nothing new
        append(path, call("toolu_D4", "make build", "error: undefined reference to `frobnicate'"))
        assert ix.refresh() == 2
        d = ix.get("toolu_D4")
        assert d and d.content == "error: undefined reference to `frobnicate'"
        assert ix.search("frobnicate", limit=3)[0].tool_use_id == "toolu_D4"
        assert ix.stats()["calls"] == 4


def test_a_cut_last_line_waits_until_it_is_complete(tmp_path: Path) -> None:
    path = session(tmp_path)
    line = result_line("toolu_E5", "the quokka result")
    with open_index(path) as ix:
        append(path, use_line("toolu_E5", "Bash", {"command": "echo quokka"}), line[:20])
        assert ix.refresh() == 1  # the use; the cut result is left for later
        e = ix.get("toolu_E5")
        assert e and not e.answered and e.content is None
        append(path, line[20:])
        assert ix.refresh() == 1
        e = ix.get("toolu_E5")
        assert e and e.answered and e.content == "the quokka result"


def test_a_shorter_transcript_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    path = session(tmp_path)
    with open_index(path) as ix:
        assert ix.get("toolu_C3")
    # the same file cut back and rewritten with other calls (same head, fewer bytes)
    write(path, prompt_line("run the tests"), call("toolu_Z9", "pytest -q", "1 passed"))
    with open_index(path) as ix:
        assert ix.get("toolu_A1") is None and ix.get("toolu_C3") is None
        z = ix.get("toolu_Z9")
        assert z and z.content == "1 passed"


def test_a_rewritten_transcript_of_the_same_size_is_rebuilt(tmp_path: Path) -> None:
    path = session(tmp_path)
    with open_index(path) as ix:
        assert ix.get("toolu_A1")
    data = path.read_bytes().replace(b"toolu_A1", b"toolu_Q1")
    path.write_bytes(data)  # same size, same head, other bytes before the offset
    with open_index(path) as ix:
        assert ix.get("toolu_A1") is None
        q = ix.get("toolu_Q1")
        assert q and q.content.startswith("FAILED")  # type: ignore[union-attr]


def test_an_index_of_another_schema_or_damaged_is_rebuilt(tmp_path: Path) -> None:
    path = session(tmp_path)
    open_index(path).close()
    db = index_path(path)
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version=1")
    con.execute("DELETE FROM calls")
    con.commit()
    con.close()
    with open_index(path) as ix:
        assert ix.get("toolu_A1")
    db.write_bytes(b"this is not an SQLite file at all" * 100)
    with open_index(path) as ix:
        assert ix.get("toolu_B2")


def test_index_files_are_private(tmp_path: Path, state_dir: Path) -> None:
    path = session(tmp_path)
    open_index(path).close()
    db = index_path(path)
    assert db.is_relative_to(state_dir)
    assert db.stat().st_mode & 0o777 == 0o600
    for f in db.parent.iterdir():  # the WAL and shared-memory files too
        assert f.stat().st_mode & 0o777 == 0o600, f
    assert db.parent.stat().st_mode & 0o777 == 0o700


def test_two_transcripts_never_mix(tmp_path: Path) -> None:
    one = write(tmp_path / "p" / "one.jsonl", call("toolu_1", "echo", "only in one"))
    two = write(tmp_path / "p" / "two.jsonl", call("toolu_2", "echo", "only in two"))
    with open_index(one) as a, open_index(two) as b:
        assert a.get("toolu_2") is None and b.get("toolu_1") is None
        assert [h.tool_use_id for h in a.search("only", limit=5)] == ["toolu_1"]
        assert [h.tool_use_id for h in b.search("only", limit=5)] == ["toolu_2"]
    assert index_path(one) != index_path(two)


def test_xz_transcripts_are_read_whole(tmp_path: Path) -> None:
    plain = session(tmp_path)
    xz = tmp_path / "proj" / "xz-session.jsonl.xz"
    xz.write_bytes(lzma.compress(plain.read_bytes().rstrip(b"\n")))  # no final newline
    with open_index(xz) as ix:
        c = ix.get("toolu_C3")  # the last line, without its newline
        assert c and c.content.startswith("caf")  # type: ignore[union-attr]
    xz.write_bytes(b"not xz")
    with pytest.raises(TranscriptError, match=r"not a valid \.xz"):
        open_index(xz)


def test_malformed_lines_are_skipped_like_claude_code(tmp_path: Path) -> None:
    path = session(tmp_path)
    append(path, b'{"type": "user", "message": {"content": [{"type": "tool_result", broken\n')
    append(path, call("toolu_F6", "echo", "after the damage"))
    with open_index(path) as ix:
        f = ix.get("toolu_F6")
        assert f and f.content == "after the damage" and ix.warnings


def test_missing_or_folder_transcript_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="no such file"):
        open_index(tmp_path / "gone.jsonl")
    with pytest.raises(TranscriptError, match="folder"):
        open_index(tmp_path)


def test_persisted_output_and_subagents(tmp_path: Path) -> None:
    """Claude Code's tool-results file is returned as full_output and searched; sub-agent
    transcripts in <session>/subagents are part of the session."""
    tid = "toolu_P7"
    folder = tmp_path / "proj"
    preview = (
        "<persisted-output>\nOutput too large (120.5KB). Full output saved to: "
        f"/Users/x/.claude/projects/proj/sess/tool-results/{tid}.txt\n\nPreview (first 2KB):\n"
        "line 1\n...\n</persisted-output>"
    )
    path = write(
        folder / "sess.jsonl",
        use_line(tid, "Bash", {"command": "cat big.log"}),
        result_line(tid, preview),
    )
    full = "line 1\n" + "filler\n" * 5000 + "the zanzibar needle\n"
    write(folder / "sess" / "tool-results" / f"{tid}.txt", full.encode())
    write(
        folder / "sess" / "subagents" / "agent-1.jsonl",
        call("toolu_S8", "grep -r needle", "found by the sub-agent"),
    )
    with open_index(path) as ix:
        p = ix.get(tid)
        assert p and p.content == preview and p.full_output == full
        assert p.persisted_path and p.persisted_path.endswith(f"{tid}.txt")
        assert ix.search("zanzibar needle", limit=3)[0].tool_use_id == tid
        s = ix.get("toolu_S8")
        assert s and s.sidechain and s.content == "found by the sub-agent"
        # a sub-agent file written later is picked up too
        write(folder / "sess" / "subagents" / "agent-2.jsonl", call("toolu_S9", "ls", "late"))
        s9 = ix.get("toolu_S9")
        assert s9 and s9.content == "late"


def test_get_rechecks_the_line_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the recorded place no longer holds the call (a rewrite the checks missed), get
    rebuilds instead of answering with another call's bytes."""
    path = session(tmp_path)
    with open_index(path) as ix:
        ix.db.execute("UPDATE calls SET res_off = res_off + 1 WHERE tool_use_id='toolu_A1'")
        a = ix.get("toolu_A1")
    assert a and a.content.startswith("FAILED")  # type: ignore[union-attr]


@pytest.mark.skipif(bool(missing()) and not os.environ.get("CI"), reason=skip_reason())
@pytest.mark.parametrize(
    "path",
    [SPOTTER / "subagent.jsonl", PUBLIC / "oneryalcin__fasthooks__sample_main_transcript.jsonl.xz"],
    ids=lambda p: p.name,
)
def test_real_sessions_byte_exact(path: Path) -> None:
    """Every tool result of two real sessions comes back as the transcript holds it."""
    data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
    expected: dict[str, object] = {}
    for raw in data.splitlines():
        rec = parse_line(raw)
        if rec is None or rec.get("type") != "user":
            continue
        for b in recall_index.extract.blocks_of(rec):
            if b.get("type") == "tool_result":
                expected.setdefault(str(b["tool_use_id"]), b.get("content"))
    assert len(expected) >= 5
    with open_index(path) as ix:
        for tid, content in expected.items():
            r = ix.get(tid)
            assert r is not None and json.dumps(r.content) == json.dumps(content), tid


def test_a_lone_surrogate_comes_back_as_json_holds_it(tmp_path: Path) -> None:
    """JavaScript writes lone surrogates as \\ud800 escapes; json (not orjson) reads them."""
    path = write(
        tmp_path / "p" / "s.jsonl",
        use_line("toolu_L1", "Bash", {"command": "cat odd"}),
        b'{"type": "user", "message": {"content": [{"type": "tool_result", '
        b'"tool_use_id": "toolu_L1", "content": "half \\ud800 surrogate"}]}}\n',
    )
    with open_index(path) as ix:
        r = ix.get("toolu_L1")
        assert r and r.content == "half \ud800 surrogate"
        assert ix.search("surrogate", limit=1)[0].tool_use_id == "toolu_L1"


def test_recall_s_own_calls_are_never_hits(tmp_path: Path) -> None:
    """The model's search call is in the transcript before it runs, its query in its input."""
    path = session(tmp_path)
    append(path, use_line("toolu_S1", "mcp__ctxpatch__search", {"query": "test_expired_token"}))
    with open_index(path) as ix:
        assert [h.tool_use_id for h in ix.search("test_expired_token", limit=5)] == ["toolu_A1"]
        own = ix.get("toolu_S1")
        assert own and own.tool == "mcp__ctxpatch__search"


def test_another_sessions_index_in_this_ones_place_is_never_read(tmp_path: Path) -> None:
    """An index file that is another transcript's (copied, restored from a backup, a hash
    collision) is rebuilt from this transcript: never the other session's calls."""
    one = write(tmp_path / "p" / "one.jsonl", call("toolu_1", "echo", "only in one"))
    two = write(tmp_path / "p" / "two.jsonl", call("toolu_2", "echo", "only in two"))
    open_index(one).close()
    open_index(two).close()
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{index_path(one)}{suffix}")
        dst = Path(f"{index_path(two)}{suffix}")
        if src.exists():
            dst.write_bytes(src.read_bytes())
        elif dst.exists():
            dst.unlink()
    with open_index(two) as ix:
        assert ix.get("toolu_1") is None
        assert [h.tool_use_id for h in ix.search("only", limit=5)] == ["toolu_2"]
        got = ix.get("toolu_2")
        assert got is not None and got.content == "only in two"
