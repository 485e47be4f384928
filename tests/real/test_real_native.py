"""Real native builds (linux-x64 platform packages, 230-380 MB), read in pure Python.

Fetched with ``npm pack`` into the cache, which keeps their tarballs (at most 3); the executable
is unpacked once per test session into a scratch folder (tests/native_builds.py). Nothing of
them is committed.
"""

from __future__ import annotations

import pytest

from patcher.native.app import read_app
from patcher.native.reader import NativeBinary

from .conftest import binary

pytestmark = pytest.mark.real

# What each build holds (measured on the real packages; api-2026.md "Native binaries")
EXPECT = {
    "2.1.113": ("single", 5, 12_900_000),
    "2.1.217": ("single", 8, 20_000_000),
    "2.1.330": ("split", 3_700, 60_000_000),
}


@pytest.mark.parametrize("version", sorted(EXPECT))
def test_real_native_js(version: str) -> None:
    layout, min_modules, min_js = EXPECT[version]
    with NativeBinary(binary(version)) as nb:
        assert nb.location.how == "ELF section .bun"
        assert nb.graph.record_size == 52
        assert len(nb.entries) >= min_modules
        app = read_app(nb)
        compressed = [e for e in nb.entries if e.compressed]
        if compressed:  # every zstd entry inflates, bounded
            assert all(len(nb.read(e)) > e.size for e in compressed)
    assert app.layout == layout
    assert app.version == version
    assert app.size >= min_js
    head = app.sources[0].data[:64]
    if layout == "single":
        assert head.startswith(b"// @bun @bytecode @bun-cjs\n(function(exports, require, module")
        assert len(app.sources) == 1
    else:
        assert head.startswith(b"// @bun @bytecode\n")
        assert app.sources[0].name == "/$bunfs/root/cli"
        assert len(app.sources) > 3_000
        assert compressed, "2.1.243+ ships zstd-compressed documents"
        assert all(b"// Version: " + version.encode() in s.data[:4096] for s in app.sources)


# What inspect reads in each build (from the binaries themselves; engine/profiles.py records it)
LEVELS = {
    "autocompact_offset": 13000,
    "warning_offset": 20000,
    "blocking_offset": 3000,
    "reserve_cap": 20000,
    "precompute_buffer_fraction": 0.2,
}
INSPECT = {
    "2.1.113": ("cli.js", {}),
    "2.1.217": ("levels", {"proactive_needs_configured_window": True}),
    "2.1.330": (
        "levels",
        {"proactive_needs_configured_window": True, "count_adds_server_cleared": True},
    ),
}


@pytest.mark.parametrize("version", sorted(INSPECT))
def test_real_native_inspect_no_drift(version: str) -> None:
    from patcher.native.inspect import inspect_path

    reader, features = INSPECT[version]
    rep = inspect_path(binary(version).parent)  # the platform package folder
    assert (rep.version, rep.reader) == (version, reader)
    assert rep.profile is not None, rep.profile_problem
    assert rep.drift == [], rep.drift
    assert rep.warnings == ()
    if reader == "levels":
        consts = {k: v["value"] for k, v in rep.report["constants"].items()}
        assert consts == LEVELS
        for key, value in features.items():
            assert rep.report["features"][key] is value, key
        assert rep.report["unresolved"] == []
        assert len(rep.compared) == 9
    else:
        assert len(rep.compared) >= 20
