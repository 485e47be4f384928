"""``ctxpatch simulate``: a session replayed by ``engine.replay.session.replay_session``.

The options are ``ctxpatch.cli.simulate_options``' (one per row of the knob table,
``engine.replay.knobs``, for the knobs); what is printed is ``ctxpatch.cli.simulate_output``'s."""

from __future__ import annotations

import os
from typing import Any

import typer

from ctxpatch.cli import simulate_output
from ctxpatch.cli.modelargs import (
    DEFAULT_PROFILE,
    TokenizerChoice,
    beyond_warnings,
    check_model,
    parse_env,
    parse_profile,
)
from ctxpatch.cli.options import with_codes
from ctxpatch.cli.output import handle
from ctxpatch.cli.simulate_options import SimulateArgs, signature


def simulate_cmd(**options: Any) -> None:
    """Replay a session request by request: the count Claude Code used, thresholds, mechanisms.

    The CLAUDE_CTX_CLEAR_* knobs come from this process's environment, then --env, then the
    --clear-* options. Cost is priced like the prompt cache, in base input-token units:
    1.0 x uncached + 1.25 x cache write + 0.1 x cache read; and in US dollars from the dated
    price table of the session's model (output included; --prices to override).

    Example: ctxpatch simulate ~/.claude/projects/x/session.jsonl --compare --keep 2 --plot out.png
    """
    args, knob_values = SimulateArgs.split(options)
    raise typer.Exit(handle(lambda: _simulate(args, knob_values), args.as_json))


simulate_cmd.__signature__ = signature()  # type: ignore[attr-defined]


def _simulate(a: SimulateArgs, knob_values: dict[str, object]) -> int:
    from ctxpatch.cli.modelargs import replayable
    from engine.replay.knobs import check_bounds, parse_knobs
    from engine.replay.session import replay_session
    from usage.prices import load_table

    check_bounds(knob_values)
    if a.model is not None:
        check_model(a.model)
    table = load_table(a.prices)  # a bad price file is a usage error before any work
    if a.plot is not None:
        from ctxpatch.cli.reporting import check_plot_path

        check_plot_path(a.plot)
    environment = parse_env(a.env, a.pct_override)
    tr = replayable(a.transcript)
    version = a.profile or tr.version or DEFAULT_PROFILE
    prof = parse_profile(version)
    warnings = [*tr.warnings, *beyond_warnings([version], a.strict)]
    no_version = a.profile is None and tr.version is None
    simulate_output.notes(tr, [] if a.as_json else warnings, no_version)
    knobs = parse_knobs(knob_values, os.environ, environment, a.microcompact_forced())
    simulate_output.knob_warnings(knobs)
    tiktoken = a.tokenizer is TokenizerChoice.tiktoken
    extra = {"recall_tools": 0} if a.no_recall else {}  # apply --no-recall
    report = replay_session(
        tr, prof, a.scenarios(), knobs, model=a.model, env=environment, tokenizer=tiktoken, **extra
    )
    if a.plot is not None:
        simulate_output.plot(report, a.plot)
    return simulate_output.show(tr, report, table, a, warnings)


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to ``app``."""
    app.command("simulate", help=with_codes(simulate_cmd, "simulate"))(simulate_cmd)
