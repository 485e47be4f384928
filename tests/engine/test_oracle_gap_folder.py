"""bench/oracle_gap.py --folder: the check of the defaults against the hindsight optimum on
sessions the repository has never seen (any folder of transcripts, read in place) replays a
session exactly as the shared run does, skips what it cannot read with a line saying why, and
refuses a folder with nothing to measure."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import ROOT
from shared_data import PUBLIC

from .conftest import need_shared

sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))
import oracle_gap
import real_sessions

SESSION = "entireio__cli__ca8cc13b-d3df-4615-8f3f-f48a96b1a6f9.jsonl.xz"  # the smallest with one


def _row(out: str, name: str) -> list[str]:
    """The figures of ``name``'s row (its name column left out)."""
    rows = [line.split()[1:] for line in out.splitlines() if line.startswith(name)]
    assert len(rows) == 1, out
    return rows[0]


def test_a_folder_session_replays_as_the_shared_one(tmp_path, capsys) -> None:
    src = need_shared(PUBLIC / SESSION)
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    shutil.copy(src, folder / "ca8cc13b-d3df-4615-8f3f-f48a96b1a6f9.jsonl.xz")
    (folder / "bad.jsonl").write_bytes(b"\xff\xfe not a transcript\n")
    (folder / "none.jsonl").write_text("")  # no compaction: not measured
    (folder / "notes.txt").write_text("not a session")

    assert oracle_gap.main(["--only", "ca8cc13b"]) == 0
    shared = capsys.readouterr().out
    assert oracle_gap.main(["--folder", str(tmp_path)]) == 0
    got = capsys.readouterr()
    assert _row(got.out, "ca8cc13b-d3df") == _row(shared, "entireio/cli/ca8cc13b")
    assert "1 sessions, 1 real auto-compactions" in got.out
    skipped = [line for line in got.err.splitlines() if line.startswith("skip")]
    assert len(skipped) == 1 and skipped[0].startswith("skip bad:"), got.err  # with why
    assert [p.name for p in real_sessions.paths(tmp_path)] == [
        "bad.jsonl",
        "ca8cc13b-d3df-4615-8f3f-f48a96b1a6f9.jsonl.xz",
        "none.jsonl",
    ]


def test_a_folder_without_a_compaction_is_refused(tmp_path, capsys) -> None:
    (tmp_path / "none.jsonl").write_text("")
    assert oracle_gap.main(["--folder", str(tmp_path)]) == 2
    assert "no session with a real auto-compaction" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        oracle_gap.main(["--folder", str(tmp_path / "absent")])
    assert exc.value.code == 2
    assert "not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        oracle_gap.main(["--folder", str(tmp_path), "--env", "CLAUDE_CTX_CLEAR_KEEP"])
    assert "NAME=VALUE" in capsys.readouterr().err
