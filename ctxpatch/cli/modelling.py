"""``ctxpatch simulate`` and ``ctxpatch thresholds``: the engine's model, on the command line.

Data goes to stdout, messages to stderr; printing and exit codes go through
``ctxpatch.cli.output``.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ctxpatch.cli.options import EnvOpt, JsonOpt, StrictOpt
from ctxpatch.cli.output import emit_json, envelope, err, handle, out, with_codes
from ctxpatch.errors import StrictFailure, TranscriptError, UsageError

DEFAULT_PROFILE = "2.1.39"
DEFAULT_MODEL = "claude-opus-4-6"


class ScenarioChoice(StrEnum):
    recorded = "recorded"
    unpatched = "unpatched"
    text_prune = "text_prune"
    server_clearing = "server_clearing"
    patched = "patched"
    oracle = "oracle"


COMPARED = ("unpatched", "text_prune", "server_clearing", "patched", "oracle")


class MicroCompactChoice(StrEnum):
    auto = "auto"
    on = "on"
    off = "off"


class TokenizerChoice(StrEnum):
    chars4 = "chars4"
    tiktoken = "tiktoken"


def _profile(version: str):
    from engine.profiles import PROFILES, profile_for

    try:
        return profile_for(version)
    except ValueError as e:
        raise UsageError(
            f"--profile {version}",
            why=str(e),
            hint=f"give a Claude Code version from 1.0.80 to {PROFILES[-1].last}, "
            "e.g. --profile 2.1.39",
        ) from None


def _model(model: str) -> None:
    from engine.profiles import model_problem

    problem = model_problem(model)
    if problem is not None:
        raise UsageError(
            f"--model {model}",
            why=problem,
            hint="give a Claude model id or alias, e.g. --model claude-opus-4-6, "
            "--model claude-sonnet-4-5[1m] or --model sonnet",
        )


def _beyond(versions: list[str], strict: bool) -> list[str]:
    """Warnings for versions newer than every profile; with ``strict`` they end the command."""
    from engine.profiles import beyond_profiles

    warnings = [
        f"Claude Code {v} is newer than every engine profile (the newest ends at "
        f"{beyond_profiles(v)}): its numbers are extrapolated"
        for v in versions
        if beyond_profiles(v)
    ]
    if warnings and strict:
        raise StrictFailure(
            "--strict: a version is newer than every engine profile",
            why="; ".join(warnings),
            hint="leave out --strict to model it with the newest profile's rules",
        )
    return warnings


def default_version() -> tuple[str, str]:
    """The version ``thresholds`` models without --profile, and why."""
    from engine.profiles import PROFILES
    from patcher.native.inspect import installed_version

    try:
        installed = installed_version()
    except Exception as e:  # finding the install is a convenience: never a failure
        installed, why = None, f"could not read the installed version ({type(e).__name__})"
    else:
        why = "none installed here"
    if installed:
        return installed, "the version installed here"
    return PROFILES[-1].last, f"the newest profile ({why})"


def _env(pairs: list[str] | None, pct: float | None) -> dict[str, str]:
    env: dict[str, str] = {}
    for p in pairs or []:
        if "=" not in p:
            raise UsageError(
                f"--env {p}", why="expected NAME=VALUE", hint="e.g. --env DISABLE_MICROCOMPACT=1"
            )
        k, v = p.split("=", 1)
        env[k] = v
    if pct is not None:
        env["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] = f"{pct:g}"
    return env


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
    profiles = [(v, _profile(v)) for v in versions]  # a bad version is a usage error first
    warnings = _beyond(versions, strict)
    _model(model)
    environment = _env(env, pct_override)
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


def simulate_cmd(
    transcript: Annotated[
        Path,
        typer.Argument(
            help="A Claude Code session transcript: ~/.claude/projects/<project>/<id>.jsonl, "
            "or the same compressed with xz (.jsonl.xz, read as is).",
            readable=False,
        ),
    ],
    scenario: Annotated[
        ScenarioChoice,
        typer.Option(
            help="recorded: explain what happened; unpatched, text_prune (the text prune), "
            "server_clearing (server-side tool-result clearing), patched (both, as "
            "`ctxpatch apply` installs): replay under the knobs; oracle: the cheapest clearing "
            "schedule in hindsight (docs/oracle.md)."
        ),
    ] = ScenarioChoice.recorded,
    compare: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="Run unpatched, text_prune, server_clearing, patched and oracle side by side, with "
            "cost = 1.0 x uncached + 1.25 x cache write + 0.1 x cache read input tokens.",
        ),
    ] = False,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile", "-p", help="Claude Code version to model (default: the transcript's)."
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model id (default: the transcript's).")] = None,
    pct_override: Annotated[
        float | None,
        typer.Option("--pct-override", help="CLAUDE_AUTOCOMPACT_PCT_OVERRIDE for the replay."),
    ] = None,
    keep: Annotated[int | None, typer.Option(help="CLAUDE_TEXT_PRUNE_KEEP (patched).")] = None,
    threshold: Annotated[
        int | None, typer.Option(help="CLAUDE_TEXT_PRUNE_THRESHOLD (patched).")
    ] = None,
    max_chars: Annotated[
        int | None, typer.Option("--max-chars", help="CLAUDE_TEXT_PRUNE_MAX_CHARS (patched).")
    ] = None,
    step: Annotated[int | None, typer.Option(help="CLAUDE_TEXT_PRUNE_STEP (patched).")] = None,
    clear_trigger: Annotated[
        int | None,
        typer.Option(help="CLAUDE_CTX_CLEAR_TRIGGER: input tokens before the server clears."),
    ] = None,
    clear_keep: Annotated[
        int | None, typer.Option(help="CLAUDE_CTX_CLEAR_KEEP: most recent tool uses kept.")
    ] = None,
    clear_at_least: Annotated[
        int | None,
        typer.Option(
            help="CLAUDE_CTX_CLEAR_AT_LEAST: clear only when this many tokens go (0: any)."
        ),
    ] = None,
    clear_exclude_tools: Annotated[
        str | None,
        typer.Option(help="CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS: comma list of tools never cleared."),
    ] = None,
    clear_tool_inputs: Annotated[
        str | None,
        typer.Option(help="CLAUDE_CTX_CLEAR_TOOL_INPUTS: 1, 0, or a comma list of tools."),
    ] = None,
    clear_step: Annotated[
        int | None,
        typer.Option(
            help="CLAUDE_CTX_CLEAR_STEP: tool uses between two moves of the cleared part."
        ),
    ] = None,
    clear_disable: Annotated[
        bool, typer.Option("--clear-disable", help="CLAUDE_CTX_CLEAR_DISABLE=1: no clearing.")
    ] = False,
    no_recall: Annotated[
        bool,
        typer.Option(
            "--no-recall",
            help="Replay apply --no-recall: the clearing replays without recall's two tool "
            "definitions on every request.",
        ),
    ] = False,
    microcompact: Annotated[
        MicroCompactChoice,
        typer.Option(help="Micro-compaction in replays; auto = as the recorded usage shows."),
    ] = MicroCompactChoice.auto,
    env: EnvOpt = None,
    tokenizer: Annotated[
        TokenizerChoice, typer.Option(help="tiktoken: add offline BPE counts next to chars/4.")
    ] = TokenizerChoice.chars4,
    all_requests: Annotated[
        bool, typer.Option("--all-requests", help="List every request, not only those with events.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Write tokens per request with threshold lines to FILE.png."),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices", help="A price file (TOML/JSON) over the built-in table (CTXPATCH_PRICES)."
        ),
    ] = None,
    as_json: JsonOpt = False,
    strict: StrictOpt = False,
) -> None:
    """Replay a session request by request: the count Claude Code used, thresholds, mechanisms.

    The CLAUDE_CTX_CLEAR_* knobs come from this process's environment, then --env, then the
    --clear-* options. Cost is priced like the prompt cache, in base input-token units:
    1.0 x uncached + 1.25 x cache write + 0.1 x cache read; and in US dollars from the dated
    price table of the session's model (output included; --prices to override).

    Example: ctxpatch simulate ~/.claude/projects/x/session.jsonl --compare --keep 2 --plot out.png
    """

    def body() -> int:
        from engine.replay.report import (
            compare_summary,
            plot_simulations,
            render_compare,
            render_simulation,
        )
        from engine.replay.session import simulate
        from engine.transcript import load_transcript

        for name, val, low in (
            ("--keep", keep, 1),
            ("--threshold", threshold, 0),
            ("--max-chars", max_chars, 1),
            ("--step", step, 1),
            ("--clear-trigger", clear_trigger, 1),
            ("--clear-keep", clear_keep, 0),
            ("--clear-at-least", clear_at_least, 0),
            ("--clear-step", clear_step, 1),
        ):
            if val is not None and val < low:
                raise UsageError(
                    f"{name} {val}",
                    why=f"must be at least {low}",
                    hint="see ctxpatch simulate --help",
                )
        if model is not None:
            _model(model)
        from usage.prices import load_table

        table = load_table(prices)  # a bad price file is a usage error before any work
        if plot is not None:
            from ctxpatch.cli.reporting import check_plot_path

            check_plot_path(plot)
        environment = _env(env, pct_override)
        tr = load_transcript(transcript)
        if not tr.replies:
            raise TranscriptError(
                f"transcript {transcript}",
                "it has no assistant reply with usage"
                + (f" ({'; '.join(tr.warnings[:3])})" if tr.warnings else ""),
                "simulate needs a session in which Claude answered at least once",
            )
        version = profile or tr.version or DEFAULT_PROFILE
        prof = _profile(version)
        warnings = [*tr.warnings, *_beyond([version], strict)]
        if not as_json:
            for w in warnings:
                err(f"warning: {w}")
        if profile is None and tr.version is None:
            err(f"note: the transcript names no version; modelling {DEFAULT_PROFILE}")
        if tr.unknown_types:
            err(f"note: unknown record types counted and skipped: {tr.unknown_types}")
        prune_env = {
            k: str(v)
            for k, v in (
                ("CLAUDE_TEXT_PRUNE_KEEP", keep),
                ("CLAUDE_TEXT_PRUNE_THRESHOLD", threshold),
                ("CLAUDE_TEXT_PRUNE_MAX_CHARS", max_chars),
                ("CLAUDE_TEXT_PRUNE_STEP", step),
            )
            if v is not None
        }
        clear_env = _clear_env(
            environment,
            {
                "CLAUDE_CTX_CLEAR_TRIGGER": clear_trigger,
                "CLAUDE_CTX_CLEAR_KEEP": clear_keep,
                "CLAUDE_CTX_CLEAR_AT_LEAST": clear_at_least,
                "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS": clear_exclude_tools,
                "CLAUDE_CTX_CLEAR_TOOL_INPUTS": clear_tool_inputs,
                "CLAUDE_CTX_CLEAR_STEP": clear_step,
                "CLAUDE_CTX_CLEAR_DISABLE": "1" if clear_disable else None,
            },
        )
        mc = {"auto": None, "on": True, "off": False}[microcompact.value]
        kw = dict(model=model, env=environment)
        if scenario is ScenarioChoice.recorded and not compare:
            sims = [simulate(tr, prof, "recorded", **kw)]
        else:
            from engine.replay.calibration import calibrate

            if mc is None:
                rec = simulate(tr, prof, "recorded", **kw)
                mc = not any(e.kind == "micro_compact" and e.recorded is False for e in rec.events)
            replay = dict(
                kw,
                prune_env=prune_env,
                clear_env=clear_env,
                microcompact_on=mc,
                calibration=calibrate(tr, prof),
                recall_tools=0 if no_recall else None,  # None: the engine's default
            )
            names = COMPARED if compare else (scenario.value,)
            sims = [simulate(tr, prof, name, **replay) for name in names]
        extra = {}
        if tokenizer is TokenizerChoice.tiktoken:
            from engine.replay.recorded import memory_records
            from engine.tokenizers import compare_counts

            extra["tokenizer"] = compare_counts(memory_records(tr, prof))
        # an unpatched replay says where and why it differs from the recorded session
        vs_recorded: tuple[str, ...] | None = None
        unpatched = next((s for s in sims if s.scenario == "unpatched"), None)
        if unpatched is not None:
            from engine.replay.divergence import vs_recorded as explain

            vs_recorded = explain(simulate(tr, prof, "recorded", **kw), unpatched)
        if plot is not None:
            try:
                plot_notes = plot_simulations(sims, plot)
            except OSError as e:
                raise UsageError(
                    f"--plot {plot}", why=e.strerror or str(e), hint="choose a writable path"
                ) from None
            err(f"plot written to {plot}")
            for note in plot_notes:
                err(f"note: {note}")
        from usage.money import simulation_dollars

        money = simulation_dollars(tr, sims, table)
        if as_json:
            if compare:
                # patched (everything `ctxpatch apply` installs) against unpatched, then each
                patched = next(s for s in sims if s.scenario == "patched")
                extra["comparison"] = {
                    **compare_summary(sims[0], patched),
                    "usd_saved": money.saved(sims[0].scenario, "patched"),
                }
                extra["vs_unpatched"] = {
                    s.scenario: {
                        **compare_summary(sims[0], s),
                        "usd_saved": money.saved(sims[0].scenario, s.scenario),
                    }
                    for s in sims[1:]
                }
                extra["scenarios"] = {s.scenario: {"summary": s.summary} for s in sims}
            results = [
                {
                    **s.as_dict(),
                    **(
                        {"vs_recorded": list(vs_recorded)}
                        if s is unpatched and vs_recorded is not None
                        else {}
                    ),
                    "usd": money.of(s.scenario),
                }
                for s in sims
            ]
            extra["prices"] = table.describe()
            emit_json(envelope(0, results, **extra, warnings=warnings), indent=1)
            return 0
        if compare:
            out(render_compare(sims))
        else:
            out(render_simulation(sims[0], all_requests))
        out(money.render())
        if vs_recorded is not None:
            out(
                ("\nunpatched " if compare else "\n")
                + "vs recorded:"
                + ("" if vs_recorded else " the same tokens_sent and cache breaks")
            )
            if vs_recorded:
                out("\n".join("  " + n for n in vs_recorded))
        if extra:
            t = extra["tokenizer"]
            out(
                f"tokenizer ({t['encoding']}, estimate): chars/4 {t['chars4_tokens']:,} vs "
                f"BPE {t['bpe_tokens']:,} (×{t['bpe_per_chars4']})"
            )
        return 0

    raise typer.Exit(handle(body, as_json))


def _clear_env(environment: dict[str, str], options: dict[str, object]) -> dict[str, str]:
    """The CLAUDE_CTX_CLEAR_* knobs: this process's environment, then --env, then the options;
    a knob the patched Claude Code would ignore (and replace by its default) is a warning."""
    from engine.twins.context_clear import REPLAY_ENV_NAMES, knob_errors

    env = {k: v for k, v in os.environ.items() if k in REPLAY_ENV_NAMES}
    env |= {k: v for k, v in environment.items() if k in REPLAY_ENV_NAMES}
    env |= {k: str(v) for k, v in options.items() if v is not None}
    for problem in knob_errors(env):
        err(f"warning: {problem}")
    return env


def register(app: typer.Typer) -> None:
    """Add ``simulate`` and ``thresholds`` to ``app``."""
    app.command("simulate", help=with_codes(simulate_cmd, "simulate"))(simulate_cmd)
    app.command("thresholds", help=with_codes(thresholds_cmd, "thresholds"))(thresholds_cmd)
