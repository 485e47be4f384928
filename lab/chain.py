"""Thinking-on sessions against the mock's preserved-thinking check, over several real runs.

Runs of thinking-on sessions, used by the e2e tests and meant for anyone who needs one (the
session's thinking blocks are first signed for what the CLI sends by
:func:`lab.signing.sign_session`):

:func:`run_chain`
    Resumes the same session once per prompt (``-p PROMPT --resume ID``), the CLI appending to
    its transcript each time, so every run's reply (a thinking block signed by the mock over the
    request as sent, then the scripted content) is sent back by the next run. Each
    :class:`ChainRun` records what the mock answered: the 400s and why, the dropped blocks, the
    prune cutoff seen in the request, the results micro-compaction cleared.

Typical use (what tests/e2e/test_thinking_where_we_stand.py does)::

    s = thinking_session(str(sb.proj), turns=2, version=v)   # thinking blocks, unsigned
    sign_session(sb, mock, s, model=MODEL, env=THINK_ENV)     # valid for what the CLI sends
    t = run_turns(sb, mock, s, ["turn 0", "turn 1", ...],
                  MockConfig(thinking=True, binding="error"), model=MODEL, env=THINK_ENV)
    t.rejected, t.n_dropped, t.cutoff_moves                   # 400s, dropped blocks, prune moves

:func:`run_turns` (one process, prompts fed one by one through ``--input-format stream-json``)
is a live session; :func:`run_chain` (one ``--resume`` per prompt) also shows what is lost
between processes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.twins.textprune_shorten import MARKER as PRUNE_MARKER
from lab.harness import CLEARED_RE, MODEL
from lab.mock import Logged, MockConfig, MockServer
from lab.predict import tool_results
from lab.sandbox import RunResult, Sandbox, _kill_group
from lab.session import SessionWriter

NO_CLIENT_EDITS = {"DISABLE_MICROCOMPACT": "1", "CLAUDE_TEXT_PRUNE_DISABLE": "1"}
ARGS = ("--disallowedTools", "Skill")
THINK_ENV = {"MAX_THINKING_TOKENS": "4000"}
"""Makes every version think: 2.0.76 sends no ``thinking`` at all without it (its thinking is
keyword-triggered: "think", "ultrathink"...); 2.1.x then sends ``{"type": "enabled",
"budget_tokens": 4000}`` instead of its own default."""


def _thinking_blocks(obj: Any) -> list[dict]:
    out: list[dict] = []
    if isinstance(obj, dict):
        if obj.get("type") == "thinking":
            out.append(obj)
        for v in obj.values():
            out += _thinking_blocks(v)
    elif isinstance(obj, list):
        for v in obj:
            out += _thinking_blocks(v)
    return out


def _resume(
    sb: Sandbox,
    mock: MockServer,
    session: SessionWriter,
    prompt: str,
    config: MockConfig,
    model: str,
    args: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
) -> tuple[RunResult, list[Logged]]:
    mock.reset(config)
    run = sb.run(
        [
            "-p",
            prompt,
            "--resume",
            session.session_id,
            "--output-format",
            "json",
            "--model",
            model,
            *args,
        ],
        mock.base_url,
        {**env, "ANTHROPIC_MODEL": model},
        timeout,
    )
    return run, mock.requests()


def write_fresh(sb: Sandbox, session: SessionWriter) -> None:
    """(Re)write the session file, with no leftovers of earlier runs of the same id."""
    shutil.rmtree(sb.projects_dir / session.session_id, ignore_errors=True)
    session.write(sb.projects_dir)


class _CheckedRequests:
    """What the preserved-thinking check saw among ``self.requests``: shared by one resumed run
    (:class:`ChainRun`) and one multi-prompt process (:class:`Turns`)."""

    requests: list[Logged]

    @property
    def checked(self) -> list[Logged]:
        """Main-loop and summarisation requests (what the check looks at)."""
        return [r for r in self.requests if r.kind in ("main", "compact")]

    @property
    def rejected(self) -> list[Logged]:
        return [r for r in self.checked if r.status == 400]

    @property
    def n_dropped(self) -> int:
        return sum(r.dropped for r in self.checked)


@dataclass
class ChainRun(_CheckedRequests):
    index: int
    prompt: str
    run: RunResult
    requests: list[Logged]

    @property
    def main(self) -> list[Logged]:
        return [r for r in self.requests if r.kind == "main"]

    @property
    def first_body(self) -> dict:
        return (self.main[0].body if self.main else None) or {}

    @property
    def pruned_upto(self) -> int:
        """1 + the last message index of the first main request holding the prune marker
        (0: nothing pruned); grows each time the text prune's cutoff moves."""
        return _pruned_upto(self.first_body)

    @property
    def cleared(self) -> int:
        """Tool results micro-compaction cleared in the first main request."""
        return _cleared(self.first_body)

    @property
    def thinking_sent(self) -> int:
        return len(_thinking_blocks(self.first_body.get("messages") or []))

    def describe(self) -> str:
        why = "; ".join(
            f"{r.kind} {r.status}: {m.location} {m.reason}"
            + (f" from {m.missing_from}" if m.missing_from else "")
            for r in self.checked
            for m in r.mismatches[:1]
        )
        return (
            f"run {self.index} ({self.prompt!r}): exit {self.run.returncode}, requests "
            f"{[(r.kind, r.status) for r in self.checked]}, thinking sent {self.thinking_sent}, "
            f"dropped {self.n_dropped}, pruned up to {self.pruned_upto}, cleared {self.cleared}"
            + (f" [{why}]" if why else "")
        )


@dataclass
class Chain:
    runs: list[ChainRun] = field(default_factory=list)

    @property
    def rejected(self) -> list[int]:
        """Indices of the runs with at least one HTTP 400."""
        return [r.index for r in self.runs if r.rejected]

    @property
    def n_rejected(self) -> int:
        return sum(len(r.rejected) for r in self.runs)

    @property
    def n_dropped(self) -> int:
        return sum(r.n_dropped for r in self.runs)

    @property
    def cutoff_moves(self) -> int:
        """How many times the pruned region grew from one run to the next."""
        marks = [r.pruned_upto for r in self.runs]
        return sum(1 for a, b in zip([0, *marks], marks, strict=False) if b > a)

    def describe(self) -> str:
        return "\n".join(r.describe() for r in self.runs)


def run_chain(
    sb: Sandbox,
    mock: MockServer,
    session: SessionWriter,
    prompts: Sequence[str],
    config: MockConfig,
    *,
    model: str = MODEL,
    args: Sequence[str] = ARGS,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> Chain:
    """Write ``session`` afresh, then resume it once per prompt (see the module docstring)."""
    write_fresh(sb, session)
    chain = Chain()
    for k, prompt in enumerate(prompts):
        run, reqs = _resume(
            sb, mock, session, prompt, config, model, args, dict(env or {}), timeout
        )
        chain.runs.append(ChainRun(k, prompt, run, reqs))
    return chain


def stream_json_prompts(prompts: Sequence[str]) -> str:
    """The stdin of ``--input-format stream-json``: one user message per line."""
    return "".join(
        json.dumps({"type": "user", "message": {"role": "user", "content": p}}) + "\n"
        for p in prompts
    )


@dataclass
class Turns(_CheckedRequests):
    """One process, several typed prompts (``--input-format stream-json``): every request the
    mock saw, in order."""

    run: RunResult
    requests: list[Logged]

    def pruned_upto(self, r: Logged) -> int:
        return _pruned_upto(r.body)

    @property
    def cutoff_moves(self) -> int:
        """How many times the pruned region grew from one main-loop request to the next."""
        marks = [_pruned_upto(r.body) for r in self.checked if r.kind == "main"]
        return sum(1 for a, b in zip([0, *marks], marks, strict=False) if b > a)

    @property
    def first_rejected(self) -> int | None:
        """Index (among :attr:`checked`) of the first request that got a 400."""
        return next((k for k, r in enumerate(self.checked) if r.status == 400), None)

    def describe(self) -> str:
        lines = []
        for k, r in enumerate(self.checked):
            b = r.body if isinstance(r.body, dict) else {}
            why = ""
            if r.mismatches:
                m = r.mismatches[0]
                why = f" {m.location} {m.reason}" + (
                    f" from {m.missing_from}" if m.missing_from else ""
                )
            lines.append(
                f"{k}: {r.kind} {r.status} msgs {len(b.get('messages') or [])} pruned "
                f"{_pruned_upto(b)} cleared {_cleared(b)} thinking "
                f"{len(_thinking_blocks(b.get('messages') or []))} dropped {r.dropped}{why}"
            )
        return "\n".join(lines) + "\n" + self.run.describe()


MARKER = json.dumps(PRUNE_MARKER)[1:-1]
"""The text prune's marker as it appears inside JSON."""


def _pruned_upto(body: Any) -> int:
    last = -1
    msgs = body.get("messages") if isinstance(body, dict) else None
    for i, m in enumerate(msgs or []):
        if MARKER in json.dumps(m.get("content") if isinstance(m, dict) else None):
            last = i
    return last + 1


def _cleared(body: Any) -> int:
    msgs = body.get("messages") if isinstance(body, dict) else None
    return sum(
        1 for v in tool_results(msgs or []).values() if isinstance(v, str) and CLEARED_RE.match(v)
    )


def drive(
    sb: Sandbox,
    args: Sequence[str],
    base_url: str,
    env: Mapping[str, str],
    prompts: Sequence[str],
    timeout: float,
) -> RunResult:
    """Run the sandbox's command (``node cli.js ARGS``, or the native binary in its network
    namespace, :meth:`Sandbox.command`) with ``--input-format stream-json`` and hand it
    ``prompts`` one at a time: the next one after each ``result`` line (2.1.x ends the session when standard input
    closes while a turn runs; 2.0.76 would queue them all). The process group is killed after
    ``timeout`` seconds or when done."""
    cmd = sb.command(args, base_url)
    t0 = time.monotonic()
    with sb.network(base_url):
        return _drive(sb, cmd, base_url, env, prompts, timeout, t0)


def _drive(
    sb: Sandbox,
    cmd: list[str],
    base_url: str,
    env: Mapping[str, str],
    prompts: Sequence[str],
    timeout: float,
    t0: float,
) -> RunResult:
    proc = subprocess.Popen(
        cmd,
        cwd=sb.proj,
        env=sb.env(base_url, env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    timer = threading.Timer(timeout, _kill_group, (proc,))
    timer.start()
    out: list[str] = []
    pending = list(prompts)
    try:
        proc.stdin.write(stream_json_prompts(pending[:1]))
        proc.stdin.flush()
        pending = pending[1:]
        for line in proc.stdout:
            out.append(line)
            if _is_result(line):
                if not pending:
                    break
                proc.stdin.write(stream_json_prompts(pending[:1]))
                proc.stdin.flush()
                pending = pending[1:]
        try:  # communicate() closes standard input: the CLI ends after its last turn
            rest, err = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rest, err = proc.communicate()
        out.append(rest or "")
    finally:
        timer.cancel()
        _kill_group(proc)
    if pending:
        err = (err or "") + f"\n[ctxpatch e2e] {len(pending)} prompts never sent"
    return RunResult(
        cmd,
        proc.returncode if proc.returncode is not None else -9,
        "".join(out),
        err or "",
        time.monotonic() - t0,
    )


def _is_result(line: str) -> bool:
    """A ``result`` line of ``--output-format stream-json`` (2.1.330 writes its keys in another
    order: ``{"duration_api_ms":...,"type":"result",...}``)."""
    if '"type":"result"' not in line:
        return False
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "result"


def run_turns(
    sb: Sandbox,
    mock: MockServer,
    session: SessionWriter,
    prompts: Sequence[str],
    config: MockConfig,
    *,
    model: str = MODEL,
    args: Sequence[str] = ARGS,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> Turns:
    """Write ``session`` afresh and resume it in ONE process that is given ``prompts`` one
    after the other (``-p --input-format stream-json``, :func:`drive`): a live session, where
    what the CLI keeps only in memory (reminders, cleared results) stays as it was."""
    write_fresh(sb, session)
    mock.reset(config)
    run = drive(
        sb,
        [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--resume",
            session.session_id,
            "--model",
            model,
            *args,
        ],
        mock.base_url,
        {**dict(env or {}), "ANTHROPIC_MODEL": model},
        prompts,
        timeout,
    )
    return Turns(run, mock.requests())
