"""One real run, end to end: write the session, resume it against the mock, capture, predict.

:func:`run_case` resumes ``case.session`` with ``case.prompt`` in a :class:`Sandbox`, finds the
first main-loop request and the summarisation request (if any) in the mock's log, asks the
engine what should have been sent and whether auto-compaction should have fired, and compares.
The :class:`Outcome` carries everything a test or ``ctxpatch verify`` needs to explain itself.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.claude_code.count import autocompact_tokens, last_usage_tokens
from engine.claude_code.flatten import api_style
from engine.claude_code.thresholds import Thresholds, compute_thresholds
from engine.profiles import Profile, profile_for
from lab.mock import Logged, MockConfig, MockServer
from lab.predict import (
    Prediction,
    compaction_runs_the_loop,
    expected_messages,
    first_difference,
    prompt_record,
    reminder_positions,
    strip_volatile,
    tool_results,
    without_deferred_tools,
)
from lab.sandbox import RunResult, Sandbox
from lab.session import SessionWriter

MODEL = "claude-sonnet-4-5-20250929"
"""Every run pins the model (``--model``): the thresholds depend on its output limit."""

CLEARED_RE = re.compile(
    r"^(\[Old tool result content cleared\]|<persisted-output>Tool result saved to: "
    r".*/tool-results/[\w-]+\.txt\n\nUse Read to view</persisted-output>)$"
)


@dataclass
class Case:
    name: str
    session: SessionWriter
    prompt: str = "continue"
    env: dict[str, str] = field(default_factory=dict)
    prune_env: dict[str, str] | None = None  # set for patched runs: the CLAUDE_TEXT_PRUNE_* knobs
    model: str = MODEL
    args: tuple[str, ...] = ("--disallowedTools", "Skill")
    """Extra CLI arguments. The default removes the Skill tool, and with it the skill-listing
    attachment added to the new prompt: from 2.1.47 with the CLI's bundled skills even in an
    empty home (2.1.45 sends none), from 2.1.39 when the user has a skill. The engine cannot
    know that attachment, and 2.1.33+ count it in the auto-compact number (as JSON up to
    2.1.44, rendered from 2.1.45). ``args=()`` keeps it; the harness then reads it back from
    the session file."""


@dataclass
class Outcome:
    case: Case
    version: str
    profile: Profile
    thresholds: Thresholds
    run: RunResult
    requests: list[Logged]
    main: Logged | None
    compact: Logged | None
    prediction: Prediction
    mc_tokens: int  # last usage, what micro-compaction compares with the warning threshold
    ac_tokens: int  # what auto-compaction compares with its threshold
    ac_expected: bool
    sent: list[dict] | None = None  # what the engine compares: main (or compact) messages, stripped
    diff: str | None = None

    @property
    def ac_fired(self) -> bool:
        return self.compact is not None

    @property
    def cleared_sent(self) -> list[str]:
        """tool_use ids whose result was replaced (cleared / persisted) in what was sent."""
        if self.sent is None:
            return []
        return [
            k
            for k, v in tool_results(self.sent).items()
            if isinstance(v, str) and CLEARED_RE.match(v)
        ]

    def explain(self) -> str:
        th = self.thresholds
        lines = [
            f"case {self.case.name}: Claude Code {self.version} (profile {self.profile.name}), "
            f"model {self.case.model}, env {self.case.env or {}}"
            + (f", prune {self.case.prune_env}" if self.case.prune_env is not None else ""),
            (
                f"  thresholds: warning {th.warning}, auto-compact {th.auto_compact} "
                f"({'on' if th.auto_compact_enabled else 'off'}), micro-compaction "
                f"{'on' if th.microcompact_enabled else 'off'}"
            ),
            f"  tokens: last usage {self.mc_tokens}, auto-compact count {self.ac_tokens}",
            (
                f"  engine: micro-compaction {self.prediction.mc.reason} "
                f"(clears {len(self.prediction.mc.cleared)}), auto-compaction "
                f"{'yes' if self.ac_expected else 'no'}"
            ),
            (
                f"  real: {len(self.requests)} requests "
                f"({', '.join(r.kind for r in self.requests)}), compaction request "
                f"{'yes' if self.ac_fired else 'no'}, cleared {len(self.cleared_sent)}"
            ),
        ]
        if self.prediction.prune is not None:
            p = self.prediction.prune
            lines.append(
                f"  prune: {p.reason}, turns {p.turns}, cutoff {p.cutoff}, "
                f"{p.blocks_pruned} blocks in {p.messages_changed} messages"
            )
        if self.diff:
            lines.append("  first difference: " + self.diff)
        lines.append("  run: " + self.run.describe().replace("\n", "\n    "))
        return "\n".join(lines)


def split_compact_messages(messages: list[dict]) -> list[dict]:
    """The history part of a summarisation request: without the summary prompt text block(s).

    The prompt is appended as a user message; when the history ends with a user message the two
    are merged, so the prompt is a trailing text block rather than a message of its own.
    """
    from lab.mock import COMPACT_MARKERS

    out = [dict(m) for m in messages]
    last = out[-1]
    c = last.get("content")

    def is_prompt(b):
        return (
            isinstance(b, Mapping)
            and b.get("type") == "text"
            and any(k in (b.get("text") or "") for k in COMPACT_MARKERS)
        )

    if isinstance(c, str) and any(k in c for k in COMPACT_MARKERS):
        return out[:-1]
    if isinstance(c, list):
        keep = [b for b in c if not is_prompt(b)]
        if not keep:
            return out[:-1]
        out[-1] = {**last, "content": keep}
    return out


REQUEST_TIME_ATTACHMENTS = frozenset({"session_context", "prompt_snapshot"})
"""2.1.330 writes these (then ``date``, ``remote_session_change``) when it builds the request,
after the auto-compact check: when compaction fires they come after the ``compact_boundary``;
when it does not, right after the prompt's own attachments. The count never saw them."""


def appended_records(sandbox: Sandbox, session: SessionWriter) -> list[dict]:
    """Records the CLI appended to the session file before any compaction: the new prompt and
    the attachments it came with (what the auto-compact count sees besides the transcript),
    up to the first request-time attachment (:data:`REQUEST_TIME_ATTACHMENTS`)."""
    path = sandbox.session_file(session.session_id)
    if not path.is_file():
        return []
    known = {r["uuid"] for r in session.records}
    out: list[dict] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("uuid") in known or rec.get("type") not in (
            "user",
            "assistant",
            "attachment",
            "system",
        ):
            continue
        if rec.get("type") == "system" or rec.get("type") == "assistant":
            break  # compact boundary or the reply: the count was taken before these
        if (rec.get("attachment") or {}).get("type") in REQUEST_TIME_ATTACHMENTS:
            break
        out.append(rec)
    return out


def run_case(
    sandbox: Sandbox,
    mock: MockServer,
    case: Case,
    version: str,
    mock_config: MockConfig | None = None,
    timeout: float = 120,
) -> Outcome:
    """Resume ``case.session`` in ``sandbox`` against ``mock`` and compare with the engine."""
    profile = profile_for(version)
    env = dict(case.env)
    th = compute_thresholds(profile, case.model, env)
    sid = case.session.session_id
    # a fresh session folder: earlier runs of the same session id must not leak in
    shutil.rmtree(sandbox.projects_dir / sid, ignore_errors=True)
    case.session.write(sandbox.projects_dir)
    mock.reset(mock_config or MockConfig())
    run_env: dict[str, Any] = {**env, "ANTHROPIC_MODEL": case.model}
    if case.prune_env is not None:
        run_env.update(case.prune_env)
    run = sandbox.run(
        [
            "-p",
            case.prompt,
            "--resume",
            sid,
            "--output-format",
            "json",
            "--model",
            case.model,
            *case.args,
        ],
        mock.base_url,
        run_env,
        timeout,
    )
    reqs = mock.requests()
    mains = [r for r in reqs if r.kind == "main"]
    compacts = [r for r in reqs if r.kind == "compact"]
    main = mains[0] if mains else None
    compact = compacts[0] if compacts else None

    records = case.session.copy()
    with_prompt = [*records, prompt_record(case.prompt)]
    captured = (compact.body if compact else main.body if main else {}) or {}
    api = without_deferred_tools(captured.get("messages") or [])
    positions = reminder_positions(api)
    prediction = expected_messages(
        records,
        case.prompt,
        profile,
        th,
        persist_dir=str(sandbox.tool_results_dir(sid)),
        prune_env=case.prune_env,
        reminders_first=0 in positions,
        reminders_last=bool(api) and len(api) - 1 in positions,
        style=api_style(version),
        compact_prompt=compact is not None,
        compaction_through_loop=compaction_runs_the_loop(version),
    )
    appended = appended_records(sandbox, case.session)
    # the count runs on the micro-compacted (and pruned) list; the CLI's own records (prompt as
    # written, attachments) replace the synthetic prompt when the session file has them
    counted = prediction.records_sent[:-1] + (appended or prediction.records_sent[-1:])
    ac_tokens = autocompact_tokens(counted, profile)
    ac_expected = th.auto_compact_enabled and ac_tokens >= th.auto_compact
    out = Outcome(
        case,
        version,
        profile,
        th,
        run,
        reqs,
        main,
        compact,
        prediction,
        last_usage_tokens(with_prompt),
        ac_tokens,
        ac_expected,
    )
    if not api:
        out.diff = "no main-loop or summarisation request was captured"
        return out
    stray = [i for i in positions if i not in (0, len(api) - 1)]
    out.sent = strip_volatile(api)
    expected = prediction.api_messages
    if compact is not None:
        out.sent = split_compact_messages(out.sent)
        expected = split_compact_messages(expected)
    out.diff = (
        (f"CLI reminder blocks in messages {stray} (only the first and the last may hold them)")
        if stray
        else first_difference(expected, out.sent)
    )
    return out


@dataclass(frozen=True)
class Boundaries:
    """The last-usage values at which the engine says each mechanism starts to fire."""

    microcompact: int | None  # the warning threshold (None: no live micro-compaction)
    autocompact: int | None  # threshold minus what the count adds after the last usage
    newer: int  # what the count adds after the last usage (the new prompt, 2.1.2+)
    thresholds: Thresholds


def engine_boundaries(
    session: SessionWriter,
    version: str,
    env: Mapping[str, str] | None = None,
    model: str = MODEL,
    prompt: str = "continue",
) -> Boundaries:
    """Where the engine puts the micro- and auto-compaction boundaries for ``session``."""
    profile = profile_for(version)
    th = compute_thresholds(profile, model, dict(env or {}))
    msgs = [*session.copy(), prompt_record(prompt)]
    newer = autocompact_tokens(msgs, profile) - last_usage_tokens(msgs)
    mc = th.warning if th.microcompact_enabled else None
    ac = th.auto_compact - newer if th.auto_compact_enabled else None
    return Boundaries(mc, ac, newer, th)
