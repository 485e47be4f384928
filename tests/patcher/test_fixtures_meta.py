"""Meta tests for the synthetic ``cli.js`` fixtures in ``fixtures/cli_js``.

They pin the fixtures themselves (checksums, header, shape, runtime contract) so that a
locator/patcher test that fails points at the patcher, not at a silently edited fixture.
The fixtures are synthetic: see ``fixtures/cli_js/README.md``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "cli_js"
SUMS = FIX / "SHA256SUMS"
NOT_FIXTURES = {"README.md", "SHA256SUMS", "make_ruflo.py", "make_rq.py"}

# file -> (shape, Claude Code version it imitates)
JS_FIXTURES: dict[str, tuple[str, str]] = {
    "s0-1.0.60.js": ("S0", "1.0.60"),
    "s1-2.0.76.js": ("S1", "2.0.76"),
    "s1p-2.1.7.js": ("S1′", "2.1.7"),
    "s1pp-2.1.30.js": ("S1″", "2.1.30"),
    "s3-2.1.50.js": ("S3", "2.1.50"),
    "s4-2.1.61.js": ("S4", "2.1.61"),
    "s5-2.1.68.js": ("S5", "2.1.68"),
    "s6-2.1.112.js": ("S6", "2.1.112"),
    "none-1.0.50.js": ("none", "1.0.50"),
    "ambiguous-two-sites.js": ("S1", "2.0.76"),
    "ruflo-patched-2.0.76.js": ("S1", "2.0.76"),
    "rq-1.0.60.js": ("S0", "1.0.60"),
    "rq-2.0.76.js": ("S1", "2.0.76"),
    "rq-2.1.112.js": ("S6", "2.1.112"),
}
# The request-builder fixtures: their shape fixture with the era's request code (make_rq.py).
RQ_FIXTURES = ("rq-1.0.60.js", "rq-2.0.76.js", "rq-2.1.112.js")
RUFLO_PAIR = ("ruflo-patched-2.0.76.js", "ruflo-patched-2.0.76.js.backup")

# The query-loop micro-compaction statement(s) of each fixture, byte-exact. The first string
# of each tuple is the one `--run` drives.
LOOP_SITES: dict[str, tuple[str, ...]] = {
    "s0-1.0.60.js": (
        "let J=A,X=F,V=await f$1(J);if(J=V.messages,V.compactionInfo?.systemMessage)yield "
        "V.compactionInfo.systemMessage;let{messages:K,wasCompacted:C}=await Nk$(J,G);",
    ),
    "s1-2.0.76.js": (
        "let F=QS(A),E=J,z=await Vd(F,void 0,Y);if(F=z.messages,z.compactionInfo?.systemMessage)"
        "yield z.compactionInfo.systemMessage;let{compactionResult:$}=await CT2(F,Y,W);",
    ),
    "s1p-2.1.7.js": (
        'h6("query_microcompact_start");let O=await lc(z,void 0,Y);if(z=O.messages,'
        "O.compactionInfo?.systemMessage)yield O.compactionInfo.systemMessage;"
        'h6("query_microcompact_end"),h6("query_autocompact_start");'
        "let{compactionResult:$}=await Qn2(z,Y,W);",
    ),
    "s1pp-2.1.30.js": (
        'Z3("query_microcompact_start");let V=await Yp(G,void 0,w);if(G=V.messages,'
        "V.compactionInfo?.boundaryMessage)yield V.compactionInfo.boundaryMessage;"
        'Z3("query_microcompact_end");let N=Ob(q,Y);Z3("query_autocompact_start");'
        "let{compactionResult:R}=await Xa4(G,w,W,N);",
    ),
    "s3-2.1.50.js": (
        'L3("query_microcompact_start");let v=await Dg(V,void 0,w,$);if(V=v.messages,'
        "v.compactionInfo?.boundaryMessage)yield v.compactionInfo.boundaryMessage;"
        'L3("query_microcompact_end");let y=Gd(oW(q,Y).model);L3("query_autocompact_start");'
        "let{compactionResult:P}=await xS9(V,w,$,y);",
    ),
    "s4-2.1.61.js": (
        'L3("query_microcompact_start");let v=await Mg(N,w,$);if(N=v.messages,'
        "v.compactionInfo?.boundaryMessage)yield v.compactionInfo.boundaryMessage;let L=void 0;"
        'L3("query_microcompact_end");let I=Cj(q,Y);L3("query_autocompact_start");'
        "let{compactionResult:f}=await Rj7(N,w,$,I);",
    ),
    "s5-2.1.68.js": (
        'L3("query_microcompact_start");let h=await H.microcompact(I,X,_);if(I=h.messages,'
        "h.compactionInfo?.boundaryMessage)yield h.compactionInfo.boundaryMessage;let S=void 0;"
        'L3("query_microcompact_end");let F=X.options.mainLoopModel;'
        'L3("query_autocompact_start");let{compactionResult:B}=await H.autocompact(I,X,_,F);',
    ),
    "s6-2.1.112.js": (
        'Y9("query_microcompact_start"),U=(await H.microcompact(U,v,w)).messages;let z6=void 0;'
        'Y9("query_microcompact_end");let A6=Jp(_,v.options.mainLoopModel);'
        'Y9("query_autocompact_start");let{compactionResult:e,consecutiveFailures:i}='
        "await H.autocompact(U,v,{systemPrompt:_,userContext:z,"
        "toolUseContext:v},w,g,n);",
    ),
    "ambiguous-two-sites.js": (
        "let F=QS(A),E=J,z=await Vd(F,void 0,Y);if(F=z.messages,z.compactionInfo?.systemMessage)"
        "yield z.compactionInfo.systemMessage;let{compactionResult:$}=await CT2(F,Y,W);",
        "let q=QS(B),R=void 0,x=await Vd(q,void 0,Z);if(q=x.messages,"
        "x.compactionInfo?.systemMessage)yield x.compactionInfo.systemMessage;"
        "let{compactionResult:j}=await CT2(q,Z,I);",
    ),
}

# The micro-compaction function of each fixture (how a locator must resolve it).
MC_HEADS: dict[str, str] = {
    "s0-1.0.60.js": "async function f$1(A,Q){",
    "s1-2.0.76.js": "async function Vd(A,Q,B){",
    "s1p-2.1.7.js": "async function lc(A,Q,B){",
    "s1pp-2.1.30.js": "async function Yp(q,K,_){",
    "s3-2.1.50.js": "async function Dg(q,K,_,z){",
    "s4-2.1.61.js": "async function Mg(q,K,_){",
    "s5-2.1.68.js": "async function Kg(q,K,_){",
    "s6-2.1.112.js": "async function _c(q,K,_){return a0(),{messages:q}}",
    "ambiguous-two-sites.js": "async function Vd(A,Q,B){",
}
DEPS_FACTORIES = {
    "s5-2.1.68.js": "function Ny(){return{callModel:Bc6,microcompact:Kg,autocompact:Wq4,uuid:rP}}",
    "s6-2.1.112.js": "function gk(){return{callModel:eb6,microcompact:_c,autocompact:Qk,uuid:Pv}}",
}

# (old, new): wrap the value that receives `.messages` after MC, as ctxpatch will.
WRAPS: dict[str, tuple[str, str]] = {
    "s0-1.0.60.js": ("if(J=V.messages,", "if(J=_aggressiveTextPrune(V.messages),"),
    "s1-2.0.76.js": ("if(F=z.messages,", "if(F=_aggressiveTextPrune(z.messages),"),
    "s1p-2.1.7.js": ("if(z=O.messages,", "if(z=_aggressiveTextPrune(O.messages),"),
    "s1pp-2.1.30.js": ("if(G=V.messages,", "if(G=_aggressiveTextPrune(V.messages),"),
    "s3-2.1.50.js": (
        "await Dg(V,void 0,w,$);if(V=v.messages,",
        "await Dg(V,void 0,w,$);if(V=_aggressiveTextPrune(v.messages),",
    ),
    "s4-2.1.61.js": ("if(N=v.messages,", "if(N=_aggressiveTextPrune(v.messages),"),
    "s5-2.1.68.js": ("if(I=h.messages,", "if(I=_aggressiveTextPrune(h.messages),"),
    "s6-2.1.112.js": (
        "U=(await H.microcompact(U,v,w)).messages;",
        "U=_aggressiveTextPrune((await H.microcompact(U,v,w)).messages);",
    ),
    "ambiguous-two-sites.js": ("if(F=z.messages,", "if(F=_aggressiveTextPrune(z.messages),"),
}

SAMPLE = [
    {
        "type": "user",
        "uuid": "u-1",
        "message": {"role": "user", "content": "まず README を読んで 🧹 — then fix `x`"},
    },
    {
        "type": "assistant",
        "uuid": "a-1",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading it.\nいいよ"},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/r"}},
            ],
        },
    },
    {
        "type": "user",
        "uuid": "u-2",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "# R\n\u00e9"}
            ],
        },
    },
    {
        "type": "assistant",
        "uuid": "a-2",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "Done ✅"}]},
    },
]

NODE = shutil.which("node")


def _node() -> str:
    if NODE is None:
        if os.environ.get("CI"):
            pytest.fail("node is required in CI (set up node 20)")
        pytest.skip("node executable not found")
    return NODE


def _sums() -> dict[str, str]:
    out = {}
    for line in SUMS.read_text(encoding="utf-8").splitlines():
        digest, name = line.split("  ", 1)
        out[name] = digest
    return out


def _fixture_files() -> set[str]:
    return {
        p.relative_to(FIX).as_posix()
        for p in FIX.rglob("*")
        if p.is_file() and p.name not in NOT_FIXTURES and "__pycache__" not in p.parts
    }


def _read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def _staged(tmp_path: Path, name: str, text: str | None = None) -> Path:
    """Copy a fixture into a fresh module-type package (as a real install has)."""
    (tmp_path / "package.json").write_text('{"type":"module"}\n', encoding="utf-8")
    target = tmp_path / name
    if text is None:
        shutil.copyfile(FIX / name, target)
    else:
        target.write_bytes(text.encode("utf-8"))
    return target


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_")}
    full_env.update(env or {})
    return subprocess.run(
        [_node(), *args], cwd=cwd, capture_output=True, timeout=60, env=full_env, check=False
    )


def _load_make_ruflo():
    spec = importlib.util.spec_from_file_location("make_ruflo", FIX / "make_ruflo.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # keep fixtures/ clean
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module


# --- checksums (fail fast on an edited fixture) -----------------------------------------


def test_sha256sums_list_exactly_the_fixture_files():
    assert set(_sums()) == _fixture_files()


@pytest.mark.parametrize("name", sorted(_fixture_files()))
def test_sha256sum_matches(name):
    assert hashlib.sha256((FIX / name).read_bytes()).hexdigest() == _sums()[name], (
        f"{name} changed: fixtures are frozen; regenerate SHA256SUMS and README only on purpose"
    )


def test_readme_lists_every_fixture_and_hash():
    readme = _read("README.md")
    for name, digest in _sums().items():
        if name.startswith("native-2.1.113/"):
            continue
        assert f"`{name}`" in readme and digest in readme, name


# --- static shape --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(JS_FIXTURES))
def test_header_and_module_shape(name):
    shape, version = JS_FIXTURES[name]
    raw = (FIX / name).read_bytes()
    text = raw.decode("utf-8")
    assert 2_000 <= len(raw) <= (11_000 if name in RQ_FIXTURES else 10_000)
    lines = text.split("\n")
    shebang = (
        "#!/usr/bin/env -S node --no-warnings --enable-source-maps"
        if name.startswith(("s0-", "rq-1.0.60"))
        else "#!/usr/bin/env node"
    )
    assert lines[0] == shebang
    notice = (
        f"// Synthetic ctxpatch test fixture reproducing the call-site shape {shape} "
        f"of Claude Code {version}. Not Anthropic code."
    )
    if name == "ruflo-patched-2.0.76.js":
        assert lines[1] == "" and lines[2] == "/*AGGRESSIVE_TEXT_PRUNE_PATCH*/"
        assert notice in lines and f"// Version: {version}" in lines
    else:
        assert lines[1:4] == [notice, "", f"// Version: {version}"]
    assert re.search(r'^import\{[^}]+\}from"fs";', text, re.M)
    assert "import.meta.url" in text
    assert "\r" not in text and not raw.startswith(b"\xef\xbb\xbf")
    assert os.access(FIX / name, os.X_OK), "cli.js files are installed executable (0755)"


@pytest.mark.parametrize("name", sorted(LOOP_SITES))
def test_loop_sites_are_present_once_and_after_non_ascii(name):
    text = _read(name)
    raw = text.encode("utf-8")
    first_non_ascii = next(i for i, b in enumerate(raw) if b > 0x7F and i > 200)
    for site in LOOP_SITES[name]:
        assert text.count(site) == 1, site
        # byte offset != str offset at the call site: locators must not mix them up
        assert raw.index(site.encode()) > first_non_ascii
        assert raw.index(site.encode()) != text.index(site)


@pytest.mark.parametrize("name", sorted(MC_HEADS))
def test_micro_compact_function_and_markers(name):
    text = _read(name)
    assert text.count(MC_HEADS[name]) == 1
    if name == "s6-2.1.112.js":
        assert "DISABLE_MICROCOMPACT" not in text and "tengu_microcompact" not in text
        assert text.count(DEPS_FACTORIES[name]) == 1
        return
    start = text.index(MC_HEADS[name])
    body = text[start : text.index("\n", start)]
    assert text.count("process.env.DISABLE_MICROCOMPACT") == 1
    assert "process.env.DISABLE_MICROCOMPACT" in body
    assert text.count('"tengu_microcompact"') == 1 and '"tengu_microcompact"' in body
    # the help/usage text mentions the variable too (a trap for plain text search)
    assert text.count("DISABLE_MICROCOMPACT") >= 2
    assert "return{messages:" in body and "[Old tool result content cleared]" not in text
    if name in DEPS_FACTORIES:
        assert text.count(DEPS_FACTORIES[name]) == 1


def test_traps_specific_to_versions():
    s1p = _read("s1p-2.1.7.js")
    naive = re.findall(r"(?<![\w$.])lc\(", s1p)
    assert len(naive) == 7  # 4 calls + 1 definition + the regex literal + the class method
    assert re.search(r"/&\(\?:[^/]*\|lc\(", s1p) and "}lc(A,Q,B,G){" in s1p
    s1pp = _read("s1pp-2.1.30.js")
    assert (
        'if(hE(),u6(process.env.DISABLE_MICROCOMPACT)||f1("tengu_cache_plum_violet",!1))'
        "return{messages:q}" in s1pp
    )
    none = _read("none-1.0.50.js")
    for needle in ("DISABLE_MICROCOMPACT", "tengu_microcompact", ".microcompact", "microcompact"):
        assert needle not in none
    for name in ("s5-2.1.68.js", "s6-2.1.112.js"):
        text = _read(name)
        assert text.count(".microcompact(") == 2  # loop call + a non-generator decoy
        assert text.count("microcompact:") >= 3  # factory + override object + settings-like key
    assert "z=await Vd(F,void 0,Y);if(F=z.messages," in _read("s1-2.0.76.js")


# --- node: syntax, --version, --run -----------------------------------------------------------


@pytest.mark.node
@pytest.mark.parametrize("name", sorted(JS_FIXTURES))
def test_node_check_in_module_context(name):
    node = _node()
    with open(FIX / name, "rb") as fh:
        res = subprocess.run(
            [node, "--input-type=module", "--check"], stdin=fh, capture_output=True, timeout=60
        )
    assert res.returncode == 0, res.stderr.decode()


@pytest.mark.node
def test_node_check_is_meaningful():
    node = _node()
    broken = (FIX / "s1-2.0.76.js").read_bytes() + b"let x=;\n"
    res = subprocess.run(
        [node, "--input-type=module", "--check"], input=broken, capture_output=True, timeout=60
    )
    assert res.returncode != 0


@pytest.mark.node
@pytest.mark.parametrize("name", sorted(JS_FIXTURES))
def test_version_flag(name, tmp_path):
    target = _staged(tmp_path, name)
    res = _run(target.name, "--version", cwd=tmp_path)
    assert res.returncode == 0, res.stderr.decode()
    assert res.stdout.decode() == f"{JS_FIXTURES[name][1]} (Claude Code)\n"


@pytest.mark.node
@pytest.mark.parametrize("name", sorted(JS_FIXTURES))
def test_run_sends_the_input_messages_unchanged(name, tmp_path):
    target = _staged(tmp_path, name)
    (tmp_path / "msgs.json").write_text(json.dumps(SAMPLE, ensure_ascii=False), encoding="utf-8")
    res = _run(target.name, "--run", "msgs.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr.decode()
    out = res.stdout.decode("utf-8")
    assert out.count("\n") == 1 and out.endswith("\n")
    assert json.loads(out) == SAMPLE
    assert out == json.dumps(SAMPLE, ensure_ascii=False, separators=(",", ":")) + "\n"


@pytest.mark.node
@pytest.mark.parametrize("name", sorted(JS_FIXTURES))
def test_no_arguments_does_nothing(name, tmp_path):
    target = _staged(tmp_path, name)
    res = _run(target.name, cwd=tmp_path)
    assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["package.json", name])


@pytest.mark.node
@pytest.mark.parametrize("name", sorted(WRAPS))
def test_wrapping_the_post_mc_value_changes_what_is_sent(name, tmp_path):
    """The recorded array is the value right after MC: wrapping it must show in the output."""
    old, new = WRAPS[name]
    text = _read(name)
    assert text.count(old) == 1
    first_nl = text.index("\n")
    probe = "function _aggressiveTextPrune(m){return m.slice(-1)}\n"
    patched = text[: first_nl + 1] + probe + text[first_nl + 1 :].replace(old, new, 1)
    target = _staged(tmp_path, name, patched)
    (tmp_path / "msgs.json").write_text(json.dumps(SAMPLE), encoding="utf-8")
    res = _run(target.name, "--run", "msgs.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr.decode()
    assert json.loads(res.stdout) == SAMPLE[-1:]


# --- the ruflo pair ---------------------------------------------------------------------------


def test_rq_fixtures_are_what_make_rq_produces():
    spec = importlib.util.spec_from_file_location("make_rq", FIX / "make_rq.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # keep fixtures/ clean
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    expected = module.expected()
    assert sorted(expected) == sorted(RQ_FIXTURES)
    for name, text in expected.items():
        assert _read(name) == text, f"{name} is stale: run make_rq.py"


def test_ruflo_pair_is_what_make_ruflo_produces():
    make_ruflo = _load_make_ruflo()
    expected = make_ruflo.expected_pair(FIX)
    assert set(expected) == set(RUFLO_PAIR)
    for name, data in expected.items():
        assert (FIX / name).read_bytes() == data, f"{name} is stale: run make_ruflo.py"
    assert (FIX / RUFLO_PAIR[1]).read_bytes() == (FIX / "s1-2.0.76.js").read_bytes()
    patched = _read(RUFLO_PAIR[0])
    assert patched.count("/*AGGRESSIVE_TEXT_PRUNE_PATCH*/") == 1
    assert patched.count("/*END_AGGRESSIVE_TEXT_PRUNE_PATCH*/") == 1
    assert patched.count("if(F=_aggressiveTextPrune(z.messages),") == 1
    assert "z=await Vd(F,void 0,Y);if(F=z.messages," not in patched
    res = subprocess.run(
        [sys.executable, str(FIX / "make_ruflo.py"), "--check"], capture_output=True, timeout=60
    )
    assert res.returncode == 0, res.stderr.decode()


@pytest.mark.node
def test_ruflo_patched_fixture_prunes_old_text(tmp_path):
    target = _staged(tmp_path, RUFLO_PAIR[0])

    def msg(kind: str, text: str) -> dict:
        content = [{"type": "text", "text": text}]
        return {"type": kind, "message": {"role": kind, "content": content}}

    msgs = [msg("user", "a" * 40 + "\nmore"), msg("assistant", "b" * 40), msg("user", "c" * 40)]
    (tmp_path / "msgs.json").write_text(json.dumps(msgs), encoding="utf-8")
    env = {
        "CLAUDE_TEXT_PRUNE_THRESHOLD": "0",
        "CLAUDE_TEXT_PRUNE_KEEP": "1",
        "CLAUDE_TEXT_PRUNE_MAX_CHARS": "5",
    }
    res = _run(target.name, "--run", "msgs.json", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr.decode()
    sent = json.loads(res.stdout)
    texts = [m["message"]["content"][0]["text"] for m in sent]
    assert texts == ["aaaaa\n[earlier context pruned]", "bbbbb\n[earlier context pruned]", "c" * 40]
    # below the default threshold nothing changes
    res = _run(target.name, "--run", "msgs.json", cwd=tmp_path)
    assert json.loads(res.stdout) == msgs


# --- the native (no cli.js) layout ------------------------------------------------------------


def test_native_layout_has_no_cli_js():
    root = FIX / "native-2.1.113"
    pkg = json.loads((root / "package.json").read_text(encoding="utf-8"))
    assert pkg["name"] == "@anthropic-ai/claude-code" and pkg["version"] == "2.1.113"
    assert pkg["bin"] == {"claude": "bin/claude.exe"}
    assert "@anthropic-ai/claude-code-linux-x64" in pkg["optionalDependencies"]
    assert all(v == "2.1.113" for v in pkg["optionalDependencies"].values())
    assert not list(root.rglob("cli.js")) and not list(root.rglob("cli.mjs"))
    exe = (root / "bin" / "claude.exe").read_bytes()
    assert 300 <= len(exe) <= 1000 and b"\0" not in exe
    assert (root / "install.cjs").is_file() and (root / "cli-wrapper.cjs").is_file()
