"""Record every command's output into a folder, to compare two checkouts byte for byte.

    python3 scripts/golden_outputs.py OUT_DIR [--shared DIR]
    diff -r OUT_BEFORE OUT_AFTER

Runs the command line of the checkout this script lives in (``ctxpatch.cli`` when that package
exists, else ``patcher.cli``) as subprocesses: status/check/apply/revert/inspect --json on copies
of fixtures/cli_js, inspect of the native fixture, simulate (every scenario, --compare) and
thresholds --json on the embedded session and a few shared sessions (--shared or CTXPATCH_SHARED,
when set), simulate's knobs (options, --env, the process environment: the clearing policy's too),
price files and refusals, ``report`` over a projects folder of copies (fixed mtimes, its own
cache), the --help text of every command, and a few refusals. Each run is stored as one file holding its
exit code, stdout and stderr; the scratch folder's path is replaced by ``<W>`` and the checkout's
by ``<R>`` so two checkouts compare equal when they behave the same. Nothing is written into the
checkout. A refactoring that changes no behaviour leaves ``diff -r`` empty.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "cli_js"
EXAMPLE = ROOT / "examples" / "spotter-session.jsonl"
COMMANDS = (
    "apply",
    "check",
    "revert",
    "status",
    "verify",
    "simulate",
    "thresholds",
    "inspect",
    "regress",
    "gateway",
    "run",
    "mcp",
    "report",
    "shell-init",
    "recall",
)
SCENARIOS = ("recorded", "unpatched", "text_prune", "server_clearing", "patched", "oracle")
PRICES = """date = "2026-12-01"
[models."claude-opus-4-6"]
input = 4.0
cache_write_5m = 5.0
cache_write_1h = 8.0
cache_read = 0.4
output = 20.0
[models."claude-sonnet-4-5"]
input = 2.0
cache_write_5m = 2.5
cache_write_1h = 4.0
cache_read = 0.2
output = 10.0
"""


def cli_module() -> str:
    """The package holding this checkout's command line."""
    return "ctxpatch.cli" if (ROOT / "ctxpatch" / "cli" / "__init__.py").exists() else "patcher.cli"


class Recorder:
    def __init__(self, out: Path, work: Path) -> None:
        self.out = out
        self.work = work
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HOME": str(work / "home"),
            "XDG_CACHE_HOME": str(work / "home" / ".cache"),
            "COLUMNS": "100",
            "TERM": "dumb",
            "NO_COLOR": "1",
        }
        # the npm cache stays the user's one (tests fill it; nothing here downloads)
        self.env.setdefault("CTXPATCH_CACHE", str(Path.home() / ".cache" / "ctxpatch"))
        for name in list(self.env):
            if name.startswith(("CLAUDE_", "CTXPATCH_CLI_JS", "ANTHROPIC_")):
                del self.env[name]
        self.names: set[str] = set()

    def run(self, name: str, *args: str, cwd: Path | None = None, **env: str) -> None:
        assert name not in self.names, name
        self.names.add(name)
        code = f"import sys; sys.argv[0] = 'ctxpatch'; from {cli_module()} import main; main()"
        proc = subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=cwd or self.work,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=900,
        )
        text = f"$ ctxpatch {' '.join(args)}\nexit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        text = text.replace(str(self.work), "<W>").replace(str(ROOT), "<R>")
        (self.out / f"{name}.txt").write_text(text)
        print(f"{name}: exit {proc.returncode}", file=sys.stderr)


def fixture_runs(rec: Recorder) -> None:
    for js in sorted(FIXTURES.glob("*.js")):
        stem = js.stem
        scratch = rec.work / "fx" / stem
        scratch.mkdir(parents=True)
        target = scratch / "cli.js"
        shutil.copy2(js, target)
        backup = js.with_name(js.name + ".backup")
        if backup.exists():
            shutil.copy2(backup, scratch / "cli.js.backup")
        p = str(target)
        rec.run(f"fx-{stem}-1-check", "check", "--path", p, "--json")
        rec.run(f"fx-{stem}-2-inspect", "inspect", p, "--json")
        rec.run(f"fx-{stem}-3-apply", "apply", "--path", p, "--json")
        rec.run(f"fx-{stem}-4-check", "check", "--path", p, "--json")
        rec.run(f"fx-{stem}-4b-check-text", "check", "--path", p)
        rec.run(f"fx-{stem}-5-status", "status", "--json", CTXPATCH_CLI_JS=p)
        rec.run(f"fx-{stem}-6-apply-again", "apply", "--path", p, "--json", "--no-node-check")
        rec.run(f"fx-{stem}-7-inspect-patched", "inspect", p, "--json")
        rec.run(f"fx-{stem}-8-revert", "revert", "--path", p, "--json")
        rec.run(f"fx-{stem}-9-check", "check", "--path", p, "--json")
        same = target.read_bytes() == js.read_bytes()
        (rec.out / f"fx-{stem}-10-bytes.txt").write_text(f"reverted byte-identical: {same}\n")
    native = FIXTURES / "native-2.1.113"
    if native.exists():
        rec.run("native-inspect", "inspect", str(native), "--json")
        rec.run("native-check", "check", "--path", str(native), "--json")
        rec.run("native-apply", "apply", "--path", str(native), "--json")


def session_runs(rec: Recorder, sessions: list[tuple[str, Path]]) -> None:
    for label, path in sessions:
        for scenario in SCENARIOS:
            rec.run(
                f"sim-{label}-{scenario}", "simulate", str(path), "--scenario", scenario, "--json"
            )
        rec.run(f"sim-{label}-compare", "simulate", str(path), "--compare", "--json")
    label, path = sessions[0]
    rec.run(f"sim-{label}-text", "simulate", str(path), "--compare")
    rec.run(
        f"sim-{label}-knobs",
        "simulate",
        str(path),
        "--scenario",
        "patched",
        "--keep",
        "2",
        "--clear-trigger",
        "30000",
        "--clear-keep",
        "2",
        "--clear-at-least",
        "1000",
        "--clear-exclude-tools",
        "Read",
        "--clear-tool-inputs",
        "1",
        "--clear-step",
        "3",
        "--microcompact",
        "on",
        "--json",
    )
    rec.run(f"sim-{label}-disable", "simulate", str(path), "--compare", "--clear-disable", "--json")
    rec.run(
        f"sim-{label}-env",
        "simulate",
        str(path),
        "--compare",
        "--env",
        "CLAUDE_CTX_CLEAR_KEEP=1",
        "--profile",
        "2.1.112",
        "--all-requests",
        "--json",
    )
    rec.run(f"sim-{label}-tiktoken", "simulate", str(path), "--tokenizer", "tiktoken", "--json")
    rec.run(
        f"sim-{label}-strict", "simulate", str(path), "--profile", "9.9.9", "--strict", "--json"
    )
    prices = rec.work / "prices.toml"
    prices.write_text(PRICES)
    rec.run(f"sim-{label}-prices", "simulate", str(path), "--compare", "--prices", str(prices))
    rec.run(
        f"sim-{label}-prices-json",
        "simulate",
        str(path),
        "--scenario",
        "patched",
        "--json",
        CTXPATCH_PRICES=str(prices),
    )
    rec.run(
        f"sim-{label}-policy-fixed",
        "simulate",
        str(path),
        "--compare",
        "--env",
        "CLAUDE_CTX_CLEAR_POLICY=fixed",
        "--json",
    )
    rec.run(
        f"sim-{label}-policy-env",
        "simulate",
        str(path),
        "--scenario",
        "server_clearing",
        "--json",
        CLAUDE_CTX_CLEAR_CEILING="60000",
        CLAUDE_CTX_CLEAR_PATIENCE="2",
        CLAUDE_CTX_CLEAR_KEEP="4",
        CLAUDE_CTX_CLEAR_WINDOW_GUARD="1",
        CLAUDE_TEXT_PRUNE_KEEP="1",
    )
    rec.run(
        f"sim-{label}-policy-bad",
        "simulate",
        str(path),
        "--scenario",
        "patched",
        "--clear-keep",
        "1",
        CLAUDE_CTX_CLEAR_POLICY="cheap",
        CLAUDE_CTX_CLEAR_CEILING="0",
        CLAUDE_CTX_CLEAR_TRIGGER="lots",
    )
    rec.run(f"sim-{label}-oracle-text", "simulate", str(path), "--scenario", "oracle")
    rec.run(
        f"sim-{label}-unpatched-all",
        "simulate",
        str(path),
        "--scenario",
        "unpatched",
        "--all-requests",
        "--microcompact",
        "off",
    )
    rec.run(f"sim-{label}-recorded-text", "simulate", str(path))
    for name, option in (
        ("keep0", ("--keep", "0")),
        ("threshold-neg", ("--threshold", "-1")),
        ("clear-step0", ("--clear-step", "0")),
        ("clear-keep-neg", ("--clear-keep", "-1")),
        ("clear-trigger0", ("--clear-trigger", "0")),
        ("env-pair", ("--env", "NOEQUALS")),
        ("model-bad", ("--model", "gpt-4")),
        ("profile-bad", ("--profile", "nope")),
        ("prices-bad", ("--prices", str(rec.work / "nope.toml"))),
        ("plot-folder", ("--plot", str(rec.work / "no" / "dir" / "x.png"))),
    ):
        rec.run(f"sim-{label}-refuse-{name}", "simulate", str(path), *option, "--json")


def misc_runs(rec: Recorder) -> None:
    rec.run("root-help", "--help")
    rec.run("version", "--version")
    for cmd in COMMANDS:
        rec.run(f"help-{cmd}", cmd, "--help")
    rec.run("thresholds-default", "thresholds", "--json", "--profile", "2.1.112")
    rec.run(
        "thresholds-eras",
        "thresholds",
        "--json",
        "--profile",
        "2.0.76",
        "--profile",
        "2.1.39",
        "--profile",
        "2.1.330",
        "--model",
        "claude-opus-4-6[1m]",
        "--pct-override",
        "50",
        "--env",
        "DISABLE_AUTO_COMPACT=1",
    )
    rec.run("thresholds-text", "thresholds", "--profile", "2.1.39")
    rec.run("thresholds-strict", "thresholds", "--json", "--profile", "9.9.9", "--strict")
    rec.run("thresholds-bad", "thresholds", "--json", "--profile", "nope")
    rec.run("check-missing", "check", "--path", str(rec.work / "nope.js"), "--json")
    rec.run("inspect-missing", "inspect", str(rec.work / "nope.js"), "--json")
    rec.run("simulate-missing", "simulate", str(rec.work / "nope.jsonl"), "--json")
    bad = rec.work / "bad.jsonl"
    bad.write_text("{not json\n")
    rec.run("simulate-bad", "simulate", str(bad), "--json")
    rec.run(
        "simulate-bad-knob", "simulate", str(EXAMPLE), "--env", "CLAUDE_CTX_CLEAR_KEEP=x", "--json"
    )
    rec.run("status-none", "status", "--json", cwd=rec.work / "home")
    rec.run("run-nothing", "run", "--", "/nonexistent-command-xyz")


def report_runs(rec: Recorder, sessions: list[tuple[str, Path]]) -> None:
    """``report`` over a projects folder of copies (fixed mtimes, so the order is fixed)."""
    projects = rec.work / "projects"
    for i, (label, path) in enumerate(sessions[:3]):
        folder = projects / ("-home-u-" + ("alpha" if i % 2 == 0 else "beta"))
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{label}{''.join(path.suffixes)}"
        shutil.copy2(path, target)
        stamp = 1_790_000_000 + i * 3600
        os.utime(target, (stamp, stamp))
    broken = projects / "-home-u-beta" / "broken.jsonl"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text("{not json\n")
    os.utime(broken, (1_790_000_000 - 60, 1_790_000_000 - 60))
    p = str(projects)
    rec.run("report-json", "report", "--projects", p, "--no-cache", "--jobs", "1", "--json")
    rec.run("report-text", "report", "--projects", p, "--jobs", "1")
    rec.run("report-cached", "report", "--projects", p, "--jobs", "1", "--json")
    rec.run(
        "report-knobs",
        "report",
        "--projects",
        p,
        "--no-cache",
        "--jobs",
        "1",
        "--project",
        "alpha",
        "--since",
        "2020-01-01",
        "--json",
        CLAUDE_CTX_CLEAR_KEEP="1",
        CLAUDE_CTX_CLEAR_POLICY="fixed",
        CLAUDE_TEXT_PRUNE_KEEP="1",
    )
    rec.run("report-none", "report", "--projects", str(rec.work / "nope"), "--json")
    rec.run("report-since-bad", "report", "--projects", p, "--since", "last week", "--json")
    rec.run("report-jobs-bad", "report", "--projects", p, "--jobs", "0", "--json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "ctxpatch-golden-work"
    )
    parser.add_argument("--shared", type=Path, help="the shared folder (default: $CTXPATCH_SHARED)")
    parser.add_argument(
        "--quick", action="store_true", help="fixtures, help texts and the example only"
    )
    args = parser.parse_args()
    out: Path = args.out.resolve()
    work: Path = args.work.resolve()
    if ROOT in out.parents or ROOT in work.parents:
        parser.error("write outside the checkout")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    out.mkdir(parents=True)
    (work / "home").mkdir(parents=True)
    rec = Recorder(out, work)
    misc_runs(rec)
    fixture_runs(rec)
    sessions = [("example", EXAMPLE)]
    shared = args.shared or os.environ.get("CTXPATCH_SHARED")
    if shared and not args.quick:
        tx = Path(shared) / "transcripts"
        for label, rel in (
            ("short", "spotter/short.jsonl"),
            ("tool-heavy", "spotter/tool_heavy.jsonl"),
            ("subagent", "spotter/subagent.jsonl"),
            ("ccl-edge", "claude-code-log/edge_cases.jsonl"),
            ("ccl-repr", "claude-code-log/representative_messages.jsonl"),
        ):
            if (tx / rel).exists():
                sessions.append((label, tx / rel))
    session_runs(rec, sessions)
    report_runs(rec, sessions)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{len(rec.names)} runs in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
