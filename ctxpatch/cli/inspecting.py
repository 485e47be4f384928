"""``ctxpatch inspect`` and ``ctxpatch regress``: real builds compared with the engine (drift).

Native builds are read (``inspect``, ``regress --native``), never patched. Printing and exit
codes go through ``ctxpatch.cli.output``.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ctxpatch.cli.options import JsonOpt, StrictOpt, with_codes
from ctxpatch.cli.output import emit_json, envelope, err, handle, out
from ctxpatch.errors import ExitCode, NotFound, UsageError


class PackageChoice(StrEnum):
    cc = "cc"
    sdk = "sdk"
    both = "both"


def register(app: typer.Typer) -> None:
    """Add ``inspect`` and ``regress`` to ``app``."""
    app.command("inspect", help=with_codes(inspect_cmd, "inspect"))(inspect_cmd)
    app.command("regress", help=with_codes(regress_cmd, "regress"))(regress_cmd)


def inspect_cmd(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="cli.js or its package folder. Default: as `ctxpatch check` "
            "(CTXPATCH_CLI_JS, local node_modules upward, then the global install).",
            show_default=False,
            readable=False,  # unreadable: our refusal (3), not a usage error
        ),
    ] = None,
    as_json: JsonOpt = False,
    strict: StrictOpt = False,
) -> None:
    """Show the compaction constants a cli.js really uses and compare them with the engine.

    Also reads native builds (2.1.113 on): a `claude` executable or the installed package folder (@anthropic-ai/claude-code with its claude-code-<platform> package, claude-agent-sdk with claude-agent-sdk-<platform>); the JavaScript is read out of the binary, which is never changed.

    Reads the Claude Code version, sha256 and call-site shape, then follows the functions that compute the thresholds, the micro-compaction and the token estimate to the constants they use (never by searching for a value), and lists every difference from the engine's profile for that version (drift). A patched file is read through the original its markers record.

    Example: ctxpatch inspect node_modules/@anthropic-ai/claude-code/cli.js --json
    """
    raise typer.Exit(handle(lambda: _inspect(path, as_json, strict), as_json))


def _inspect(path: Path | None, as_json: bool, strict: bool) -> int:
    from patcher import bundle, markers, snippet
    from patcher.discover import environ, targets
    from patcher.inspect import Report, render
    from patcher.inspection import CliJsFile, inspect_cli_js
    from patcher.native import inspect as native

    if path is None:
        installs, _ = targets(None, environ(), Path.cwd())
        found = None if installs else native.discover()  # a native `claude` on PATH
        if installs:
            path = installs[0].path
        elif found is not None:
            path = found
        else:
            raise NotFound.no_cli_js(
                "ctxpatch inspect node_modules/@anthropic-ai/claude-code/cli.js"
            )
    if native.is_native(path):
        return _inspect_native(path, as_json, strict)
    b = bundle.load(path)
    data, note = b.data, ""
    marks = markers.read(data, snippet.sha())
    if marks.state.value in ("PATCHED", "OUTDATED"):
        original = markers.strip(data)
        if original is not None:
            data, note = original, "patched by ctxpatch: inspected the original it records"
    package = f"{b.package.name}@{b.package.version}" if b.package else None
    report = inspect_cli_js(data, b.version, CliJsFile(str(b.path), package, note))
    code = report.exit_code()
    if as_json:
        emit_json(envelope(code, [report.to_json()]))
    else:
        out(f"{b.path}" + (f"  ({package})" if package else ""))
        if note:
            out(f"note: {note}")
        assert isinstance(report.findings, Report)  # the cli.js inspector's
        out(render(report.findings, report.comparison))
    return code


def _inspect_native(path: Path, as_json: bool, strict: bool) -> int:
    from patcher.native import inspect as native

    rep = native.inspect_path(path)
    code = rep.exit_code(strict)
    if as_json:
        emit_json(envelope(code, [rep.to_json()], strict=strict))
    else:
        out(native.render(rep))
        if strict and rep.warnings:
            err("error: --strict: the version is newer than every engine profile")
    return code


def regress_cmd(
    versions: Annotated[
        str | None,
        typer.Option(
            "--versions",
            help="Versions or ranges, e.g. 2.1.40..2.1.68 or "
            "2.0.76,2.1.7 (Claude Code numbers; for the SDK they map 2.0.N→0.1.N, "
            "2.1.N→0.2.N; SDK numbers are accepted too).",
            show_default=False,
        ),
    ] = None,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Every published version that can take the "
            "patch (cc 1.0.60-2.1.112, sdk 0.0.4-0.2.112).",
        ),
    ] = False,
    sample: Annotated[
        int | None,
        typer.Option("--sample", help="N versions spread evenly over --all.", show_default=False),
    ] = None,
    package: Annotated[PackageChoice, typer.Option("--package", help="Which npm package.")] = (
        PackageChoice.cc
    ),
    json_file: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Write the results as JSON to FILE (rewritten after every version).",
            show_default=False,
            readable=False,  # unreadable: our refusal (3), not a usage error
        ),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Versions run in parallel.")] = 1,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Skip the patch cycle of versions that "
            "already passed (or were rightly refused) in the --json "
            "FILE of an earlier run; their drift is read again.",
        ),
    ] = False,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Keep only cli.js and package.json of "
            "the versions this run downloads (saves disk).",
        ),
    ] = False,
    no_node_check: Annotated[
        bool, typer.Option("--no-node-check", help="Skip node's ESM check of each patched file.")
    ] = False,
    native: Annotated[
        bool,
        typer.Option(
            "--native",
            help="Native builds (cc 2.1.113+, sdk 0.2.113+): fetch each version's linux-x64 "
            "platform package (230-380 MB; the 3 most recently used are kept) and run inspect "
            "on the JavaScript inside; never patched; one version at a time (--jobs, --resume "
            "and --prune do not apply). Default versions: 2.1.113, 2.1.217, 2.1.330.",
        ),
    ] = False,
) -> None:
    """Run the patch life cycle on published versions and report drift from the engine.

    Each version is downloaded once with npm pack into ~/.cache/ctxpatch (CTXPATCH_CACHE overrides), copied to a scratch folder, then: locate → apply → check → apply again (no change) → node ESM check of the patched file → revert (byte-identical) → inspect drift. With no version option it runs the per-shape sample that CI uses. Prints a matrix on stdout and progress on stderr.

    Example: ctxpatch regress --versions 2.1.40..2.1.68 --package both --json out.json -j 2
    """
    packages = ["cc", "sdk"] if package is PackageChoice.both else [package.value]
    raise typer.Exit(
        handle(
            lambda: _regress(
                packages,
                versions,
                all_,
                sample,
                json_file,
                jobs,
                resume,
                prune,
                no_node_check,
                native,
            ),
            False,
            interrupted="results so far are in the --json file" if json_file else "",
        )
    )


def _regress(
    packages: list[str],
    versions: str | None,
    all_: bool,
    sample: int | None,
    json_file: Path | None,
    jobs: int,
    resume: bool,
    prune: bool,
    no_node_check: bool,
    native: bool,
) -> int:
    from patcher import regress
    from patcher.native import regress as native_regress

    if jobs < 1:
        raise UsageError("--jobs needs a positive number", hint="e.g. --jobs 2")
    if resume and json_file is None:
        raise UsageError(
            "--resume needs --json FILE", hint="give the --json FILE of the earlier run"
        )
    select = native_regress.select if native else regress.select
    selected = select(packages, versions=versions, all_=all_, sample=sample)
    if not selected:
        raise UsageError("no published version matches", hint="see ctxpatch regress --help")
    on_done, close = _progress(len(selected))
    try:
        if native:
            result = native_regress.run(selected, on_done=on_done)
            if json_file is not None:
                result.write(json_file)
        else:
            result = regress.run(
                selected,
                workers=jobs,
                prune=prune,
                node_check=not no_node_check,
                json_path=json_file,
                resume=resume,
                on_done=on_done,
            )
    finally:
        close()
    outcomes = list(result.outcomes.values())
    out(regress.matrix(outcomes))
    extra = regress.details(outcomes)
    if extra:
        out("")
        out(extra)
    s = result.summary()
    counts = ", ".join(f"{n} {k}" for k, n in s["results"].items() if n)
    err(f"\n{s['versions']} versions: {counts}; {s['with_drift']} with drift")
    return 0 if s["ok"] else int(ExitCode.CHANGE_NEEDED)


def _progress(total: int):
    """A rich progress bar on a terminal; one line per version otherwise (logs, CI)."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        bar = Progress(
            TextColumn("regress"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=Console(stderr=True),
            transient=True,
        )
        task = bar.add_task("", total=total)
        bar.start()

        def on_done(o, done: int, _total: int) -> None:
            bar.update(task, completed=done, description=f"{o.key} {o.result}")

        return on_done, bar.stop

    def on_line(o, done: int, _total: int) -> None:
        drift = f", {len(o.drift)} drift" if o.drift else ""
        err(f"[{done}/{_total}] {o.key}: {o.result}{drift} ({o.seconds:.1f}s)")

    return on_line, lambda: None
