"""The real session embedded in ``examples/`` (Claude Code 2.1.39, Opus, 152 requests): the
README's golden test, and what ``simulate`` says about it. Always runs: no ``../shared``."""

import json
import re
from pathlib import Path

import pytest
from conftest import app_with
from typer.testing import CliRunner

from ctxpatch.cli.modelling import register
from engine.profiles import profile_for
from engine.replay.divergence import vs_recorded
from engine.replay.model import EVENT_KINDS
from engine.replay.recorded import simulate_recorded
from engine.replay.session import simulate
from engine.transcript import load_transcript

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "spotter-session.jsonl"
runner = CliRunner()


@pytest.fixture(scope="module")
def tr():
    return load_transcript(EXAMPLE)


@pytest.fixture(scope="module")
def app():
    return app_with(register)


def test_golden_recorded_predicts_the_real_auto_compaction(tr):
    """THE acceptance test of the README: the one real auto-compaction predicted at its line,
    with the program's own count within 1% of preTokens (167,093 vs 167,094), and no other."""
    sim = simulate_recorded(tr, profile_for(tr.version))
    autos = [e for e in sim.events if e.kind == "auto_compact"]
    assert [(e.line, e.tokens, e.pre_tokens, e.threshold) for e in autos] == [
        (1256, 167093, 167094, 167000)
    ]
    assert autos[0].predicted and autos[0].recorded
    assert [b.line for b in tr.boundaries if b.trigger == "auto"] == [1256]


def test_recorded_summary_counts_every_listed_micro_compaction(tr):
    """#10 defect 11: the recorded scenario listed a micro_compact event (predicted, but not in
    the recorded usage) that its summary counted as 0."""
    sim = simulate_recorded(tr, profile_for(tr.version))
    listed = [e for e in sim.events if e.kind == "micro_compact"]
    assert len(listed) == 1 and listed[0].recorded is False
    s = sim.summary
    assert (s["micro_compactions"], s["micro_compactions_not_observed"]) == (0, 1)
    assert s["micro_compactions"] + s["micro_compactions_not_observed"] == len(listed)


def test_unpatched_replay_says_why_it_differs_from_the_recording(tr):
    """#10 defect 11: cache breaks differ from the recorded scenario; every difference is
    listed with its reason. #8: where the session compacted, the replay holds the file's own
    boundary and summary with their fitted costs (what came back with the summary included),
    so its prompts equal the recorded ones after the compaction too (before: -2,569 each,
    -128,450 tokens in all)."""
    p = profile_for(tr.version)
    rec, rep = simulate(tr, p, "recorded"), simulate(tr, p, "unpatched")
    notes = vs_recorded(rec, rep)
    assert rep.summary["tokens_sent"] == rec.summary["tokens_sent"] == 15_121_271
    assert [r.prompt_tokens for r in rep.requests] == [r.prompt_tokens for r in rec.requests]
    assert notes[0] == "cache_breaks 1 vs recorded 2:"
    breaks = [n for n in notes if re.match(r"  line \d+ \(request \d+\)", n)]
    rec_lines = {r.line for r in rec.requests if r.cache_break}
    rep_lines = {r.line for r in rep.requests if r.cache_break}
    assert [int(n.split()[1]) for n in breaks] == sorted(rec_lines ^ rep_lines) == [498, 1261, 1848]
    assert "first request after a compaction" in breaks[1]
    assert all("recorded break, not in the replay" in breaks[i] for i in (0, 2))
    assert vs_recorded(rec, rec) == ()  # nothing to explain when they agree


def test_simulate_prints_and_returns_the_reasons(app):
    out = runner.invoke(app, ["simulate", str(EXAMPLE), "--scenario", "unpatched"])
    assert out.exit_code == 0, out.output
    assert "vs recorded:" in out.stdout and "line 498 (request 31)" in out.stdout
    (doc,) = json.loads(
        runner.invoke(app, ["simulate", str(EXAMPLE), "--scenario", "unpatched", "--json"]).stdout
    )["results"]
    assert any("line 1261" in n for n in doc["vs_recorded"])
    (rec,) = json.loads(runner.invoke(app, ["simulate", str(EXAMPLE), "--json"]).stdout)["results"]
    assert "vs_recorded" not in rec and rec["summary"]["micro_compactions_not_observed"] == 1


def test_compare_blanks_the_recorded_rows_of_the_patched_column(app):
    """#10 defect 11: recorded/matched compactions mean nothing for the patched run."""
    out = runner.invoke(app, ["simulate", str(EXAMPLE), "--compare"]).stdout
    for row in ("recorded_auto_compactions", "matched_auto_compactions"):
        line = next(x for x in out.splitlines() if x.startswith(row + " "))
        assert line.split()[1:] == ["1", "—", "—", "—", "—"], line  # oracle too
    assert "unpatched vs recorded:" in out


def test_a_plot_whose_lines_coincide_says_so(tr, tmp_path):
    """#10 defect 11: with knobs under which the prune never fires, text_prune = unpatched and
    one line hid the other without a word."""
    pytest.importorskip("matplotlib", reason="the plot needs the [plot] extra (matplotlib)")
    from engine.replay.report import plot_simulations

    p = profile_for(tr.version)
    sims = [simulate(tr, p, "unpatched"), simulate(tr, p, "text_prune")]
    assert [r.prompt_tokens for r in sims[0].requests] == [
        r.prompt_tokens for r in sims[1].requests
    ]
    notes = plot_simulations(sims, tmp_path / "same.png")
    assert notes == [
        "the text_prune and unpatched lines coincide (identical prompt sizes): "
        "text_prune is drawn dashed over unpatched"
    ]
    assert (tmp_path / "same.png").stat().st_size > 0
    pruned = simulate(
        tr,
        p,
        "text_prune",
        prune_env={"CLAUDE_TEXT_PRUNE_KEEP": "1", "CLAUDE_TEXT_PRUNE_STEP": "1"},
    )
    assert plot_simulations([sims[0], pruned], tmp_path / "differ.png") == []


def test_documented_event_kinds_are_the_emitted_ones():
    """#10: session_memory_compact was documented but never emitted. docs/simulate.md (the
    JSON fields) lists exactly EVENT_KINDS, and the example emits only kinds from it."""
    doc = (ROOT / "docs" / "simulate.md").read_text()
    m = re.search(r"`events` \(`kind` in (.*?), with `line`", doc, re.S)
    assert m is not None
    assert set(re.findall(r"`(\w+)`", m.group(1))) == set(EVENT_KINDS)
    assert "session_memory_compact" not in EVENT_KINDS
