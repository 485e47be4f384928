"""``ctxpatch inspect``: constants read by meaning, compared with the engine's profiles."""

from __future__ import annotations

import json
import shutil
from operator import attrgetter
from pathlib import Path

import pytest
from conftest import FIXTURES, IN_CI, app_with, need
from typer.testing import CliRunner

from ctxpatch.cli.inspecting import register
from ctxpatch.errors import CtxpatchError
from patcher import inspect as ib
from patcher import npmcache, ops
from patcher.inspection import inspect_cli_js

LEGACY_8 = ["Read", "Bash", "Grep", "Glob", "WebSearch", "WebFetch", "Edit", "Write"]

# fixture -> what inspect must read from it (the fixtures carry these numbers inline)
FIXTURE_CASES = {
    "s0-1.0.60.js": dict(
        shape="S0",
        era="ratio",
        mc="legacy",
        autocompact_ratio=0.92,
        warning_ratio=0.8,
        mc_target=40000,
        mc_keep=3,
        mc_min_saving=20000,
    ),
    "s1-2.0.76.js": dict(
        shape="S1",
        era="offset",
        mc="legacy",
        autocompact_offset=13000,
        warning_offset=20000,
        error_offset=20000,
        mc_target=40000,
        mc_keep=3,
        mc_min_saving=20000,
        mc_tools=LEGACY_8,
    ),
    "s1p-2.1.7.js": dict(
        shape="S1'",
        era="offset",
        mc="legacy",
        blocking_offset=3000,
        mc_tools=LEGACY_8,
        image_tokens=2000,
        chars_per_token=4,
    ),
    "s1pp-2.1.30.js": dict(
        shape="S1''",
        era="offset",
        mc="legacy",
        reserve_cap=20000,
        blocking_offset=3000,
        mc_target=40000,
    ),
    "s3-2.1.50.js": dict(shape="S3", era="offset", mc="legacy", reserve_cap=20000),
    "s4-2.1.61.js": dict(shape="S4", era="offset", mc="legacy", mc_target=40000, mc_keep=3),
    "s5-2.1.68.js": dict(shape="S5", era="offset", mc="legacy", mc_min_saving=20000),
    "s6-2.1.112.js": dict(
        shape="S6",
        era="offset",
        mc="stub",
        reserve_cap=20000,
        autocompact_offset=13000,
        blocking_offset=3000,
    ),
    "none-1.0.50.js": dict(shape=None, era="ratio", mc=None, autocompact_ratio=0.92),
}


def _check(rep: ib.Report, want: dict) -> None:
    assert rep.shape == want["shape"]
    assert rep.era == want["era"]
    assert rep.micro.kind == want["mc"]
    for key, value in want.items():
        if key not in ("shape", "era", "mc"):
            assert rep.value(key) == value, (key, rep.constants.get(key), rep.unresolved)


@pytest.mark.parametrize("name", sorted(FIXTURE_CASES))
def test_fixture_constants(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    seen = inspect_cli_js(data)
    rep = ib.inspect(data)
    assert seen.findings == rep
    _check(rep, FIXTURE_CASES[name])
    assert rep.sha256 == ib.sha256(data) and rep.size == len(data)
    assert rep.version == name.rsplit("-", 1)[1].removesuffix(".js")
    json.dumps(seen.to_json())  # serialisable
    assert "call site" in ib.render(rep, seen.comparison)


def test_ratio_era_has_no_profile_and_no_drift() -> None:
    rep = inspect_cli_js((FIXTURES / "s0-1.0.60.js").read_bytes())
    assert rep.profile is None and "ratio" in rep.profile_problem and rep.drift == []


def test_stub_bundle_is_found_through_the_deps_factory() -> None:
    rep = inspect_cli_js((FIXTURES / "s6-2.1.112.js").read_bytes())
    functions = rep.findings.functions
    assert functions["deps_factory"] == "gk" and functions["microcompact"] == "_c"
    assert rep.profile == "2.1.105" and rep.drift == []


# ------------------------------------------------------------------ resolution by identifiers

SYNTH = """\
// Version: 2.0.76
var AA=13000,BB=20000,CC=20000,RR=20000,KK=3,TT=40000,MM=20000,II=2000;
var X1="Read",X2="Bash",X3=null,SH,TOOLS,CFG;
var init=L(()=>{SH=[X2,X3].filter((q)=>q!=null);TOOLS=new Set([X1,...SH,"Grep"]);CFG={minTokens:1e4,minTextBlockMessages:5,maxTokens:40000}});
function win(){return 200000}
function eff(){let A=win(),q=Math.min(maxOut(A),RR);return A-q}
function thr(){let A=eff(),q=A-AA,K=process.env.CLAUDE_AUTOCOMPACT_PCT_OVERRIDE;if(K){let Y=parseFloat(K);if(Y>0)return Math.min(Math.floor(A*Y/100),q)}return q}
function on(){if(t(process.env.DISABLE_COMPACT))return!1;return s().autoCompactEnabled}
function ws(A){let q=thr(),K=on()?q:eff(),z=K-BB,w=K-CC,H=A>=z,O=A>=w,$=on()&&A>=q;return{percentLeft:1,isAboveWarningThreshold:H,isAboveErrorThreshold:O,isAboveAutoCompactThreshold:$}}
function tok(A){return Math.round(A.length/4)}
function est(A){let q=0;for(let K of A)for(let Y of K.message.content)if(Y.type==="text")q+=tok(Y.text);else if(Y.type==="image")q+=II;return Math.ceil(q*1.3333333333333333)}
async function mc(A,q,K){if(t(process.env.DISABLE_MICROCOMPACT))return{messages:A};let Y=q!==void 0,z=Y?q:TT,w=[];for(let M of A)for(let P of M.message.content)if(P.type==="tool_use"&&TOOLS.has(P.name))w.push(P.id);let O=w.slice(-KK),s=0,S=0;for(let M of w)if(s-S>z)S+=1;if(!Y){if(!ws(est(A)).isAboveWarningThreshold||S<MM)S=0}return{messages:A}}
"tengu_sm_compact_done";
"""


def test_constants_resolve_through_identifiers_not_values() -> None:
    """Four identifiers hold 20000; each role is read through its own identifier."""
    rep = ib.inspect(SYNTH.encode())
    got = {k: (c.value, c.via) for k, c in rep.constants.items()}
    assert got["autocompact_offset"] == (13000, "AA")
    assert got["warning_offset"] == (20000, "BB")
    assert got["error_offset"] == (20000, "CC")
    assert got["reserve_cap"] == (20000, "RR")
    assert got["mc_min_saving"] == (20000, "MM")
    assert got["mc_target"] == (40000, "TT")
    assert got["mc_keep"] == (3, "KK")
    assert got["image_tokens"] == (2000, "II")
    assert rep.value("mc_tools") == ["Read", "Bash", "Grep"]  # spread of a filtered list
    assert (rep.value("sm_min_tokens"), rep.value("sm_max_tokens")) == (10000, 40000)
    assert rep.estimator.factor_4_3 is True
    assert rep.session_memory.present is True
    assert rep.functions["threshold"] == "thr" and rep.functions["effective_window"] == "eff"


def test_changing_one_20000_changes_only_its_role() -> None:
    data = SYNTH.replace("CC=20000", "CC=25000").encode()
    seen = inspect_cli_js(data)
    rep = seen.findings
    assert (rep.value("warning_offset"), rep.value("error_offset")) == (20000, 25000)
    assert rep.value("reserve_cap") == 20000 and rep.value("mc_min_saving") == 20000
    assert [d.field for d in seen.drift if d.field.endswith("offset")] == ["error_offset"]


def test_conflicting_declarations_are_not_guessed() -> None:
    data = SYNTH.replace(
        "function win(){", "function other(){let AA=12000;return AA}\nfunction win(){"
    )
    rep = ib.inspect(data.encode())
    assert rep.value("autocompact_offset") is None
    assert any("AA" in u and "different values" in u for u in rep.unresolved)


def test_drift_is_reported_against_the_profile() -> None:
    rep = inspect_cli_js(SYNTH.encode())
    assert rep.profile == "2.0.65"  # 2.0.76 falls in 2.0.65..2.0.76
    fields = {d.field: (d.file, d.profile) for d in rep.drift}
    assert fields["reserve_cap"] == (20000, None)  # 2.0.x reserves the whole output
    assert fields["mc_tools"] == (["Bash", "Grep", "Read"], sorted(LEGACY_8))
    assert "autocompact_offset" not in fields and "autocompact_offset" in rep.compared


def test_not_a_bundle_gives_an_empty_report() -> None:
    seen = inspect_cli_js(b"console.log('hello')\n")
    rep = seen.findings
    assert isinstance(rep, ib.Report)
    assert rep.version is None and rep.era == "none" and rep.shape is None
    assert seen.profile is None and seen.drift == []


# ------------------------------------------------------------------ the command


def _invoke(*args: str):
    return CliRunner().invoke(app_with(register), list(args))


def test_cli_json_on_a_fixture(fixture_copy) -> None:
    cli = fixture_copy("s6-2.1.112.js")
    res = _invoke("inspect", str(cli), "--json")
    assert res.exit_code == 0, res.output
    top = json.loads(res.stdout)
    (doc,) = top["results"]
    assert (doc["version"], doc["shape"], doc["profile"]) == ("2.1.112", "S6", "2.1.105")
    assert doc["constants"]["autocompact_offset"]["value"] == 13000
    assert doc["drift"] == [] and top["exit_code"] == 0


def test_cli_drift_exits_1(tmp_path: Path) -> None:
    cli = tmp_path / "cli.js"
    cli.write_text(SYNTH)
    res = _invoke("inspect", str(cli))
    assert res.exit_code == 1
    assert "DRIFT" in res.stdout and "reserve_cap" in res.stdout


def test_cli_reads_a_patched_file_through_its_original(fixture_copy) -> None:
    cli = fixture_copy("s1p-2.1.7.js")
    ops.apply_file(cli, node_check=False)
    res = _invoke("inspect", str(cli), "--json")
    (doc,) = json.loads(res.stdout)["results"]
    assert doc["shape"] == "S1'" and "original" in doc["note"]
    assert doc["sha256"] == ib.sha256((FIXTURES / "s1p-2.1.7.js").read_bytes())


def test_cli_refusals(tmp_path: Path) -> None:
    empty = tmp_path / "cli.js"
    empty.write_text("")
    res = _invoke("inspect", str(empty))
    assert res.exit_code == 3 and "empty" in res.output and "hint" in res.output
    res = _invoke("inspect", str(tmp_path / "missing.js"), "--json")
    assert res.exit_code == 3 and json.loads(res.stdout)["error"]["error"] == "file_access"
    native = tmp_path / "native"
    shutil.copytree(FIXTURES / "native-2.1.113", native)
    res = _invoke("inspect", str(native))
    assert res.exit_code == 4 and "no cli.js" in res.output


def test_cli_usage_error() -> None:
    assert _invoke("inspect", "--bogus").exit_code == 2


# ------------------------------------------------------------------ real versions

# versions.md §3 and the engine profiles: (package, version) -> expected reading
REAL = {
    ("cc", "1.0.60"): dict(
        shape="S0", era="ratio", mc="legacy", autocompact_ratio=0.92, mc_target=40000
    ),
    ("cc", "1.0.128"): dict(
        shape="S1", era="offset", mc="legacy", autocompact_offset=13000, reserve_cap=None
    ),
    ("cc", "2.0.76"): dict(
        shape="S1",
        era="offset",
        mc="legacy",
        autocompact_offset=13000,
        warning_offset=20000,
        error_offset=20000,
        reserve_cap=None,
        mc_target=40000,
        mc_keep=3,
        mc_min_saving=20000,
        mc_tools=LEGACY_8,
        image_tokens=2000,
        chars_per_token=4,
    ),
    ("cc", "2.1.7"): dict(
        shape="S1'",
        era="offset",
        mc="legacy",
        blocking_offset=3000,
        reserve_cap=None,
        sm_min_tokens=10000,
        sm_max_tokens=40000,
    ),
    ("cc", "2.1.30"): dict(
        shape="S1''",
        era="offset",
        mc="legacy",
        reserve_cap=20000,
        blocking_offset=3000,
        mc_target=40000,
        mc_tools=LEGACY_8,
    ),
    ("cc", "2.1.50"): dict(
        shape="S3", era="offset", mc="legacy", reserve_cap=20000, mc_tools=LEGACY_8
    ),
    ("cc", "2.1.61"): dict(shape="S4", era="offset", mc="legacy", mc_target=40000),
    ("cc", "2.1.68"): dict(shape="S5", era="offset", mc="legacy", mc_keep=3),
    ("cc", "2.1.112"): dict(
        shape="S6",
        era="offset",
        mc="stub",
        reserve_cap=20000,
        autocompact_offset=13000,
        blocking_offset=3000,
    ),
    ("sdk", "0.2.112"): dict(shape="S6", era="offset", mc="stub", reserve_cap=20000),
}


def _real(pkg: str, version: str) -> bytes:
    need("npm", "real versions are downloaded with npm pack")
    try:
        return npmcache.cli_js(pkg, version).read_bytes()
    except CtxpatchError as e:
        if IN_CI:
            raise
        pytest.skip(f"cannot fetch {pkg}@{version}: {e.what}")


@pytest.mark.real
@pytest.mark.parametrize(("pkg", "version"), sorted(REAL), ids=lambda v: str(v))
def test_real_version_agrees_with_the_engine(pkg: str, version: str) -> None:
    seen = inspect_cli_js(_real(pkg, version))
    rep = seen.findings
    assert isinstance(rep, ib.Report)
    _check(rep, REAL[pkg, version])
    assert seen.drift == [], [str(d) for d in seen.drift]
    if rep.era == "offset":
        assert seen.profile is not None and len(seen.compared) >= 14


@pytest.mark.real
def test_real_auto_compact_count() -> None:
    """Usage only up to 2.1.1; usage + a chars/4 estimate of newer messages from 2.1.2, whose
    images count 1334 up to 2.1.21 and 2000 from 2.1.39 (engine/profiles.py)."""
    old = ib.inspect(_real("cc", "2.0.76"))
    assert old.counter.mode == "usage" and "newer_image_tokens" not in old.constants
    mid = ib.inspect(_real("cc", "2.1.7"))
    assert mid.counter.mode == "usage+newer" and mid.value("newer_image_tokens") == 1334
    new = inspect_cli_js(_real("cc", "2.1.112"))
    assert new.findings.value("newer_image_tokens") == 2000
    assert new.findings.value("newer_chars_per_token") == 4
    assert "count_mode" in new.compared and "newer_image_tokens" in new.compared


# Mechanisms that changed in one release: (the reading, its profile field, {version: value}),
# each with the last version before the change and the first after it.
MECHANISM_CHANGES = [
    # 2.1.44 counts an attachment record's JSON; 2.1.45 loops over the messages it renders the
    # attachment to and counts their content
    ("counter.renders_attachments", "newer_renders_attachments", {"2.1.44": False, "2.1.45": True}),
    # 2.1.73's newer-estimate block function counts text, tool_result and images and returns 0
    # for anything else; 2.1.74's also counts tool_use, thinking, redacted_thinking, documents
    # and any other block as JSON
    ("counter.counts_all_blocks", "newer_counts_all_blocks", {"2.1.73": False, "2.1.74": True}),
    # 2.1.45's x4/3 estimator counts a document block as JSON; 2.1.47's counts it like an image
    # (``type==="image"||type==="document"``)
    ("estimator.counts_documents", "estimate_counts_documents", {"2.1.45": False, "2.1.47": True}),
    # 2.1.74's x4/3 estimator counts thinking/redacted_thinking/tool_use as JSON; 2.1.75's
    # (through 2.1.104) by their text
    (
        "estimator.counts_block_text",
        "estimate_counts_block_text",
        {"2.1.74": False, "2.1.75": True},
    ),
    # 2.1.63 and 2.1.68 count the newer messages from the last usage record; 2.1.64 and 2.1.69
    # walk back to the first record with the same message.id
    (
        "counter.from_message_start",
        "newer_from_message_start",
        {"2.1.63": False, "2.1.64": True, "2.1.68": False, "2.1.69": True, "2.1.112": True},
    ),
]
MECHANISM_READINGS = [
    (version, reading, field, want)
    for reading, field, by_version in MECHANISM_CHANGES
    for version, want in by_version.items()
]


@pytest.mark.real
@pytest.mark.parametrize(("version", "reading", "field", "want"), MECHANISM_READINGS)
def test_real_mechanism_read_on_each_side_of_its_change(
    version: str, reading: str, field: str, want: bool
) -> None:
    rep = inspect_cli_js(_real("cc", version))
    assert attrgetter(reading)(rep.findings) is want
    assert field in rep.compared and rep.drift == []


@pytest.mark.real
def test_real_readings_around_those_changes() -> None:
    """What else the versions of MECHANISM_CHANGES show: 2.1.44 counts attachments, the
    render of 2.1.73/2.1.74 names the counted blocks, and 2.1.105 has no x4/3 estimator left
    (the engine then uses the newer estimate, message_estimate_is_newer)."""
    assert ib.inspect(_real("cc", "2.1.44")).counter.counts_attachments is True
    for version, counted in (("2.1.73", "text/tool_result/images only"), ("2.1.74", "every block")):
        seen = inspect_cli_js(_real("cc", version))
        assert isinstance(seen.findings, ib.Report)
        assert counted in ib.render(seen.findings, seen.comparison)
    gone = inspect_cli_js(_real("cc", "2.1.105"))
    assert isinstance(gone.findings, ib.Report)
    assert gone.findings.estimator.factor_4_3 is False
    assert gone.findings.estimator.counts_block_text is None and gone.drift == []


@pytest.mark.real
def test_real_blocking_base_differs_between_versions() -> None:
    """2.0.77 counts the blocking limit off the raw window, 2.1.7 off the effective one."""
    assert ib.inspect(_real("cc", "2.1.7")).thresholds.blocking_base == "effective"
    assert ib.inspect(_real("cc", "2.1.30")).thresholds.blocking_base == "window"
