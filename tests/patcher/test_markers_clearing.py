"""The clearing marker pair read back by ``markers.read`` (no parse): every way it can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from patcher import markers, ops, snippet
from patcher.markers import State


@pytest.fixture
def patched(fixture_copy) -> tuple[bytes, bytes]:
    cli: Path = fixture_copy("rq-2.1.112.js")
    original = cli.read_bytes()
    assert ops.apply_file(cli, node_check=False).clearing == "create/cm"
    return original, cli.read_bytes()


def _read(data: bytes, clear_sha: str | None = None) -> markers.Marks:
    return markers.read(data, snippet.sha(), clear_sha or snippet.clear_sha())


def test_a_patched_file_proves_its_original_with_both_pairs(patched) -> None:
    original, data = patched
    marks = _read(data)
    assert marks.state is State.PATCHED and marks.original == original
    assert marks.header is not None and marks.header.clear == "create/cm"
    assert marks.header.clear_snippet_sha == snippet.clear_sha()
    assert data.count(markers.WATCH_OPEN) == 1 and data.count(markers.CLEAR_OPEN) == 1


def test_an_older_clearing_snippet_reads_outdated(patched) -> None:
    _, data = patched
    assert _read(data, "0" * 64).state is State.OUTDATED
    assert markers.read(data, snippet.sha()).state is State.PATCHED  # sha not compared


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (b'var BETA = "context', b'var BETA  = "context', "clearing function was edited"),
        (markers.WATCH_OPEN, b"", "clearing marker counts"),
        (markers.CLEAR_CLOSE, b")", "clearing marker counts"),
        (b" clear=create/cm*/", b" clear=none*/", "do not match clear=none"),
        (markers.CLEAR_END, b"/*x*/\n", "clearing marker counts"),
    ],
)
def test_damage_to_the_clearing_pair_reads_foreign(patched, old, new, why) -> None:
    _, data = patched
    assert data.count(old) == 1
    marks = _read(data.replace(old, new, 1))
    assert marks.state is State.FOREIGN and marks.foreign_kind == "damaged"
    assert why in marks.reason


def test_the_clearing_function_name_without_markers_is_a_name_clash(fixture_copy) -> None:
    data = (Path(fixture_copy("rq-1.0.60.js"))).read_bytes()
    data += b"function _ctxpatchContextClearing(x){return x}\n"
    marks = _read(data)
    assert (marks.state, marks.foreign_kind) == (State.FOREIGN, "name-clash")
