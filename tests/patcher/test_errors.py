"""Failures: every one is a what/why/hint with the right exit code and the one JSON envelope.

The defects of issue #10 each have a test here that failed before the fix: a bad
CTXPATCH_LOCK_TIMEOUT (1), environment failures as refusals (4), an unreadable cli.js and the
backup given as --path (8), status's exit_code, revert through a proven backup and marker text
in an unpatched file (9). Conditions a test cannot make for real (a full disk, an immutable file,
no memory) are injected at the system call.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import time
from pathlib import Path

import pytest
from conftest import copy_fixture
from conftest import run_cli as run

from ctxpatch.cli.files import lock_timeout
from ctxpatch.errors import (
    CtxpatchError,
    EnvironmentFailure,
    ExitCode,
    FileAccess,
    InternalError,
    UsageError,
    from_exception,
)
from patcher import fsio, markers, plan, snippet

ENVELOPE_ERROR_KEYS = {"ctxpatch", "exit_code", "error"}
ERROR_KEYS = {"error", "exit_code", "what", "why", "hint", "info"}


pytestmark = pytest.mark.usefixtures("isolated_cli")


def run_json(*args: str) -> tuple[int, dict]:
    code, out, err = run(*args, "--json")
    assert "Traceback" not in out + err
    doc = json.loads(out)
    assert doc["exit_code"] == code  # the field is the real exit code, always
    return code, doc


def file_error(doc: dict) -> dict:
    (res,) = doc["results"]
    assert res["state"] == "ERROR" and set(res["error"]) == ERROR_KEYS
    assert res["error"]["what"] and res["error"]["why"] and res["error"]["hint"]
    return res["error"]


# ------------------------------------------------------------ defect 1: CTXPATCH_LOCK_TIMEOUT


@pytest.mark.parametrize("value", ["", "abc", "nan", "-1", "inf"])
def test_bad_lock_timeout_is_a_usage_error(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")
    before = cli.read_bytes()
    monkeypatch.setenv("CTXPATCH_LOCK_TIMEOUT", value)
    for verb in ("apply", "revert"):
        code, doc = run_json(verb, "-p", str(cli))
        assert code == ExitCode.USAGE and set(doc) == ENVELOPE_ERROR_KEYS
        assert doc["error"]["error"] == "usage" and "CTXPATCH_LOCK_TIMEOUT" in doc["error"]["what"]
        code, _, err = run(verb, "-p", str(cli))
        assert code == 2 and "error: CTXPATCH_LOCK_TIMEOUT" in err and "hint:" in err
    assert cli.read_bytes() == before
    # check never takes the lock: it reports the state as always
    assert run("check", "-p", str(cli))[0] == ExitCode.CHANGE_NEEDED


def test_nan_lock_timeout_never_waits_on_a_held_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")
    monkeypatch.setenv("CTXPATCH_LOCK_TIMEOUT", "nan")
    started = time.monotonic()
    with fsio.folder_lock(cli.parent, timeout=0):  # held by "another run"
        assert run("apply", "-p", str(cli))[0] == ExitCode.USAGE
    assert time.monotonic() - started < 5


def test_good_lock_timeouts() -> None:
    assert lock_timeout({}) == fsio.DEFAULT_LOCK_TIMEOUT
    assert lock_timeout({"CTXPATCH_LOCK_TIMEOUT": "0"}) == 0
    assert lock_timeout({"CTXPATCH_LOCK_TIMEOUT": " 2.5 "}) == 2.5
    with pytest.raises(UsageError):
        lock_timeout({"CTXPATCH_LOCK_TIMEOUT": "nan"})


# ---------------------------------------------------- defect 4: environment failures refuse


def _apply_refused(cli: Path, code_name: str) -> dict:
    before = cli.read_bytes()
    code, doc = run_json("apply", "-p", str(cli), "--no-node-check")
    error = file_error(doc)
    assert code == ExitCode.REFUSED and error["error"] == code_name, error
    assert cli.read_bytes() == before  # nothing written
    assert not list(cli.parent.glob(".cli.js*.ctxpatch"))  # no temp file left
    return error


def test_disk_full_is_a_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fsio.os, "fsync", full)
    error = _apply_refused(cli, "environment")
    assert "disk is full" in error["why"] and "free some space" in error["hint"]
    assert error["info"]["errno"] == "ENOSPC"


def test_immutable_file_is_a_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`chattr +i cli.js`: the rename over it fails with EPERM (root included)."""
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")

    def immutable(src: object, dst: object) -> None:
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(src), None, str(dst))

    monkeypatch.setattr(fsio.os, "replace", immutable)
    error = _apply_refused(cli, "file_access")
    assert "immutable" in error["why"] and "chattr -i" in error["hint"]


def test_symlink_loop_is_a_refusal(tmp_path: Path) -> None:
    loop = tmp_path / "loop.js"
    loop.symlink_to(tmp_path / "other.js")
    (tmp_path / "other.js").symlink_to(loop)
    for verb in ("check", "apply", "revert"):
        code, doc = run_json(verb, "-p", str(loop))
        error = file_error(doc)
        assert code == ExitCode.REFUSED and error["error"] == "file_access"
        assert "symlink loop" in error["why"]


def test_missing_ctxpatch_node_is_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")
    monkeypatch.setenv("CTXPATCH_NODE", str(tmp_path / "no-such-node"))
    before = cli.read_bytes()
    code, doc = run_json("apply", "-p", str(cli))
    error = file_error(doc)
    assert code == ExitCode.REFUSED and error["error"] == "node_missing"
    assert "CTXPATCH_NODE" in error["what"] and "--no-node-check" in error["hint"]
    assert cli.read_bytes() == before


def test_out_of_memory_is_a_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")

    def no_memory(*a: object, **k: object) -> None:
        raise MemoryError

    monkeypatch.setattr(plan, "plan_patch", no_memory)
    error = _apply_refused(cli, "environment")
    assert "memory" in error["what"]


def test_from_exception_maps_the_environment_and_keeps_bugs_internal() -> None:
    assert isinstance(from_exception(OSError(errno.EIO, "I/O error", "x")), EnvironmentFailure)
    assert isinstance(from_exception(PermissionError(errno.EACCES, "denied", "x")), FileAccess)
    assert from_exception(RuntimeError("Symlink loop from '/a'")).exit_code == ExitCode.REFUSED
    bug = from_exception(KeyError("k"))
    assert isinstance(bug, InternalError) and bug.exit_code == ExitCode.INTERNAL
    same = FileAccess("x")
    assert from_exception(same) is same


# ------------------------------------------------- defect 8: unreadable cli.js, the backup


def test_unreadable_cli_js_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user without read permission (root reads anyway, so the denial is injected)."""
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")
    real_access, real_read = os.access, pathlib.Path.read_bytes

    def access(path: object, mode: int, **kw: object) -> bool:
        if Path(os.fspath(path)) == cli and mode & os.R_OK:  # type: ignore[arg-type]
            return False
        return real_access(path, mode, **kw)  # type: ignore[arg-type]

    def read_bytes(self: Path) -> bytes:
        if self == cli:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_read(self)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(pathlib.Path, "read_bytes", read_bytes)
    for verb in ("check", "apply", "revert"):
        code, doc = run_json(verb, "-p", str(cli))
        error = file_error(doc)
        assert code == ExitCode.REFUSED and error["error"] == "file_access", (verb, error)
    code, _, err = run("inspect", str(cli))
    assert code == ExitCode.REFUSED and "cannot read" in err


def test_the_backup_is_never_acted_on(tmp_path: Path) -> None:
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")
    assert run("apply", "-p", str(cli), "--no-node-check")[0] == 0
    backup = cli.with_name("cli.js.backup")
    link = tmp_path / "p" / "looks-fine.js"
    link.symlink_to(backup)
    saved = backup.read_bytes()
    for given in (backup, link):
        for verb in ("apply", "check", "revert"):
            code, doc = run_json(verb, "-p", str(given))
            error = file_error(doc)
            assert code == ExitCode.REFUSED and error["error"] == "not_a_bundle"
            assert "backup" in error["what"] and str(cli) in error["hint"]
    assert backup.read_bytes() == saved
    assert b"ctxpatch:begin" not in saved


# ---------------------------------------- defect 9: status, tampered markers, marker text


def test_status_json_exit_code_is_the_exit_code(tmp_path: Path, monkeypatch) -> None:
    proj = tmp_path / "proj"
    copy_fixture("s1-2.0.76.js", proj / "node_modules" / "@anthropic-ai" / "claude-code")
    monkeypatch.chdir(proj)
    code, doc = run_json("status")
    assert code == 0 and doc["results"][0]["state"] == "UNPATCHED"
    assert doc["results"][0]["exit_code"] == ExitCode.CHANGE_NEEDED  # per file, as check says
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, doc = run_json("status")
    assert code == ExitCode.REFUSED and doc["error"]["error"] == "not_found"


def test_tampered_markers_revert_through_the_proven_backup(tmp_path: Path) -> None:
    cli = copy_fixture("s6-2.1.112.js", tmp_path / "p")
    original = cli.read_bytes()
    assert run("apply", "-p", str(cli), "--no-node-check")[0] == 0
    cli.write_bytes(cli.read_bytes() + b"\n/*ctxpatch:/wrap*/\n")  # a second unwrap marker
    code, doc = run_json("check", "-p", str(cli))
    (res,) = doc["results"]
    assert code == ExitCode.REFUSED and res["state"] == "FOREIGN"
    assert res["backup"]["status"] == "valid"
    code, doc = run_json("revert", "-p", str(cli))
    assert code == 0 and doc["results"][0]["action"] == "reverted"
    assert "backup" in doc["results"][0]["reason"]
    assert cli.read_bytes() == original


def test_tampered_markers_without_a_proof_refuse_and_name_the_backup(tmp_path: Path) -> None:
    cli = copy_fixture("s6-2.1.112.js", tmp_path / "p")
    assert run("apply", "-p", str(cli), "--no-node-check")[0] == 0
    data = cli.read_bytes()
    at = data.index(b"/*ctxpatch:begin")
    cli.write_bytes(data[:at] + b"/*ctxpatch:begin BROKEN*/" + data[data.index(b"*/", at) + 2 :])
    code, doc = run_json("revert", "-p", str(cli))
    error = file_error(doc)
    assert code == ExitCode.REFUSED and error["error"] == "revert_impossible"
    assert "cli.js.backup" in error["hint"]


@pytest.mark.parametrize(
    "text",
    [
        b"// see /*ctxpatch:begin v=0.1.0 snippet=x*/ in the docs\n",
        b"/* the ruflo marker is /*AGGRESSIVE_TEXT_PRUNE_PATCH*/ \n",
        b"var s = '/*ctxpatch:wrap*/';\n",
    ],
)
def test_marker_text_in_an_unpatched_file_is_not_foreign(tmp_path: Path, text: bytes) -> None:
    cli = copy_fixture("s1-2.0.76.js", tmp_path / "p")
    data = cli.read_bytes()
    nl = data.index(b"\n") + 1
    cli.write_bytes(data[:nl] + text + data[nl:])
    assert markers.read(cli.read_bytes(), snippet.sha()).state is markers.State.UNPATCHED
    code, doc = run_json("check", "-p", str(cli))
    assert code == ExitCode.CHANGE_NEEDED and doc["results"][0]["state"] == "UNPATCHED"
    before = cli.read_bytes()
    code, doc = run_json("apply", "-p", str(cli), "--no-node-check")
    if b"ctxpatch:" in text:  # ours would be ambiguous afterwards: a clear refusal
        assert code == ExitCode.REFUSED and file_error(doc)["error"] == "foreign_patch"
        assert cli.read_bytes() == before
    else:
        assert code == 0 and run("revert", "-p", str(cli))[0] == 0
        assert cli.read_bytes() == before


# ------------------------------------------------------------------ the one error shape


def test_every_error_renders_what_why_hint() -> None:
    e = UsageError("bad", why="because", hint="do this", n=1)
    assert e.render() == "error: bad\n  why: because\n  hint: do this\n  info: n=1"
    assert set(e.to_json()) == ERROR_KEYS and str(e) == "bad: because"
    assert issubclass(UsageError, CtxpatchError)


def test_the_error_module_is_the_only_way_the_engine_reaches_the_product() -> None:
    """engine/ imports nothing of the project but itself and ctxpatch.errors, a leaf module
    (README "Layout"): the model stays free of the patching machinery, the errors stay in one
    place."""
    import ast

    root = Path(__file__).resolve().parents[2]
    project = {p.parent.name for p in root.glob("*/__init__.py")}

    def imported(path: Path) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        return names

    for path in sorted((root / "engine").rglob("*.py")):
        outside = {m for m in imported(path) if m.split(".")[0] in project - {"engine"}}
        assert outside <= {"ctxpatch.errors"}, (path, outside)
    own = {m for m in imported(root / "ctxpatch" / "errors.py") if m.split(".")[0] in project}
    assert own == set()
