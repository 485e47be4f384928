"""``simulate`` reads a transcript compressed with xz as it is (the shared public sessions are
stored so), and says so where a user looks: ``--help`` and the README."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

from conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "spotter-session.jsonl"


def test_an_xz_transcript_simulates_like_the_plain_one(tmp_path: Path) -> None:
    packed = tmp_path / "session.jsonl.xz"
    packed.write_bytes(lzma.compress(EXAMPLE.read_bytes()))
    docs = []
    for path in (EXAMPLE, packed):
        code, out, err = run_cli("simulate", str(path), "--json")
        assert code == 0, err
        docs.append(json.loads(out)["results"][0]["summary"])
    assert docs[0] == docs[1] and docs[0]["auto_compactions"] == 1


def test_xz_input_is_documented() -> None:
    code, out, _ = run_cli("simulate", "--help")
    assert code == 0 and ".jsonl.xz" in " ".join(out.split())
    assert ".jsonl.xz" in (ROOT / "README.md").read_text(encoding="utf-8")
