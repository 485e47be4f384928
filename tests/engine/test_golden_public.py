"""Golden tests on 39 real sessions of other people's projects (``shared/transcripts/public``).

Read from ``../shared`` with ``lzma`` (never copied into the repo), parametrised over its
``MANIFEST.json``. For every session: each real auto-compaction usable for checking is predicted
at the same line with the program's own count within 1% of ``compactMetadata.preTokens``, and no
compaction is predicted anywhere else (sessions without one, the 1M-window 2.1.217 session
included, predict none). Malformed lines are skipped, never refused.
"""

from __future__ import annotations

import pytest
from shared_data import PUBLIC, public_manifest

from engine.profiles import profile_for
from engine.replay.recorded import simulate_recorded
from engine.replay.session import simulate
from engine.transcript import load_transcript

from .conftest import need_shared

MANIFEST = public_manifest()
WITH_AUTO = [
    s["file"]
    for s in MANIFEST
    if any(b["trigger"] == "auto" and b["usable_for_check"] for b in s["boundaries"])
]
WITHOUT_AUTO = [
    s["file"] for s in MANIFEST if not any(b["trigger"] == "auto" for b in s["boundaries"])
]
ENTRY = {s["file"]: s for s in MANIFEST}


def _replay(name: str):
    tr = load_transcript(need_shared(PUBLIC / name))
    return tr, simulate_recorded(tr, profile_for(tr.version))


def test_manifest_is_read():
    """Guards the parametrisation: with the shared folder present, 35 usable auto-compactions."""
    need_shared(PUBLIC / "MANIFEST.json")
    usable = [
        b
        for s in MANIFEST
        for b in s["boundaries"]
        if b["trigger"] == "auto" and b["usable_for_check"]
    ]
    assert len(MANIFEST) == 39 and len(usable) == 35 and len(WITH_AUTO) == 30


# Known misses, each with its measured cause (strict: a fix turns the xfail into a failure).
MISSING_ATTACHMENT = "entireio__cli__1a289c77-a9da-491d-954a-2df7f0dd6a17.jsonl.xz"
KNOWN_MISSES = {
    MISSING_ATTACHMENT: (
        "line 175, not recoverable from the file: cli.js counted a message the file does not "
        "hold. The boundary's logicalParentUuid (the last message compacted) is no line of the "
        "file: an attachment, which 2.1.33 never writes for users outside Anthropic, and which "
        "its count adds as JSON at chars/4. The compact summary quotes it: two new IDE/LSP "
        "diagnostics ('undefined: session' at lines 800 and 849), about 128 tokens as a "
        "diagnostics attachment; the rest of the 495 missing is unknown (another attachment, "
        "or more diagnostics than quoted). Not the last reply's output: it holds no thinking "
        "block and its first block came 2.56 s after the request (the fastest of the session), "
        "chars/4 x1.57 gives 63. Count 166596 vs preTokens 167091, under the 167000 threshold"
    ),
}


# Newly shared sessions (issue 14) where cli.js counted a message it never wrote (the boundary's
# logicalParentUuid is no line of the file; see engine.replay.recorded.unwritten_tail): not recoverable.
UNWRITTEN = {
    "FSM1__cipher-box__fcdd6c6f-e3f3-4f79-9cc3-98345b993339.jsonl.xz": (
        "2.1.42, line 340: count 135691 vs preTokens 171539 (-20.9%). The last message counted is "
        "not in the file, and a queued prompt was taken off the queue at line 338 whose enqueue "
        "(line 334) holds no content: cli.js 2.1.42 records it only for a string prompt, so this "
        "one carried non-text blocks (the summary: the user 'shared another screenshot'). Sent as "
        "a queued_command attachment the writer drops; up to 2.1.44 the count adds its JSON at "
        "chars/4, the image's base64 included (~36K tokens = ~144K base64 characters)"
    ),
    "Safecast__safecast-map-MCP__0852daa6-239f-424e-bdd6-79521b1cbc88.jsonl.xz": (
        "2.1.42, line 1486: count 158289 vs preTokens 172369 (-8.2%). The last message counted is "
        "not in the file and a queued prompt was attached at line 1485 whose enqueue is not in the "
        "file (the session was joined from checkpoints); the user pasted 4 screenshots before: "
        "a queued_command attachment counted as JSON at chars/4 (see fcdd6c6f)"
    ),
    "entireio__cli__a0927dd5-61a3-4802-a716-4480286f16d4.jsonl.xz": (
        "2.1.37, line 631: count 164697 vs preTokens 171656 (-4.1%): the last message counted "
        "(logicalParentUuid efe9f4b5) is not in the file, an attachment cli.js did not write"
    ),
    "FSM1__cipher-box__f585e6e9-7dc1-4135-a4dc-9021adb21c96.jsonl.xz": (
        "2.1.49, line 753: count 166519 vs preTokens 167332 (-0.5%, under the 167000 threshold): "
        "the last message counted (logicalParentUuid adf9c7ea) is not in the file, nor is the "
        "result of the Read at line 751 (80 lines of folder.service.ts): 813 tokens, that result "
        "and any attachment after it, counted and not in the file (see UNWRITTEN_TOOL_RESULT)"
    ),
}
KNOWN_MISSES.update({n: f"not recoverable from the file: {why}" for n, why in UNWRITTEN.items()})
# The last reply before the boundary holds the streaming placeholder (output_tokens 1) and no later
# request bounds its final output (engine.transcript._bound_by_next): the session ratio's estimate
# is all there is. (The spurious predictions the ratio made elsewhere in 1284c080 and ca8cc13b,
# on large Write inputs, are gone since the next request bounds them.)
PLACEHOLDER_AT_BOUNDARY = {
    "entireio__cli__ca8cc13b-d3df-4615-8f3f-f48a96b1a6f9.jsonl.xz": (
        "2.1.38, line 366: count 166990 vs preTokens 167038 (-0.03%), 10 under the 167000 "
        "threshold: reply 363-364 (33 characters of text and a Bash call) is recorded with "
        "output_tokens 1 and the compaction follows it, so its final output is the ratio's "
        "82 where ~130 would reach preTokens"
    ),
}
KNOWN_MISSES.update(
    {n: f"not recoverable from the file: {why}" for n, why in PLACEHOLDER_AT_BOUNDARY.items()}
)
# The result of the last tool call before the compaction is no line of the file, yet cli.js
# counted it: the compaction runs on the next request's messages, tool results included, and the
# 2.1.25/2.1.29 estimate counts a tool_result's text at chars/4 (attachments 0), so the gap is that
# result alone; the boundary's logicalParentUuid is no line either (engine.replay.recorded's
# unanswered_tool_calls names the call in the event). The compact summaries quote what it held.
# What dropped it is not known (see unwritten_tail: the real 2.1.25 in the lab writes it).
UNWRITTEN_TOOL_RESULT = {
    "entireio__cli__9d7a9d52-7eb4-427d-847d-ee5451884f3d.jsonl.xz": (
        "2.1.25, lines 383 / 817: count 164865 / 166194 vs preTokens 167066 / 168934 (-1.3% / "
        "-1.6%), 2201 / 2740 tokens short, the results of the Grep at line 381 "
        "(toolu_01HfyW6pMYmjJb5JV4PA8gK6, pattern 'entire/.*\\[:7\\]', -B 2 -A 2) and of the "
        "Bash at line 796 ('mise run test:ci 2>&1 | head -150'), neither in the file. The "
        "summaries quote them: 'Last grep output showed ... session_conflict_test.go (lines 37, "
        "147, 178, 229, 371)', line numbers no earlier line holds (~8,800 characters at chars/4), "
        "and the failures 'Expected at least 2 rewind points, got 1', first in the file in the "
        "summary (~11,000 characters; the same command's head -150 gave 13,884 at line 232)"
    ),
    "entireio__cli__4b3ddf27-d7f7-4773-b4f2-b94b999c661d.jsonl.xz": (
        "2.1.29, line 530: count 165384 vs preTokens 167369 (-1.2%), 1985 tokens short, the "
        "result of the Grep at line 528 (toolu_014aewKTpne6up5uZkYfErTp, pattern "
        "'sessionStateToStrategy|sessionStateFromStrategy', -A 15), not in the file: ~7,900 "
        "characters at chars/4; the summary's next step is to update those two converters"
    ),
}
KNOWN_MISSES.update(
    {n: f"not recoverable from the file: {why}" for n, why in UNWRITTEN_TOOL_RESULT.items()}
)


def _params(names):
    return [
        pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_MISSES[n], strict=True))
        if n in KNOWN_MISSES
        else n
        for n in names
    ]


@pytest.mark.parametrize("name", _params(WITH_AUTO))
def test_every_real_auto_compaction_predicted_within_1_percent_and_no_other(name):
    _tr, sim = _replay(name)
    entry = ENTRY[name]
    usable = {
        b["line"]: b
        for b in entry["boundaries"]
        if b["trigger"] == "auto" and b["usable_for_check"]
    }
    autos = [e for e in sim.events if e.kind == "auto_compact"]
    extra = [(e.line, e.tokens) for e in autos if e.predicted and not e.recorded]
    assert extra == [], f"predicted where no compaction happened: {extra}"
    got = {e.line: e for e in autos if e.line in usable}
    assert sorted(got) == sorted(usable)
    for line, b in usable.items():
        e = got[line]
        assert e.pre_tokens == b["preTokens"]
        assert e.predicted, f"line {line}: count {e.tokens} < threshold {e.threshold}"
        assert abs(e.tokens - b["preTokens"]) <= 0.01 * b["preTokens"], (line, e.tokens, b)


@pytest.mark.parametrize("name", WITHOUT_AUTO)
def test_sessions_without_auto_compaction_predict_none(name):
    _tr, sim = _replay(name)
    predicted = [(e.line, e.tokens) for e in sim.events if e.kind == "auto_compact" and e.predicted]
    assert predicted == []
    manual = [e.line for e in sim.events if e.kind == "manual_compact"]
    assert manual == [b["line"] for b in ENTRY[name]["boundaries"] if b["trigger"] == "manual"]


def test_1m_window_session_predicts_no_compaction_over_200k():
    """2.1.217, claude-opus-5 (natively 1M): requests far above 200K, no auto-compaction."""
    name = next((s["file"] for s in MANIFEST if "2.1.217" in s["versions"]), None)
    if name is None:
        need_shared(PUBLIC / "MANIFEST.json")
        pytest.fail("the manifest lists no 2.1.217 session")
    _tr, sim = _replay(name)
    assert max(r.prompt_tokens for r in sim.requests) > 200_000
    assert sim.thresholds.context_window == 1_000_000
    assert not any(e.predicted for e in sim.events if e.kind == "auto_compact")


def test_malformed_lines_are_skipped_not_refused():
    names = [s["file"] for s in MANIFEST if s["bad_json_lines"]]
    if not names:
        need_shared(PUBLIC / "MANIFEST.json")
    assert len(names) == 2
    for name in names:
        tr, sim = _replay(name)
        assert len(tr.warnings) == ENTRY[name]["bad_json_lines"]
        assert all(w.startswith("line ") and " skipped: " in w for w in tr.warnings)
        assert sim.summary["matched_auto_compactions"] == 1


def test_the_known_miss_names_the_message_the_file_lacks():
    """The event of the miss says why: the boundary's last message is not in the file."""
    _tr, sim = _replay(MISSING_ATTACHMENT)
    (e,) = [e for e in sim.events if e.kind == "auto_compact"]
    assert (e.line, e.predicted, e.pre_tokens) == (175, False, 167091)
    assert "(logicalParentUuid 0ee5de15-f622-49f3-9163-d8107a16d503) is not in the file" in e.note
    assert 0 < e.pre_tokens - e.tokens < 0.01 * e.pre_tokens


def test_the_queued_image_prompt_is_named_as_the_cause():
    """fcdd6c6f (2.1.42): the event says which queued prompt cli.js attached without writing."""
    name = "FSM1__cipher-box__fcdd6c6f-e3f3-4f79-9cc3-98345b993339.jsonl.xz"
    _tr, sim = _replay(name)
    (e,) = [e for e in sim.events if e.kind == "auto_compact"]
    assert (e.line, e.predicted, e.pre_tokens) == (340, False, 171539)
    assert "its enqueue at line 334 holds no content" in e.note and "attached at line 338" in e.note


def test_the_unwritten_tool_result_is_named_as_the_cause():
    """9d7a9d52 (2.1.25): each event names the tool call whose result cli.js counted and the file
    lacks; the count is short by that result alone (1.3% and 1.6%), the rest of it exact."""
    name = "entireio__cli__9d7a9d52-7eb4-427d-847d-ee5451884f3d.jsonl.xz"
    _tr, sim = _replay(name)
    autos = [e for e in sim.events if e.kind == "auto_compact"]
    assert [(e.line, e.predicted, e.pre_tokens) for e in autos] == [
        (383, False, 167066),
        (817, False, 168934),
    ]
    assert (
        "the result of the Grep call at line 381 (toolu_01HfyW6pMYmjJb5JV4PA8gK6)" in autos[0].note
    )
    assert (
        "the result of the Bash call at line 796 (toolu_01E39MtwEGUMCeyY4R7i9j2D)" in autos[1].note
    )
    # the count is the last recorded usage, nothing newer in the file: the gap is the result
    usage = [b["last_usage_ctx_plus_output"] for b in ENTRY[name]["boundaries"]]
    assert [e.tokens for e in autos] == usage == [164865, 166194]
    assert all(0 < e.pre_tokens - e.tokens < 0.02 * e.pre_tokens for e in autos)


def test_unpatched_replay_of_a_2_1_29_session_compacts_where_it_did():
    """2.1.29 keeps the message_start output in memory: the counterfactual replay counts with it
    too (it compacted 4 lines early, at 99, when it counted the final output)."""
    tr = load_transcript(
        need_shared(PUBLIC / "entireio__cli__24a274a3-0317-440d-b17a-41e83ee34fec.jsonl.xz")
    )
    prof = profile_for(tr.version)
    assert tr.version == "2.1.29" and not prof.usage_final_in_memory
    rec = simulate_recorded(tr, prof)
    cf = simulate(tr, prof, "unpatched")
    autos = [(e.line, e.recorded) for e in cf.events if e.kind == "auto_compact"]
    assert autos == [(103, True)]
    before = [r.tokens for r in rec.requests if r.line < 103]
    assert [r.tokens for r in cf.requests[: len(before)]] == before
