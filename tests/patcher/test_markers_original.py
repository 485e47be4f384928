"""``markers.Original``: a patched file's original as byte ranges, hashed and compared piece by
piece, and ``fsio.holds``: a file compared with those ranges chunk by chunk (``check`` neither
joins 13.7 MB nor reads the backup into memory). The piecewise answers must be exactly those of
the joined bytes: any byte off, anywhere, is a different file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from patcher import backup, fsio, markers, ops, snippet, versions
from patcher.backup import BackupStatus
from patcher.markers import Original, State


def _joined(data: bytes, ranges: tuple[tuple[int, int], ...]) -> bytes:
    """The reference: plain slices of ``data`` concatenated (no memoryview, no Original)."""
    out = b""
    for a, b in ranges:
        out += data[a:b]
    return out


@st.composite
def originals(draw: st.DrawFn) -> Original:
    """Bytes and increasing, non-overlapping ranges of them (empty ranges included), the way
    ``markers`` keeps what lies between marked edits."""
    data = draw(st.binary(max_size=300))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    pairs = list(zip(bounds[::2], bounds[1::2], strict=False))
    return Original(data, tuple(pairs))


def _mutations(target: bytes) -> list[bytes]:
    """``target`` itself, then every way to be one byte off: each byte changed, each byte
    dropped, a byte added at each place."""
    out = [target]
    for i in range(len(target)):
        out.append(target[:i] + bytes([target[i] ^ 0x01]) + target[i + 1 :])
        out.append(target[:i] + target[i + 1 :])
    for i in range(len(target) + 1):
        out.append(target[:i] + b"\x00" + target[i:])
    return out


@given(originals())
def test_pieces_hash_and_compare_as_the_joined_bytes(original: Original) -> None:
    joined = _joined(original.data, original.ranges)
    assert original.join() == joined
    assert original.size() == len(joined)
    assert original.sha256() == hashlib.sha256(joined).hexdigest()
    for other in _mutations(joined):
        assert original.same_as(other) is (other == joined)


@given(originals(), st.binary(max_size=300))
def test_any_other_bytes_compare_as_the_joined_bytes(original: Original, other: bytes) -> None:
    joined = _joined(original.data, original.ranges)
    assert original.same_as(other) is (other == joined)
    assert original.same_as(joined[: len(other)] + other[len(joined) :]) is (
        len(other) == len(joined)
    )


@given(originals(), st.integers(1, 7), st.data())
def test_a_file_holds_the_ranges_exactly_when_its_bytes_are_the_joined_bytes(
    tmp_path_factory: pytest.TempPathFactory, original: Original, chunk: int, data: st.DataObject
) -> None:
    """Small chunks, so chunk edges fall everywhere against the piece edges."""
    joined = _joined(original.data, original.ranges)
    other = data.draw(st.sampled_from(_mutations(joined)) | st.binary(max_size=40))
    path = tmp_path_factory.mktemp("holds") / "cli.js.backup"
    path.write_bytes(other)
    assert fsio.holds(path, original.data, original.ranges, chunk=chunk) is (other == joined)
    assert original.head(chunk) == joined[:chunk]


def test_holds_never_blocks_or_raises_on_what_is_not_a_regular_file(tmp_path: Path) -> None:
    data = b"abc"
    assert not fsio.holds(tmp_path / "missing", data, ((0, 3),))
    assert not fsio.holds(tmp_path, data, ((0, 3),))  # a folder
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert not fsio.holds(fifo, data, ((0, 3),))  # no writer: a blocking open would hang
    (tmp_path / "f").write_bytes(data)
    assert fsio.holds(tmp_path / "f", data, ((0, 3),))
    (tmp_path / "f").chmod(0)
    try:
        if os.geteuid() != 0:
            assert not fsio.holds(tmp_path / "f", data, ((0, 3),))
    finally:
        (tmp_path / "f").chmod(0o644)


@pytest.mark.parametrize("head", [b"// Version: 2.1.112\n", b"// no version line\n"])
def test_a_proven_copy_gets_the_info_classify_gives_it(head: bytes) -> None:
    """With and without the ``// Version:`` line in the first 4 KiB (then the version comes
    from ``README_URL:…,VERSION:`` further on, as ``version_of`` reads it)."""
    data = b"#!/usr/bin/env node\n" + head + b"x" * 5000 + b'README_URL:"u",VERSION:"2.1.7"'
    original = Original(data, ((0, 20), (20, 21), (21, len(data))))
    sha = original.sha256()
    given = backup.classify(data, sha, "2.1.112", "0" * 64, original)
    assert backup.valid_copy(original, sha) == given
    assert given.status is BackupStatus.VALID and given.version == versions.version_of(data)


def test_whole_is_the_data_itself() -> None:
    data = b"#!/usr/bin/env node\nlet a=1;\n"
    whole = Original.whole(data)
    assert whole.join() == data and whole.same_as(data)
    assert not whole.same_as(data[:-1]) and not whole.same_as(data + b"\n")
    assert Original.whole(b"").same_as(b"") and not Original.whole(b"").same_as(b"x")


@pytest.fixture
def patched(fixture_copy) -> tuple[Path, bytes]:
    cli: Path = fixture_copy("rq-2.1.112.js")
    original = cli.read_bytes()
    assert ops.apply_file(cli, node_check=False).state == "PATCHED"
    return cli, original


def test_a_patched_files_original_is_the_backup_byte_for_byte(patched) -> None:
    cli, original = patched
    marks = markers.read(cli.read_bytes(), snippet.sha(), snippet.clear_sha())
    assert marks.state is State.PATCHED and marks.unpatched is not None
    assert len(marks.unpatched.ranges) > 2  # head block and wraps removed: several pieces
    assert marks.unpatched.same_as(original) and marks.original == original
    assert marks.unpatched.sha256() == hashlib.sha256(original).hexdigest()


def test_check_finds_a_backup_one_byte_off_at_every_piece_edge(patched) -> None:
    """Where the pieces meet is where a piecewise comparison could go wrong: change the backup
    one byte at each edge (and its first and last byte); check must never call it valid."""
    cli, original = patched
    marks = markers.read(cli.read_bytes(), snippet.sha(), snippet.clear_sha())
    assert marks.unpatched is not None
    edges = {0, len(original) - 1}
    at = 0
    for a, b in marks.unpatched.ranges:
        at += b - a
        edges |= {max(at - 1, 0), min(at, len(original) - 1)}
    bpath = backup.path_for(cli)
    assert ops.check_file(cli).backup["status"] == BackupStatus.VALID
    for i in sorted(edges):
        bpath.write_bytes(original[:i] + bytes([original[i] ^ 0x20]) + original[i + 1 :])
        r = ops.check_file(cli)
        assert (r.state, r.backup["status"]) == ("PATCHED", BackupStatus.MISMATCH), i
        bpath.write_bytes(original[:i] + original[i + 1 :])
        assert ops.check_file(cli).backup["status"] == BackupStatus.MISMATCH, i
    bpath.write_bytes(original)
    assert ops.check_file(cli).backup["status"] == BackupStatus.VALID


def _scan_by_find(data: bytes) -> dict[bytes, list[int]]:
    """The reference: every marker found where a bytes.find loop (overlaps allowed) sees it."""
    found: dict[bytes, list[int]] = {m: [] for m in markers._ALL}
    for m in markers._ALL:
        hit = data.find(m)
        while hit >= 0:
            found[m].append(hit)
            hit = data.find(m, hit + 1)
    return found


_PIECES = [
    *markers._ALL,
    markers.MARK,
    markers.MARK[:-1],
    b"/*",
    b"/*ctxpatch",
    b"*/",
    b"ctxpatch:",
    b"a",
    b"\n",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_the_one_pass_scan_finds_every_marker_a_find_loop_finds(parts: list[bytes]) -> None:
    data = b"".join(parts)
    assert markers._scan(data) == _scan_by_find(data)
