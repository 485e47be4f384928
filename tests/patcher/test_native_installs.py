"""Native installs: discovery (native installer, PATH, npm wrapper + platform package, agent SDK,
Python SDK, a bare binary), the version read from the binary, and status / check / apply /
revert on them (text, JSON, exit codes; nothing is ever written). Synthetic Bun executables
only (tests/native_builder.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import native_builder as nbld
import pytest
from typer.testing import CliRunner

from ctxpatch.cli.app import app
from ctxpatch.errors import ExitCode
from patcher.discover import KINDS, kind_of, native_installs, native_of, targets
from patcher.native.package import platform_tag

runner = CliRunner()
IDLE_CHUNK = (  # our own code, shaped like 2.1.330's idle clearing (tests/patcher/test_native_levers)
    b'var Fl="tengu_some_flag",Kp=12,Cfg={minIdleSeconds:3900,keepToolUses:Kp};'
    b'function mode(){let{value:v,source:s}=get(Fl,"off");if(s==="fallback")return"unknown";'
    b'return v==="on"||v==="shadow"?v:"off"}'
    b'function edit(p){return{type:"clear_tool_uses_20250919",trigger:{type:"tool_uses",value:1}}}'
    b"class Flags{getEnvironmentOverrides(){return null}}"
    b"var d={readEnvironmentOverrides:()=>env.CLAUDE_INTERNAL_FC_OVERRIDES};"
)


def fake_claude(version: str = "2.1.330", code: bytes = IDLE_CHUNK) -> bytes:
    """A code-split Bun executable (> 64 KiB, the size under which a wrapper's bin/claude.exe
    counts as the install-time placeholder)."""
    head = b"// @bun @bytecode\n// Version: " + version.encode() + b"\n"
    mods = [
        nbld.Mod("/$bunfs/root/cli", head + b'import"/$bunfs/root/chunk-0000abcd.js";\n'),
        nbld.Mod("/$bunfs/root/chunk-0000abcd.js", head + code),
        nbld.Mod("/$bunfs/root/pad.bin", b"\x01" * 70_000, loader="file", fmt=0),
    ]
    return nbld.elf(nbld.blob(mods, entry_point=0))


def put(path: Path, data: bytes, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def pkg(folder: Path, name: str, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"name": name, "version": version}))
    return folder


def npm_wrapper(
    nm: Path, short: str = "claude-code", version: str = "2.1.330", cc: str = "2.1.330"
) -> Path:
    """A wrapper package ``version`` and its platform package holding Claude Code ``cc``."""
    wrapper = pkg(nm / "@anthropic-ai" / short, f"@anthropic-ai/{short}", version)
    put(wrapper / "bin" / "claude.exe", b"#!/bin/sh\necho not installed\n")  # the placeholder
    plat = pkg(
        nm / "@anthropic-ai" / f"{short}-{platform_tag()}",
        f"@anthropic-ai/{short}-{platform_tag()}",
        version,
    )
    put(plat / "claude", fake_claude(cc))
    return wrapper


def installer(home: Path, version: str = "2.1.330") -> Path:
    exe = put(home / ".local" / "share" / "claude" / "versions" / version, fake_claude(version))
    link = home / ".local" / "bin" / "claude"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(exe)
    return link


def python_sdk(project: Path, version: str = "2.1.330") -> Path:
    site = project / ".venv" / "lib" / "python3.12" / "site-packages" / "claude_agent_sdk"
    return put(site / "_bundled" / "claude", fake_claude(version))


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: sha256 and mtime (nothing may change, not even a touch)."""
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty world: HOME, PATH and the current folder in tmp, no global npm."""
    h = tmp_path / "home"
    h.mkdir()
    (tmp_path / "bin").mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("CTXPATCH_NPM_ROOT", "")
    monkeypatch.delenv("CTXPATCH_CLI_JS", raising=False)
    monkeypatch.chdir(tmp_path / "work")
    return h


def js(*args: str) -> tuple[int, dict]:
    r = runner.invoke(app, [*args, "--json"])
    return r.exit_code, json.loads(r.stdout)


# --- discovery -------------------------------------------------------------------------------


def test_kinds(tmp_path: Path) -> None:
    home = tmp_path / "h"
    link = installer(home)
    assert native_of(link).kind == "native installer"  # type: ignore[union-attr]
    assert native_of(link).binary == link.resolve()  # type: ignore[union-attr]
    assert native_of(home / ".local" / "share" / "claude").kind == "native installer"  # type: ignore[union-attr]
    nm = tmp_path / "p" / "node_modules"
    wrapper = npm_wrapper(nm)
    ni = native_of(wrapper)
    assert ni is not None and ni.kind == "npm wrapper"
    assert ni.binary.parent.name == f"claude-code-{platform_tag()}"
    sdk = npm_wrapper(nm, "claude-agent-sdk", "0.3.330")
    assert native_of(sdk).kind == "agent-sdk"  # type: ignore[union-attr]
    bundled = python_sdk(tmp_path / "p")
    for given in (bundled, bundled.parent, bundled.parent.parent):
        assert native_of(given).kind == "python sdk"  # type: ignore[union-attr]
    bare = put(tmp_path / "opt" / "claude", fake_claude())
    assert native_of(bare).kind == "binary" and kind_of(bare) in KINDS  # type: ignore[union-attr]


def test_not_native(tmp_path: Path) -> None:
    cli = put(tmp_path / "cc" / "cli.js", b"// Version: 2.1.112\nvar x=1;\n", 0o644)
    assert native_of(cli) is None and native_of(cli.parent) is None  # a cli.js package
    put(cli.parent / "claude", fake_claude())  # a binary beside cli.js: still the JS package
    assert native_of(cli.parent) is None
    placeholder = pkg(
        tmp_path / "w" / "@anthropic-ai" / "claude-code", "@anthropic-ai/claude-code", "2.1.330"
    )
    put(placeholder / "bin" / "claude.exe", b"#!/bin/sh\nexit 1\n")
    assert native_of(placeholder) is None  # no platform package: nothing to read
    assert native_of(tmp_path / "missing") is None


def test_installer_folder_prefers_the_linked_version(tmp_path: Path) -> None:
    home = tmp_path / "h"
    installer(home, "2.1.200")
    put(home / ".local" / "share" / "claude" / "versions" / "2.1.330", fake_claude("2.1.330"))
    ni = native_of(home / ".local" / "share" / "claude")
    assert ni is not None and ni.binary.name == "2.1.200"  # the one the link runs
    (home / ".local" / "bin" / "claude").unlink()
    ni = native_of(home / ".local" / "share" / "claude" / "versions")
    assert ni is not None and ni.binary.name == "2.1.330"  # else the newest


def test_native_installs_found_where_users_have_them(home: Path, tmp_path: Path) -> None:
    link = installer(home)
    other = put(tmp_path / "opt" / "claude-dev", fake_claude("2.1.331"))
    (tmp_path / "bin" / "claude").symlink_to(other)
    python_sdk(tmp_path)  # a .venv above the current folder
    found = native_installs(os.environ, Path.cwd())
    assert [i.path for i in found] == [
        link,
        tmp_path / "bin" / "claude",
        python_sdk(tmp_path),
    ]
    # with nothing in node_modules or npm's global root, apply/check/revert act on these
    chosen, how = targets(None, os.environ, Path.cwd())
    assert len(chosen) == 3 and "native installs" in how


def test_path_claude_that_is_the_installer_link_is_listed_once(home: Path, tmp_path: Path) -> None:
    link = installer(home)
    (tmp_path / "bin" / "claude").symlink_to(link)
    code, doc = js("status")
    assert code == 0
    assert [r["binary"] for r in doc["results"]] == [str(link.resolve())]


def test_hard_linked_wrapper_binary_is_listed_once(home: Path, tmp_path: Path) -> None:
    wrapper = npm_wrapper(Path.cwd() / "node_modules")
    exe = wrapper / "bin" / "claude.exe"
    exe.unlink()
    os.link(wrapper.parent / f"claude-code-{platform_tag()}" / "claude", exe)  # as install.cjs
    (tmp_path / "bin" / "claude").symlink_to(exe)
    code, doc = js("status")
    assert code == 0 and len(doc["results"]) == 1
    assert doc["results"][0]["kind"] == "npm wrapper"


# --- the commands ----------------------------------------------------------------------------


def test_status_lists_native_installs_with_version_kind_and_lever(
    home: Path, tmp_path: Path
) -> None:
    installer(home, "2.1.330")
    npm_wrapper(Path.cwd() / "node_modules", "claude-agent-sdk", "0.3.330")
    python_sdk(Path.cwd(), "2.1.329")
    code, doc = js("status")
    assert code == 0 == doc["exit_code"]
    got = {(r["kind"], r["version"], r["lever"], r["state"]) for r in doc["results"]}
    assert got == {
        ("agent-sdk", "2.1.330", "gateway", "NATIVE"),
        ("native installer", "2.1.330", "gateway", "NATIVE"),
        ("python sdk", "2.1.329", "gateway", "NATIVE"),
    }
    r = runner.invoke(app, ["status"])
    assert r.exit_code == 0
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("NATIVE")]
    assert len(lines) == 3
    assert any("Claude Code 2.1.329  python sdk, lever gateway" in ln for ln in lines)


def test_check_apply_revert_on_a_native_install_write_nothing(home: Path, tmp_path: Path) -> None:
    link = installer(home)
    settings = home / ".claude" / "settings.json"
    put(settings, b'{\n  // mine\n  "env": {"A": "1"},\n}\n', 0o644)
    before = snapshot(tmp_path)

    code, doc = js("check", "-p", str(link))
    assert code == ExitCode.UNSUPPORTED == doc["exit_code"]
    (r,) = doc["results"]
    assert (r["state"], r["action"], r["version"], r["kind"]) == (
        "NATIVE", "checked", "2.1.330", "native installer",
    )  # fmt: skip
    assert (r["lever"], r["lever_state"]) == ("gateway", "nothing-to-write")
    assert r["binary"] == str(link.resolve()) and r["path"] == str(link)
    assert r["lever_facts"]["idle_flag"] == "tengu_some_flag"
    assert r["lever_facts"]["flag_overrides"] == "compiled-out"
    # not on PATH here (PATH is tmp/bin): the hint names the path that exists
    assert "`claude` on PATH is none: run `ctxpatch run -- ~/.local/bin/claude …`" in r["notes"][0]

    out = runner.invoke(app, ["check", "-p", str(link)])
    assert out.exit_code == 4
    assert out.stdout.startswith(f"NATIVE      {link}  Claude Code 2.1.330  native installer")
    assert "remote flag tengu_some_flag" in out.stdout

    code, doc = js("apply", "-p", str(link))
    assert code == 4 and doc["results"][0]["action"] == "nothing-to-write"
    out = runner.invoke(app, ["apply", "-p", str(link)])
    assert out.exit_code == 4
    assert "nothing written (native build)" in out.stderr
    assert "ctxpatch run -- ~/.local/bin/claude" in out.stderr

    code, doc = js("revert", "-p", str(link))
    assert code == 0 and doc["results"][0]["action"] == "not-patched"
    assert "nothing to revert" in doc["results"][0]["reason"]
    assert snapshot(tmp_path) == before  # the install and settings.json, byte for byte


def test_claude_on_path_apply_gives_the_shell_init_line_revert_names_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = installer(home)
    (tmp_path / "bin" / "claude").symlink_to(link)
    monkeypatch.setenv("SHELL", "/bin/bash")
    out = runner.invoke(app, ["apply"])
    assert out.exit_code == 4
    assert (
        "nothing written; to make `claude` go through the gateway in every new bash, add this "
        'line to ~/.bashrc: eval "$(ctxpatch shell-init bash)"; or run `ctxpatch run -- claude …`'
    ) in out.stderr
    rc = home / ".bashrc"
    rc.write_bytes(b'alias ll="ls -l"\neval "$(ctxpatch shell-init bash)"\n')
    before = snapshot(tmp_path)
    code, doc = js("apply")
    assert code == 4
    assert (
        "already goes through the gateway in new shells (line 2 of ~/.bashrc"
        in (doc["results"][0]["notes"][0])
    )
    out = runner.invoke(app, ["revert"])
    assert out.exit_code == 0
    assert (
        'to stop `claude` going through the gateway, remove line 2 of ~/.bashrc: `eval "$('
        'ctxpatch shell-init bash)"` (ctxpatch never edits rc files)'
    ) in out.stderr
    assert snapshot(tmp_path) == before  # the rc file too: revert names the line, never edits


def test_npm_local_hint_names_the_bin_that_exists(home: Path, tmp_path: Path) -> None:
    wrapper = npm_wrapper(Path.cwd() / "node_modules")
    bin_link = Path.cwd() / "node_modules" / ".bin" / "claude"
    bin_link.parent.mkdir()
    bin_link.symlink_to(wrapper / "bin" / "claude.exe")
    code, doc = js("check")
    assert code == 4
    note = doc["results"][0]["notes"][0]
    assert "ctxpatch run -- ./node_modules/.bin/claude …" in note
    assert "ctxpatch run -- claude" not in note  # rc 2 here: no claude on PATH
    out = runner.invoke(app, ["status"])
    assert "ctxpatch run -- ./node_modules/.bin/claude" in out.stderr
    sub = Path.cwd() / "src"
    sub.mkdir()
    os.chdir(sub)
    code, doc = js("check")
    assert "ctxpatch run -- ../node_modules/.bin/claude …" in doc["results"][0]["notes"][0]


def test_python_sdk_hint_is_the_one_liner(home: Path) -> None:
    python_sdk(Path.cwd())
    code, doc = js("check")
    assert code == 4
    assert "import ctxpatch.agent_sdk; ctxpatch.agent_sdk.enable()" in doc["results"][0]["notes"][0]


def test_check_without_path_uses_the_native_installs(home: Path) -> None:
    installer(home)
    code, doc = js("check")
    assert code == 4 and "native installs" in doc["chosen_by"]
    assert doc["results"][0]["kind"] == "native installer"


def test_package_folders_are_accepted(home: Path) -> None:
    wrapper = npm_wrapper(Path.cwd() / "node_modules")
    code, doc = js("check", "-p", str(wrapper))
    assert code == 4
    (r,) = doc["results"]
    assert r["kind"] == "npm wrapper" and r["version"] == "2.1.330"
    assert r["package"] == "@anthropic-ai/claude-code@2.1.330"
    assert r["binary"].endswith(f"claude-code-{platform_tag()}/claude")


def test_a_version_without_the_edit_builder(home: Path) -> None:
    exe = put(
        home / "claude",
        fake_claude("2.1.113", b"let f=on(process.env.USE_API_CONTEXT_MANAGEMENT)&&!1;"),
    )
    code, doc = js("check", "-p", str(exe))
    (r,) = doc["results"]
    assert code == 4 and r["kind"] == "binary" and r["version"] == "2.1.113"
    assert "never builds a clear_tool_uses_20250919 edit" in r["reason"]
    assert r["lever_facts"]["switches"] == {"USE_API_CONTEXT_MANAGEMENT": "compiled-off"}


def test_a_damaged_native_file_is_an_error_result(home: Path) -> None:
    exe = put(home / "claude", b"\x7fELF\x02\x01\x01" + b"\0" * 100)
    code, doc = js("check", "-p", str(exe))
    assert code == ExitCode.REFUSED
    assert doc["results"][0]["state"] == "ERROR" and doc["results"][0]["error"]["what"]


def test_inspect_reports_the_lever(home: Path) -> None:
    exe = put(home / "claude", fake_claude("2.1.330"))
    r = runner.invoke(app, ["inspect", str(exe), "--json"])
    doc = json.loads(r.stdout)
    rep = doc["results"][0] if "results" in doc else doc
    assert rep["lever"]["lever"] == "gateway"
    assert rep["lever"]["facts"]["idle_flag"] == "tengu_some_flag"
    text = runner.invoke(app, ["inspect", str(exe)]).stdout
    assert "lever: gateway (no in-binary switch" in text


def test_kind_follows_the_links(tmp_path: Path) -> None:
    """An installer version that is itself a link (to a binary anywhere) is still the native
    installer's; a link on PATH to a plain binary is a binary."""
    real = put(tmp_path / "store" / "claude", fake_claude())
    versions = tmp_path / "h" / ".local" / "share" / "claude" / "versions"
    versions.mkdir(parents=True)
    (versions / "2.1.330").symlink_to(real)
    link = tmp_path / "h" / ".local" / "bin" / "claude"
    link.parent.mkdir(parents=True)
    link.symlink_to(versions / "2.1.330")
    ni = native_of(link)
    assert ni is not None and ni.kind == "native installer" and ni.binary == real
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "claude").symlink_to(real)
    assert native_of(tmp_path / "bin" / "claude").kind == "binary"  # type: ignore[union-attr]


def test_python_sdk_in_a_windows_venv(tmp_path: Path) -> None:
    exe = put(
        tmp_path
        / "venv"
        / "Lib"
        / "site-packages"
        / "claude_agent_sdk"
        / "_bundled"
        / "claude.exe",
        nbld.pe(nbld.blob([nbld.Mod("/$bunfs/root/cli", b"// Version: 2.1.330\n")])),
    )
    from patcher.discover import python_sdk_binaries

    assert python_sdk_binaries(tmp_path) == [exe]
    assert native_of(exe.parent.parent).kind == "python sdk"  # type: ignore[union-attr]


def test_result_native_part_serialises_at_the_top_level_after_the_rest() -> None:
    """``Result.native`` is one optional part; its JSON keys stay where the five native-only
    fields were (after ``error``, in this order), and a cli.js Result has none of them."""
    from patcher.result import NativeFacts, Result

    facts = {"builds_edit": False, "switches": {}}
    part = NativeFacts("binary", "gateway", "nothing-to-write", "/x/claude", facts)
    r = Result("/x/claude", "checked", "NATIVE", 4, version="2.1.330", native=part)
    doc = r.to_json()
    assert list(doc)[-6:] == ["notes", "kind", "lever", "lever_state", "binary", "lever_facts"]
    assert (doc["kind"], doc["lever_facts"]) == ("binary", facts)
    assert doc["lever_facts"] is not facts  # copied, as the Result's own dicts are
    assert "native" not in doc and "error" not in doc
    plain = Result("/x/cli.js", "checked", "UNPATCHED", 0).to_json()
    assert not {"native", "kind", "lever", "lever_state", "binary", "lever_facts"} & set(plain)
    assert r == Result("/x/claude", "checked", "NATIVE", 4, version="2.1.330", native=part)
