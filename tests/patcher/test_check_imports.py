"""``ctxpatch check`` runs at every start of Claude Code (issue #10: <= 100 ms for the whole
command, ``bench/bench_patcher.py``): its path imports none of the heavy modules the other
commands need. Not a timing test: it pins what is imported, so a new import on the path is
caught here with its name instead of as a slower bench."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from patcher import ops

# Each costs check milliseconds: typer/click/rich (the option parser), dataclasses (inspect, ast,
# dis, tokenize), tempfile (shutil, random, bz2, lzma), importlib.resources (zipfile), the
# writer, the planner and tree-sitter (only an unpatched file needs them), the engine's models.
NOT_ON_CHECKS_PATH = (
    "typer",
    "click",
    "rich",
    "dataclasses",
    "inspect",
    "tempfile",
    "shutil",
    "importlib.resources",
    "zipfile",
    "threading",
    "subprocess",
    "patcher.ops",
    "patcher.plan",
    "patcher.callsite",
    "patcher.selfcheck",
    "tree_sitter",
    "esprima",
    "engine.profiles",
)

_RUN = """
import sys
from ctxpatch.cli import main
sys.argv = ["ctxpatch", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("\\n" + repr(sorted(sys.modules)), file=sys.stderr)
"""


def _check(cli: Path, *args: str) -> tuple[str, list[str]]:
    """stdout and the modules imported by ``ctxpatch check --path cli *args``, without site
    (this machine's site hooks import modules of their own)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-S", "-c", _RUN, "check", "--path", str(cli), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cli.parent,
        check=False,
    )
    modules = ast.literal_eval(done.stderr.strip().splitlines()[-1])
    return done.stdout, modules


def test_check_of_a_patched_file_imports_only_what_it_reads_with(fixture_copy) -> None:
    cli = fixture_copy("rq-2.1.112.js")
    assert ops.apply_file(cli, node_check=False).state == "PATCHED"
    for args in ((), ("--json",)):
        out, modules = _check(cli, *args)
        assert out.startswith("PATCHED") or json.loads(out)["results"][0]["state"] == "PATCHED"
        assert "patcher.check" in modules and "patcher.markers" in modules  # it did run
        heavy = [
            m for m in modules if m.split(".")[0] in NOT_ON_CHECKS_PATH or m in NOT_ON_CHECKS_PATH
        ]
        assert heavy == [], f"check imports {heavy}: keep them off its path (lazy imports)"
