"""Which transcript is "the current session" for a hook, an MCP server or the command line.

What the real program tells its children (measured on cli.js 2.1.112 and the 2.1.332 native
build, not guessed):

* hooks get a JSON object on stdin with ``session_id``, ``transcript_path``, ``cwd`` and
  ``hook_event_name`` (``source`` for SessionStart: startup / resume / clear / compact), and
  ``CLAUDE_PROJECT_DIR`` in their environment;
* a stdio MCP server gets no session in 2.1.112 (its environment is Claude Code's own plus the
  server's ``env``), and ``CLAUDE_CODE_SESSION_ID`` in 2.1.332, set once when it is started: it
  goes stale after ``/clear`` or an in-app ``/resume``, which change the session but keep the
  server running.

So the hooks say it: ``ctxpatch recall hook`` (SessionStart, which fires on startup, resume, clear and compact) calls
:func:`remember`, which records, in the state dir, the Claude Code process the hook runs under
(its nearest ancestor that is not a shell, with its start time against pid reuse) ->
``{session_id, transcript_path}``. The MCP server, a child of the same Claude Code process,
looks its own nearest non-shell ancestor up (:func:`current_transcript`). Two sessions in one
project are two Claude Code processes, so each finds its own; ``--resume``/``--continue``,
``/clear`` and ``/resume`` fire SessionStart with the new session, which overwrites the record.
When nothing is recorded: ``CLAUDE_CODE_SESSION_ID`` (2.1.332+) names the session, else a clear
error; never a guess such as the newest transcript of the project, which may be another
session's.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ctxpatch.errors import SessionUnknown, UsageError
from recall.store import private_dir, state_dir

TRANSCRIPT_ENV = "CTXPATCH_RECALL_TRANSCRIPT"  # an explicit transcript wins (scripts, tests)
SESSION_ENV = "CLAUDE_CODE_SESSION_ID"  # what 2.1.332+ give an MCP server at its start
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "ash", "busybox", "env"})
MAX_DEPTH = 32


@dataclass(frozen=True)
class Proc:
    pid: int
    start: str  # start time (clock ticks since boot on Linux): pid plus start is one process
    name: str
    ppid: int


def _proc_linux(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lpar, rpar = stat.find("("), stat.rfind(")")
    fields = stat[rpar + 2 :].split()
    # fields[0] is the state (field 3), so field N is fields[N - 3]
    return Proc(pid, fields[19], stat[lpar + 1 : rpar], int(fields[1]))


def _proc_ps(pid: int) -> Proc | None:
    try:
        out = subprocess.run(
            ["ps", "-o", "ppid=,lstart=,comm=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(out) < 7:
        return None
    return Proc(pid, " ".join(out[1:6]), Path(" ".join(out[6:])).name, int(out[0]))


def process(pid: int) -> Proc | None:
    """``pid``'s process (None when it is gone)."""
    return _proc_linux(pid) if Path("/proc/self/stat").exists() else _proc_ps(pid)


def ancestors(pid: int | None = None) -> Iterator[Proc]:
    """The parent of ``pid`` (this process by default), its parent, and so on below init."""
    here = process(os.getpid() if pid is None else pid)
    depth = 0
    while here is not None and here.ppid > 1 and depth < MAX_DEPTH:
        here = process(here.ppid)
        depth += 1
        if here is not None:
            yield here


def owner(pid: int | None = None) -> Proc | None:
    """The Claude Code process that started this one: the nearest ancestor that is not a shell
    (a hook's command runs under ``sh -c``; an MCP server is started directly)."""
    for p in ancestors(pid):
        if p.name not in SHELLS:
            return p
    return None


def _registry() -> Path:
    return private_dir(state_dir() / "sessions")


def _entry_path(proc: Proc) -> Path:
    return _registry() / f"{proc.pid}.json"


def remember(payload: Mapping[str, object], *, pid: int | None = None) -> None:
    """Record that the Claude Code process running this hook now serves ``payload``'s session
    (a hook's stdin: ``session_id``, ``transcript_path``). ``pid``: whose ancestors to walk
    (this process by default)."""
    sid, path = payload.get("session_id"), payload.get("transcript_path")
    if not isinstance(sid, str) or not sid or not isinstance(path, str) or not path:
        raise UsageError(
            "not a Claude Code hook payload",
            "it needs the strings session_id and transcript_path",
            "run `ctxpatch recall hook` as a Claude Code hook, which passes them on stdin",
        )
    proc = owner(pid)
    if proc is None:
        raise SessionUnknown(
            "cannot tell which Claude Code process runs this hook",
            "no ancestor process other than a shell was found",
            "run it as a Claude Code hook",
        )
    record = {
        "pid": proc.pid,
        "start": proc.start,
        "session_id": sid,
        "transcript_path": path,
    }
    target = _entry_path(proc)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)  # mode 600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _forget_dead(target.parent)


def _forget_dead(folder: Path) -> None:
    for entry in folder.glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            rec = json.loads(entry.read_text(encoding="utf-8"))
            p = process(int(rec["pid"]))
            if p is None or p.start != rec["start"]:
                entry.unlink()


def recorded(proc: Proc) -> Path | None:
    """The transcript the hooks recorded for ``proc``, if it is still that process."""
    try:
        rec = json.loads(_entry_path(proc).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("start") != proc.start:
        return None  # the pid was reused by another process
    path = rec.get("transcript_path")
    return Path(path) if isinstance(path, str) else None


def _config_dir(environ: Mapping[str, str]) -> Path:
    env = environ.get("CLAUDE_CONFIG_DIR")
    return Path(env) if env else Path.home() / ".claude"


def by_session_id(session_id: str, environ: Mapping[str, str]) -> Path | None:
    """``<config>/projects/*/<session_id>.jsonl``: one file, as a session id is a UUID."""
    if not session_id or "/" in session_id or session_id.startswith("."):
        return None
    found = sorted((_config_dir(environ) / "projects").glob(f"*/{session_id}.jsonl"))
    return found[0] if len(found) == 1 else None


def current_transcript(
    *,
    environ: Mapping[str, str] | None = None,
    pid: int | None = None,
    lookup: Callable[[Proc], Path | None] = recorded,
) -> Path:
    """The transcript of the session this process serves: ``CTXPATCH_RECALL_TRANSCRIPT``, else
    what the hooks recorded for the Claude Code process above this one, else the session named
    by ``CLAUDE_CODE_SESSION_ID``; a clear error when none says it."""
    env = os.environ if environ is None else environ
    explicit = env.get(TRANSCRIPT_ENV)
    if explicit:
        return Path(explicit)
    proc = owner(pid)
    if proc is not None:
        found = lookup(proc)
        if found is not None:
            return found
    sid = env.get(SESSION_ENV, "")
    if sid:
        path = by_session_id(sid, env)
        if path is not None:
            return path
    raise SessionUnknown(
        "no current Claude Code session",
        "no recall hook has recorded a session for the Claude Code process above this one"
        + (f" (process {proc.pid}, {proc.name})" if proc else "")
        + (f", and no transcript is named {sid}.jsonl" if sid else ""),
        "pass --transcript ~/.claude/projects/<dir>/<session>.jsonl, or turn recall on with "
        "`ctxpatch apply` (it registers the hooks) and start a new Claude Code session",
    )
