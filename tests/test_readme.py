"""Every command in README.md runs as written.

The README's ``sh`` blocks are read line by line; each command line is run exactly as it is
written (``bash -c LINE``, comments and all) with ``ctxpatch`` on ``PATH`` meaning this checkout,
in the place a reader would run it: the ``cli.js`` block in a scratch project holding a
``cli.js``, the gateway block with a stand-in ``claude``, the simulate block from the repository
root. A command the README gains without a runner here fails the test, so the README cannot
document a command nobody ran. The two set-up commands (``scripts/demo.sh``, ``.ci/run``) and the
install and gate lines they run are proven in a fresh venv by ``tests/test_fresh_machine.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, copy_fixture

README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"
DEMO = ROOT / "scripts" / "demo.sh"


def sh_lines() -> list[str]:
    """Every non-blank line of every ```sh block of the README, in order."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def command(line: str) -> str:
    """The command of a README line, without its trailing comment."""
    return re.split(r"\s+#\s", line, maxsplit=1)[0].strip()


# The lines proven by the fresh-machine test: the two set-up commands, and what .ci/run runs.
SETUP = {"bash scripts/demo.sh", "bash .ci/run"}
PIP_USER = "pip install ."
CLI_JS = (
    "ctxpatch status",
    "ctxpatch apply",
    "ctxpatch check",
    "ctxpatch verify",
    "ctxpatch revert",
)


def ci_run_covers(cmd: str) -> bool:
    """A development line of the README that .ci/run runs itself (each part of a ``&&`` chain)."""
    script = CI_RUN.read_text(encoding="utf-8")
    if cmd.startswith("pip install -e "):
        # .ci/run: python3 -m pip install ... -e '<the same extras>'
        return cmd.removeprefix("pip install -e ") in script
    lines = script.splitlines()
    # .ci/run passes its own arguments on: `python3 -m pytest "$@"` is the README's line
    return all(part.strip() in lines or f'{part.strip()} "$@"' in lines for part in cmd.split("&&"))


def test_every_readme_command_has_a_runner() -> None:
    lines = sh_lines()
    assert [command(x) for x in lines[:2]] == ["bash scripts/demo.sh", "bash .ci/run"]
    unknown = []
    for line in lines:
        cmd = command(line)
        known = (
            cmd in SETUP
            or cmd == PIP_USER
            or cmd.startswith(CLI_JS)
            or cmd.startswith(("ctxpatch run -- claude", "ctxpatch gateway --port"))
            or cmd.startswith(("ctxpatch thresholds", "ctxpatch simulate"))
            or ci_run_covers(cmd)
        )
        if not known:
            unknown.append(line)
    assert unknown == [], "README commands no test runs: add a runner in tests/test_readme.py"


def test_the_dev_lines_are_what_ci_run_runs() -> None:
    dev = [
        command(x)
        for x in sh_lines()
        if command(x).startswith(("pip install -e", "python3 -m", "ruff"))
    ]
    assert dev and all(ci_run_covers(c) for c in dev), dev
    assert "python3 -m pytest" in dev


# ------------------------------------------------------------------ running them as written


@pytest.fixture
def user(tmp_path: Path) -> dict[str, str]:
    """The environment of a reader: ``ctxpatch`` is this checkout, an empty HOME, no global npm
    install, none of the caller's ctxpatch or knob settings."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "ctxpatch"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m patcher "$@"\n')
    shim.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CTXPATCH_", "CLAUDE_CTX_CLEAR_", "CLAUDE_TEXT_PRUNE_", "ANTHROPIC_"))
    }
    env.update(
        PATH=f"{bin_dir}:{env.get('PATH', '')}",
        PYTHONPATH=str(ROOT),
        HOME=str(home),
        CTXPATCH_NPM_ROOT="",
        CTXPATCH_CACHE=str(Path.home() / ".cache" / "ctxpatch")
        if not os.environ.get("CTXPATCH_CACHE")
        else os.environ["CTXPATCH_CACHE"],
    )
    return env


def run_line(
    line: str, cwd: Path, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def cli_js_lines() -> list[str]:
    return [x for x in sh_lines() if command(x).startswith(CLI_JS)]


def test_the_cli_js_block_runs_as_written(tmp_path: Path, user: dict[str, str]) -> None:
    """status, apply, check, revert in a project holding a cli.js (the 2.1.112 fixture), in the
    README's order; verify needs a real Claude Code: test_the_cli_js_block_with_verify."""
    project = tmp_path / "project"
    cli = copy_fixture("s6-2.1.112.js", project / "node_modules" / "@anthropic-ai" / "claude-code")
    original = cli.read_bytes()
    codes = {}
    for line in cli_js_lines():
        if command(line) == "ctxpatch verify":
            continue
        r = run_line(line, project, user)
        codes[command(line)] = r.returncode
        assert r.returncode == 0, (line, r.stdout, r.stderr)
        if command(line) == "ctxpatch check":
            assert "PATCHED" in r.stdout and "UNPATCHED" not in r.stdout
    assert set(codes) == {"ctxpatch status", "ctxpatch apply", "ctxpatch check", "ctxpatch revert"}
    assert cli.read_bytes() == original  # revert, the last line, gave back every byte


@pytest.mark.real
@pytest.mark.e2e
def test_the_cli_js_block_with_verify(tmp_path: Path, user: dict[str, str]) -> None:
    """The whole block, verify included, on the real Claude Code 2.1.112 (the npm-pack cache)."""
    from conftest import need

    from patcher import npmcache

    need("node", "verify runs the real cli.js")
    project = tmp_path / "project"
    shutil.copytree(
        npmcache.package_dir("cc", "2.1.112"),
        project / "node_modules" / "@anthropic-ai" / "claude-code",
    )
    for line in cli_js_lines():
        r = run_line(line, project, user, timeout=300)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        if command(line) == "ctxpatch verify":
            assert r.stdout.startswith("PASS"), r.stdout


def test_the_gateway_block_runs_as_written(tmp_path: Path, user: dict[str, str]) -> None:
    """``ctxpatch run -- claude --continue`` with a stand-in ``claude`` that reports the base URL
    it was given; ``ctxpatch gateway --port 8787`` prints its URL and stops on Ctrl-C (SIGINT)."""
    bin_dir = Path(user["PATH"].split(":")[0])
    claude = bin_dir / "claude"
    claude.write_text('#!/bin/sh\necho "base=$ANTHROPIC_BASE_URL args=$*"\nexit 7\n')
    claude.chmod(0o755)
    lines = [
        x for x in sh_lines() if command(x).startswith(("ctxpatch run --", "ctxpatch gateway"))
    ]
    assert len(lines) == 2
    r = run_line(lines[0], tmp_path, user)
    assert r.returncode == 7, (r.stdout, r.stderr)  # the command's own exit code
    assert re.search(r"base=http://127\.0\.0\.1:\d+ args=--continue", r.stdout), r.stdout
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {lines[1]}"],
        cwd=tmp_path,
        env=user,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if not first:  # 8787 taken on this machine: the documented refusal, exit 3
            assert proc.wait(timeout=30) == 3, proc.stderr.read() if proc.stderr else ""
            return
        assert first.strip() == "http://127.0.0.1:8787"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_simulate_block_runs_as_written(user: dict[str, str]) -> None:
    lines = [
        x for x in sh_lines() if command(x).startswith(("ctxpatch thresholds", "ctxpatch simulate"))
    ]
    assert len(lines) == 3
    out = {}
    for line in lines:
        r = run_line(line, ROOT, user)
        assert r.returncode == 0, (line, r.stderr)
        out[command(line)] = r.stdout
    thresholds = out["ctxpatch thresholds -p 2.1.39 -p 2.0.76"]
    assert "167,000" in thresholds and "155,000" in thresholds  # what the comment promises
    compare = out["ctxpatch simulate examples/spotter-session.jsonl --compare"]
    # the figures the README quotes from this run
    readme = README.read_text(encoding="utf-8")
    quoted = re.search(r"^patched vs unpatched: .*$", readme, re.M)
    assert quoted is not None and quoted.group(0) in compare
    # and the introduction's figures (they had gone stale: 55%, $6.80 of $11.20)
    saved = re.search(r"^patched vs unpatched: .* tokens saved \(([\d.]+)%\)", compare, re.M)
    dollars = re.search(r"unpatched \$([\d.]+),.* patched \$([\d.]+),", compare)
    assert saved is not None and dollars is not None, compare
    intro = " ".join(readme.split("## ")[0].split())
    unpatched, patched = dollars.groups()
    assert f"sends {round(float(saved.group(1)))}% fewer input tokens" in intro
    assert f"costs ${patched} instead of ${unpatched}" in intro


def test_the_package_summary_says_what_the_readme_says() -> None:
    """``pip show ctxpatch``'s summary is pyproject's description: the product of today (the
    0.1.0 one said "prune old conversation text after micro-compaction")."""
    import tomllib

    summary = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]
    intro = README.read_text(encoding="utf-8").split("## ")[0]
    for words in ("server-side tool-result clearing", "gateway", "thinking-safe text prune"):
        assert words in summary and words in intro, words
    assert "cli.js" in summary and "native" in summary and "simulator" in summary


def test_links_stay_in_the_repo_and_resolve() -> None:
    """README and docs/ link only to files of this repository (no ../shared), and each exists."""
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text, page
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "#")):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.is_relative_to(ROOT) and path.exists(), (page.name, target)
