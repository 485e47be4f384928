"""``ctxpatch report``: every session of a projects folder, real and replayed, in dollars
(``usage.report``); printing and exit codes go through ``ctxpatch.cli.output``."""

from __future__ import annotations

import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from ctxpatch.cli.options import JsonOpt, with_codes
from ctxpatch.cli.output import emit_json, envelope, err, handle, out
from ctxpatch.errors import NotFound, UsageError


def parse_since(value: str) -> datetime:
    """``YYYY-MM-DD`` (UTC midnight) or ``Nd`` (N days ago)."""
    m = re.fullmatch(r"(\d+)d", value.strip())
    if m:
        return datetime.now(UTC) - timedelta(days=int(m.group(1)))
    try:
        return datetime.strptime(value.strip(), "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise UsageError(
            f"--since {value}",
            why="expected a date YYYY-MM-DD or a number of days like 7d",
            hint="e.g. --since 2026-11-01 or --since 30d",
        ) from None


def check_plot_path(plot: Path) -> None:
    """A --plot FILE whose folder is missing is refused before any work."""
    folder = plot.expanduser().resolve().parent
    if not folder.is_dir():
        raise UsageError(
            f"--plot {plot}",
            why=f"the folder {folder} does not exist",
            hint="create the folder first, or give a path in an existing one",
        )


def report_cmd(
    projects: Annotated[
        Path | None,
        typer.Option(
            "--projects", help="Claude Code's projects folder (default ~/.claude/projects)."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only sessions modified since YYYY-MM-DD or N days ago (7d)."),
    ] = None,
    project: Annotated[
        str | None, typer.Option(help="Only project folders whose name contains this.")
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices", help="A price file (TOML/JSON) over the built-in table (CTXPATCH_PRICES)."
        ),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option(help="Worker processes (default: the CPU count).")
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Replay every session, ignoring cached replays.")
    ] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a picture of the report to FILE.png.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Every session: compactions that happened, the engine's replay without and with ctxpatch
    (as `simulate --compare`), cost in US dollars, and what the ledger saw the API clear and bill.

    "With ctxpatch" is what ctxpatch installs for the session's Claude Code version: the
    `patched` replay for a cli.js build (`ctxpatch apply`), `server_clearing` for a native build
    (the gateway, `ctxpatch run`); the "with" column says which.

    The CLAUDE_CTX_CLEAR_* knobs of this environment are the "with ctxpatch" ones. The ledger is
    what `ctxpatch gateway`/`run` wrote (CTXPATCH_LEDGER=0 turns it off). Replays are cached by
    file, size and mtime in the cache folder.

    Example: ctxpatch report --since 30d --plot report.png
    """

    def body() -> int:
        from usage import ledger as ledger_mod
        from usage import report as rep
        from usage.prices import load_table

        table = load_table(prices)  # a bad price file is a usage error before any work
        if plot is not None:
            check_plot_path(plot)
        if jobs is not None and jobs < 1:
            raise UsageError(f"--jobs {jobs}", why="must be at least 1", hint="e.g. --jobs 2")
        when = parse_since(since) if since else None
        folder = (projects or Path("~/.claude/projects")).expanduser()
        if not folder.is_dir():
            raise NotFound(
                f"no projects folder at {folder}",
                why="it does not exist or is not a folder",
                hint="pass Claude Code's projects folder with --projects DIR",
            )
        files = rep.find_sessions(folder, when, project)
        from engine.replay.knobs import parse_knobs

        knobs = parse_knobs(process_env=os.environ)  # the knobs of this environment, both sides
        bar = None
        if sys.stderr.isatty() and files:
            import click

            bar = click.progressbar(length=len(files), label="replaying", file=sys.stderr)
            bar.__enter__()
        try:
            numbers, skipped, counts = rep.replay_all(
                files,
                knobs,
                jobs or os.cpu_count() or 1,
                use_cache=not no_cache,
                progress=bar.update if bar is not None else None,
            )
        finally:
            if bar is not None:
                bar.__exit__(None, None, None)
        led = ledger_mod.read_ledger()
        by_session = rep.ledger_by_session(led.entries)
        results = [rep.session_result(n, table, by_session.get(n.session)) for n in numbers]
        tot = rep.totals(results)
        if plot is not None:
            from usage.plot import plot_report

            plot_report(results, tot, plot, table)
            err(f"plot written to {plot}")
        context = {
            "totals": tot,
            "skipped": [{"file": s.file, "why": s.why} for s in skipped],
            "prices": table.describe(),
            "clear_env": dict(knobs.clear_env),
            "prune_env": dict(knobs.prune_env),
            "replays": counts,
            "ledger": {
                "files": [str(p) for p in led.files],
                "entries": len(led.entries),
                "unreadable_lines": led.skipped,
            },
        }
        if as_json:
            emit_json(envelope(0, results, **context), indent=1)
        else:
            out(rep.render(results, tot, skipped, table))
        return 0

    raise typer.Exit(handle(body, as_json))


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""
    app.command("report", help=with_codes(report_cmd, "report"))(report_cmd)
