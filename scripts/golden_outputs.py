"""Record every command's output into a folder, to compare two checkouts byte for byte.

    python3 scripts/golden_outputs.py OUT_DIR [--shared DIR]
    diff -r OUT_BEFORE OUT_AFTER

Runs the command line of the checkout this script lives in (``ctxpatch.cli`` when that package
exists, else ``patcher.cli``) as subprocesses: status/check/apply/revert/inspect --json on copies
of fixtures/cli_js, inspect of the native fixture, simulate (every scenario, --compare) and
thresholds --json on the embedded session and a few shared sessions (CTXPATCH_SHARED, when set),
the --help text of every command, and a few refusals. Each run is stored as one file holding its
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
)
SCENARIOS = ("recorded", "unpatched", "text_prune", "server_clearing", "patched")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "ctxpatch-golden-work"
    )
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
    shared = os.environ.get("CTXPATCH_SHARED")
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
    shutil.rmtree(work, ignore_errors=True)
    print(f"{len(rec.names)} runs in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
