"""Every command family that reads a file, given what is not one: a text file that is not Claude
Code's (``/etc/passwd``-like), a missing file, a folder. README "Exit codes": each is a refusal
(3) with what, why and a hint, never a report of a bogus file (exit 0) nor "unsupported build" (4).
``status`` lists what it was pointed at (0) and says why that copy is an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from ctxpatch.errors import ExitCode

pytestmark = pytest.mark.usefixtures("isolated_cli")

PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)


@pytest.fixture(params=["not_a_bundle", "missing", "folder"])
def bad(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "not_a_bundle":
        p = tmp_path / "passwd"
        p.write_text(PASSWD)
    elif request.param == "missing":
        p = tmp_path / "nothing-here.js"
    else:
        p = tmp_path / "a-folder"
        p.mkdir()
    return p


# (command line, the hint of the refusal must name) per command family reading a cli.js
FILE_COMMANDS = {
    "apply": ["apply", "--path"],
    "revert": ["revert", "--path"],
    "check": ["check", "--path"],
    "verify": ["verify", "--path"],
    "inspect": ["inspect"],
}


@pytest.mark.parametrize("family", list(FILE_COMMANDS))
def test_a_file_command_refuses_what_is_not_a_cli_js(family: str, bad: Path) -> None:
    code, out, err = run_cli(*FILE_COMMANDS[family], str(bad), "--json")
    assert code == ExitCode.REFUSED, (family, out, err)
    doc = json.loads(out)
    assert doc["exit_code"] == ExitCode.REFUSED
    error = doc.get("error") or doc["results"][0]["error"]
    assert error["exit_code"] == ExitCode.REFUSED
    assert str(bad) in error["what"] and error["hint"], error
    # and in text: an error line, no state of a bundle
    code, out, err = run_cli(*FILE_COMMANDS[family], str(bad))
    assert code == ExitCode.REFUSED
    assert "error:" in out + err and "UNSUPPORTED" not in out + err and "PASS" not in out


def test_a_text_file_is_named_not_a_cli_js(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text(PASSWD)
    code, out, _ = run_cli("check", "--path", str(passwd), "--json")
    error = json.loads(out)["results"][0]["error"]
    assert code == 3 and error["error"] == "not_a_bundle"
    assert "is not Claude Code's cli.js" in error["what"]


def test_status_lists_what_it_was_pointed_at_and_why_it_is_an_error(
    bad: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXPATCH_CLI_JS", str(bad))
    code, out, err = run_cli("status")
    assert code == ExitCode.OK  # status: "listed every copy found"
    assert out.startswith("ERROR") and str(bad) in out
    assert "error:" in err and "hint:" in err  # the reason, not a bare ERROR
    code, out, _ = run_cli("status", "--json")
    (result,) = json.loads(out)["results"]
    assert result["state"] == "ERROR" and result["exit_code"] == ExitCode.REFUSED


@pytest.mark.parametrize(
    "args",
    [
        ["simulate"],
        ["recall", "search", "x", "--transcript"],
        ["recall", "get", "toolu_x", "--transcript"],
    ],
    ids=["simulate", "recall-search", "recall-get"],
)
def test_a_transcript_command_refuses_what_is_not_a_transcript(args: list[str], bad: Path) -> None:
    code, out, err = run_cli(*args, str(bad), "--json")
    assert code == ExitCode.REFUSED, (args, out, err)
    error = json.loads(out)["error"]
    assert error["error"] == "bad_transcript" and str(bad) in error["what"] and error["hint"]
