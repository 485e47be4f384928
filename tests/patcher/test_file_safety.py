"""Files that are not what a plain install leaves: a byte-order mark, a backup that is not a
regular file or belongs to root, temp files of a killed run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_node

from patcher import markers, ops, selfcheck

BOM = b"\xef\xbb\xbf"


def _with_bom(cli: Path, *, shebang: bool) -> bytes:
    data = cli.read_bytes()
    if not shebang:
        data = data.split(b"\n", 1)[1]
    cli.write_bytes(BOM + data)
    return BOM + data


@pytest.mark.parametrize("shebang", [True, False], ids=["bom+shebang", "bom"])
@pytest.mark.parametrize("name", ["s1-2.0.76.js", "s6-2.1.112.js"])
def test_byte_order_mark_stays_first(name: str, shebang: bool, fixture_copy, node) -> None:
    cli = fixture_copy(name)
    original = _with_bom(cli, shebang=shebang)
    version = name.split("-", 1)[1].removesuffix(".js")
    assert run_node(node, [str(cli), "--version"]).returncode == 0  # node runs the original

    r = ops.apply_file(cli)  # with the whole-file node check
    patched = cli.read_bytes()
    assert r.state == "PATCHED" and patched.startswith(BOM)
    head = patched[len(BOM) :]
    if shebang:
        assert head.startswith(b"#!") and head.split(b"\n", 1)[1].startswith(markers.BEGIN)
    else:
        assert head.startswith(markers.BEGIN)
    assert selfcheck.node_check(patched, node).ok
    run = run_node(node, [str(cli), "--version"])
    assert run.returncode == 0 and version.encode() in run.stdout, run.stderr
    assert ops.check_file(cli).state == "PATCHED"

    assert ops.revert_file(cli).action == "reverted"
    assert cli.read_bytes() == original


def test_byte_order_mark_without_node_check_is_still_valid(fixture_copy, node) -> None:
    # the reported defect: --no-node-check wrote a SyntaxError that `check` called PATCHED
    cli = fixture_copy("s3-2.1.50.js")
    _with_bom(cli, shebang=True)
    ops.apply_file(cli, node_check=False)
    run = run_node(node, [str(cli), "--version"])
    assert run.returncode == 0, run.stderr
