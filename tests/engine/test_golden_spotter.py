"""Golden tests on the real spotter sessions (Claude Code 2.1.38-2.1.39, claude-opus-4-6).

THE acceptance test: the recorded scenario predicts each real auto-compaction at the same line
with the program's own count within 1% of ``compactMetadata.preTokens``, and no other.
"""

import json

import pytest
from shared_data import missing_message

from engine.profiles import profile_for
from engine.replay.recorded import simulate_recorded
from engine.replay.session import simulate
from engine.transcript import load_transcript

from .conftest import SPOTTER, spotter_sessions

SESSIONS = [p.name for p in spotter_sessions()]


@pytest.mark.parametrize("name", SESSIONS)
def test_recorded_predicts_every_auto_compaction_and_no_other(name):
    tr = load_transcript(SPOTTER / name)
    sim = simulate_recorded(tr, profile_for(tr.version))
    real = [b for b in tr.boundaries if b.trigger == "auto"]
    autos = [e for e in sim.events if e.kind == "auto_compact"]
    assert [e.line for e in autos] == [b.line for b in real]
    for e, b in zip(autos, real, strict=False):
        assert e.predicted and e.recorded
        assert abs(e.tokens - b.pre_tokens) <= 0.01 * b.pre_tokens, (e.tokens, b.pre_tokens)


def test_measured_values_on_the_two_large_sessions():
    """2.1.39 vv: last usage (final output) + newer estimate; threshold 200000-20000-13000."""
    got = {}
    for p in spotter_sessions():
        tr = load_transcript(p)
        for e in simulate_recorded(tr, profile_for(tr.version)).events:
            if e.kind == "auto_compact":
                got[p.name[:8]] = (e.line, e.tokens, e.pre_tokens, e.threshold)
    if not got:
        pytest.skip(missing_message())
    assert got["258c7280"] == (1256, 167093, 167094, 167000)
    assert got["4d5611e5"][0] == 754 and got["4d5611e5"][2] == 170251


def test_manual_compaction_is_reported_as_manual(tmp_path, need_spotter):
    src = SPOTTER / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    lines = src.read_text().splitlines()
    rec = json.loads(lines[1255])
    rec["compactMetadata"]["trigger"] = "manual"
    lines[1255] = json.dumps(rec)
    dst = tmp_path / "manual.jsonl"
    dst.write_text("\n".join(lines) + "\n")
    tr = load_transcript(dst)
    ev = simulate_recorded(tr, profile_for("2.1.39")).events
    assert [(e.kind, e.line) for e in ev if e.kind in ("auto_compact", "manual_compact")] == [
        ("manual_compact", 1256)
    ]


def test_unpatched_replay_reproduces_the_recorded_compaction(need_spotter):
    tr = load_transcript(SPOTTER / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    sim = simulate(tr, profile_for("2.1.39"), "unpatched")
    autos = [e for e in sim.events if e.kind == "auto_compact"]
    assert [(e.line, e.recorded) for e in autos] == [(754, True)]
    rec = simulate_recorded(tr, profile_for("2.1.39"))
    before = [r for r in rec.requests if r.line < 754]
    assert [r.prompt_tokens for r in sim.requests[: len(before)]] == [
        r.prompt_tokens for r in before
    ]


def test_micro_compaction_predicted_but_not_observed_on_2_1_39(need_spotter):
    """2.1.39 pm: last usage >= 147000 and saving >= 20000 → would fire; usage shows it didn't."""
    tr = load_transcript(SPOTTER / "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    mc = [
        e for e in simulate_recorded(tr, profile_for("2.1.39")).events if e.kind == "micro_compact"
    ]
    assert len(mc) == 1 and mc[0].recorded is False and mc[0].tokens >= 147000
    assert "tengu_cache_plum_violet" in mc[0].note
