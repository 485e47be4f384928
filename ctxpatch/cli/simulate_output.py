"""What ``ctxpatch simulate`` prints: notes and warnings on stderr, the replays on stdout (text,
or one JSON document) with their cost in dollars, and the --plot file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxpatch.cli.modelargs import DEFAULT_PROFILE
from ctxpatch.cli.output import emit_json, envelope, err, out
from ctxpatch.errors import UsageError

if TYPE_CHECKING:
    from ctxpatch.cli.simulate_options import SimulateArgs
    from engine.replay.knobs import Knobs
    from engine.replay.session import SessionReport
    from engine.transcript import Transcript
    from usage.prices import PriceTable


def notes(tr: Transcript, warnings: list[str], no_version: bool) -> None:
    """The transcript's warnings (text output only), then what was assumed or skipped."""
    for w in warnings:
        err(f"warning: {w}")
    if no_version:
        err(f"note: the transcript names no version; modelling {DEFAULT_PROFILE}")
    if tr.unknown_types:
        err(f"note: unknown record types counted and skipped: {tr.unknown_types}")


def knob_warnings(knobs: Knobs) -> None:
    """A clearing knob the patched Claude Code would ignore (and replace by its default)."""
    for problem in knobs.problems():
        err(f"warning: {problem}")


def plot(report: SessionReport, path: Path) -> None:
    from engine.replay.report import plot_simulations

    try:
        plot_notes = plot_simulations(list(report.simulations), path)
    except OSError as e:
        raise UsageError(
            f"--plot {path}", why=e.strerror or str(e), hint="choose a writable path"
        ) from None
    err(f"plot written to {path}")
    for note in plot_notes:
        err(f"note: {note}")


def show(
    tr: Transcript, report: SessionReport, table: PriceTable, a: SimulateArgs, warnings: list[str]
) -> int:
    """Print the replays (``--compare``: side by side) and their dollars; exit code 0."""
    from engine.replay.report import compare_summary, render_compare, render_simulation
    from usage.money import simulation_dollars
    from usage.report import with_scenario

    sims = list(report.simulations)
    vs_recorded = report.vs_recorded
    unpatched = report.of("unpatched")
    extra: dict[str, Any] = {}
    if report.tokenizer is not None:
        extra["tokenizer"] = report.tokenizer
    money = simulation_dollars(tr, sims, table)
    compare = a.compare
    # what ctxpatch installs for the session's version (usage.report.with_scenario): patched
    # for a cli.js build (`ctxpatch apply`), server_clearing for a native one (the gateway)
    installed = with_scenario(tr.version)
    if a.as_json:
        if compare:
            # what ctxpatch installs against unpatched, then each
            chosen = report.of(installed)
            assert chosen is not None
            extra["with_scenario"] = installed
            extra["comparison"] = {
                **compare_summary(sims[0], chosen),
                "usd_saved": money.saved(sims[0].scenario, installed),
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
    out(render_compare(sims) if compare else render_simulation(sims[0], a.all_requests))
    out(money.render(installed if compare else None))
    if compare and installed != "patched":
        out(
            f"(Claude Code {tr.version} is a native build: ctxpatch adds server-side clearing "
            "through the gateway, `ctxpatch run`, so server_clearing is what it installs; "
            "patched adds the text prune only `ctxpatch apply` puts into a cli.js build)"
        )
    if vs_recorded is not None:
        out(
            ("\nunpatched " if compare else "\n")
            + "vs recorded:"
            + ("" if vs_recorded else " the same tokens_sent and cache breaks")
        )
        if vs_recorded:
            out("\n".join("  " + n for n in vs_recorded))
    if report.tokenizer is not None:
        t = report.tokenizer
        out(
            f"tokenizer ({t['encoding']}, estimate): chars/4 {t['chars4_tokens']:,} vs "
            f"BPE {t['bpe_tokens']:,} (×{t['bpe_per_chars4']})"
        )
    return 0
