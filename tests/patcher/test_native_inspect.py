"""inspect on native builds: finding the binary in package folders, the levels-era extractor
(anchors across chunks, constants read in their own module), the CLI, --strict."""

from __future__ import annotations

import json
from pathlib import Path

import native_builder as nbld
import pytest
from typer.testing import CliRunner

from ctxpatch.cli.app import app
from ctxpatch.errors import NotABundle, NotFound
from patcher.native import inspect as native
from patcher.native import package
from patcher.native.app import Source
from patcher.native.levels import extract

HEAD = b"// @bun @bytecode\n// (c) Example\n\n// Version: {v}\n"

# Hand-written code shaped like the levels era (2.1.2xx-2.1.330): our own names and text.
LEVELS_CHUNK = b"""var A1=13000;var Kb=20000,Q9=0.2,Cap=20000;
function thr(w,c){let r=w-A1,g=c.testPctOverride;if(g!==void 0&&g>0&&g<=100)return Math.min(Math.floor(w*(g/100)),r);return r}
function pre(w,c){return Math.min(w-Math.round(w*c.precomputeBufferFraction),thr(w,c))}
function lvl(t,w,c,b=w){let y=thr(w,c),k=c.enabled?y:w,R=k-Kb,H=c.testBlockingOverride,z=H!==void 0&&!isNaN(H)&&H>0?H:b-3000,X=Math.max(0,Math.round((k-t)/k*100));if(t>=z)return{level:"blocked",pctLeft:X};if(c.enabled&&t>=y)return{level:"compact",pctLeft:X};if(t>=R)return{level:"warn",pctLeft:X};return{level:"ok"}}
function frac(){let e=flag("tengu_some_flag",Q9);return typeof e==="number"&&Number.isFinite(e)&&e>=0&&e<1?e:Q9}
function eff(m,s){let o=Math.min(m.maxOutputTokens,Cap);return win(m)-o}
function src(m,s){return pick(m,s).source!=="auto"}
async function dec(e,m,s){if(reactive()&&!src(m,s))return!1;let H=count(e),Q=lvl(H,eff(m,s),cfg());return log(`autocompact: tokens=${H} level=${Q.level} effectiveWindow=${eff(m,s)} serverCleared=1`),Q.level==="compact"}
var ctx="context-1m-2025-08-07",sfx="[1m]",mc="tengu_time_based_microcompact";
"""
DECOY_CHUNK = b"var Cap=999,Kb=1,A1=7;export{Cap};\n"  # same names, other module: never read


def split_binary(version: str = "2.1.300", levels: bytes = LEVELS_CHUNK) -> bytes:
    head = HEAD.replace(b"{v}", version.encode())
    mods = [
        nbld.Mod("/$bunfs/root/chunk-aaaa0001.js", head + DECOY_CHUNK),
        nbld.Mod("/$bunfs/root/chunk-aaaa0002.js", head + levels),
        nbld.Mod("/$bunfs/root/cli", head + b'import"/$bunfs/root/chunk-aaaa0002.js";\n'),
    ]
    return nbld.elf(nbld.blob(mods, entry_point=2))


def test_levels_read_in_the_module_that_holds_them() -> None:
    head = HEAD.replace(b"{v}", b"2.1.300")
    sources = [
        Source("/$bunfs/root/cli", head),
        Source("/$bunfs/root/chunk-aaaa0001.js", head + DECOY_CHUNK),
        Source("/$bunfs/root/chunk-aaaa0002.js", head + LEVELS_CHUNK),
    ]
    lv = extract(sources)
    assert lv.functions["level"] == "lvl@chunk-aaaa0002.js"
    assert lv.functions["threshold"] == "thr@chunk-aaaa0002.js"
    assert lv.functions["effective_window"] == "eff@chunk-aaaa0002.js"
    got = {k: (v.value, v.via) for k, v in lv.constants.items()}
    assert got == {
        "autocompact_offset": (13000, "A1"),
        "warning_offset": (20000, "Kb"),
        "blocking_offset": (3000, "literal"),
        "precompute_buffer_fraction": (0.2, "Q9"),
        "reserve_cap": (20000, "Cap"),
    }
    assert lv.features["proactive_needs_configured_window"] is True
    assert lv.features["count_adds_server_cleared"] is True
    assert lv.features["pct_override"] and lv.features["blocking_override"]
    assert lv.features["beta_context_1m"] and lv.features["model_suffix_1m"]
    assert lv.unresolved == ()


def test_levels_without_the_guard_or_precompute() -> None:
    code = (
        LEVELS_CHUNK.replace(b"if(reactive()&&!src(m,s))return!1;", b"")
        .replace(b" serverCleared=1", b"")
        .replace(b".precomputeBufferFraction", b".other")
    )
    lv = extract([Source("/$bunfs/root/src/entrypoints/cli.js", code)])
    assert lv.features["proactive_needs_configured_window"] is False
    assert lv.features["count_adds_server_cleared"] is False
    assert lv.features["precompute"] is False
    assert "precompute_buffer_fraction" not in lv.constants


def test_no_level_function_is_reported_not_guessed() -> None:
    lv = extract([Source("/$bunfs/root/cli", b"var x=13000;")])
    assert not lv.found and lv.constants == {}
    assert "level function" in lv.unresolved[0]


def test_one_drift_table_compares_levels_and_cli_js_findings_by_kind() -> None:
    """The levels of a native build go through the same drift table (patcher.inspect.drift,
    keyed by the findings' kind) as a cli.js Report, into the same typed Comparison."""
    from dataclasses import replace

    from engine.profiles import profile_for
    from patcher.inspect.drift import TABLE, compare
    from patcher.inspect.report import Drift
    from patcher.native.levels import Value

    head = HEAD.replace(b"{v}", b"2.1.300")
    lv = extract([Source("/$bunfs/root/chunk-aaaa0002.js", head + LEVELS_CHUNK)])
    assert set(TABLE) == {"cli.js", "levels"} and lv.kind == "levels"
    same = compare(lv, "2.1.300")
    assert same.profile == profile_for("2.1.300").name and same.drift == ()
    assert same.compared == tuple(c.field for c in TABLE["levels"])  # every row was read
    off = replace(lv, constants={**lv.constants, "reserve_cap": Value(1, "Cap", "x.js")})
    p = profile_for("2.1.300")
    assert compare(off, "2.1.300").drift == (Drift("reserve_cap", 1, p.reserve_cap),)
    assert compare(lv, None).profile_problem == "unknown version: no profile to compare with"
    missing = extract([Source("/$bunfs/root/cli", b"var x=13000;")])
    assert compare(missing, "2.1.300").profile_problem.startswith("level function")
    assert compare(missing, "2.1.300").compared == ()


def test_the_reader_is_chosen_by_the_build_and_the_report_is_frozen(tmp_path: Path) -> None:
    import dataclasses

    from patcher.native.app import App

    levels_app = App("split", "2.1.300", (Source("/$bunfs/root/cli", LEVELS_CHUNK),))
    assert isinstance(native.reader_for(levels_app), native.LevelsReader)
    old = App("single", "2.1.113", (Source("cli.js", b"isAboveAutoCompactThreshold"),))
    assert isinstance(native.reader_for(old), native.CliJsReader)
    exe = tmp_path / "claude"
    exe.write_bytes(split_binary("2.1.300"))
    rep = native.inspect_path(exe)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.native = None  # type: ignore[misc]
    doc = rep.to_json()
    assert list(doc) == [
        "path", "container", "layout", "version", "modules", "js_modules", "js_bytes",
        "reader", "report", "profile", "profile_range", "profile_problem", "compared",
        "drift", "warnings", "lever",
    ]  # fmt: skip
    assert doc["report"] == rep.findings.to_json() and doc["reader"] == "levels"
    assert list(doc["lever"]) == ["lever", "why", "facts"] and doc["lever"]["lever"] == "gateway"


# --- finding the binary -----------------------------------------------------------------------


def _pkg(folder: Path, name: str, exe: bytes | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": name, "version": "2.1.300"}))
    if exe is not None:
        (folder / "claude").write_bytes(exe)
    return folder


def test_find_binary_in_package_layouts(tmp_path: Path) -> None:
    big = split_binary() + b"\0" * (70 << 10)  # past the placeholder size
    scope = tmp_path / "node_modules" / "@anthropic-ai"
    wrapper = _pkg(scope / "claude-code", "@anthropic-ai/claude-code")
    (wrapper / "bin").mkdir()
    (wrapper / "bin" / "claude.exe").write_bytes(b"placeholder\n")
    with pytest.raises(NotFound, match="no native binary installed"):
        package.find_binary(wrapper)
    other = _pkg(scope / "claude-code-zz-other", "@anthropic-ai/claude-code-zz-other", big)
    assert package.find_binary(wrapper) == other / "claude"  # any platform package beside it
    mine = _pkg(scope / f"claude-code-{package.platform_tag()}", "@anthropic-ai/claude-code-x", big)
    assert package.find_binary(wrapper) == mine / "claude"  # this machine's platform first
    assert package.find_binary(mine) == mine / "claude"
    sdk = _pkg(scope / "claude-agent-sdk", "@anthropic-ai/claude-agent-sdk")
    nested = _pkg(
        sdk / "node_modules" / "@anthropic-ai" / "claude-agent-sdk-linux-arm64",
        "@anthropic-ai/claude-agent-sdk-linux-arm64",
        big,
    )
    assert package.find_binary(sdk) == nested / "claude"
    with pytest.raises(NotABundle):
        package.find_binary(tmp_path)


def test_inspect_a_package_folder_and_a_binary(tmp_path: Path) -> None:
    exe = tmp_path / "claude"
    exe.write_bytes(split_binary("2.1.300"))
    rep = native.inspect_path(exe)
    assert rep.native is not None
    build = rep.native.build
    assert (build.layout, rep.version, rep.reader, build.js_modules) == (
        "split",
        "2.1.300",
        "levels",
        3,
    )
    assert rep.report["constants"]["reserve_cap"] == {
        "value": 20000,
        "via": "Cap",
        "module": "chunk-aaaa0002.js",
    }
    assert rep.profile is not None and "reserve_cap" in rep.compared


# --- the CLI --------------------------------------------------------------------------------------


def test_cli_inspect_native_json_and_strict(tmp_path: Path) -> None:
    exe = tmp_path / "claude"
    exe.write_bytes(split_binary("9.9.9"))
    runner = CliRunner()
    res = runner.invoke(app, ["inspect", str(exe), "--json"])
    (doc,) = json.loads(res.stdout)["results"]
    assert doc["version"] == "9.9.9" and doc["layout"] == "split"
    assert any("newer than every engine profile" in w for w in doc["warnings"])
    assert res.exit_code == (1 if doc["drift"] else 0)
    strict = runner.invoke(app, ["inspect", str(exe), "--strict"])
    assert strict.exit_code == 1
    assert "warning: Claude Code 9.9.9 is newer than every engine profile" in strict.stdout


def test_cli_inspect_a_damaged_binary_is_refused(tmp_path: Path) -> None:
    exe = tmp_path / "claude"
    whole = split_binary()
    exe.write_bytes(whole[: len(whole) // 2])
    res = CliRunner().invoke(app, ["inspect", str(exe)])
    assert res.exit_code == 3
    assert "error:" in res.output and "hint:" in res.output


def test_a_folder_with_cli_js_is_the_javascript_package(tmp_path: Path) -> None:
    """sdk 0.2.112 ships cli.js and may have a native platform package beside it: inspect
    reads the cli.js the folder holds."""
    scope = tmp_path / "node_modules" / "@anthropic-ai"
    sdk = _pkg(scope / "claude-agent-sdk", "@anthropic-ai/claude-agent-sdk")
    _pkg(
        scope / "claude-agent-sdk-linux-x64",
        "@anthropic-ai/claude-agent-sdk-linux-x64",
        split_binary() + b"\0" * (70 << 10),
    )
    assert native.is_native(sdk)
    (sdk / "cli.js").write_text("// Version: 2.1.112\n")
    assert not native.is_native(sdk)


# --- regress --native ------------------------------------------------------------------------


def test_native_regress_selects_native_versions_only() -> None:
    from patcher.native import regress as nreg

    def lister(pkg: str) -> list[str]:
        return ["2.1.111", "2.1.112", "2.1.113", "2.1.200", "2.1.330"]

    jobs = nreg.select(["cc"], versions="2.1.100..2.1.400", lister=lister)
    assert [j.version for j in jobs] == ["2.1.113", "2.1.200", "2.1.330"]
    assert [j.version for j in nreg.select(["cc"], sample=2, lister=lister)] == [
        "2.1.113",
        "2.1.330",
    ]
    default = nreg.select(["cc", "sdk"], lister=lister)
    assert [j.key for j in default] == [
        "cc@2.1.113",
        "cc@2.1.217",
        "cc@2.1.330",
        "sdk@0.2.113",
        "sdk@0.3.217",
        "sdk@0.3.330",
    ]


def test_native_regress_inspects_a_cached_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import cached_tgz

    from patcher.native import regress as nreg
    from patcher.regress import Job

    monkeypatch.setenv("CTXPATCH_CACHE", str(tmp_path))
    for version, data in (("2.1.300", split_binary("2.1.300")), ("2.1.301", b"\x7fELF junk")):
        files = {"package/claude": data, "package/package.json": b"{}"}
        cached_tgz(tmp_path, "anthropic-ai-claude-code-linux-x64", version, files)
    ok = nreg.run_one(Job("cc", "2.1.300"))
    assert (ok.result, ok.claude_code_version, ok.shape) == ("pass", "2.1.300", "native-split")
    assert ok.profile == "2.1.284" and ok.drift == []
    bad = nreg.run_one(Job("cc", "2.1.301"))
    assert bad.result == "fail" and bad.failed_step == "inspect"
    assert "ELF header is corrupt" in bad.reason


def test_installed_version_reads_a_local_native_install(tmp_path: Path) -> None:
    """`thresholds` without --profile models this: the local wrapper package's platform binary."""
    scope = tmp_path / "proj" / "node_modules" / "@anthropic-ai"
    _pkg(scope / "claude-code", "@anthropic-ai/claude-code")
    _pkg(
        scope / f"claude-code-{package.platform_tag()}",
        "@anthropic-ai/claude-code-x",
        split_binary("2.1.290") + b"\0" * (70 << 10),
    )
    assert native.installed_version(tmp_path / "proj") == "2.1.290"


def test_one_inspection_type_for_a_cli_js_and_a_native_build(tmp_path: Path) -> None:
    """patcher.inspection.Inspection: the same findings + comparison for both kinds, a cli.js
    file or a native part around them, each kind's JSON as the CLI prints it."""
    from conftest import FIXTURES

    from patcher.inspect.drift import compare
    from patcher.inspection import CliJsFile, inspect_cli_js

    data = (FIXTURES / "rq-2.1.112.js").read_bytes()
    js = inspect_cli_js(data, None, CliJsFile("/x/cli.js", "pkg@1", "a note"))
    assert js.comparison == compare(js.findings, "2.1.112")  # the one comparison
    doc = js.to_json()
    assert list(doc)[:4] == ["path", "package", "note", "version"]
    assert doc == {"path": "/x/cli.js", "package": "pkg@1", "note": "a note", **js.report}
    assert list(js.report)[-6:] == [*js.comparison.to_json(), "unresolved"]
    assert (js.reader, js.path, js.version, js.warnings) == ("cli.js", "/x/cli.js", "2.1.112", ())
    assert js.exit_code(strict=True) == (1 if js.drift else 0)
    exe = tmp_path / "claude"
    exe.write_bytes(split_binary("9.9.9"))  # newer than every profile: a warning
    nat = native.inspect_path(exe)
    assert nat.file is None and nat.native is not None and nat.reader == "levels"
    assert nat.warnings and nat.exit_code(strict=True) == 1
    assert nat.exit_code() == (1 if nat.drift else 0)
    res = CliRunner().invoke(app, ["inspect", str(exe), "--json"])
    assert json.loads(res.stdout)["results"] == [nat.to_json()]
