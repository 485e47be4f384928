"""The replays with ctxpatch carry recall's tool definitions on every request
(``engine.replay.recall_tools``), on the embedded real session; ``unpatched`` does not, and
``simulate --no-recall`` replays ``apply --no-recall``."""

import json
from pathlib import Path

import pytest
from conftest import app_with
from typer.testing import CliRunner

from ctxpatch.cli.modelling import register
from engine.profiles import profile_for
from engine.replay.calibration import calibrate
from engine.replay.recall_tools import RECALL_TOOLS_ESTIMATE, recall_tools_tokens
from engine.replay.session import simulate
from engine.transcript import load_transcript

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spotter-session.jsonl"


@pytest.fixture(scope="module")
def setup():
    tr = load_transcript(EXAMPLE)
    prof = profile_for(tr.version)
    return tr, prof, calibrate(tr, prof)


def test_every_prompt_carries_the_definitions(setup) -> None:
    tr, prof, cal = setup
    n = recall_tools_tokens(RECALL_TOOLS_ESTIMATE, cal.ratio)
    assert 200 < n < 400  # 202 chars/4 at this session's ratio
    plain = simulate(tr, prof, "unpatched", calibration=cal, microcompact_on=True)
    more = simulate(
        tr,
        prof,
        "unpatched",
        calibration=cal,
        microcompact_on=True,
        recall_tools=RECALL_TOOLS_ESTIMATE,
    )
    assert "recall_tools" not in plain.knobs and more.knobs["recall_tools"] == RECALL_TOOLS_ESTIMATE
    first = next(e.line for e in plain.events if e.kind == "auto_compact")
    before = [(a, b) for a, b in zip(plain.requests, more.requests, strict=False) if a.line < first]
    assert len(before) > 50
    assert all(b.prompt_tokens - a.prompt_tokens == n for a, b in before)


@pytest.mark.parametrize("scenario", ["server_clearing", "patched", "oracle"])
def test_the_scenarios_with_ctxpatch_add_them_by_default(setup, scenario) -> None:
    tr, prof, cal = setup
    kw = {"calibration": cal, "microcompact_on": True}
    with_recall = simulate(tr, prof, scenario, **kw)
    without = simulate(tr, prof, scenario, recall_tools=0, **kw)
    assert with_recall.knobs["recall_tools"] == RECALL_TOOLS_ESTIMATE
    assert "recall_tools" not in without.knobs
    n = recall_tools_tokens(RECALL_TOOLS_ESTIMATE, cal.ratio)
    # the first request, before any clearing: exactly the definitions more
    assert with_recall.requests[0].prompt_tokens - without.requests[0].prompt_tokens == n
    assert with_recall.summary["tokens_sent"] > without.summary["tokens_sent"]


def test_simulate_no_recall(tmp_path) -> None:
    app = app_with(register)
    runner = CliRunner()
    args = ["simulate", str(EXAMPLE), "--scenario", "patched", "--json"]
    on = json.loads(runner.invoke(app, args).stdout)
    off = json.loads(runner.invoke(app, [*args, "--no-recall"]).stdout)
    knobs_on = on["results"][0]["knobs"]
    knobs_off = off["results"][0]["knobs"]
    assert knobs_on["recall_tools"] == RECALL_TOOLS_ESTIMATE and "recall_tools" not in knobs_off
    sent_on = on["results"][0]["summary"]["tokens_sent"]
    assert sent_on > off["results"][0]["summary"]["tokens_sent"]
