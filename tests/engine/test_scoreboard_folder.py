"""scripts/public_scoreboard.py --folder: the check on sessions this repository has never seen
reads each auto-compaction from the file itself, as the shared manifest records it."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT
from shared_data import PUBLIC, public_manifest

from engine.transcript import build_transcript, load_transcript, parse_records

from .conftest import need_shared

sys.path.insert(0, str(ROOT / "scripts"))
import public_scoreboard

MANIFEST = public_manifest()


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"][:40] for e in MANIFEST])
def test_the_boundaries_read_from_the_file_are_the_manifests(entry: dict) -> None:
    path = need_shared(PUBLIC / entry["file"])
    want = {
        b["line"]: b["preTokens"]
        for b in entry["boundaries"]
        if b["trigger"] == "auto" and b["usable_for_check"]
    }
    assert public_scoreboard.usable_boundaries(load_transcript(path).records) == want


def _records(path) -> tuple[dict, ...]:
    """The records the engine reads from ``path`` (a malformed line an empty record)."""
    return build_transcript(parse_records(path.read_text().splitlines(), path.name, [])).records


def _line(**rec: object) -> str:
    return json.dumps(rec) + "\n"


def _boundary(uuid: str, pre: int, trigger: str = "auto") -> str:
    meta = {"trigger": trigger, "preTokens": pre}
    return _line(type="system", subtype="compact_boundary", uuid=uuid, compactMetadata=meta)


def test_a_file_that_starts_mid_session_loses_only_its_first_epoch(tmp_path) -> None:
    whole = tmp_path / "whole.jsonl"
    whole.write_text(
        _line(type="user", uuid="a", parentUuid=None)
        + _boundary("b1", 155_000)
        + _line(type="user", uuid="c", parentUuid="b1")
        + _boundary("b2", 156_000, "manual")
        + _line(type="user", uuid="e", parentUuid="b2")
        + _boundary("b3", 157_000)
    )
    assert public_scoreboard.usable_boundaries(_records(whole)) == {2: 155_000, 6: 157_000}
    cut = tmp_path / "cut.jsonl"  # the first record's parent is no line of the file
    cut.write_text(
        _line(type="user", uuid="a", parentUuid="gone")
        + "not json\n"
        + _boundary("b1", 155_000)
        + _line(type="user", uuid="c", parentUuid="b1")
        + _boundary("b3", 157_000)
    )
    assert public_scoreboard.usable_boundaries(_records(cut)) == {5: 157_000}
    resumed = tmp_path / "resumed.jsonl"  # starts at a boundary: its history is in another file
    resumed.write_text(
        _line(type="queue-operation")
        + _boundary("b1", 998_659)
        + _line(type="user", uuid="c", parentUuid="b1")
        + _line(type="assistant", uuid="d", parentUuid="c")
        + _boundary("b2", 999_000)
    )
    assert public_scoreboard.usable_boundaries(_records(resumed)) == {5: 999_000}


def test_an_empty_folder_is_refused_with_exit_2(tmp_path, capsys) -> None:
    assert public_scoreboard.main(["--folder", str(tmp_path)]) == 2
    assert "no .jsonl or .jsonl.xz file" in capsys.readouterr().err


def test_a_folder_of_sessions_is_scored_as_the_manifest_scores_them(tmp_path, capsys) -> None:
    name = "entireio__cli__0276a600-2f22-4d2b-844c-3feb9c5aa108.jsonl.xz"
    entry = next(e for e in MANIFEST if e["file"] == name)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / name).symlink_to(need_shared(PUBLIC / name))  # read in place
    assert public_scoreboard.main(["--folder", str(tmp_path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    row = public_scoreboard.score(entry)
    assert row["usable"] == row["hit"] == 2
    assert first.startswith("2 of 2 usable real auto-compactions predicted at the same line")
    assert "0 predicted where none happened" in first


def test_a_file_without_a_version_is_listed_as_refused_not_fatal(tmp_path, capsys) -> None:
    (tmp_path / "old.jsonl").write_text(
        _line(type="user", uuid="a", parentUuid=None, message={"role": "user", "content": "hi"})
        + _line(
            type="assistant",
            uuid="b",
            parentUuid="a",
            message={
                "id": "m",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "text", "text": "ok"}],
                "usage": {"input_tokens": 10, "output_tokens": 2},
            },
        )
    )
    assert public_scoreboard.main(["--folder", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 files refused (1 sessions)" in out.splitlines()[0]
    assert "refused: no Claude Code version in the file" in out
