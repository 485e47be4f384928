"""Real published cli.js files, one per call-site shape, fetched with `npm pack` into the cache.

apply -> check -> apply again -> revert must round-trip byte for byte and pass node's ESM check.
Never committed: the files live in $CTXPATCH_CACHE (default ~/.cache/ctxpatch).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import IN_CI, need

from ctxpatch.errors import CtxpatchError, Unsupported
from patcher import backup, markers, npmcache, ops, selfcheck, snippet

pytestmark = pytest.mark.real

SHAPE = {  # shared/research/versions.md §3-4
    ("cc", "1.0.60"): "S0",
    ("cc", "1.0.128"): "S1",
    ("cc", "2.0.76"): "S1",
    ("sdk", "0.1.76"): "S1",
    ("cc", "2.1.7"): "S1'",
    ("sdk", "0.2.7"): "S1'",
    ("cc", "2.1.30"): "S1''",
    ("cc", "2.1.50"): "S3",
    ("cc", "2.1.61"): "S4",
    ("cc", "2.1.68"): "S5",
    ("cc", "2.1.112"): "S6",
    ("sdk", "0.2.112"): "S6",
}
# The request builder of the query loop (patcher/clearsite.py): the request calls that send it
# and whether Claude Code already puts context_management in it.
CLEARING = {
    ("cc", "1.0.60"): "stream+create",
    ("cc", "1.0.128"): "stream+create/cm",
    ("cc", "2.0.76"): "stream/cm",
    ("sdk", "0.1.76"): "stream/cm",
    ("cc", "2.1.7"): "stream/cm",
    ("sdk", "0.2.7"): "stream/cm",
    ("cc", "2.1.30"): "create/cm",
    ("cc", "2.1.50"): "create/cm",
    ("cc", "2.1.61"): "create/cm",
    ("cc", "2.1.68"): "create/cm",
    ("cc", "2.1.112"): "create/cm",
    ("sdk", "0.2.112"): "create/cm",
}
assert set(CLEARING) == set(SHAPE)
SDK_BUNDLES = {"0.1.76": "2.0.76", "0.2.7": "2.1.7", "0.2.112": "2.1.112"}  # versions.md §1
REFUSED = {("cc", "1.0.50"): "has no micro-compaction step", ("sdk", "0.2.113"): "has no cli.js"}
assert set(SHAPE) | set(REFUSED) == set(npmcache.CI_SAMPLE)


def fetched(pkg: str, version: str) -> Path:
    need("npm", "real versions are downloaded with npm pack")
    try:
        return npmcache.package_dir(pkg, version)
    except CtxpatchError as e:
        if IN_CI:
            raise
        pytest.skip(f"cannot fetch {pkg}@{version}: {e.what}")


def install(pkg: str, version: str, tmp_path: Path) -> Path:
    src = fetched(pkg, version)
    dest = tmp_path / "package"
    dest.mkdir()
    shutil.copy2(src / "package.json", dest / "package.json")
    if (src / "cli.js").exists():
        shutil.copy2(src / "cli.js", dest / "cli.js")
    return dest


@pytest.mark.parametrize(("pkg", "version"), sorted(SHAPE), ids=lambda v: str(v))
def test_real_round_trip(pkg: str, version: str, tmp_path: Path, node: str) -> None:
    folder = install(pkg, version, tmp_path)
    cli = folder / "cli.js"
    original = cli.read_bytes()
    mode = cli.stat().st_mode

    before = ops.check_file(cli)
    assert (before.state, before.shape) == ("UNPATCHED", SHAPE[pkg, version])

    r = ops.apply_file(cli)  # includes the node ESM check of the whole patched file
    cc_version = version if pkg == "cc" else SDK_BUNDLES[version]
    assert (r.action, r.shape, r.version) == ("patched", SHAPE[pkg, version], cc_version)
    assert r.clearing == CLEARING[pkg, version]
    patched = cli.read_bytes()
    assert patched.count(markers.CLEAR_OPEN) == 1 and snippet.clear_source() in patched
    assert patched.count(markers.WATCH_OPEN) == patched.count(markers.WATCH_CLOSE) >= 1
    assert patched.startswith(original.split(b"\n", 1)[0] + b"\n")
    assert cli.stat().st_mode == mode
    assert selfcheck.node_check(patched, node).ok
    assert snippet.source() in patched
    assert backup.path_for(cli).read_bytes() == original

    checked = ops.check_file(cli)
    assert (checked.state, checked.clearing) == ("PATCHED", CLEARING[pkg, version])
    assert ops.apply_file(cli).action == "already-patched"
    assert cli.read_bytes() == patched

    backup.path_for(cli).unlink()  # revert must also work from the markers alone
    assert ops.revert_file(cli).action == "reverted"
    assert markers.sha256(cli.read_bytes()) == markers.sha256(original)


@pytest.mark.parametrize(("pkg", "version"), sorted(REFUSED), ids=lambda v: str(v))
def test_real_refusals(pkg: str, version: str, tmp_path: Path) -> None:
    folder = install(pkg, version, tmp_path)
    target = folder / "cli.js" if (folder / "cli.js").exists() else folder
    with pytest.raises(Unsupported, match=REFUSED[pkg, version]):
        ops.apply_file(target)
    assert sorted(p.name for p in folder.iterdir()) in (
        ["cli.js", "package.json"],
        ["package.json"],
    )


# Releases whose request generator a 16 KB parse window cuts into one node up to the window's end
# (the sweep found them: no builder found on 2.1.87-2.1.98, and the patched 2.1.107 failed our own
# verification); jsparse grows the window there.
@pytest.mark.parametrize("version", ["2.1.87", "2.1.107"])
def test_real_clearing_where_the_first_window_cuts_the_generator(
    version: str, tmp_path: Path
) -> None:
    folder = install("cc", version, tmp_path)
    cli = folder / "cli.js"
    original = cli.read_bytes()
    r = ops.apply_file(cli, node_check=False)
    assert (r.action, r.clearing) == ("patched", "create/cm")
    assert ops.check_file(cli).state == "PATCHED"
    assert ops.revert_file(cli).action == "reverted" and cli.read_bytes() == original
