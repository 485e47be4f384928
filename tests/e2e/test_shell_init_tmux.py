"""``ctxpatch shell-init`` in a real interactive bash and zsh (under tmux), as a user has it.

The rc file holds the one line the README gives; ``claude`` is a stand-in on PATH that prints
the base URL it was given (the real binary's ``--version`` sends nothing, so what matters is
its environment). Proven: ``claude --version`` goes through a gateway (a loopback base URL, the
user's own base URL kept as the upstream); with the gateway made to fail (a broken ``aiohttp``
first on PYTHONPATH: a broken install) ``claude`` still runs, with exactly one warning line on
stderr; with ctxpatch gone, the same; without the line, ``claude`` is the plain command.
tmux or the shell missing: skip locally, fail in CI (``.ci/run`` installs them).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import need

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
FAKE_CLAUDE = """#!/bin/sh
echo "claude $* base=${ANTHROPIC_BASE_URL:-none} upstream=${CTXPATCH_UPSTREAM:-none}"
exit 7
"""
CTXPATCH = f"""#!/bin/sh
exec {shlex.quote(sys.executable)} -m ctxpatch "$@"
"""


class Shell:
    """One interactive shell in a detached tmux session with its own HOME and PATH."""

    def __init__(self, tmux: str, shell: str, home: Path, bin_dir: Path) -> None:
        self.tmux, self.home = tmux, home
        self.name = f"ctxpatch-{uuid.uuid4().hex[:8]}"
        env = {
            "HOME": str(home),
            "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "TERM": "xterm",
            "SHELL": shell,
            "PYTHONPATH": str(ROOT),
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/mine",  # the user's own: the upstream
            "TMUX_TMPDIR": str(home),
        }
        self.env = env
        argv = [shell, "-i"] if shell.endswith("bash") else [shell, "-i", "-d"]
        inner = " ".join(shlex.quote(a) for a in argv)
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        cmd = f"env -i {exports} {inner}"
        self._tmux("new-session", "-d", "-s", self.name, "-x", "200", "-y", "50", cmd)

    def _tmux(self, *args: str) -> None:
        # -L: a tmux server of this shell's own. With one shared socket, the next shell's
        # new-session could reach the server the previous kill-session was shutting down
        # ("server exited unexpectedly", 2 of 8 runs under load)
        subprocess.run(
            [self.tmux, "-L", self.name, *args],
            check=True,
            env={**os.environ, "TMUX_TMPDIR": str(self.home)},
        )

    def run(self, line: str, tag: str, timeout: float = 60) -> tuple[int, str, str]:
        """Type ``line`` (its stdout/stderr to files) and wait for its exit code."""
        out, err, rc = (self.home / f"{tag}.{x}" for x in ("out", "err", "rc"))
        typed = f"{line} >{out} 2>{err}; echo $? >{rc}.tmp; mv {rc}.tmp {rc}"
        self._tmux("send-keys", "-t", self.name, typed, "Enter")
        deadline = time.monotonic() + timeout
        while not rc.exists():
            if time.monotonic() > deadline:
                pytest.fail(f"{line!r} did not finish in {timeout} s in the tmux shell")
            time.sleep(0.1)
        return int(rc.read_text().strip()), out.read_text(), err.read_text()

    def close(self) -> None:
        subprocess.run(
            [self.tmux, "-L", self.name, "kill-server"],
            check=False,
            env={**os.environ, "TMUX_TMPDIR": str(self.home)},
        )


@pytest.mark.parametrize("shell_name", ["bash", "zsh"])
def test_claude_goes_through_the_gateway_and_falls_back(shell_name: str, tmp_path: Path) -> None:
    tmux = need("tmux", "the shell-init test runs a real interactive shell under tmux")
    shell = need(shell_name, f"shell-init {shell_name} is tested in a real {shell_name}")
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    for name, text in (("claude", FAKE_CLAUDE), ("ctxpatch", CTXPATCH)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    broken = tmp_path / "broken" / "aiohttp"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('aiohttp is broken here')\n")
    rc_name = ".bashrc" if shell_name == "bash" else ".zshrc"
    (home / rc_name).write_text(f'eval "$(ctxpatch shell-init {shell_name})"\n')

    sh = Shell(tmux, shell, home, bin_dir)
    try:
        code, out, err = sh.run("claude --version", "through")
        assert code == 7, (out, err)  # the command's own exit code
        assert out.startswith("claude --version base=http://127.0.0.1:"), out
        assert "upstream=http://127.0.0.1:9/mine" in out  # the user's base URL chained
        assert err == ""

        line = f"PYTHONPATH={tmp_path / 'broken'}:{ROOT} claude --version"
        code, out, err = sh.run(line, "failing")
        assert code == 7
        assert out == "claude --version base=http://127.0.0.1:9/mine upstream=none\n"
        assert err.count("\n") == 1, err  # ONE warning line
        assert err.startswith("ctxpatch: the gateway could not start (aiohttp is broken here)")

        (bin_dir / "ctxpatch").unlink()  # ctxpatch uninstalled, the rc line still there
        code, out, err = sh.run("claude --version", "gone")
        assert code == 7
        assert out == "claude --version base=http://127.0.0.1:9/mine upstream=none\n"
        assert err.count("\n") == 1 and "is gone; running claude without the gateway" in err
    finally:
        sh.close()

    (home / rc_name).write_text("")  # the line removed: a new shell has the plain claude
    (bin_dir / "ctxpatch").write_text(CTXPATCH)
    (bin_dir / "ctxpatch").chmod(0o755)
    sh = Shell(tmux, shell, home, bin_dir)
    try:
        code, out, err = sh.run("claude --version", "removed")
        assert (code, err) == (7, "")
        assert out == "claude --version base=http://127.0.0.1:9/mine upstream=none\n"
    finally:
        sh.close()
