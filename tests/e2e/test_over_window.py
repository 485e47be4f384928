"""The real builds past the model's window (issue 16 item 5), offline against the mock's
``window`` switch: a request whose prompt *as sent* (before server edits) is over the window
gets the documented ``400 prompt is too long``.

With clearing, Claude Code's count follows the edited usage, so its own auto-compaction stops
firing while the prompt it sends keeps growing. Measured here:

* native 2.1.330 and the newest, 2.1.332, recover by themselves: on the 400 it compacts (its summary request, too long as
  well, is retried with less history) and the session goes on;
* native 2.1.113 and cli.js 2.1.112 (patched) answer every later prompt with "Prompt is too
  long": stuck (measured with the window between the edited and the unedited prompt). ctxpatch
  keeps them out of it: the gateway (``gateway.window``) and the injected snippet
  (``nearWindow``) stop clearing once the request is large enough that the unedited prompt may
  have reached Claude Code's auto-compact threshold, so that request reports the whole prompt
  and Claude Code compacts before the next one, inside the window. That guard is opt-in
  (``CLAUDE_CTX_CLEAR_WINDOW_GUARD=1``): the API documents context editing as what keeps a
  conversation within the window, i.e. the window measured on the edited prompt, which the mock's
  switch assumes otherwise; only a real request past 200K tokens can settle it.
"""

from __future__ import annotations

import json
from itertools import pairwise

import native_builds
import pytest

from .lab_compat import lab
from .test_native_gateway import PROMPTS, env_for

Turns, run_turns, THINK_ENV = lab("chain").Turns, lab("chain").run_turns, lab("chain").THINK_ENV
MODEL = lab("harness").MODEL
MockConfig = lab("mock").MockConfig
GatewaySandbox = lab("sandbox").GatewaySandbox
thinking_session = lab("scenarios").thinking_session
prompt_tokens = lab("server_edits").prompt_tokens
sign_session = lab("signing").sign_session
ARGS, CLEAR = lab("verify_thinking").ARGS, lab("verify_thinking").CLEAR
GUARD = {"CLAUDE_CTX_CLEAR_WINDOW_GUARD": "1"}  # the guard is opt-in (gateway/window.py)

pytestmark = [pytest.mark.e2e, pytest.mark.real]


def config(window: int | None = None) -> MockConfig:
    return MockConfig(thinking=True, binding="error", count_prompt=True, window=window)


def never_too_long_twice(t: Turns) -> bool:
    """No two main-loop requests in a row refused as too long: a prompt the user typed after a
    refusal is not refused again (2.1.113 and 2.1.112 alone refuse every later prompt)."""
    mains = [r for r in t.checked if r.kind == "main"]
    return not any(
        "prompt is too long" in (a.error or "") and "prompt is too long" in (b.error or "")
        for a, b in pairwise(mains)
    )


def goes_on(t: Turns) -> bool:
    """The run ended well: its last result is no error and the last request was answered."""
    results = [json.loads(x) for x in t.run.stdout.splitlines() if '"type":"result"' in x]
    return (
        t.run.returncode == 0
        and bool(results)
        and not any(r.get("is_error") for r in results)
        and t.checked[-1].status == 200
    )


def describe(t: Turns) -> str:
    return str([(r.kind, r.status, prompt_tokens(r.body), (r.error or "")[:60]) for r in t.checked])


def test_native_2_1_330_recovers_from_prompt_too_long_by_itself(native_exe, mock, e2e_root):
    recovers("2.1.330", native_exe("2.1.330"), mock, e2e_root)


def test_the_newest_native_recovers_from_prompt_too_long_by_itself(native_exe, mock, e2e_root):
    """The newest build (2.1.332) behaves as 2.1.330: it compacts on the 400 and goes on, so the
    gateway's guard (builds before 2.1.330) rightly leaves it alone. ``native_exe`` first: the
    network-namespace check and the cache's location before the test moves HOME."""
    native_exe  # noqa: B018 (the fixture's checks)
    recovers(native_builds.SDK_BUNDLED, native_builds.newest_native_or_skip(), mock, e2e_root)


def recovers(version, exe, mock, e2e_root) -> None:
    sb = GatewaySandbox(e2e_root / f"over-window-{version}", exe)
    env = env_for(version)
    s = thinking_session(str(sb.proj), version=version, turns=4, result_chars=16000)
    sign_session(sb, mock, s, model=MODEL, env=env, args=ARGS, live=True)
    probe = run_turns(sb, mock, s, PROMPTS, config(), model=MODEL, env=env, args=ARGS, timeout=90)
    first = probe.checked[0]
    raw, edited = prompt_tokens(first.body), first.input_tokens
    assert edited is not None and edited < raw, probe.describe()
    # a window between the edited and the unedited prompt: clearing hides how close it is
    t = run_turns(
        sb,
        mock,
        s,
        PROMPTS,
        config((raw + edited) // 2),
        model=MODEL,
        env=env,
        args=ARGS,
        timeout=300,
    )
    assert t.checked[0].status == 400 and "prompt is too long" in (t.checked[0].error or "")
    assert any(r.kind == "compact" and r.status == 200 for r in t.checked), describe(t)
    assert goes_on(t), describe(t)
    assert never_too_long_twice(t), describe(t)


def test_native_2_1_113_through_the_gateway_compacts_inside_the_window(native_exe, mock, e2e_root):
    version = "2.1.113"
    sb = GatewaySandbox(e2e_root / f"over-window-{version}", native_exe(version))
    env = {**env_for(version), **GUARD}
    # a session whose prompt is just over 2.1.113's auto-compact threshold (167,000)
    s = thinking_session(str(sb.proj), version=version, turns=6, result_chars=110_000)
    sign_session(sb, mock, s, model=MODEL, env=env, args=ARGS, live=True)
    probe = run_turns(sb, mock, s, PROMPTS, config(), model=MODEL, env=env, args=ARGS, timeout=300)
    raw = prompt_tokens(probe.checked[0].body)
    assert 167_000 < raw < 200_000, describe(probe)
    # the window right above the first request: the second would pass it if nothing compacted
    t = run_turns(
        sb, mock, s, PROMPTS, config(raw + 50), model=MODEL, env=env, args=ARGS, timeout=300
    )
    first = t.checked[0]
    assert "clear_tool_uses_20250919" not in json.dumps(first.body.get("context_management"))
    assert first.status == 200 and first.input_tokens == raw  # the whole prompt, reported
    assert any(r.kind == "compact" and r.status == 200 for r in t.checked), describe(t)
    # (here the window is 50 tokens above that request, so Claude Code's summary request, a
    # little longer, is refused once and retried with less history: its own recovery)
    assert goes_on(t), describe(t)
    assert never_too_long_twice(t), describe(t)


def test_cli_2_1_112_patched_compacts_inside_the_window(sandbox_for, mock):
    version = "2.1.112"
    sb = sandbox_for(version, True)
    env = {**THINK_ENV, **CLEAR, **GUARD, "CLAUDE_TEXT_PRUNE_DISABLE": "1"}
    s = thinking_session(str(sb.proj), version=version, turns=6, result_chars=110_000)
    sign_session(sb, mock, s, model=MODEL, env=env, args=ARGS, live=True)
    probe = run_turns(sb, mock, s, PROMPTS, config(), model=MODEL, env=env, args=ARGS, timeout=300)
    raw = prompt_tokens(probe.checked[0].body)
    assert 167_000 < raw < 200_000, describe(probe)
    t = run_turns(
        sb, mock, s, PROMPTS, config(raw + 50), model=MODEL, env=env, args=ARGS, timeout=300
    )
    first = t.checked[0]
    assert "clear_tool_uses_20250919" not in json.dumps(first.body.get("context_management"))
    assert first.status == 200 and first.input_tokens == raw  # the whole prompt, reported
    assert any(r.kind == "compact" and r.status == 200 for r in t.checked), describe(t)
    assert goes_on(t), describe(t)
    assert never_too_long_twice(t), describe(t)
