"""A cli.js patched by ctxpatch 0.1.0 (text prune only) reads OUTDATED and ``apply`` upgrades it.

The 0.1.0 file is rebuilt from the frozen 0.1.0 snippet (``tests/patcher/data/
text_prune-0.1.0.js``) with 0.1.0's header (``v=0.1.0``, no ``clear=``), and proven to be what
the 0.1.0 code itself wrote by the sha256 of its real output (recorded once from commit
``2177146``): no git history needed, so a shallow clone runs it too.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, SNIPPET_010_SHA256, snippet_010

from ctxpatch import __version__
from patcher import markers, ops, plan, snippet
from patcher.versions import version_of

# sha256 of what ctxpatch 0.1.0 (commit 2177146) wrote into each fixture
WRITTEN_BY_010 = {
    "rq-2.1.112.js": "645018674065b585ea3a4f43064112a5d7d607dc44b5b0806b4e44464f15e008",
    "s1-2.0.76.js": "64a31a82f1c66921d1ba143deae25ce6aa8e774b03256eeb8ff689c06fdeb471",
}


def patched_by_010(name: str) -> bytes:
    """fixtures/cli_js/<name> as ctxpatch 0.1.0 patched it, byte for byte."""
    original = (FIXTURES / name).read_bytes()
    new = plan.plan_patch(original, version_of(original), snippet_010()).new
    head = f"v={__version__} ".encode()
    assert new.count(head) == 1 and new.count(b" clear=none*/") == 1
    v010 = new.replace(head, b"v=0.1.0 ").replace(b" clear=none*/", b"*/")  # 0.1.0's header
    assert markers.sha256(v010) == WRITTEN_BY_010[name], "not what ctxpatch 0.1.0 wrote"
    return v010


def test_the_frozen_snippet_is_0_1_0s() -> None:
    assert markers.sha256(snippet_010()) == SNIPPET_010_SHA256


@pytest.mark.parametrize("name", ["rq-2.1.112.js", "s1-2.0.76.js"])
def test_a_010_patched_file_is_outdated_and_apply_upgrades_it(name: str, fixture_copy) -> None:
    cli = fixture_copy(name)
    original = cli.read_bytes()
    shutil.copyfile(cli, cli.with_name("cli.js.backup"))  # 0.1.0 wrote the backup too
    cli.write_bytes(patched_by_010(name))
    v010 = cli.read_bytes()
    assert b"v=0.1.0 " in v010 and b" clear=" not in v010  # what 0.1.0 writes
    assert markers.CLEAR_BEGIN not in v010

    checked = ops.check_file(cli)
    assert (checked.state, checked.exit_code) == ("OUTDATED", 1)
    assert "without server-side clearing" in checked.reason

    r = ops.apply_file(cli)
    assert (r.action, r.state) == ("repatched", "PATCHED")
    upgraded = cli.read_bytes()
    assert upgraded.count(markers.BEGIN) == 1 and snippet.source() in upgraded
    expect_clearing = name.startswith("rq-")
    assert (markers.CLEAR_BEGIN in upgraded) is expect_clearing
    assert r.clearing == ("create/cm" if expect_clearing else "none")
    assert markers.strip(upgraded) == original  # the proven original survives the upgrade
    assert ops.check_file(cli).state == "PATCHED"
    assert ops.apply_file(cli).action == "already-patched" and cli.read_bytes() == upgraded
    assert ops.revert_file(cli).action == "reverted" and cli.read_bytes() == original
