"""The end-to-end proof (issue 7): everything ``ctxpatch apply`` installs, on the real 2.0.76,
2.1.50 and 2.1.112, against the mock with thinking on and the preserved-thinking check enforced
(``binding="error"``) and usage that follows the edited prompt (``count_prompt=True``).

* Every main-loop request carries ``clear_tool_uses_20250919`` (after Claude Code's own
  ``clear_thinking_20251015`` where it sends one) and the ``context-management-2025-06-27`` beta,
  and the mock applies it (``applied_edits``), over a session where the text prune's cutoff moves
  three times (the knobs of tests/e2e/test_thinking_where_we_stand.py).
* Server-side clearing alone (text prune off) passes the check: 0 HTTP 400, 0 dropped blocks.
* Everything together (the thinking-safe text prune, its cutoff moving three times, and server
  clearing): 0 HTTP 400 on an enforced account (``error``), 0 dropped blocks under ``drop_block``.
  (With the 0.1.0 prune, ``CLAUDE_TEXT_PRUNE_THINKING=ignore``, the first request after the
  cutoff's first move is refused: tests/e2e/test_thinking_where_we_stand.py.)
* The auto-compaction boundary: the engine predicts Claude Code's next count from the edited
  prompt (the twin, :mod:`engine.api.context_editing`, applied to what the CLI sent, counted like the
  mock counts, then :func:`engine.claude_code.count.autocompact_tokens` over the CLI's own transcript) and the
  threshold (:mod:`engine.claude_code.thresholds`); the mock's reply ``output_tokens`` puts that count one
  token below the boundary (no compaction) or at it (compaction). Without the clearing edit the
  same session compacts one token below: clearing moved the compaction.

One process per run (``--input-format stream-json``), sandboxes shared with the other e2e tests.
"""

from __future__ import annotations

import json

import pytest

from engine.api.context_editing import apply_edits
from engine.api.context_management import (
    BETA,
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    parse_edits,
    to_json,
)
from engine.claude_code.count import autocompact_tokens
from engine.claude_code.thresholds import compute_thresholds
from engine.profiles import profile_for
from engine.twins.context_clear import (
    ENV_DISABLE,
    ENV_KEEP,
    ENV_POLICY,
    ENV_STEP,
    ENV_TRIGGER,
    edit_for_request,
    knobs_from_env,
    step_from_env,
)
from lab.chain import THINK_ENV, Turns, run_turns
from lab.harness import MODEL
from lab.mock import MockConfig, Step
from lab.predict import prompt_record
from lab.scenarios import thinking_session
from lab.server_edits import betas_of, prompt_tokens
from lab.signing import sign_session
from lab.thinking_binding import thinking_on

from .test_thinking_where_we_stand import ARGS, PRUNE, TURNS, live_script, prompts

pytestmark = pytest.mark.e2e

VERSIONS = ("2.0.76", "2.1.50", "2.1.112")
CLEAR = {ENV_POLICY: "fixed", ENV_TRIGGER: "1000", ENV_KEEP: "1", ENV_STEP: "1"}
"""Clearing knobs that fire in a short session (the defaults wait for a long one; STEP 1: the
plain API keep, one more result cleared per tool use)."""
NO_PRUNE = {"CLAUDE_TEXT_PRUNE_DISABLE": "1"}


_RUNS: dict[tuple[str, tuple[tuple[str, str], ...]], Turns] = {}


def proof_session(
    sandbox_for, mock, version: str, env: dict[str, str], binding: str = "error"
) -> Turns:
    """One run per (version, env, binding), shared by the tests that read it (CI time)."""
    key = (version, tuple(sorted(env.items())), binding)
    if key not in _RUNS:
        _RUNS[key] = _proof_session(sandbox_for, mock, version, env, binding)
    return _RUNS[key]


def _proof_session(sandbox_for, mock, version: str, env: dict[str, str], binding: str) -> Turns:
    sb = sandbox_for(version, True)
    s = thinking_session(str(sb.proj), version=version, turns=2)
    sign_session(sb, mock, s, model=MODEL, env=env, args=ARGS)
    cfg = MockConfig(script=live_script(sb), thinking=True, binding=binding, count_prompt=True)  # type: ignore[arg-type]
    return run_turns(sb, mock, s, prompts(), cfg, model=MODEL, env=env, args=ARGS)


def assert_clearing_sent_and_applied(t: Turns) -> None:
    mains = [r for r in t.checked if r.kind == "main"]
    assert mains, t.describe()
    want = to_json(knobs_from_env(CLEAR))  # type: ignore[arg-type]
    for r in mains:
        assert BETA in betas_of(r.headers), r.headers
        edits = r.body["context_management"]["edits"]
        assert edits[-1] == {**want, **{k: v for k, v in edits[-1].items() if k not in want}}
        assert [e["type"] for e in edits] in ([CLEAR_TOOL_USES], [CLEAR_THINKING, CLEAR_TOOL_USES])
        if r.status == 200:
            assert [e["type"] for e in r.applied_edits] == [CLEAR_TOOL_USES], t.describe()


@pytest.mark.parametrize("version", VERSIONS)
def test_server_clearing_alone_passes_the_check(sandbox_for, mock, version):
    t = proof_session(sandbox_for, mock, version, {**THINK_ENV, **NO_PRUNE, **CLEAR})
    assert t.run.returncode == 0, t.describe()
    assert t.rejected == [] and t.n_dropped == 0, t.describe()
    assert_clearing_sent_and_applied(t)
    mains = [r for r in t.checked if r.kind == "main"]
    assert len(mains) == 2 * TURNS, t.describe()  # a tool round and a reply per turn
    # the clearing grows with the session: the server clears more tool uses as they accumulate
    cleared = [r.applied_edits[0]["cleared_tool_uses"] for r in mains]
    assert cleared == sorted(cleared) and cleared[-1] > cleared[0], cleared


@pytest.mark.parametrize("version", VERSIONS)
def test_everything_apply_installs_sends_the_clearing_edit_and_beta(sandbox_for, mock, version):
    t = proof_session(sandbox_for, mock, version, {**THINK_ENV, **PRUNE, **CLEAR})
    assert_clearing_sent_and_applied(t)


@pytest.mark.parametrize("binding", ["error", "drop_block"])
@pytest.mark.parametrize("version", VERSIONS)
def test_everything_apply_installs_passes_the_check(sandbox_for, mock, version, binding):
    """The thinking-safe text prune (its cutoff moves three times) with server clearing: no
    400 on an enforced account, no block dropped on a ``drop_block`` one."""
    t = proof_session(sandbox_for, mock, version, {**THINK_ENV, **PRUNE, **CLEAR}, binding)
    assert t.rejected == [] and t.n_dropped == 0, t.describe()
    assert t.cutoff_moves >= 3, t.describe()
    assert t.run.returncode == 0, t.describe()


# --- the auto-compaction boundary ----------------------------------------------------------------

BOUNDARY_PROMPTS = ("First prompt: explain the module.", "Second prompt: go on.")


def _boundary_run(sb, mock, s, env: dict[str, str], output_tokens: int) -> Turns:
    """Two prompts in one process; the first reply reports ``output_tokens`` (its input tokens
    are the mock's count of the edited prompt)."""
    script = [
        Step.text("Reply one. " * 20, usage={"input_tokens": 1, "output_tokens": output_tokens}),
        Step.text("Reply two."),
    ]
    cfg = MockConfig(script=script, thinking=True, binding="error", count_prompt=True)
    return run_turns(sb, mock, s, BOUNDARY_PROMPTS, cfg, model=MODEL, env=env, args=ARGS)


def _compacted(t: Turns) -> bool:
    return any(r.kind == "compact" for r in t.checked)


def predicted_count(version: str, env: dict[str, str], t: Turns, transcript: list[dict]) -> int:
    """The engine's Claude Code count before the second prompt's request, from the first
    request as sent: the twin's edit (from the knobs) applied to its messages, counted like the
    API (here: the mock) counts, is the reply's input usage; the count is then
    :func:`autocompact_tokens` over the CLI's transcript up to the second prompt."""
    first = t.checked[0]
    thinking = thinking_on(first.body)
    edits = parse_edits(first.body["context_management"], thinking_enabled=thinking)
    edit = knobs_from_env(env)
    assert edit is not None
    want = edit_for_request(edit, first.body["messages"], step_from_env(env))
    assert edits[-1] == want, edits  # the JavaScript sent the twin's edit
    edited = apply_edits(
        first.body["messages"],
        edits,
        lambda m: prompt_tokens(first.body, m),
        thinking_enabled=thinking,
    )
    input_tokens = prompt_tokens(first.body, edited.messages)
    assert input_tokens == first.input_tokens, (input_tokens, first.input_tokens)
    k = next(
        i
        for i, r in enumerate(transcript)
        if r.get("type") == "user" and BOUNDARY_PROMPTS[1] in json.dumps(r.get("message"))
    )
    records = [json.loads(json.dumps(r)) for r in transcript[:k]]
    for r in records:  # the usage the reply got (the transcript holds it already; be explicit)
        if r.get("type") == "assistant" and (r.get("message") or {}).get("id") == _reply_id(t):
            r["message"]["usage"]["input_tokens"] = input_tokens
    return autocompact_tokens([*records, prompt_record(BOUNDARY_PROMPTS[1])], profile_for(version))


def _reply_id(t: Turns) -> str | None:
    for line in t.run.stdout.splitlines():
        if line.startswith('{"type":"assistant"'):
            return json.loads(line)["message"].get("id")
    return None


@pytest.mark.parametrize("version", VERSIONS)
def test_clearing_moves_auto_compaction_exactly_where_the_engine_predicts(
    sandbox_for, mock, version
):
    sb = sandbox_for(version, True)
    env = {**THINK_ENV, **NO_PRUNE, **CLEAR}
    s = thinking_session(str(sb.proj), version=version, turns=4, result_chars=16000)
    sign_session(sb, mock, s, model=MODEL, env=env, args=ARGS)
    threshold = compute_thresholds(profile_for(version), MODEL, env).auto_compact

    probe = _boundary_run(sb, mock, s, env, 1)
    assert probe.rejected == [] and not _compacted(probe), probe.describe()
    first = probe.checked[0]
    (applied,) = first.applied_edits
    original = prompt_tokens(first.body)
    assert applied["cleared_input_tokens"] > 0 and first.input_tokens < original
    transcript = [
        json.loads(line) for line in sb.session_file(s.session_id).read_text().splitlines() if line
    ]
    count = predicted_count(version, env, probe, transcript)  # with output_tokens 1
    at = threshold - (count - 1)  # the output_tokens that put the count at the threshold
    assert at > 1, (count, threshold)

    below = _boundary_run(sb, mock, s, env, at - 1)
    assert below.rejected == [] and not _compacted(below), below.describe()
    assert below.checked[0].input_tokens == first.input_tokens  # the same prompt, the same count
    on = _boundary_run(sb, mock, s, env, at)
    assert on.rejected == [] and _compacted(on), on.describe()
    assert [r.kind for r in on.checked][:2] == ["main", "compact"], on.describe()
    # without the clearing edit the reply's usage is the whole prompt: compaction one token below
    plain = _boundary_run(sb, mock, s, {**env, ENV_DISABLE: "1"}, at - 1)
    assert "context_management" not in plain.checked[0].body or not any(
        e["type"] == CLEAR_TOOL_USES for e in plain.checked[0].body["context_management"]["edits"]
    )
    assert plain.checked[0].input_tokens == original, plain.describe()
    assert _compacted(plain), plain.describe()
