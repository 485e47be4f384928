"""``ctxpatch verify`` on a native install (Claude Code >= 2.1.113): the gateway's proofs.

A native build has no ``cli.js`` to patch: server-side clearing reaches it through the loopback
gateway (``ctxpatch run -- claude``). So verify runs the user's own binary, where it lies (never
copied, never written), behind the real ``ctxpatch run`` (``python -m ctxpatch run``), both
inside a loopback-only network namespace (:class:`lab.sandbox.GatewaySandbox`,
:mod:`lab.netns`), against the local mock of the Messages API, with a throwaway
``HOME``, ``TMPDIR`` and project folder. Nothing can leave the machine: the namespace has no
interface but ``lo``. The user's ``~/.claude``, settings and environment are not read (the
environment is built from ``PATH`` alone).

The run is the thinking-on one of the ``cli.js`` verify (:mod:`lab.verify_thinking`):
a signed two-turn thinking session and three live tool turns, the mock enforcing the
preserved-thinking check and answering usage that follows the edited prompt. Its three proofs:
``clearing sent`` (every main-loop request carries ``clear_tool_uses_20250919`` after Claude
Code's own ``clear_thinking_20251015``, with the beta, and the mock cleared), ``clearing
counted`` (the usage Claude Code recorded is the edited prompt's: its next auto-compact count,
:func:`engine.claude_code.count.autocompact_tokens`, is lower by what the server cleared), ``thinking
check`` (0 HTTP 400, 0 dropped thinking blocks). Plus: the run was offline (the namespace held
``lo`` only, every connection was forwarded to the mock) and the install is unchanged (size,
modification time and inode of the binary before and after).

Needs ``unshare -rn`` (unprivileged user namespaces): where it is not possible, a refusal
(:class:`ctxpatch.errors.NamespaceMissing`, exit 3) that says how to allow it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ctxpatch.errors import NamespaceMissing, NotABundle
from lab import netns
from lab.mock import MockServer
from lab.sandbox import GatewaySandbox
from lab.verify import Check, NativeRun, VerifyReport, require_profile
from lab.verify_thinking import run_thinking_proof
from patcher.discover import native_of
from patcher.native.app import read_app
from patcher.native.package import find_binary
from patcher.native.reader import NativeBinary

NETNS_HINT = (
    "allow unprivileged user namespaces (sudo sysctl -w kernel.unprivileged_userns_clone=1; "
    "on Ubuntu 24.04+ also kernel.apparmor_restrict_unprivileged_userns=0), or run verify in a "
    "container or VM that allows `unshare -rn`; `ctxpatch run -- claude` itself does not need it"
)


def native_executable(path: Path) -> Path:
    """The native ``claude`` for ``path`` (:func:`patcher.discover.native_of`): the executable
    itself (the native installer's ``~/.local/share/claude/versions/<version>`` or its
    ``~/.local/bin/claude`` link), or a folder holding it (a platform package, the npm wrapper
    with its platform package, the Python SDK's); a wrapper without its binary: the refusal of
    :func:`patcher.native.package.find_binary`."""
    found = native_of(path)
    if found is not None:
        return found.binary
    path = Path(os.path.realpath(path))
    if path.is_dir():
        exe = find_binary(path)  # raises, saying what is missing
        assert exe is not None
        return exe
    return path


def native_version(exe: Path) -> str:
    with NativeBinary(exe) as nb:
        version = read_app(nb).version
    if not version:
        raise NotABundle(
            f"cannot tell the Claude Code version of {exe}",
            why="the native build's JavaScript names no version",
            hint="pass the `claude` executable of a published Claude Code release",
        )
    return version


@dataclass(frozen=True)
class _Stat:
    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, p: Path) -> _Stat:
        st = p.stat()
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)


def verify_native(path: Path, *, timeout: float = 120) -> VerifyReport:
    """The proofs on the native install at ``path`` (see the module docstring); raises
    CtxpatchError on a refusal."""
    exe = native_executable(path)
    why = netns.netns_available()
    if why is not None:
        raise NamespaceMissing(
            f"cannot verify the native build {exe} here",
            why=f"verify runs it offline in a network namespace of its own, and {why}",
            hint=NETNS_HINT,
        )
    version = native_version(exe)
    require_profile(
        version, hint="verify knows the native builds 2.1.113 and later that the engine models"
    )
    t0 = time.monotonic()
    before = _Stat.of(exe)
    root = Path(tempfile.mkdtemp(prefix="ctxpatch-verify-"))
    report = VerifyReport(str(path), version, "native", False, 0.0, native=NativeRun.of(version))
    try:
        report = _run(report, exe, root, version, timeout)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    unchanged = _Stat.of(exe) == before
    report.checks.append(
        Check(
            "install unchanged",
            unchanged,
            "the binary was run where it lies, never written"
            if unchanged
            else f"{exe} changed during the run",
        )
    )
    report.passed = all(c.ok for c in report.checks)
    report.seconds = time.monotonic() - t0
    return report


def _run(
    report: VerifyReport,
    exe: Path,
    root: Path,
    version: str,
    timeout: float,
) -> VerifyReport:
    sandbox = GatewaySandbox(root, exe)
    with MockServer() as mock:
        proofs, turns = run_thinking_proof(sandbox, mock, version, timeout)
        port = mock.port
    run = turns.run
    report.checks.append(
        Check(
            "claude ran through ctxpatch run",
            run.returncode == 0,
            f"exit {run.returncode} in {run.seconds:.1f}s, {len(turns.requests)} requests "
            "reached the mock",
        )
    )
    events = sandbox.net_events()
    interfaces = {tuple(e.get("interfaces") or ()) for e in events if e.get("event") == "netns"}
    conns = [e for e in events if e.get("event") == "connect"]
    offline = interfaces == {("lo",)} and all(e.get("port") == port for e in conns)
    report.checks.append(
        Check(
            "offline",
            offline,
            f"a network namespace with lo only; {len(conns)} connections, all to the local mock"
            if offline
            else f"namespace interfaces {sorted(interfaces)}, connections {conns}",
        )
    )
    for p in proofs:
        report.checks.append(Check(p.name.replace("_", " "), p.ok, p.detail))
        report.proofs[p.name] = p.to_json()
    if not all(c.ok for c in report.checks):
        log = sandbox.gateway_log.read_text() if sandbox.gateway_log.exists() else ""
        report.log = turns.describe() + ("\n--- gateway log\n" + log if log else "")
    return report
