"""Where we stand under the preserved-thinking check, on the real 2.0.76, 2.1.50 and 2.1.112.

A thinking-on session (two turns in the file, every thinking block signed by the mock's
function over what the CLI sends, :func:`lab.signing.sign_session`), then seven live turns
in ONE process (``--input-format stream-json``): each turn a thinking + Read ``tool_use`` reply,
the tool result, then a thinking + text reply, every thinking block signed by the mock over the
request as sent. The mock enforces the check (``error``, an account created on or after
2026-08-31) or drops the blocks (``drop_block``). ``MAX_THINKING_TOKENS`` makes every version
think (2.0.76 sends no ``thinking`` without it or a "think" keyword).

Measured (these tests assert it):

* unpatched, no client edit: 0 HTTP 400 on all three versions (the CLI sends the conversation
  back as it was, thinking blocks included);
* patched with the 0.1.0 text prune (``CLAUDE_TEXT_PRUNE_THINKING=ignore``; knobs below: it
  fires from the first move; the thinking-safe default passes, tests/e2e/test_proof.py): the first request
  after the prune's cutoff first moves gets 400 (a thinking block after the pruned texts), and
  so does every later request of the session (the broken block is sent again each time); with
  ``drop_block`` no 400, but every move drops more blocks (the reasoning after the edit point is
  silently lost), over at least three cutoff moves;
* Claude Code's own micro-compaction (live on 2.0.76 and 2.1.50, a stub on 2.1.112): once it
  clears old tool results, the next request gets 400, unpatched;
* 2.0.76 only, across ``--resume``: the TodoWrite ``<system-reminder>`` the CLI adds to a
  prompt is not written to the transcript, so a thinking block produced after such a prompt
  fails once the session is resumed;
* 2.0.76 with ``DISABLE_MICROCOMPACT=1``: the reply of every tool round is sent twice in the next
  request (see the micro-compaction test).
"""

from __future__ import annotations

import pytest

from lab.chain import THINK_ENV, run_chain, run_turns
from lab.harness import MODEL, engine_boundaries
from lab.mock import MockConfig, Step
from lab.scenarios import thinking_session
from lab.signing import sign_session

pytestmark = pytest.mark.e2e

VERSIONS = ("2.0.76", "2.1.50", "2.1.112")
LIVE_MC = ("2.0.76", "2.1.50")
PRUNE = {
    "CLAUDE_TEXT_PRUNE_THRESHOLD": "1000",
    "CLAUDE_TEXT_PRUNE_KEEP": "2",
    "CLAUDE_TEXT_PRUNE_STEP": "2",
    "CLAUDE_TEXT_PRUNE_MAX_CHARS": "60",
}
"""Today's prune with knobs that make it fire in a short session: 2 turns in the file + 7 live
turns move the cutoff at the 4th, 6th and 8th turn (three moves)."""
PRUNE_0_1_0 = {**PRUNE, "CLAUDE_TEXT_PRUNE_THINKING": "ignore"}
"""The same with the 0.1.0 rule (the knob that restores it): "today's prune" of these tests.
The thinking-safe rule, on by default, passes: tests/e2e/test_proof.py."""
ARGS = ("--disallowedTools", "Skill", "--allowedTools", "Read")
TURNS = 7


def live_script(sb, n: int = TURNS) -> list[Step]:
    out: list[Step] = []
    for k in range(n):
        note = sb.proj / f"notes{k}.txt"
        note.write_text(f"notes {k}\n" * 50)
        out.append(
            Step(
                [
                    {
                        "type": "tool_use",
                        "id": f"toolu_live_{k:02d}",
                        "name": "Read",
                        "input": {"file_path": str(note)},
                    }
                ],
                "tool_use",
            )
        )
        out.append(Step.text(f"Reply {k}: the notes say what they say.\n" + "More detail. " * 12))
    return out


def prompts(n: int = TURNS) -> list[str]:
    return [
        f"Live turn {k}: go on with the next module and explain it in detail." for k in range(n)
    ]


def live(sandbox_for, mock, version: str, patched: bool, binding: str, **session_kw):
    sb = sandbox_for(version, patched)
    env = {**THINK_ENV, **(PRUNE_0_1_0 if patched else {}), **session_kw.pop("env", {})}
    s = thinking_session(str(sb.proj), version=version, **{"turns": 2, **session_kw})
    signed = sign_session(sb, mock, s, model=MODEL, env=env, args=ARGS)
    assert signed.body.get("thinking", {}).get("type") == "enabled", signed.body.get("thinking")
    cfg = MockConfig(script=live_script(sb), thinking=True, binding=binding)  # type: ignore[arg-type]
    return run_turns(sb, mock, s, prompts(), cfg, model=MODEL, env=env, args=ARGS)


@pytest.mark.parametrize("version", VERSIONS)
def test_unpatched_thinking_session_passes_the_check(sandbox_for, mock, version):
    t = live(sandbox_for, mock, version, False, "error")
    assert t.run.returncode == 0, t.describe()
    mains = [r for r in t.checked if r.kind == "main"]
    assert len(mains) == 2 * TURNS and t.rejected == [], t.describe()
    # every thinking block goes back: 4 signed by the harness, then one per reply
    sent = [len(r.body["messages"]) for r in mains]
    assert sent == sorted(sent), t.describe()
    assert t.cutoff_moves == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_todays_text_prune_breaks_the_check_at_its_first_cutoff_move(sandbox_for, mock, version):
    t = live(sandbox_for, mock, version, True, "error")
    first = t.first_rejected
    assert first is not None, t.describe()
    ok, bad = t.checked[:first], t.checked[first:]
    assert all(t.pruned_upto(r) == 0 for r in ok), t.describe()  # before any prune: accepted
    assert t.pruned_upto(bad[0]) > 0, t.describe()  # the first pruned request: rejected
    assert all(r.status == 400 for r in bad), t.describe()  # and every one after it
    assert first == 2, t.describe()  # the first request of the second live turn
    # one refused request per remaining turn; 2.0.76 sends each twice (stream, then without)
    assert len(t.rejected) == (12 if version == "2.0.76" else 6), t.describe()
    m = bad[0].mismatches[0]
    assert m.reason == "prefix" and m.missing_from == "messages.0", t.describe()
    assert bad[0].error and "bound to a different conversation" in bad[0].error
    assert t.run.returncode != 0


@pytest.mark.parametrize("version", VERSIONS)
def test_todays_text_prune_under_drop_block_loses_reasoning_at_every_move(
    sandbox_for, mock, version
):
    t = live(sandbox_for, mock, version, True, "drop_block")
    assert t.run.returncode == 0 and t.rejected == [], t.describe()
    assert t.cutoff_moves >= 3, t.describe()
    mains = [r for r in t.checked if r.kind == "main"]
    drops = [r.dropped for r in mains]
    marks = [t.pruned_upto(r) for r in mains]
    assert drops[0] == 0 and marks[0] == 0, t.describe()
    # the number of dropped blocks grows exactly where the pruned region grows
    for k in range(1, len(mains)):
        if marks[k] > marks[k - 1]:
            assert drops[k] > drops[k - 1], t.describe()
        else:
            assert drops[k] == drops[k - 1], t.describe()
    assert t.cutoff_moves == 3 and t.n_dropped == 120, t.describe()
    assert sorted(set(drops)) == [0, 6, 10, 14], t.describe()


@pytest.mark.parametrize("version", VERSIONS)
def test_claude_codes_own_microcompaction_breaks_the_check(sandbox_for, mock, version):
    """Unpatched. Sixteen turns with a result of ~4000 tokens each and a last usage at the
    warning threshold: live micro-compaction clears the oldest results, which precede thinking
    blocks. Measured on 2.0.76 besides: with ``DISABLE_MICROCOMPACT=1`` (the control below) its
    micro-compaction returns the very array it was given (``return{messages:A}``), and the
    request after a tool-use reply carries that reply twice (thinking, tool_use, thinking,
    tool_use: a repeated tool_use id, which the real API refuses as well); not an edit, but the
    check rejects it too. 2.1.50 has no such problem."""
    sb = sandbox_for(version)
    probe = thinking_session(str(sb.proj), turns=16, result_chars=16000)
    at = engine_boundaries(probe, version, THINK_ENV).thresholds.warning
    kw = {"turns": 16, "result_chars": 16000, "last_usage": at}
    t = live(sandbox_for, mock, version, False, "error", **kw)
    first = t.checked[0]
    if version in LIVE_MC:
        assert first.status == 400, t.describe()
        assert all(r.status == 400 for r in t.checked), t.describe()
        # one refused request per turn (2.0.76: twice, stream then without)
        assert len(t.checked) == (14 if version == "2.0.76" else 7), t.describe()
        assert t.checked[0].mismatches[0].location == "messages.3.content.0"
        m = first.mismatches[0]
        assert m.reason == "prefix" and m.missing_from == "messages.2", t.describe()
        assert (
            sum(
                1
                for msg in first.body["messages"]
                for b in (msg["content"] if isinstance(msg["content"], list) else [])
                if b.get("type") == "tool_result"
                and (
                    "cleared" in str(b.get("content"))
                    or "persisted-output" in str(b.get("content"))
                )
            )
            == 6
        ), t.describe()
        # the message named is the first one whose tool result was cleared
        body = first.body
        k = int(m.missing_from.split(".")[1])
        block = body["messages"][k]["content"][0]
        assert block["type"] == "tool_result", t.describe()
        assert "cleared" in str(block["content"]) or "persisted-output" in str(block["content"])
        # the control: the same session with micro-compaction off: the first request passes
        off = live(
            sandbox_for, mock, version, False, "error", env={"DISABLE_MICROCOMPACT": "1"}, **kw
        )
        assert off.checked[0].status == 200, off.describe()
        if version == "2.1.50":
            assert off.rejected == [], off.describe()
        else:  # 2.0.76: see the docstring; every 400 is that doubled reply, none an edit
            for r in off.rejected:
                m = r.mismatches[0]
                blocks = r.body["messages"][m.message]["content"]
                assert m.block == 2 and m.missing_from == f"messages.{m.message}", off.describe()
                assert [b["type"] for b in blocks] == ["thinking", "tool_use"] * 2
                same = [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]
                assert same[:2] == same[2:], off.describe()
    else:  # 2.1.112: micro-compaction is a stub, nothing is cleared
        assert t.rejected == [], t.describe()


@pytest.mark.parametrize("version", VERSIONS)
def test_resume_keeps_the_binding_except_2_0_76_todo_reminder(sandbox_for, mock, version):
    """Three ``-p --resume`` runs in a row (each a new process), unpatched."""
    sb = sandbox_for(version)
    s = thinking_session(str(sb.proj), turns=2, version=version)
    sign_session(sb, mock, s, model=MODEL, env=THINK_ENV)
    cfg = MockConfig(thinking=True, binding="error")
    chain = run_chain(sb, mock, s, ["turn a", "turn b", "turn c"], cfg, model=MODEL, env=THINK_ENV)
    if version == "2.0.76":
        assert chain.rejected == [2], chain.describe()
        # the reply to "turn b" was made while that prompt carried the TodoWrite reminder
        body = chain.runs[1].first_body
        prompt_b = body["messages"][-1]["content"]
        assert any("TodoWrite" in (b.get("text") or "") for b in prompt_b), chain.describe()
        m = chain.runs[2].rejected[0].mismatches[0]
        assert m.missing_from == f"messages.{len(body['messages']) - 1}", chain.describe()
    else:
        assert chain.rejected == [], chain.describe()
