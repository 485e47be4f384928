"""``ctxpatch recall hook``: the one command Claude Code runs for its hooks (the I/O edge).

It reads the hook's JSON on stdin and answers by ``hook_event_name``:

* ``SessionStart`` (every source) and ``UserPromptSubmit``: records which session and
  transcript this Claude Code process serves (``recall.sessions.remember``), so ``ctxpatch mcp``
  started by the same process recalls from its own session, never a neighbour's;
* ``SessionStart`` with ``source: "compact"`` (right after a real compaction): prints
  ``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": DIGEST}}``,
  the digest of what the summary dropped (:mod:`recall.digest`), within
  ``CTXPATCH_RECALL_DIGEST_TOKENS`` tokens (default 2000, 0: none). Claude Code adds it to the
  context of the next request;
* ``PreCompact``: prints the prompts the user marked ``#keep`` as plain text; Claude Code
  (2.1.112, 2.1.332) appends a PreCompact hook's stdout on exit 0 to the summary's
  instructions. The hook never exits 2, which would block the compaction.

It never fails Claude Code: whatever goes wrong (bad input, an unreadable transcript, a bug),
it prints nothing and exits 0; the failure goes to ``hook.log`` in ctxpatch's state folder
(:mod:`recall.store`; mode 600, ids, sizes and times only, rotated at :data:`LOG_LIMIT`). Each call logs its wall
time there too. Nothing is ever written to stderr (Claude Code shows a hook's stderr to the
user). Only the tail (:data:`READ_LIMIT`) of a very large transcript is read, so the hook
stays fast.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from recall import digest

ENV_BUDGET = "CTXPATCH_RECALL_DIGEST_TOKENS"
INPUT_LIMIT = 1 << 20  # a hook's JSON input is a few hundred bytes
READ_LIMIT = 64 << 20  # bytes of a transcript's tail read for the digest
LOG_LIMIT = 256 << 10
LOG_NAME = "hook.log"


def budget(environ: Mapping[str, str]) -> int:
    """``CTXPATCH_RECALL_DIGEST_TOKENS`` as a number of tokens; the default when unset or not
    a whole number >= 0 (a hook has no one to tell: the log says it)."""
    raw = environ.get(ENV_BUDGET, "").strip()
    if not raw:
        return digest.DEFAULT_BUDGET
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise BadKnob(f"{ENV_BUDGET}={raw!r} is not a whole number >= 0")
    return value


class BadKnob(ValueError):
    pass


def read_records(path: Path, limit: int = READ_LIMIT) -> list[Any]:
    """The transcript's parsed lines (of its last ``limit`` bytes); a line that does not parse
    (the cut first one of a tail, a half-written last one) is skipped."""
    import orjson

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            f.seek(size - limit)
            f.readline()  # the cut line
        data = f.read()
    out: list[Any] = []
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return out


def _transcript(payload: Mapping[str, Any]) -> Path:
    raw = payload.get("transcript_path")
    if not isinstance(raw, str) or not raw:
        raise ValueError("the hook input has no transcript_path")
    return Path(raw).expanduser()


def respond(payload: Mapping[str, Any], environ: Mapping[str, str], problems: list[str]) -> str:
    """What to print for one hook call ("" for nothing). A failure to record the session goes
    to ``problems`` and does not stop the digest."""
    import json

    event = payload.get("hook_event_name")
    if event in ("SessionStart", "UserPromptSubmit"):
        try:
            remember(payload)
        except Exception as exc:  # logged; the digest still comes
            problems.append(f"remember failed: {type(exc).__name__}: {str(exc)[:200]}")
    if event == "SessionStart" and payload.get("source") == "compact":
        tokens = budget(environ)
        if tokens == 0:
            return ""
        d = digest.build(read_records(_transcript(payload)), tokens)
        if not d.text:
            return ""
        out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": d.text}}
        return json.dumps(out, ensure_ascii=False)
    if event == "PreCompact":
        return digest.compact_instructions(read_records(_transcript(payload)))
    return ""


def remember(payload: Mapping[str, Any]) -> None:
    from recall import sessions

    sessions.remember(payload)


def state_dir() -> Path:
    """ctxpatch's state folder (:func:`recall.store.state_dir`: XDG, ``CTXPATCH_STATE_DIR``)."""
    from recall.store import state_dir

    return state_dir()


def log(line: str, folder: Path | None = None) -> None:
    """Append one line to ``hook.log`` (mode 600); never raises."""
    try:
        folder = folder or state_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / LOG_NAME
        try:
            if path.stat().st_size > LOG_LIMIT:
                os.replace(path, folder / (LOG_NAME + ".1"))
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line.rstrip("\n") + "\n").encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:  # the log is best effort; the hook must not fail
        pass


def run(
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """The hook command: always 0; prints the answer or nothing."""
    t0 = time.monotonic()
    env = os.environ if environ is None else environ
    event = session = "?"
    outcome = "ok"
    text = ""
    try:
        raw = (stdin or sys.stdin.buffer).read(INPUT_LIMIT)
        import json

        payload = json.loads(raw)
        if not isinstance(payload, dict):
            raise ValueError("the hook input is not a JSON object")
        event = str(payload.get("hook_event_name") or "?")[:40]
        session = str(payload.get("session_id") or "?")[:80]
        problems: list[str] = []
        text = respond(payload, env, problems)
        if problems:
            outcome = "; ".join(problems)
    except BaseException as exc:  # never fail Claude Code, even on Ctrl-C
        text = ""
        outcome = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    if text:
        try:
            out = stdout or sys.stdout
            out.write(text)
            out.flush()
        except BaseException as exc:  # a closed pipe is not Claude Code's problem
            outcome = f"failed writing: {type(exc).__name__}"
    ms = (time.monotonic() - t0) * 1000
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    log(f"{stamp} {event} session={session} {ms:.0f}ms out={len(text)} {outcome}")
    return 0


def main() -> None:
    sys.exit(run())
