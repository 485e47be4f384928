"""The engine against the real Claude Code: unpatched and patched, at the exact boundaries.

For one real version per call-site shape with a live micro-compaction (2.0.76 S1, 2.1.7 S1',
2.1.30 S1'', 2.1.50 S3, 2.1.68 S5) and for 2.1.112 (S6, micro-compaction is a stub there):

* micro-compaction: last usage one token below the engine's boundary clears nothing, at the
  boundary it clears exactly the results the engine names;
* auto-compaction: one token below the engine's boundary no summarisation request, at it one,
  with and without ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``;
* every captured request (the main-loop one, or the summarisation one when it fires) equals the
  engine's prediction byte for byte after ``engine.claude_code.flatten``, except the fields
  ``lab.predict`` documents as volatile;
* patched (``patcher.ops.apply_file`` on a sandbox copy) with prune knobs set so it fires: the
  same, with micro-compaction then the text prune; turn boundaries, STEP and untouched blocks
  are checked on what was sent.

A failure prints ``Outcome.explain()``: thresholds, counts, what the engine and the real program
did, the first differing message and block, and the tail of the CLI's output.
"""

from __future__ import annotations

import pytest

from engine.claude_code.flatten import api_style
from engine.twins.textprune_shorten import MARKER
from engine.twins.textprune_turns import find_cutoff, is_turn_start
from lab.harness import Case, Outcome, engine_boundaries, run_case
from lab.predict import expected_messages, tool_results
from lab.scenarios import (
    LONG_PROMPT,
    newer_blocks_session,
    rounds_session,
    turns_session,
)

pytestmark = pytest.mark.e2e

MC_VERSIONS = ("2.0.76", "2.1.7", "2.1.30", "2.1.50", "2.1.68")
ALL_VERSIONS = (*MC_VERSIONS, "2.1.112")
# where the request format changes (engine.claude_code.flatten.api_style, lab.predict): the last
# version sending user strings as blocks, deferred tools, the merge seam, summarising through
# the loop
WIDER = ("2.1.29", "2.1.69", "2.1.78", "2.1.90")
PRUNE = {
    "CLAUDE_TEXT_PRUNE_THRESHOLD": "1000",
    "CLAUDE_TEXT_PRUNE_KEEP": "2",
    "CLAUDE_TEXT_PRUNE_STEP": "3",
    "CLAUDE_TEXT_PRUNE_MAX_CHARS": "60",
}


def agree(o: Outcome) -> None:
    assert o.run.returncode == 0, o.explain()
    assert o.diff is None, o.explain()


def run(sandbox_for, mock, version: str, case: Case, patched: bool = False) -> Outcome:
    return run_case(sandbox_for(version, patched), mock, case, version)


# --- micro-compaction ----------------------------------------------------------------------


@pytest.mark.parametrize("version", MC_VERSIONS)
def test_microcompaction_fires_exactly_at_the_engine_boundary(sandbox_for, mock, version):
    sb = sandbox_for(version)
    b = engine_boundaries(rounds_session(str(sb.proj), version=version), version)
    assert b.microcompact is not None

    below = run(
        sandbox_for,
        mock,
        version,
        Case(
            "mc-below", rounds_session(str(sb.proj), last_usage=b.microcompact - 1, version=version)
        ),
    )
    agree(below)
    assert not below.prediction.mc.fired and below.cleared_sent == [], below.explain()
    assert not below.ac_fired, below.explain()

    at = run(
        sandbox_for,
        mock,
        version,
        Case("mc-at", rounds_session(str(sb.proj), last_usage=b.microcompact, version=version)),
    )
    agree(at)
    assert at.prediction.mc.fired, at.explain()
    assert at.cleared_sent == list(at.prediction.mc.cleared), at.explain()
    assert len(at.cleared_sent) == 10, at.explain()  # 20 results of 4000 tokens, 40000 kept
    assert not at.ac_fired, at.explain()


def test_microcompaction_is_a_stub_in_2_1_112(sandbox_for, mock):
    version = "2.1.112"
    sb = sandbox_for(version)
    b = engine_boundaries(rounds_session(str(sb.proj), version=version), version)
    assert b.microcompact is None
    usage = b.thresholds.warning + 5000  # legacy micro-compaction would clear 10 results here
    o = run(
        sandbox_for,
        mock,
        version,
        Case("mc-stub", rounds_session(str(sb.proj), last_usage=usage, version=version)),
    )
    agree(o)
    assert o.cleared_sent == [] and not o.prediction.mc.fired and not o.ac_fired, o.explain()


# --- auto-compaction -----------------------------------------------------------------------


@pytest.mark.parametrize("pct", [None, "50"], ids=["default", "pct50"])
@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_autocompaction_fires_exactly_at_the_engine_threshold(sandbox_for, mock, version, pct):
    sb = sandbox_for(version)
    env = {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": pct} if pct else {}
    b = engine_boundaries(rounds_session(str(sb.proj), n=6, version=version), version, env)
    assert b.autocompact is not None
    if pct:
        assert b.thresholds.auto_compact < b.thresholds.effective_window - 13000

    below = run(
        sandbox_for,
        mock,
        version,
        Case(
            "ac-below",
            rounds_session(str(sb.proj), n=6, last_usage=b.autocompact - 1, version=version),
            env=env,
        ),
    )
    agree(below)
    assert not below.ac_expected and not below.ac_fired, below.explain()

    at = run(
        sandbox_for,
        mock,
        version,
        Case(
            "ac-at",
            rounds_session(str(sb.proj), n=6, last_usage=b.autocompact, version=version),
            env=env,
        ),
    )
    agree(at)  # the summarisation request's history equals the prediction
    assert at.ac_expected and at.ac_fired, at.explain()
    assert at.ac_tokens == b.thresholds.auto_compact, at.explain()
    # the next main-loop request carries the summary instead of the history
    assert at.main is not None, at.explain()
    after = at.main.body["messages"]
    assert len(after) == 1 and "MOCK SUMMARY" in str(after[0]["content"]), at.explain()


@pytest.mark.parametrize("version", ["2.1.112"])
def test_autocompaction_counts_the_skill_listing_attachment(sandbox_for, mock, version):
    """With the Skill tool on, the new prompt carries the skill-listing attachment, and the
    auto-compact count includes it. The harness reads it back from the session file (2.1.112
    writes it there) and hands it to the engine's count."""
    sb = sandbox_for(version)
    probe = run(
        sandbox_for,
        mock,
        version,
        Case(
            "skills-probe",
            rounds_session(str(sb.proj), n=4, last_usage=5000, version=version),
            args=(),
        ),
    )
    agree(probe)
    extra = probe.ac_tokens - 5000  # prompt + attachment, as the engine counts them
    assert extra > 100, probe.explain()  # the listing is there and counted
    boundary = probe.thresholds.auto_compact - extra
    below = run(
        sandbox_for,
        mock,
        version,
        Case(
            "skills-below",
            rounds_session(str(sb.proj), n=4, last_usage=boundary - 1, version=version),
            args=(),
        ),
    )
    assert not below.ac_fired, below.explain()
    at = run(
        sandbox_for,
        mock,
        version,
        Case(
            "skills-at",
            rounds_session(str(sb.proj), n=4, last_usage=boundary, version=version),
            args=(),
        ),
    )
    assert at.ac_fired, at.explain()


@pytest.mark.parametrize("version", ["2.1.73", "2.1.74"])
def test_autocompaction_counts_tool_use_and_thinking_from_2_1_74(sandbox_for, mock, version):
    """After the last usage the session holds a thinking block (8000 chars), a Write tool_use
    (4000-char input), its result and a closing reply. 2.1.73 counts only the texts (newer ~22);
    2.1.74 also the thinking text and the tool_use name + JSON input (newer ~3050): the real
    program fires exactly at the engine's boundary either way, which is ~3000 tokens apart, so
    one token below 2.1.73's boundary would fire under the new rule and 2.1.74's boundary would
    not fire under the old one (profile field newer_counts_all_blocks).

    Only the decision is compared, not the request: the engine's prediction merges the
    ``<synthetic>`` assistant line into the reply before it, which the CLI does not."""
    sb = sandbox_for(version)
    b = engine_boundaries(newer_blocks_session(str(sb.proj), version=version), version)
    assert b.autocompact is not None
    assert (b.newer > 3000) is (version == "2.1.74") and b.newer > 20, b.newer
    for usage, fires in ((b.autocompact - 1, False), (b.autocompact, True)):
        o = run(
            sandbox_for,
            mock,
            version,
            Case(
                "newer-blocks",
                newer_blocks_session(str(sb.proj), last_usage=usage, version=version),
            ),
        )
        assert o.run.returncode == 0, o.explain()
        assert o.ac_expected is fires and o.ac_fired is fires, o.explain()


# --- patched -------------------------------------------------------------------------------


def _has_marker(messages) -> bool:
    return any(MARKER in t for m in messages or [] for t in _texts(m))


def _texts(m) -> list[str]:
    c = m["content"]
    if isinstance(c, str):
        return [c]
    return [b["text"] for b in c if b.get("type") == "text"]


def _turn_texts(o: Outcome) -> tuple[list[str], list[str]]:
    """Texts sent for the typed prompts of the session, in order, and every text sent."""
    texts: list[str] = []
    prompts: list[str] = []
    for m in o.sent or []:
        c = m["content"]
        blocks = [{"type": "text", "text": c}] if isinstance(c, str) else c
        for b in blocks:
            if b.get("type") == "text":
                texts.append(b["text"])
                if m["role"] == "user" and b["text"].startswith(("Turn ", "ok, go on", "continue")):
                    prompts.append(b["text"])
    return prompts, texts


@pytest.mark.parametrize("version", ALL_VERSIONS + WIDER)
def test_patched_request_is_microcompaction_then_text_prune(sandbox_for, mock, version):
    sb = sandbox_for(version, patched=True)
    base = turns_session(str(sb.proj), version=version)
    b = engine_boundaries(base, version)
    usage = b.microcompact if b.microcompact is not None else b.thresholds.warning
    o = run(
        sandbox_for,
        mock,
        version,
        Case(
            "patched",
            turns_session(str(sb.proj), last_usage=usage, version=version),
            prune_env=dict(PRUNE),
        ),
        patched=True,
    )
    agree(o)
    p = o.prediction.prune
    assert p is not None and p.reason == "pruned", o.explain()
    if b.microcompact is not None:  # micro-compaction ran first; its results are what was sent
        assert o.prediction.mc.fired and o.cleared_sent == list(o.prediction.mc.cleared), (
            o.explain()
        )
    # STEP: 9 transcript turns + the new prompt = 10; KEEP 2 → 8 prunable, STEP 3 → 6
    starts = [i for i, r in enumerate(o.prediction.records_sent) if is_turn_start(r)]
    assert p.turns == len(starts) == 10, o.explain()
    assert p.cutoff == find_cutoff(starts, 2, 3) == starts[6] != starts[8], o.explain()
    prompts, texts = _turn_texts(o)
    assert len(prompts) == 10, o.explain()
    # turns 0-5 are older: long prompts pruned, short ones (<= MAX_CHARS) untouched
    for t in range(6):
        if t % 3 == 2:
            assert prompts[t] == f"ok, go on ({t})", o.explain()
        else:
            first = LONG_PROMPT.format(t=t).split("\n")[0][:60]
            assert prompts[t] == first + MARKER, o.explain()
    # turns 6-9 are kept intact, whatever their length
    for t in (6, 7):
        assert prompts[t] == LONG_PROMPT.format(t=t), o.explain()
    assert prompts[9] == "continue"
    # the prune touched text only: every tool_use input and tool_result equals the
    # micro-compacted prediction without the prune
    unpruned = expected_messages(
        o.case.session.copy(),
        o.case.prompt,
        o.profile,
        o.thresholds,
        persist_dir=str(sb.tool_results_dir(o.case.session.session_id)),
        style=api_style(version),
    )
    assert tool_results(o.sent) == tool_results(unpruned.api_messages), o.explain()
    assert sum(MARKER in t for t in texts) == p.blocks_pruned, o.explain()


@pytest.mark.parametrize("version", ALL_VERSIONS + WIDER)
def test_patched_summarisation_request_carries_the_pruned_history(sandbox_for, mock, version):
    sb = sandbox_for(version, patched=True)
    b = engine_boundaries(turns_session(str(sb.proj), version=version), version)
    o = run(
        sandbox_for,
        mock,
        version,
        Case(
            "patched-ac",
            turns_session(str(sb.proj), last_usage=b.autocompact, version=version),
            prune_env=dict(PRUNE),
        ),
        patched=True,
    )
    agree(o)
    assert o.ac_expected and o.ac_fired, o.explain()
    assert o.prediction.prune is not None and o.prediction.prune.reason == "pruned", o.explain()
    assert _has_marker(o.sent), o.explain()


@pytest.mark.parametrize("version", ["2.0.76", "2.1.112"])
def test_patched_below_prune_threshold_sends_what_unpatched_sends(sandbox_for, mock, version):
    sb = sandbox_for(version, patched=True)
    b = engine_boundaries(turns_session(str(sb.proj), version=version), version)
    usage = b.microcompact if b.microcompact is not None else b.thresholds.warning
    knobs = {**PRUNE, "CLAUDE_TEXT_PRUNE_THRESHOLD": "900000000"}
    o = run(
        sandbox_for,
        mock,
        version,
        Case(
            "patched-quiet",
            turns_session(str(sb.proj), last_usage=usage, version=version),
            prune_env=knobs,
        ),
        patched=True,
    )
    agree(o)
    assert o.prediction.prune is not None and o.prediction.prune.reason == "below-threshold"
    assert not _has_marker(o.sent), o.explain()
