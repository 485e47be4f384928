"""``ctxpatch shell-init``'s code, ``run --fallback`` and the rc-line advice (the interactive
bash/zsh proof is tests/e2e/test_shell_init_tmux.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need

from ctxpatch.cli import quick_run_args
from gateway.shell_init import (
    find_lines,
    init_line,
    script,
    setup_advice,
    undo_advice,
)

ROOT = Path(__file__).resolve().parents[1]
CTXPATCH = [sys.executable, "-m", "ctxpatch"]
ODD = ["/opt/it's here/ctxpatch"]  # a quote and a space in the path
CHILD = "import os, sys; print(os.environ.get('ANTHROPIC_BASE_URL', 'none')); sys.exit(7)"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_posix_code_parses_and_quotes_the_path(shell: str, tmp_path: Path) -> None:
    exe = need(shell, f"the {shell} code is checked with {shell} -n")
    code = script(shell, ODD)
    f = tmp_path / "init"
    f.write_text(code)
    r = subprocess.run([exe, "-n", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # the function runs ctxpatch by that exact path (defined, then printed by the shell itself)
    r = subprocess.run(
        [exe, "-c", f". {f}; typeset -f claude"], capture_output=True, text=True, check=True
    )
    assert "run --fallback -- claude" in r.stdout and "it" in r.stdout


def test_fish_code_parses_and_runs(tmp_path: Path) -> None:
    fish = need("fish", "the fish code is checked with fish --no-execute")
    f = tmp_path / "init.fish"
    f.write_text(script("fish", ODD))
    r = subprocess.run([fish, "--no-execute", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # sourced for real: ctxpatch is not at ODD, so the function says so once and runs claude
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text('#!/bin/sh\necho plain "$@"\n')
    (bin_dir / "claude").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    r = subprocess.run(
        [fish, "--no-config", "-c", f"source {f}; claude --version"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.stdout == "plain --version\n"
    assert r.stderr.count("\n") == 1 and "is gone; running claude without the gateway" in r.stderr


def test_unknown_shell_is_a_usage_error() -> None:
    r = subprocess.run([*CTXPATCH, "shell-init", "tcsh"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert "unknown shell: 'tcsh'" in r.stderr and "bash, zsh, fish" in r.stderr


def test_quick_run_takes_only_the_exact_shell_init_form() -> None:
    assert quick_run_args(["run", "--fallback", "--", "claude", "-c"]) == ["claude", "-c"]
    assert quick_run_args(["run", "--fallback", "--"]) is None
    assert quick_run_args(["run", "--", "claude"]) is None
    assert quick_run_args(["run", "--fallback", "--log", "x", "--", "claude"]) is None


def _broken_env(tmp_path: Path) -> dict[str, str]:
    broken = tmp_path / "broken" / "aiohttp"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('aiohttp is broken here')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_BASE_URL",)}
    env["PYTHONPATH"] = f"{broken.parent}{os.pathsep}{ROOT}"
    return env


@pytest.mark.parametrize("fast", [True, False])
def test_run_fallback_runs_the_command_once_with_one_line(tmp_path: Path, fast: bool) -> None:
    """Both entry points (the shell function's fast path and typer's ``run --fallback``)."""
    args = (
        ["run", "--fallback", "--"]
        if fast
        else ["run", "--log", str(tmp_path / "l"), "--fallback", "--"]
    )
    r = subprocess.run(
        [*CTXPATCH, *args, sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        env=_broken_env(tmp_path),
    )
    assert r.returncode == 7  # the command's own code: it ran, once, without the gateway
    assert r.stdout == "none\n"
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("ctxpatch: the gateway could not start (aiohttp is broken here)")


def test_run_without_fallback_still_refuses(tmp_path: Path) -> None:
    r = subprocess.run(
        [*CTXPATCH, "run", "--", sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        env=_broken_env(tmp_path),
    )
    assert r.returncode not in (0, 7) and r.stdout == ""  # the command never ran


def test_fallback_with_a_working_gateway_goes_through_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_BASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [*CTXPATCH, "run", "--fallback", "--", sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 7 and r.stdout.startswith("http://127.0.0.1:"), r.stderr
    assert "could not start" not in r.stderr


def _home(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return {"HOME": str(tmp_path), "SHELL": "/usr/bin/zsh"}


def test_advice_names_the_exact_lines(tmp_path: Path) -> None:
    env = _home(
        tmp_path,
        {
            ".bashrc": 'export A=1\n# eval "$(ctxpatch shell-init bash)"\n'
            + init_line("bash")
            + "\n",
            ".config/fish/config.fish": "set x 1\n" + init_line("fish") + "\n",
        },
    )
    lines = find_lines(env)
    assert [(x.path.name, x.number) for x in lines] == [(".bashrc", 3), ("config.fish", 2)]
    undo = undo_advice(env)
    assert 'line 3 of ~/.bashrc: `eval "$(ctxpatch shell-init bash)"`' in undo
    assert "line 2 of ~/.config/fish/config.fish: `ctxpatch shell-init fish | source`" in undo
    assert "already goes through the gateway" in setup_advice(env)


def test_advice_without_a_line(tmp_path: Path) -> None:
    env = _home(tmp_path, {".zshrc": "PROMPT='%~ '\n"})
    assert "nothing routes `claude` through the gateway" in undo_advice(env)
    assert setup_advice(env) == (
        "to make `claude` go through the gateway in every new zsh, add this line to "
        '~/.zshrc: eval "$(ctxpatch shell-init zsh)"'
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_fast_path_prints_what_the_typer_command_prints(shell: str) -> None:
    from typer.testing import CliRunner

    from ctxpatch.cli.app import app

    fast = subprocess.run(
        [*CTXPATCH, "shell-init", shell], capture_output=True, text=True, check=True
    ).stdout
    typed = CliRunner().invoke(app, ["shell-init", shell])
    assert typed.exit_code == 0
    # the same code but for how ctxpatch is called (this process vs the child's argv[0])
    assert fast.count("\n") == typed.stdout.count("\n") > 5
    assert fast.splitlines()[:3] == typed.stdout.splitlines()[:3]
