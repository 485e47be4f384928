"""Shared test helpers: fixture copies, node, the real-version cache."""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import shared_data
import typer
from scratch_dirs import scratch_dir

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "cli_js"
IN_CI = bool(os.environ.get("CI"))
# Gateways started by tests (and the processes they spawn) write their usage ledger
# (usage.ledger, in the XDG state dir) into a throwaway folder, never the user's (deleted when
# the process ends, or by the next run when it was killed: tests/scratch_dirs.py).
os.environ["XDG_STATE_HOME"] = str(scratch_dir("ctxpatch-test-state-"))
# One synthetic bundle per call-site shape (fixtures/cli_js/README.md).
SHAPE_FIXTURES = (
    "s0-1.0.60.js",
    "s1-2.0.76.js",
    "s1p-2.1.7.js",
    "s1pp-2.1.30.js",
    "s3-2.1.50.js",
    "s4-2.1.61.js",
    "s5-2.1.68.js",
    "s6-2.1.112.js",
)


# The test files that take longest (seconds on the 2-core CI machine, whole file), started
# first: the workers run a file each (pyproject.toml's addopts) in collection order, so a long
# file collected last runs on one worker while the others are done (the fresh-machine test,
# one test of 2.5 min, ran last by itself). A file not named here keeps its place.
LONGEST_FIRST = (
    "tests/e2e/test_engine_vs_real.py",  # 213 s
    "tests/test_fresh_machine.py",  # 153 s (CI only)
    "tests/engine/test_clearing_incremental.py",  # 140 s
    "tests/e2e/test_thinking_where_we_stand.py",  # 129 s
    "tests/e2e/test_proof.py",  # 112 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """:data:`LONGEST_FIRST`'s files first, in that order; the others after, as collected."""
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI the shared real sessions must be there: fail the run at once, loudly, if not
    (a usage error: pytest prints it once, as ``ERROR: ...``, and exits 4; ``pytest.exit``
    printed it twice, the second time framed by ``!``)."""
    if IN_CI and shared_data.missing():
        raise pytest.UsageError(f"CI run refused: {shared_data.missing_message()}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Every skip for want of the shared real sessions reported at one place with one reason,
    so the short summary (``-ra``) folds them into ONE line: how many, and how to get the data."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and shared_data.missing():
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        empty_set = reason.startswith("got empty parameter set") and _reads_shared(item)
        if shared_data.is_about_shared(reason) or empty_set:
            report.longrepr = (shared_data.__file__, None, shared_data.skip_reason())
    return report


def _reads_shared(item: pytest.Item) -> bool:
    """Whether the test's module reads the shared folder (its parameters come from it)."""
    module = getattr(item, "module", None)
    return module is not None and any(
        getattr(module, name, None) is not None
        for name in ("shared_data", "SPOTTER", "PUBLIC", "CCLOG", "spotter_sessions")
    )


@pytest.fixture(autouse=True)
def _no_interpreter_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python Agent SDK this interpreter may have installed (site-packages) is the
    machine's, not the test's: discovery sees only the installs a test builds."""
    from patcher import discover

    monkeypatch.setattr(discover, "interpreter_sdk", lambda: None)


def need(tool: str, why: str) -> str:
    """The tool's path; skip with a reason when absent, but fail in CI (core checks)."""
    path = shutil.which(tool)
    if path is None:
        if IN_CI:
            pytest.fail(f"{tool} is required in CI: {why}")
        pytest.skip(f"{tool} not on PATH: {why}")
    return path


@pytest.fixture
def node() -> str:
    return need("node", "node is the ground truth for JavaScript")


def copy_fixture(name: str, dest: Path, *, package: dict[str, str] | None = None) -> Path:
    """Copy fixtures/cli_js/<name> into ``dest`` as cli.js, with an ESM package.json."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "cli.js"
    shutil.copyfile(FIXTURES / name, target)
    target.chmod(0o755)
    meta = {"type": "module", **(package or {})}
    (dest / "package.json").write_text(json.dumps(meta))
    return target


# The 0.1.0 text-prune snippet, frozen (the header of the file says why).
SNIPPET_010 = ROOT / "tests" / "patcher" / "data" / "text_prune-0.1.0.js"
SNIPPET_010_SHA256 = "690a1dcc74319011c634892d19fadfd870305c54406a60f7933ee1e9101d94aa"


def snippet_010() -> bytes:
    """The text-prune snippet of ctxpatch 0.1.0 (before the thinking-safe rule), as 0.1.0
    injected it: the frozen file without its header."""
    data = SNIPPET_010.read_bytes()
    return data[data.index(b"function _aggressiveTextPrune(") :].strip() + b"\n"


def cached_tgz(root: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A package tarball where the npm-pack cache under ``root`` keeps it,
    ``root/npm/<name>-<version>.tgz`` (``name`` as npm pack spells it, e.g.
    ``anthropic-ai-claude-code``), holding ``files`` (path in the tarball -> bytes)."""
    base = root / "npm"
    base.mkdir(parents=True, exist_ok=True)
    tgz = base / f"{name}-{version}.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return tgz


@functools.cache
def patched_fixture(name: str) -> bytes:
    """fixtures/cli_js/<name> as ``ctxpatch apply`` patches it (no node check): what users run."""
    from patcher import ops

    with tempfile.TemporaryDirectory() as folder:
        cli = Path(folder) / "cli.js"
        shutil.copyfile(FIXTURES / name, cli)
        ops.apply_file(cli, node_check=False)
        return cli.read_bytes()


def injected_clearing_js() -> str:
    """The server-side clearing function as ctxpatch injects it (into the 2.1.112 fixture)."""
    from patcher import markers

    js = markers._clear_snippet_bytes(patched_fixture("rq-2.1.112.js"))
    assert js is not None
    return js.decode().strip()


@pytest.fixture
def fixture_copy(tmp_path: Path):
    def make(name: str, **kw: object) -> Path:
        return copy_fixture(name, tmp_path / "pkg", **kw)  # type: ignore[arg-type]

    return make


# The knobs of the injected code, and the providers it reads: never inherited by a test run.
_KNOB_PREFIXES = ("CLAUDE_TEXT_PRUNE_", "CLAUDE_CTX_CLEAR_", "CLAUDE_CODE_USE_")


def run_node(
    node: str, args: list[str], env: dict[str, str] | None = None, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(_KNOB_PREFIXES)}
    full_env.update(env or {})
    return subprocess.run(
        [node, *args], capture_output=True, env=full_env, input=input, timeout=60, check=False
    )


# ------------------------------------------------------------------ the command line in-process


@pytest.fixture(autouse=True)
def _claude_settings_elsewhere(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``apply``/``revert`` register recall in Claude Code's user settings and keep a receipt in
    ctxpatch's state folder: in every test those are a fresh folder, never the real ones."""
    root = tmp_path_factory.mktemp("claude-home")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(root / "claude"))
    monkeypatch.setenv("XDG_STATE_HOME", str(root / "state"))


@pytest.fixture
def isolated_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Commands that see none of the caller's ctxpatch settings, no global npm install, and run
    in ``tmp_path`` (``pytestmark = pytest.mark.usefixtures("isolated_cli")``)."""
    for var in ("CTXPATCH_CLI_JS", "CTXPATCH_LOCK_TIMEOUT", "CTXPATCH_NODE", "CTXPATCH_DEBUG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CTXPATCH_NPM_ROOT", "")  # no global search unless a test sets one
    monkeypatch.chdir(tmp_path)


def run_cli(*args: str) -> tuple[int, str, str]:
    """``ctxpatch ARGS`` in-process: (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from ctxpatch.cli.app import app

    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def app_with(register: Callable[[typer.Typer], None]) -> typer.Typer:
    """A typer app holding only the commands ``register`` adds (one command module)."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test app"""

    register(app)
    return app
