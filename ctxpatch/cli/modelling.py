"""``ctxpatch thresholds`` and (``ctxpatch.cli.simulating``) ``ctxpatch simulate``: the engine's
model, on the command line.

Data goes to stdout, messages to stderr; printing and exit codes go through
``ctxpatch.cli.output``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ctxpatch.cli import simulating
from ctxpatch.cli.modelargs import (
    DEFAULT_MODEL,
    beyond_warnings,
    check_model,
    default_version,
    parse_env,
    parse_profile,
)
from ctxpatch.cli.options import EnvOpt, JsonOpt, StrictOpt, with_codes
from ctxpatch.cli.output import emit_json, envelope, err, handle, out


def thresholds_cmd(
    profile: Annotated[
        list[str] | None,
        typer.Option("--profile", "-p", help="Claude Code version(s); repeat to compare eras."),
    ] = None,
    model: Annotated[
        str, typer.Option(help="Model id; '[1m]' in it selects the 1M window.")
    ] = DEFAULT_MODEL,
    pct_override: Annotated[
        float | None,
        typer.Option(
            "--pct-override", help="CLAUDE_AUTOCOMPACT_PCT_OVERRIDE (only lowers the threshold)."
        ),
    ] = None,
    env: EnvOpt = None,
    as_json: JsonOpt = False,
    strict: StrictOpt = False,
) -> None:
    """Print the compaction thresholds for a model, version profile and environment, and why.

    Without --profile: the Claude Code version installed here (cli.js or native build), else the newest profile.

    Example: ctxpatch thresholds --profile 2.1.39 --profile 2.0.76 --model claude-opus-4-6
    """
    raise typer.Exit(
        handle(lambda: _thresholds(profile, model, pct_override, env, as_json, strict), as_json)
    )


def _thresholds(
    profile: list[str] | None,
    model: str,
    pct_override: float | None,
    env: list[str] | None,
    as_json: bool,
    strict: bool,
) -> int:
    from engine.claude_code.thresholds import compute_thresholds
    from engine.replay.report import render_thresholds

    if profile:
        versions = profile
    else:
        chosen, why = default_version()
        err(f"note: modelling {chosen}: {why}")
        versions = [chosen]
    profiles = [(v, parse_profile(v)) for v in versions]  # a bad version is a usage error first
    warnings = beyond_warnings(versions, strict)
    check_model(model)
    environment = parse_env(env, pct_override)
    if pct_override is not None and not 0 < pct_override <= 100:
        err(f"warning: --pct-override {pct_override:g} is outside (0,100]: Claude Code ignores it")
    items = [(v, compute_thresholds(p, model, environment)) for v, p in profiles]
    if as_json:
        emit_json(envelope(0, [{"version": v, **t.as_dict()} for v, t in items], warnings=warnings))
    else:
        out(render_thresholds(items))
        for w in warnings:
            out(f"warning: {w}")
    return 0


def register(app: typer.Typer) -> None:
    """Add ``simulate`` and ``thresholds`` to ``app``."""
    simulating.register(app)
    app.command("thresholds", help=with_codes(thresholds_cmd, "thresholds"))(thresholds_cmd)
