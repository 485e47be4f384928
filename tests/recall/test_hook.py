"""``ctxpatch recall hook``: the answer per event, and never a failure of Claude Code."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from digest_lines import session

from recall import digest, hook, registered, sessions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def remembered(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """``recall.sessions.remember`` replaced: what the hook told it (test_sessions.py tests the
    real one)."""
    seen: list[dict] = []
    monkeypatch.setattr(sessions, "remember", lambda payload: seen.append(dict(payload)))
    return seen


@pytest.fixture
def state(state_dir: Path) -> Path:
    return state_dir  # tests/recall/conftest.py: CTXPATCH_STATE_DIR


def write_transcript(folder: Path, lines: list) -> Path:
    path = folder / "s1.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def call(payload: object, env: dict[str, str] | None = None) -> tuple[int, str]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    out = io.StringIO()
    code = hook.run(io.BytesIO(raw), out, env or {})
    return code, out.getvalue()


def log_lines(state: Path) -> list[str]:
    return (state / "hook.log").read_text().splitlines()


def test_after_a_compaction_the_digest_is_additional_context(tmp_path, remembered, state):
    path = write_transcript(tmp_path, session())
    payload = {
        "hook_event_name": "SessionStart",
        "source": "compact",
        "session_id": "s1",
        "transcript_path": str(path),
    }
    code, out = call(payload)
    assert code == 0
    doc = json.loads(out)
    assert doc == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": digest.build(session(), 2000).text,
        }
    }
    assert remembered == [payload]
    (line,) = log_lines(state)
    assert (
        " SessionStart session=s1 " in line and line.endswith(" ok") and f"out={len(out)}" in line
    )
    assert stat.S_IMODE((state / "hook.log").stat().st_mode) == 0o600


def test_the_budget_knob(tmp_path, remembered, state):
    path = write_transcript(tmp_path, session())
    payload = {"hook_event_name": "SessionStart", "source": "compact", "transcript_path": str(path)}
    _, small = call(payload, {hook.ENV_BUDGET: "200"})
    text = json.loads(small)["hookSpecificOutput"]["additionalContext"]
    assert text == digest.build(session(), 200).text and digest.estimate(text) <= 200
    assert call(payload, {hook.ENV_BUDGET: "0"}) == (0, "")
    # a bad value: nothing printed, the log says why
    assert call(payload, {hook.ENV_BUDGET: "lots"}) == (0, "")
    assert "CTXPATCH_RECALL_DIGEST_TOKENS='lots' is not a whole number" in log_lines(state)[-1]


@pytest.mark.parametrize("source", ["startup", "resume", "clear"])
def test_other_starts_only_remember_the_session(tmp_path, remembered, state, source):
    path = write_transcript(tmp_path, session())
    payload = {"hook_event_name": "SessionStart", "source": source, "transcript_path": str(path)}
    assert call(payload) == (0, "")
    assert call({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}) == (0, "")
    assert [p["hook_event_name"] for p in remembered] == ["SessionStart", "UserPromptSubmit"]


def test_pre_compact_prints_the_marks_as_plain_text(tmp_path, remembered, state):
    path = write_transcript(tmp_path, session())
    payload = {"hook_event_name": "PreCompact", "trigger": "auto", "transcript_path": str(path)}
    assert call(payload) == (0, digest.compact_instructions(session()))
    assert remembered == []  # PreCompact does not track sessions
    unmarked = write_transcript(tmp_path, session()[1:-1])
    assert call({**payload, "transcript_path": str(unmarked)}) == (0, "")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1, 2]",
        json.dumps({"hook_event_name": "SessionStart", "source": "compact"}).encode(),
        json.dumps(
            {"hook_event_name": "PreCompact", "transcript_path": "/nonexistent/x.jsonl"}
        ).encode(),
    ],
)
def test_bad_input_prints_nothing_and_exits_0(raw, remembered, state):
    assert call(raw) == (0, "")
    assert " failed: " in log_lines(state)[-1]


def test_a_failing_session_record_does_not_stop_the_digest(tmp_path, monkeypatch, state):
    def broken(payload):
        raise OSError("disk full")

    monkeypatch.setattr(sessions, "remember", broken)
    path = write_transcript(tmp_path, session())
    payload = {"hook_event_name": "SessionStart", "source": "compact", "transcript_path": str(path)}
    code, out = call(payload)
    assert code == 0 and json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "remember failed: OSError: disk full" in log_lines(state)[-1]


def test_a_cut_last_line_and_a_huge_transcript_tail(tmp_path):
    lines = session()
    path = write_transcript(tmp_path, lines)
    with open(path, "a") as f:
        f.write('{"type": "assistant", "message": {"content": [{"type": "tool_u')  # being written
    assert hook.read_records(path) == lines
    # only the tail is read: the first (cut) line is skipped, the rest parse
    size = path.stat().st_size
    tail = hook.read_records(path, limit=size - 10)
    assert tail == lines[1:]


def test_the_real_command_line(tmp_path):
    """``python -m <package> recall hook`` as Claude Code runs it: stdout only, exit 0, and the
    log in the XDG state folder (mode 600)."""
    path = write_transcript(tmp_path, session())
    env = {
        **os.environ,
        "CTXPATCH_STATE_DIR": str(tmp_path / "st"),
        "PYTHONPATH": str(ROOT),
    }
    payload = {"hook_event_name": "SessionStart", "source": "compact", "transcript_path": str(path)}
    proc = subprocess.run(
        [sys.executable, "-m", registered.cli_package(), "recall", "hook"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == b""
    doc = json.loads(proc.stdout)
    assert doc["hookSpecificOutput"]["additionalContext"] == digest.build(session()).text
    log = tmp_path / "st" / "hook.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    # garbage in: still exit 0, nothing on either stream
    proc = subprocess.run(
        [sys.executable, "-m", registered.cli_package(), "recall", "hook"],
        input=b"\x00garbage",
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
