"""The command line: every exit code, the --json shapes, discovery of installed copies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, copy_fixture
from conftest import run_cli as run
from typer.testing import CliRunner

from ctxpatch.cli.app import app
from ctxpatch.errors import ExitCode
from patcher import snippet

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("isolated_cli")


def js(*args: str) -> tuple[int, dict]:
    code, out, _ = run(*args, "--json")
    return code, json.loads(out)


RESULT_KEYS = {
    "path",
    "action",
    "state",
    "exit_code",
    "version",
    "package",
    "shape",
    "clearing",
    "reason",
    "backup",
    "notes",
}


def test_apply_check_revert_exit_codes_and_json(tmp_path: Path) -> None:
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")
    p = str(cli)
    code, doc = js("check", "-p", p)
    assert code == ExitCode.CHANGE_NEEDED == doc["exit_code"]
    assert set(doc) == {"ctxpatch", "exit_code", "chosen_by", "results", "recall"}
    (res,) = doc["results"]
    assert set(res) == RESULT_KEYS
    assert (res["state"], res["version"], res["shape"]) == ("UNPATCHED", "2.0.76", "S1")
    assert doc["recall"]["registered"] is False

    code, doc = js("apply", "-p", p)
    assert code == 0 and doc["results"][0]["action"] == "patched"
    assert doc["recall"]["registered"] is True  # recall/test_register.py: the entries
    assert [f["action"] for f in doc["recall"]["files"]] == ["created", "created"]
    assert js("check", "-p", p)[1]["recall"]["registered"] is True
    assert doc["results"][0]["backup"]["status"] == "valid"
    assert run("apply", "--check", "-p", p)[0] == 0
    assert run("check", "-p", p)[0] == 0
    code, _, err = run("apply", "-p", p)
    assert code == 0 and "already patched" in err

    code, doc = js("apply", "--revert", "-p", p)
    assert code == 0 and doc["results"][0]["action"] == "reverted"
    assert [f["action"] for f in doc["recall"]["files"]] == ["deleted", "deleted"]
    code, _, err = run("revert", "-p", p)
    assert code == 0 and "nothing to revert" in err
    assert cli.read_bytes() == (FIXTURES / "s1-2.0.76.js").read_bytes()


def test_human_check_output_goes_to_stdout(tmp_path: Path) -> None:
    cli = copy_fixture("s6-2.1.112.js", tmp_path / "p")
    code, out, err = run("check", "-p", str(cli))
    assert code == 1 and out.startswith("UNPATCHED") and "2.1.112" in out and err == ""
    assert out.splitlines()[-1].startswith("recall: not registered in ")
    code, out, err = run("apply", "-p", str(cli))
    assert code == 0 and out == "" and err.startswith("patched: ")


def test_outdated_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = copy_fixture("s6-2.1.112.js", tmp_path / "p")
    old = b"function _aggressiveTextPrune(m){return m}\n"
    monkeypatch.setattr(snippet, "source", lambda: old)
    monkeypatch.setattr(snippet, "sha", lambda: __import__("hashlib").sha256(old).hexdigest())
    assert run("apply", "-p", str(cli))[0] == 0
    monkeypatch.undo()
    monkeypatch.setenv("CTXPATCH_NPM_ROOT", "")
    code, doc = js("check", "-p", str(cli))
    assert code == 1 and doc["results"][0]["state"] == "OUTDATED"


def test_foreign_exits_3(tmp_path: Path) -> None:
    cli = copy_fixture("ruflo-patched-2.0.76.js", tmp_path / "p")
    code, doc = js("check", "-p", str(cli))
    assert code == ExitCode.REFUSED and doc["results"][0]["state"] == "FOREIGN"
    code, doc = js("apply", "-p", str(cli))
    assert code == ExitCode.REFUSED
    assert doc["results"][0]["error"]["error"] == "foreign_patch"
    assert set(doc["results"][0]["error"]) == {"error", "exit_code", "what", "why", "hint", "info"}


def test_refused_ambiguous_exits_3_with_hint(tmp_path: Path) -> None:
    cli = copy_fixture("ambiguous-two-sites.js", tmp_path / "p")
    code, _, err = run("apply", "-p", str(cli))
    assert code == 3
    assert "error: found 2 candidate" in err and "hint:" in err and "why:" in err


def test_unsupported_exits_4(tmp_path: Path) -> None:
    cli = copy_fixture("none-1.0.50.js", tmp_path / "p")
    code, doc = js("check", "-p", str(cli))
    assert code == ExitCode.UNSUPPORTED
    assert doc["results"][0]["state"] == "UNSUPPORTED" and "1.0.60" in doc["results"][0]["reason"]
    pkg = tmp_path / "native"
    shutil.copytree(FIXTURES / "native-2.1.113", pkg)
    code, _out, err = run("apply", "-p", str(pkg))
    assert code == 4 and "native binary" in err


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run("apply", "--check", "--revert")[0] == ExitCode.USAGE
    assert run("apply", "--no-such-option")[0] == ExitCode.USAGE
    assert run("frobnicate")[0] == ExitCode.USAGE


def test_internal_error_exits_5_without_traceback(tmp_path: Path, monkeypatch) -> None:
    cli = copy_fixture("s3-2.1.50.js", tmp_path / "p")
    monkeypatch.setattr(
        snippet, "source", lambda: b"function _aggressiveTextPrune(m){return m.?x}\n"
    )
    code, _, err = run("apply", "-p", str(cli))
    assert code == ExitCode.INTERNAL and "failed verification" in err and "Traceback" not in err

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr("patcher.check.check_file", boom)
    code, _, err = run("check", "-p", str(cli))
    assert code == ExitCode.INTERNAL and "internal error: RuntimeError: kaboom" in err


def test_nothing_found_exits_3_and_says_what_to_do(tmp_path: Path, monkeypatch) -> None:
    """An empty folder, HOME and PATH: every command says nothing is installed and how to
    install and route it; a `claude` on PATH that is a script is named, with the gateway hint."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("CTXPATCH_NPM_ROOT", "")
    monkeypatch.delenv("CTXPATCH_CLI_JS", raising=False)
    monkeypatch.chdir(tmp_path)
    for verb in ("apply", "check", "revert", "status", "inspect"):
        code, _, err = run(verb)
        assert code == 3, (verb, err)
        assert "error: no Claude Code installed here" in err
        assert "curl -fsSL https://claude.ai/install.sh | bash" in err
        assert 'eval "$(ctxpatch shell-init bash)"' in err
        assert "--path" in err or verb in ("status", "inspect")
    code, doc = js("check")
    assert code == 3 and doc["error"]["error"] == "not_found"
    script = tmp_path / "bin" / "claude"
    script.write_text('#!/bin/sh\nexec node /somewhere/cli.js "$@"\n')
    script.chmod(0o755)
    code, _, err = run("apply")
    assert code == 3 and f"`claude` on PATH ({script}) is neither a cli.js nor a native" in err
    assert "`ctxpatch run -- claude`" in err


def test_discovery_local_upward_patches_every_local_copy(tmp_path: Path, monkeypatch) -> None:
    nm = tmp_path / "proj" / "node_modules" / "@anthropic-ai"
    sdk = copy_fixture(
        "s6-2.1.112.js",
        nm / "claude-agent-sdk",
        package={"name": "@anthropic-ai/claude-agent-sdk", "version": "0.2.112"},
    )
    cc = copy_fixture(
        "s5-2.1.68.js",
        nm / "claude-code",
        package={"name": "@anthropic-ai/claude-code", "version": "2.1.68"},
    )
    glob = copy_fixture("s1-2.0.76.js", tmp_path / "global" / "@anthropic-ai" / "claude-code")
    monkeypatch.setenv("CTXPATCH_NPM_ROOT", str(tmp_path / "global"))
    deep = tmp_path / "proj" / "src" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    code, doc = js("apply")
    assert code == 0
    assert [r["path"] for r in doc["results"]] == [str(sdk), str(cc)]
    assert "local" in doc["chosen_by"]
    assert doc["results"][0]["package"] == "@anthropic-ai/claude-agent-sdk@0.2.112"
    assert b"ctxpatch:begin" not in glob.read_bytes()  # the global one is left alone

    code, out, _ = run("status")
    states = [line.split()[0] for line in out.splitlines() if not line.startswith(" ")]
    assert code == 0 and states == ["PATCHED", "PATCHED", "UNPATCHED"]
    code, doc = js("status")
    assert [r["state"] for r in doc["results"]] == ["PATCHED", "PATCHED", "UNPATCHED"]


def test_discovery_env_var_then_global(tmp_path: Path, monkeypatch) -> None:
    glob = copy_fixture("s1-2.0.76.js", tmp_path / "global" / "@anthropic-ai" / "claude-code")
    monkeypatch.setenv("CTXPATCH_NPM_ROOT", str(tmp_path / "global"))
    code, doc = js("check")
    assert code == 1 and doc["results"][0]["path"] == str(glob) and "global" in doc["chosen_by"]
    other = copy_fixture("s4-2.1.61.js", tmp_path / "elsewhere")
    monkeypatch.setenv("CTXPATCH_CLI_JS", str(other))
    code, doc = js("check")
    assert doc["results"][0]["path"] == str(other) and doc["chosen_by"] == "CTXPATCH_CLI_JS"


def test_concurrent_applies_patch_exactly_once(tmp_path: Path) -> None:
    cli = copy_fixture("s1pp-2.1.30.js", tmp_path / "p")
    original = cli.read_bytes()
    env = {**os.environ, "CTXPATCH_NPM_ROOT": ""}
    cmd = [sys.executable, "-m", "ctxpatch", "apply", "--json", "-p", str(cli)]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [o[1][-500:] for o in outs]
    actions = sorted(json.loads(o[0])["results"][0]["action"] for o in outs)
    assert actions == ["already-patched"] * 3 + ["patched"]
    data = cli.read_bytes()
    assert data.count(b"/*ctxpatch:begin") == 1 and data.count(b"/*ctxpatch:wrap*/") == 1
    assert run("revert", "-p", str(cli))[0] == 0 and cli.read_bytes() == original


def test_version_and_help() -> None:
    code, out, _ = run("--version")
    assert code == 0 and out.strip() == f"ctxpatch {__import__('ctxpatch').__version__}"
    for cmd in ("apply", "check", "revert", "status"):
        code, out, _ = run(cmd, "--help")
        assert code == 0 and "Example:" in out


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_the_fast_check_prints_what_the_app_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    """``ctxpatch check`` skips typer (bench: it runs at every start); same output, same code."""
    from ctxpatch.cli import main

    for name in ("s6-2.1.112.js", "ruflo-patched-2.0.76.js"):
        cli = copy_fixture(name, tmp_path / name)
        with pytest.raises(SystemExit) as stop:
            main(["check", "--path", str(cli), *extra])
        fast = (stop.value.code, *capsys.readouterr())
        r = runner.invoke(app, ["check", "--path", str(cli), *extra])
        assert fast == (r.exit_code, r.stdout, r.stderr)


def test_quick_check_args_only_take_plain_check_lines() -> None:
    from ctxpatch.cli.quickcheck import quick_check_args

    assert quick_check_args(["check"]) == (None, False)
    assert quick_check_args(["check", "--path=x", "--json"]) == (Path("x"), True)
    assert quick_check_args(["check", "-p", "x"]) == (Path("x"), False)
    for argv in (["check", "--help"], ["check", "-p"], ["check", "--json", "--json"], ["apply"]):
        assert quick_check_args(argv) is None, argv


def test_check_of_a_patched_file_imports_no_parser(tmp_path: Path) -> None:
    """What makes `check` fast: no typer/pydantic, no tree-sitter or esprima, no engine model."""
    cli = copy_fixture("s6-2.1.112.js", tmp_path / "p")
    assert run("apply", "-p", str(cli), "--no-node-check")[0] == 0
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ctxpatch", "check", "--path", str(cli)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("PATCHED"), proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    heavy = {"typer", "click", "rich", "pydantic", "tree_sitter", "esprima", "concurrent"}
    assert not heavy & imported
    assert {m for m in imported if m.startswith("engine")} <= {"engine", "engine.versions"}
