"""The replays with ctxpatch carry recall's tool definitions on every request
(``engine.replay.recall_tools``), on the embedded real session; ``unpatched`` does not, and
``simulate --no-recall`` replays ``apply --no-recall``. A session of 2.1.69 on (a native build's
too) carries only their names (tool search) and the server's instructions, an older one the
definitions."""

import json
from pathlib import Path

import pytest
from conftest import app_with
from shared_data import PUBLIC, need_shared
from typer.testing import CliRunner

from ctxpatch.cli.modelling import register
from engine.profiles import profile_for
from engine.replay.calibration import calibrate
from engine.replay.recall_tools import (
    RECALL_TOOLS_DEFERRED_ESTIMATE,
    RECALL_TOOLS_ESTIMATE,
    recall_tools_for,
    recall_tools_tokens,
)
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
    assert RECALL_TOOLS_ESTIMATE < n < 2 * RECALL_TOOLS_ESTIMATE  # at this session's ratio
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


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2.0.13", RECALL_TOOLS_ESTIMATE),
        ("2.1.68", RECALL_TOOLS_ESTIMATE),  # both definitions, even talking to Anthropic
        ("2.1.69", RECALL_TOOLS_DEFERRED_ESTIMATE),  # tool search: names and instructions
        ("2.1.112", RECALL_TOOLS_DEFERRED_ESTIMATE),  # the last cli.js build
        ("2.1.113", RECALL_TOOLS_DEFERRED_ESTIMATE),  # native: behind ctxpatch run
        ("2.1.400", RECALL_TOOLS_DEFERRED_ESTIMATE),  # newer than every profile
    ],
)
def test_what_a_version_sends(version, expected) -> None:
    assert recall_tools_for(profile_for(version)) == expected


NATIVE_SESSION = "JanDeDobbeleer__oh-my-posh__6c0a282a-886f-458d-a426-93d95104b4a6.jsonl.xz"


@pytest.mark.parametrize("scenario", ["server_clearing", "patched"])
def test_a_native_session_carries_only_the_names(scenario) -> None:
    """The shared 2.1.217 session: behind ``ctxpatch run`` its requests carry recall's names in
    the deferred tools' list and the server's instructions, not the definitions
    (tests/e2e/test_recall_real.py measures it)."""
    tr = load_transcript(need_shared(PUBLIC / NATIVE_SESSION))
    assert tr.version == "2.1.217"
    prof = profile_for(tr.version)
    cal = calibrate(tr, prof)
    kw = {"calibration": cal, "microcompact_on": True}
    default = simulate(tr, prof, scenario, **kw)
    whole = simulate(tr, prof, scenario, recall_tools=RECALL_TOOLS_ESTIMATE, **kw)
    none = simulate(tr, prof, scenario, recall_tools=0, **kw)
    assert default.knobs["recall_tools"] == RECALL_TOOLS_DEFERRED_ESTIMATE
    names = recall_tools_tokens(RECALL_TOOLS_DEFERRED_ESTIMATE, cal.ratio)
    definitions = recall_tools_tokens(RECALL_TOOLS_ESTIMATE, cal.ratio)
    assert 0 < names < definitions
    assert default.requests[0].prompt_tokens - none.requests[0].prompt_tokens == names
    assert whole.requests[0].prompt_tokens - none.requests[0].prompt_tokens == definitions
    assert none.summary["cost"] < default.summary["cost"] < whole.summary["cost"]
