"""The thinking-on part of ``ctxpatch verify``: server-side clearing under the preserved-thinking
check, on the user's own patched ``cli.js``.

One run (one process, ``--input-format stream-json``): a generated two-turn thinking session
(its thinking blocks signed for what this ``cli.js`` sends, :func:`lab.signing.sign_session`)
then :data:`LIVE_TURNS` typed prompts, each answered with a thinking block and a ``Read`` of a
generated note, then a thinking block and a text. The mock enforces the check (``binding="error"``,
an account created on or after 2026-08-31) and reports usage that follows the edited prompt
(``count_prompt``). The clearing knobs are set low (:data:`CLEAR`) so the edit fires in a short
session; the text prune keeps its defaults (it does not fire in a session this short).

Three proofs, each a :class:`Proof`:

``clearing_sent``
    every main-loop request carries ``clear_tool_uses_20250919`` (the edit the knobs ask for,
    :func:`engine.context_clear.knobs_from_env`) and the ``context-management-2025-06-27`` beta,
    and the mock applied it;
``clearing_counted``
    the usage the mock answered (the edited prompt's count) is what Claude Code wrote for that
    reply, so its next auto-compact count (:func:`engine.count.autocompact_tokens` over its
    transcript) is lower than the unedited prompt by what the server cleared;
``thinking_check``
    0 HTTP 400 and 0 dropped thinking blocks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.api.context_management import BETA, CLEAR_TOOL_USES
from engine.api.context_management import to_json as edit_json
from engine.claude_code.count import autocompact_tokens
from engine.profiles import profile_for
from engine.twins.context_clear import ENV_KEEP, ENV_POLICY, ENV_STEP, ENV_TRIGGER, knobs_from_env
from lab.chain import THINK_ENV, Turns, run_turns
from lab.harness import MODEL
from lab.mock import MockConfig, MockServer, Step
from lab.predict import prompt_record
from lab.sandbox import Sandbox
from lab.scenarios import thinking_session
from lab.server_edits import betas_of, prompt_tokens
from lab.signing import sign_session

CLEAR = {ENV_POLICY: "fixed", ENV_TRIGGER: "1000", ENV_KEEP: "1", ENV_STEP: "1"}
ARGS = ("--disallowedTools", "Skill", "--allowedTools", "Read")
LIVE_TURNS = 3
CLEARING_FUNCTION = "_ctxpatchContextClearing"
"""The injected function's name: present only where ``apply`` installed the clearing."""


@dataclass
class Proof:
    name: str
    ok: bool
    detail: str
    numbers: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "detail": self.detail, **self.numbers}


def has_clearing(cli_js: Path) -> bool:
    return CLEARING_FUNCTION in cli_js.read_text(encoding="utf-8", errors="replace")


def _script(sb: Sandbox) -> list[Step]:
    out: list[Step] = []
    for k in range(LIVE_TURNS):
        note = sb.proj / f"verify-notes{k}.txt"
        note.write_text(f"verify notes {k}\n" * 200)
        use = {"type": "tool_use", "id": f"toolu_verify_{k:02d}", "name": "Read"}
        out.append(Step([{**use, "input": {"file_path": str(note)}}], "tool_use"))
        out.append(Step.text(f"Reply {k}: the notes are read."))
    return out


def _prompts() -> list[str]:
    return [f"Verify turn {k}: read the next notes." for k in range(LIVE_TURNS)]


def run_thinking_proof(
    sandbox: Sandbox, mock: MockServer, version: str, timeout: float
) -> tuple[list[Proof], Turns]:
    """The three proofs (see the module docstring) from one run in ``sandbox``."""
    env = {**THINK_ENV, **CLEAR}
    s = thinking_session(str(sandbox.proj), version=version, turns=2)
    sign_session(sandbox, mock, s, model=MODEL, env=env, args=ARGS, timeout=timeout, live=True)
    cfg = MockConfig(script=_script(sandbox), thinking=True, binding="error", count_prompt=True)
    t = run_turns(
        sandbox, mock, s, _prompts(), cfg, model=MODEL, env=env, args=ARGS, timeout=timeout
    )
    transcript = []
    path = sandbox.session_file(s.session_id)
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                transcript.append(json.loads(line))
    return [_sent(t, env), _counted(t, transcript, version), _check(t)], t


def _sent(t: Turns, env: dict[str, str]) -> Proof:
    mains = [r for r in t.checked if r.kind == "main"]
    edit = knobs_from_env(env)
    want = edit_json(edit) if edit is not None else {"type": CLEAR_TOOL_USES}
    carrying = applied = 0
    for r in mains:
        cm = r.body.get("context_management") if isinstance(r.body, dict) else None
        edits = cm.get("edits") if isinstance(cm, dict) else None
        ours = [e for e in edits or [] if isinstance(e, dict) and e.get("type") == CLEAR_TOOL_USES]
        if (
            ours
            and all(ours[0].get(k) == v for k, v in want.items())
            and BETA in betas_of(r.headers)
        ):
            carrying += 1
        if any(e.get("type") == CLEAR_TOOL_USES for e in r.applied_edits):
            applied += 1
    ok = bool(mains) and carrying == len(mains) and applied > 0
    return Proof(
        "clearing_sent",
        ok,
        f"{carrying} of {len(mains)} main-loop requests carried {CLEAR_TOOL_USES} with the beta "
        f"{BETA}; the mock cleared tool results in {applied}",
        {"main_requests": len(mains), "carrying": carrying, "applied": applied},
    )


def _counted(t: Turns, transcript: list[dict], version: str) -> Proof:
    """The last reply that the server edited: its usage in the transcript, and the engine's
    count of Claude Code's next check with and without the edit."""
    edited = [r for r in t.checked if r.kind == "main" and r.status == 200 and r.applied_edits]
    if not edited:
        return Proof("clearing_counted", False, "no request was edited by the mock")
    r = edited[-1]
    original = prompt_tokens(r.body)
    got = r.input_tokens or 0
    recorded = [
        (i, rec)
        for i, rec in enumerate(transcript)
        if rec.get("type") == "assistant"
        and ((rec.get("message") or {}).get("usage") or {}).get("input_tokens") == got
    ]
    if not recorded:
        return Proof(
            "clearing_counted",
            False,
            f"the mock answered {got} input tokens (edited prompt); Claude Code did not record it",
            {"input_tokens": got, "unedited_tokens": original},
        )
    i = recorded[-1][0]
    profile = profile_for(version)
    upto = [*transcript[: i + 1], prompt_record("next")]
    count = autocompact_tokens(upto, profile)
    unedited = json.loads(json.dumps(upto))
    unedited[i]["message"]["usage"]["input_tokens"] = original
    count_unedited = autocompact_tokens(unedited, profile)
    ok = 0 < got < original and count_unedited - count == original - got
    return Proof(
        "clearing_counted",
        ok,
        f"usage {got} input tokens (unedited prompt {original}) recorded by Claude Code: its next "
        f"auto-compact count is {count}, {count_unedited - count} lower than without clearing",
        {
            "input_tokens": got,
            "unedited_tokens": original,
            "next_count": count,
            "next_count_unedited": count_unedited,
        },
    )


def _check(t: Turns) -> Proof:
    n = len(t.checked)
    ok = n > 0 and not t.rejected and t.n_dropped == 0 and t.run.returncode == 0
    first = t.rejected[0] if t.rejected else None
    why = f"; first 400: {first.error}" if first is not None and first.error else ""
    return Proof(
        "thinking_check",
        ok,
        f"{n} requests checked, {len(t.rejected)} HTTP 400, {t.n_dropped} thinking blocks "
        f"dropped (enforced check, thinking on){why}",
        {"requests": n, "http_400": len(t.rejected), "dropped": t.n_dropped},
    )
