"""recall.sessions: each Claude Code process finds the session its own hooks recorded.

The real process tree is simulated with real processes: a stand-in for Claude Code (a Python
process) runs a hook through ``sh -c`` (as Claude Code runs hook commands) and then a
look-up as its direct child (as it starts an MCP server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxpatch.errors import SessionUnknown, UsageError
from recall import sessions

ROOT = Path(__file__).resolve().parents[2]

# what a stand-in Claude Code does: a hook via sh -c, then a child that asks
CLAUDE = r"""
import json, os, subprocess, sys
payload, hook_only = sys.argv[1], sys.argv[2] == "1"
hook = f"{sys.executable} -c 'import json, sys; from recall.sessions import remember; remember(json.load(sys.stdin))'"
subprocess.run(["sh", "-c", hook], input=payload, text=True, check=True)
if not hook_only:
    ask = "from recall.sessions import current_transcript; print(current_transcript())"
    r = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True)
    print(r.stdout.strip() or r.stderr.strip().splitlines()[-1])
"""


def claude(payload: dict[str, str], env: dict[str, str], hook_only: bool = False) -> str:
    r = subprocess.run(
        [sys.executable, "-c", CLAUDE, json.dumps(payload), "1" if hook_only else "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return r.stdout.strip()


@pytest.fixture
def env(state_dir: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CODE_SESSION_ID",)}
    e.update(CTXPATCH_STATE_DIR=str(state_dir), PYTHONPATH=str(ROOT))
    return e


def test_two_claude_processes_each_find_their_own(tmp_path: Path, env: dict[str, str]) -> None:
    a = {"session_id": "aaaa", "transcript_path": str(tmp_path / "aaaa.jsonl")}
    b = {"session_id": "bbbb", "transcript_path": str(tmp_path / "bbbb.jsonl")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAUDE, json.dumps(p), "0"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for p in (a, b)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert outs == [a["transcript_path"], b["transcript_path"]]


def test_a_process_without_a_recorded_session_is_told_so(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # a hook recorded a session for one stand-in; another one (no hook) must not get it
    claude({"session_id": "cccc", "transcript_path": str(tmp_path / "c.jsonl")}, env, True)
    ask = "from recall.sessions import current_transcript; current_transcript()"
    r = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "no current Claude Code session" in r.stderr


@pytest.fixture
def me():
    """A pid whose owner is this test process (a python, not a shell), whatever ran pytest: a
    child of ours. (This process's own ancestors may all be shells, e.g. under `bash .ci/run`.)"""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def test_the_record_follows_clear_and_resume(tmp_path: Path, state_dir: Path, me: int) -> None:
    """SessionStart after /clear or --resume records the new session for the same process."""
    sessions.remember({"session_id": "old", "transcript_path": str(tmp_path / "old.jsonl")}, pid=me)
    sessions.remember({"session_id": "new", "transcript_path": str(tmp_path / "new.jsonl")}, pid=me)
    assert sessions.current_transcript(pid=me, environ={}) == tmp_path / "new.jsonl"
    entries = list((state_dir / "sessions").glob("*.json"))
    assert len(entries) == 1 and entries[0].stat().st_mode & 0o777 == 0o600
    assert set(json.loads(entries[0].read_text())) == {
        "pid",
        "start",
        "session_id",
        "transcript_path",
    }


def test_a_reused_pid_is_not_trusted(tmp_path: Path, state_dir: Path, me: int) -> None:
    sessions.remember({"session_id": "x", "transcript_path": str(tmp_path / "x.jsonl")}, pid=me)
    entry = next((state_dir / "sessions").glob("*.json"))
    rec = json.loads(entry.read_text())
    entry.write_text(json.dumps({**rec, "start": "1"}))  # another process had that pid
    with pytest.raises(SessionUnknown):
        sessions.current_transcript(pid=me, environ={})


def test_claude_code_session_id_names_the_transcript(tmp_path: Path) -> None:
    """2.1.332+ give an MCP server CLAUDE_CODE_SESSION_ID: used when no hook recorded one."""
    t = tmp_path / "cfg" / "projects" / "-home-u-proj" / "1234-abcd.jsonl"
    t.parent.mkdir(parents=True)
    t.write_text("{}\n")
    env = {"CLAUDE_CODE_SESSION_ID": "1234-abcd", "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    assert sessions.current_transcript(environ=env, lookup=lambda p: None) == t
    with pytest.raises(SessionUnknown, match="no current"):
        sessions.current_transcript(
            environ={**env, "CLAUDE_CODE_SESSION_ID": "../../etc"}, lookup=lambda p: None
        )


def test_remember_refuses_a_payload_without_the_session() -> None:
    with pytest.raises(UsageError, match="hook payload"):
        sessions.remember({"hook_event_name": "SessionStart"})
