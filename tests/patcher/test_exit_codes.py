"""Every exit code of every command family, as README "Exit codes" and each --help state them.

One case per (command family, code), like black's ``--check`` tests: the README table and the
--help texts come from ``ctxpatch.cli.output.EXIT_CODES``, and each code is produced for real
(an injected bug for 5). With --json the envelope's ``exit_code`` is the process's exit code.
Codes whose cases need the real cli.js and node sandbox (verify 0/1) or npm (regress 0/1) are
in tests/e2e/test_verify.py and tests/patcher/test_regress.py.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, copy_fixture, need
from typer.testing import CliRunner

from ctxpatch.cli.app import app
from ctxpatch.cli.output import EXIT_CODES, help_codes
from patcher import snippet

runner = CliRunner()
JSON_COMMANDS = {
    "apply",
    "check",
    "revert",
    "status",
    "verify",
    "inspect",
    "simulate",
    "thresholds",
    "recall",
}


def boom(*a: object, **k: object) -> None:
    raise RuntimeError("an injected bug")


pytestmark = pytest.mark.usefixtures("isolated_cli")


Setup = Callable[[Path, pytest.MonkeyPatch], list[str]]


def fx(name: str, tmp: Path) -> str:
    return str(copy_fixture(name, tmp / "p"))


def patched(name: str, tmp: Path) -> str:
    path = fx(name, tmp)
    assert runner.invoke(app, ["apply", "-p", path, "--no-node-check"]).exit_code == 0
    return path


def native(tmp: Path) -> str:
    shutil.copytree(FIXTURES / "native-2.1.113", tmp / "native")
    return str(tmp / "native")


def broken_snippet(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(snippet, "source", lambda: b"function _aggressiveTextPrune(m){return m.?x}\n")


def empty(tmp: Path) -> str:
    (tmp / "cli.js").write_text("")
    return str(tmp / "cli.js")


def no_npm(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    (tmp / "bin").mkdir()
    mp.setenv("PATH", str(tmp / "bin"))
    mp.setenv("CTXPATCH_CACHE", str(tmp / "cache"))


CASES: dict[tuple[str, int], Setup] = {
    ("apply", 0): lambda t, mp: ["apply", "-p", fx("s1-2.0.76.js", t), "--no-node-check"],
    ("revert", 0): lambda t, mp: ["revert", "-p", patched("s1-2.0.76.js", t)],
    ("apply", 2): lambda t, mp: ["apply", "--check", "--revert"],
    ("revert", 2): lambda t, mp: ["revert", "--bogus"],
    ("apply", 3): lambda t, mp: ["apply", "-p", fx("ambiguous-two-sites.js", t)],
    ("revert", 3): lambda t, mp: ["revert", "-p", fx("ruflo-patched-2.0.76.js", t)],
    ("apply", 4): lambda t, mp: ["apply", "-p", fx("none-1.0.50.js", t)],
    ("revert", 4): lambda t, mp: ["revert", "-p", native(t)],
    ("apply", 5): lambda t, mp: [
        broken_snippet(t, mp),
        "apply",
        "-p",
        fx("s3-2.1.50.js", t),
        "--no-node-check",
    ][1:],
    ("revert", 5): lambda t, mp: [
        mp.setattr("patcher.ops.revert_file", boom),
        "revert",
        "-p",
        fx("s1-2.0.76.js", t),
    ][1:],
    ("check", 0): lambda t, mp: ["check", "-p", patched("s6-2.1.112.js", t)],
    ("check", 1): lambda t, mp: ["check", "-p", fx("s6-2.1.112.js", t)],
    ("check", 2): lambda t, mp: ["check", "--bogus"],
    ("check", 3): lambda t, mp: ["check", "-p", fx("ruflo-patched-2.0.76.js", t)],
    ("check", 4): lambda t, mp: ["check", "-p", fx("none-1.0.50.js", t)],
    ("check", 5): lambda t, mp: [
        mp.setattr("patcher.check.check_file", boom),
        "check",
        "-p",
        fx("s1-2.0.76.js", t),
    ][1:],
    ("status", 0): lambda t, mp: [mp.setenv("CTXPATCH_CLI_JS", fx("s1-2.0.76.js", t)), "status"][
        1:
    ],
    ("status", 2): lambda t, mp: ["status", "--path", "x"],
    ("status", 3): lambda t, mp: ["status"],
    ("status", 5): lambda t, mp: [mp.setattr("ctxpatch.cli.files.all_installs", boom), "status"][
        1:
    ],
    ("verify", 2): lambda t, mp: ["verify", "--timeout", "soon"],
    ("verify", 3): lambda t, mp: [need("node", "verify"), "verify", "-p", fx("s1-2.0.76.js", t)][
        1:
    ],
    ("verify", 4): lambda t, mp: [
        need("node", "verify"),
        "verify",
        "-p",
        patched("s0-1.0.60.js", t),
    ][1:],
    ("verify", 5): lambda t, mp: [
        mp.setattr("lab.verify.verify_install", boom),
        "verify",
        "-p",
        fx("s1-2.0.76.js", t),
    ][1:],
    ("inspect", 0): lambda t, mp: ["inspect", fx("s6-2.1.112.js", t)],
    ("inspect", 1): lambda t, mp: [
        (t / "cli.js").write_text("// Version: 2.0.76\nvar AA=13000,BB=20000,CC=20000;\n"),
        "inspect",
        str(t / "cli.js"),
    ][1:],
    ("inspect", 2): lambda t, mp: ["inspect", "--bogus"],
    ("inspect", 3): lambda t, mp: ["inspect", empty(t)],
    ("inspect", 4): lambda t, mp: ["inspect", native(t)],
    ("inspect", 5): lambda t, mp: [
        mp.setattr("patcher.inspect.inspect", boom),
        "inspect",
        fx("s6-2.1.112.js", t),
    ][1:],
    ("regress", 2): lambda t, mp: ["regress", "--jobs", "0"],
    ("regress", 3): lambda t, mp: [no_npm(t, mp), "regress", "--all"][1:],
    ("regress", 5): lambda t, mp: [mp.setattr("patcher.regress.select", boom), "regress"][1:],
    ("thresholds", 0): lambda t, mp: ["thresholds", "-p", "2.1.39"],
    ("simulate", 0): lambda t, mp: ["simulate", str(ROOT / "examples" / "spotter-session.jsonl")],
    ("thresholds", 2): lambda t, mp: ["thresholds", "-p", "banana"],
    ("simulate", 2): lambda t, mp: ["simulate", "x.jsonl", "--keep", "0"],
    ("simulate", 3): lambda t, mp: ["simulate", str(t / "missing.jsonl")],
    ("thresholds", 1): lambda t, mp: ["thresholds", "-p", "2.1.999", "--strict"],
    ("simulate", 1): lambda t, mp: [
        "simulate",
        str(ROOT / "examples" / "spotter-session.jsonl"),
        "-p",
        "2.1.999",
        "--strict",
    ],
    ("thresholds", 3): None,  # thresholds reads no input: nothing to refuse
    ("thresholds", 5): lambda t, mp: [
        mp.setattr("engine.claude_code.thresholds.compute_thresholds", boom),
        "thresholds",
    ][1:],
    ("report", 0): lambda t, mp: [
        (t / "projects").mkdir(),
        "report",
        "--projects",
        str(t / "projects"),
    ][1:],
    ("report", 2): lambda t, mp: ["report", "--jobs", "0"],
    ("report", 3): lambda t, mp: ["report", "--projects", str(t / "missing")],
    ("report", 5): lambda t, mp: [
        mp.setattr("usage.report.find_sessions", boom),
        (t / "projects").mkdir(),
        "report",
        "--projects",
        str(t / "projects"),
    ][2:],
    ("simulate", 5): lambda t, mp: [
        mp.setattr("engine.replay.session.simulate", boom),
        "simulate",
        str(ROOT / "examples" / "spotter-session.jsonl"),
    ][1:],
}
_HELD: list[socket.socket] = []  # a port kept busy for ("gateway", 3)


def _busy_port() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    _HELD.append(sock)
    return str(sock.getsockname()[1])


CASES[("gateway", 2)] = lambda t, mp: ["gateway", "--upstream", "ftp://example.com"]
CASES[("gateway", 3)] = lambda t, mp: ["gateway", "--port", _busy_port()]
CASES[("gateway", 5)] = lambda t, mp: [
    mp.setattr("gateway.server.Gateway.start", boom),
    "gateway",
][1:]
SPOTTER_EXAMPLE = str(ROOT / "examples" / "spotter-session.jsonl")
CASES[("recall", 0)] = lambda t, mp: [
    mp.setenv("CTXPATCH_STATE_DIR", str(t / "state")),
    "recall",
    "search",
    "pytest",
    "--transcript",
    SPOTTER_EXAMPLE,
][1:]
CASES[("recall", 2)] = lambda t, mp: ["recall", "search", "x", "--limit", "0"]
CASES[("recall", 3)] = lambda t, mp: [
    mp.setenv("CTXPATCH_STATE_DIR", str(t / "state")),
    "recall",
    "get",
    "toolu_not_in_this_session",
    "--transcript",
    SPOTTER_EXAMPLE,
][1:]
CASES[("recall", 5)] = lambda t, mp: [
    mp.setattr("recall.index.open_index", boom),
    "recall",
    "get",
    "toolu_x",
    "--transcript",
    SPOTTER_EXAMPLE,
][1:]
# verify and regress: their own e2e tests; gateway 0: tests/test_gateway_cli.py (SIGTERM)
ELSEWHERE = {
    ("verify", 0),
    ("verify", 1),
    ("regress", 0),
    ("regress", 1),
    ("gateway", 0),
}


def test_every_documented_code_has_a_case() -> None:
    documented = {
        (cmd, code)
        for fam, codes in EXIT_CODES.items()
        for cmd in fam.split(", ")
        for code in codes
    }
    assert documented - ELSEWHERE <= set(CASES)
    assert {k for k, v in CASES.items() if v is not None} <= documented


@pytest.mark.parametrize(
    "command,code",
    [k for k, v in CASES.items() if v is not None],
    ids=[f"{c}-{n}" for (c, n), v in CASES.items() if v is not None],
)
def test_exit_code(command: str, code: int, tmp_path: Path, monkeypatch) -> None:
    setup = CASES[(command, code)]
    assert setup is not None
    argv = setup(tmp_path, monkeypatch)
    r = runner.invoke(app, argv)
    assert r.exit_code == code, (argv, r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    if code != 2 and command in JSON_COMMANDS:
        r = runner.invoke(app, [*argv, "--json"])
        assert r.exit_code == code, (argv, r.stdout, r.stderr)
        doc = json.loads(r.stdout)
        assert doc["exit_code"] == code and doc["ctxpatch"]
        assert ("results" in doc) != ("error" in doc)
        if "error" in doc:
            assert doc["error"]["exit_code"] == code and doc["error"]["hint"]


def test_readme_table_is_the_code_table() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Exit codes") :].split("\n\n")[1]  # the table
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    table = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        family = ", ".join(re.findall(r"`([a-z]+)`", cells[0]))
        table[family] = {i: c for i, c in enumerate(cells[1:]) if c != "—"}
    assert table == EXIT_CODES


@pytest.mark.parametrize("command", sorted({c for f in EXIT_CODES for c in f.split(", ")}))
def test_help_lists_the_codes(command: str) -> None:
    r = runner.invoke(app, [command, "--help"], terminal_width=200)
    assert r.exit_code == 0
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", r.stdout).split())
    assert help_codes(command) in text
