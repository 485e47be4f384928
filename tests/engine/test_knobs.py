"""The one knob table (engine.replay.knobs): the simulate options, their bounds and the
environments a replay gets (simulate and report) all come from it, and it names every variable the
clearing twin reads."""

from __future__ import annotations

import re

import pytest

from ctxpatch.errors import UsageError
from engine.replay.knobs import (
    KNOBS,
    OPTIONS,
    PRUNE_ENV_NAMES,
    below_bound,
    check_bounds,
    parse_knobs,
)
from engine.twins.context_clear import REPLAY_ENV_NAMES, knob_errors


def test_the_clearing_rows_are_the_variables_the_twin_reads() -> None:
    clearing = [k.env for k in KNOBS if not k.prunes]
    assert sorted(clearing) == sorted(REPLAY_ENV_NAMES)
    assert len({k.env for k in KNOBS}) == len(KNOBS)
    assert len({k.name for k in OPTIONS}) == len(OPTIONS)
    assert all(k.env.startswith("CLAUDE_TEXT_PRUNE_") for k in KNOBS if k.prunes)
    # the policy's knobs are read from the environment only
    assert {k.env for k in KNOBS if k.option is None} == {
        "CLAUDE_CTX_CLEAR_POLICY",
        "CLAUDE_CTX_CLEAR_CEILING",
        "CLAUDE_CTX_CLEAR_PATIENCE",
        "CLAUDE_CTX_CLEAR_FREE",
        "CLAUDE_CTX_CLEAR_MARGIN",
        "CLAUDE_CTX_CLEAR_WINDOW_GUARD",
    }


def test_the_free_move_knob_takes_on_and_off_words() -> None:
    from engine.twins.free_moves import free_from_env

    for raw in ("0", " off ", "FALSE", "no"):
        assert not free_from_env({"CLAUDE_CTX_CLEAR_FREE": raw}), raw
        assert knob_errors({"CLAUDE_CTX_CLEAR_FREE": raw}) == [], raw
    for raw in ("1", "yes", "", " On"):
        assert free_from_env({"CLAUDE_CTX_CLEAR_FREE": raw}), raw
        assert knob_errors({"CLAUDE_CTX_CLEAR_FREE": raw}) == [], raw
    assert free_from_env({})
    # a word it does not know: on, and said so
    assert free_from_env({"CLAUDE_CTX_CLEAR_FREE": "maybe"})
    assert knob_errors({"CLAUDE_CTX_CLEAR_FREE": "maybe"}) == [
        "CLAUDE_CTX_CLEAR_FREE='maybe' is not 0 or 1; the default (on) is used"
    ]


def test_the_integer_bounds_are_the_twins() -> None:
    """A value one below a knob's bound is what the twin (and the injected code) ignores."""
    for k in KNOBS:
        if k.prunes or k.kind is not int:
            continue
        assert k.low is not None
        assert knob_errors({k.env: str(k.low)}) == [], k.env
        if k.low > 0:
            assert knob_errors({k.env: str(k.low - 1)}) != [], k.env


def test_parsed_once_environment_then_env_then_options() -> None:
    knobs = parse_knobs(
        {"keep": 2, "clear_keep": 5, "clear_disable": True, "clear_step": None},
        {
            "CLAUDE_CTX_CLEAR_KEEP": "1",
            "CLAUDE_CTX_CLEAR_TRIGGER": "9",
            "CLAUDE_CTX_CLEAR_POLICY": "fixed",
            "CLAUDE_TEXT_PRUNE_STEP": "4",
            "CLAUDE_TEXT_PRUNE_DISABLE": "1",  # read by the prune, no option: environment only
            "CLAUDE_TEXT_PRUNE_DEBUG": "/tmp/log",  # a log path: changes nothing replayed
            "HOME": "/x",
        },
        {"CLAUDE_CTX_CLEAR_TRIGGER": "7", "CLAUDE_TEXT_PRUNE_KEEP": "9"},
        None,
    )
    assert dict(knobs.prune_env) == {
        "CLAUDE_TEXT_PRUNE_STEP": "4",
        "CLAUDE_TEXT_PRUNE_DISABLE": "1",
        "CLAUDE_TEXT_PRUNE_KEEP": "2",  # environment, then --env (9), then the option (2)
    }
    assert list(knobs.clear_env.items()) == [
        ("CLAUDE_CTX_CLEAR_KEEP", "5"),
        ("CLAUDE_CTX_CLEAR_TRIGGER", "7"),
        ("CLAUDE_CTX_CLEAR_POLICY", "fixed"),
        ("CLAUDE_CTX_CLEAR_DISABLE", "1"),
    ]
    assert knobs.microcompact is None
    assert parse_knobs().clear_env == {} and parse_knobs().cache_key() == "[[], []]"


def test_the_prune_variables_are_those_the_twin_reads() -> None:
    """Every CLAUDE_TEXT_PRUNE_* name the twin reads from its environment is taken from the
    user's (a replay at the knobs the patched Claude Code would run under), but the debug log."""
    import inspect

    from engine.twins import textprune

    read = set(re.findall(r"ENV_[A-Z_]+", inspect.getsource(textprune.PruneSettings.from_env)))
    assert {getattr(textprune, n) for n in read} == set(PRUNE_ENV_NAMES)
    assert textprune.ENV_DEBUG not in PRUNE_ENV_NAMES
    assert {k.env for k in KNOBS if k.prunes} <= set(PRUNE_ENV_NAMES)


def test_the_first_value_below_its_bound_is_named() -> None:
    assert below_bound({"keep": 1, "threshold": 0, "clear_keep": 0}) is None
    knob, value = below_bound({"clear_step": 0, "keep": 0}) or (None, None)
    assert knob is not None and knob.option == "--keep" and value == 0
    with pytest.raises(UsageError) as e:
        check_bounds({"clear_trigger": 0})
    assert e.value.what == "--clear-trigger 0" and "at least 1" in e.value.why


def test_problems_are_the_twins_warnings() -> None:
    knobs = parse_knobs(process_env={"CLAUDE_CTX_CLEAR_CEILING": "0", "CLAUDE_CTX_CLEAR_KEEP": "x"})
    assert knobs.problems() == knob_errors(knobs.clear_env) and len(knobs.problems()) == 2


def test_every_option_knob_is_a_simulate_option() -> None:
    from typer.testing import CliRunner

    from ctxpatch.cli.app import app

    res = CliRunner().invoke(app, ["simulate", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    for k in OPTIONS:
        assert k.option is not None and k.option in res.output, k.option
    assert "--clear-policy" not in res.output and "--clear-window-guard" not in res.output
