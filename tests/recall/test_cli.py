"""``ctxpatch recall search|get``: the one envelope, exact content, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from transcript_lines import call, result_line, use_line, write

BLOCKS = [{"type": "text", "text": "pane one"}, {"type": "text", "text": "pane two"}]


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    return write(
        tmp_path / "proj" / "sess.jsonl",
        call(
            "toolu_A",
            "pytest -q tests/test_cart.py",
            "E   AssertionError: 3 != 4 in test_cart_total",
        ),
        use_line("toolu_B", "mcp__tmux__capture", {"pane": "%1"}),
        result_line("toolu_B", BLOCKS),
    )


def test_get_json_gives_the_content_exactly(transcript: Path) -> None:
    code, out, _ = run_cli("recall", "get", "toolu_B", "--transcript", str(transcript), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["exit_code"] == 0 and doc["ctxpatch"]
    assert doc["transcript"] == str(transcript)
    assert (
        doc["results"][0]["content"] == BLOCKS and doc["results"][0]["tool"] == "mcp__tmux__capture"
    )
    code, out, _ = run_cli("recall", "get", "toolu_A", "-t", str(transcript), "--json")
    assert (
        json.loads(out)["results"][0]["content"] == "E   AssertionError: 3 != 4 in test_cart_total"
    )


def test_get_text_prints_the_output(transcript: Path) -> None:
    code, out, _ = run_cli("recall", "get", "toolu_B", "-t", str(transcript))
    assert (
        code == 0 and "pane one\npane two" in out and out.startswith("toolu_B  mcp__tmux__capture")
    )


def test_search_json_ranks_the_distinctive_phrase_first(transcript: Path) -> None:
    code, out, _ = run_cli(
        "recall", "search", "3 != 4 test_cart_total", "-t", str(transcript), "--json"
    )
    doc = json.loads(out)
    assert code == 0 and doc["query"] == "3 != 4 test_cart_total"
    hit = doc["results"][0]
    assert (
        hit["tool_use_id"] == "toolu_A" and hit["summary"] == "Bash: pytest -q tests/test_cart.py"
    )
    assert "AssertionError" in hit["snippet"] and hit["line"] == 2
    code, out, _ = run_cli("recall", "search", "pytest", "-t", str(transcript), "--tool", "Read")
    assert code == 0 and "no match" in out


def test_the_current_session_is_the_default(
    transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXPATCH_RECALL_TRANSCRIPT", str(transcript))
    code, out, _ = run_cli("recall", "get", "toolu_A", "--json")
    assert code == 0 and json.loads(out)["results"][0]["tool_use_id"] == "toolu_A"


@pytest.mark.parametrize(
    "args,error,what",
    [
        (["get", "toolu_nope"], "unknown_tool_use", "no tool call toolu_nope"),
        (["search", "   "], "usage", "empty query"),
    ],
)
def test_bad_requests(transcript: Path, args: list[str], error: str, what: str) -> None:
    code, out, _ = run_cli("recall", *args, "-t", str(transcript), "--json")
    doc = json.loads(out)
    assert doc["error"]["error"] == error and what in doc["error"]["what"] and doc["error"]["hint"]
    assert code == doc["exit_code"] == doc["error"]["exit_code"]


def test_bad_transcripts_are_refused_without_traceback(tmp_path: Path) -> None:
    xz = tmp_path / "cut.jsonl.xz"
    xz.write_bytes(b"\xfd7zXZ\x00 truncated")
    (tmp_path / "notes.jsonl").write_text("just some notes\nnot json at all\n")
    (tmp_path / "blob.jsonl").write_bytes(b"\x7fELF\x00\x00\x01\n" * 10)
    for path, why in (
        (tmp_path / "missing.jsonl", "no such file"),
        (xz, "not a valid .xz"),
        (tmp_path, "folder"),
        (tmp_path / "notes.jsonl", "is a JSON object"),
        (tmp_path / "blob.jsonl", "is a JSON object"),  # the CLI refuses it before the index
    ):
        code, out, err = run_cli("recall", "search", "x", "-t", str(path), "--json")
        doc = json.loads(out)
        assert code == 3 and doc["error"]["error"] == "bad_transcript", path
        assert why in doc["error"]["why"] and "Traceback" not in out + err


def test_no_current_session_is_a_clear_refusal() -> None:
    code, _, err = run_cli("recall", "search", "anything")
    assert code == 3 and "no current Claude Code session" in err and "--transcript" in err
