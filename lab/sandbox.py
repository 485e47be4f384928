"""A throwaway place to run a real ``cli.js``: own HOME, TMPDIR, project folder, no network.

Layout under ``root`` (a temporary folder the caller owns and deletes)::

    pkg/cli.js            copy of the cli.js under test (+ package.json {"type":"module"},
    pkg/vendor/ripgrep/   ripgrep for this platform when the package has it,
    pkg/yoga.wasm         yoga.wasm for <= 2.0.0)
    home/                 HOME: .claude.json, .claude/projects/<escaped cwd>/<session>.jsonl
    tmp/                  TMPDIR (the Bash tool writes claude-*-cwd files here)
    proj/                 the project folder, the process's cwd
    guard.cjs             the offline guard, loaded with node --require
    net.jsonl             what the guard saw (one JSON line per lookup / connection attempt)

Environment (:meth:`Sandbox.env`): built from nothing but ``PATH`` (``env -i`` style), so no
``ANTHROPIC_*``/``CLAUDE_*`` variable of the caller leaks in. ``ANTHROPIC_BASE_URL`` points at
the mock; ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``, ``DISABLE_TELEMETRY``,
``DISABLE_AUTOUPDATER`` and ``DISABLE_ERROR_REPORTING`` stop Statsig/GrowthBook, telemetry,
update checks and error reports (and make every remote feature gate evaluate to false, so runs
are deterministic). The one call no variable stops (the metrics exporter's
``api.anthropic.com/.../metrics_enabled``) is refused by the guard.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

GUARD_JS = r"""'use strict';
// ctxpatch e2e offline guard: every connection that is not to the loopback interface fails at
// once (ENOTFOUND / ECONNREFUSED), before any packet leaves the machine. Logs to $NETLOG_FILE.
const dns = require('dns'), net = require('net'), fs = require('fs');
const LOG = process.env.NETLOG_FILE;
function log(entry) {
  if (!LOG) return;
  try { fs.appendFileSync(LOG, JSON.stringify(entry) + '\n'); } catch (e) { /* never break */ }
}
function isLoopback(host) {
  if (host === undefined || host === null || host === '') return true;  // node defaults: localhost
  host = String(host).toLowerCase().replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\./.test(host) || host === '::ffff:127.0.0.1';
}
function refused(host, code) {
  const err = new Error(`${code} ${host} (ctxpatch e2e: only 127.0.0.1 is reachable)`);
  err.code = code; err.errno = code === 'ENOTFOUND' ? -3008 : -111; err.hostname = host;
  err.syscall = code === 'ENOTFOUND' ? 'getaddrinfo' : 'connect';
  return err;
}
const origLookup = dns.lookup;
dns.lookup = function lookup(host, opts, cb) {
  if (typeof opts === 'function') { cb = opts; opts = {}; }
  if (!isLoopback(host)) {
    log({ event: 'blocked', via: 'dns.lookup', host: String(host) });
    process.nextTick(cb, refused(host, 'ENOTFOUND'));
    return {};
  }
  return origLookup.call(this, host, opts, cb);
};
if (dns.promises && dns.promises.lookup) {
  const origP = dns.promises.lookup;
  dns.promises.lookup = function lookup(host, opts) {
    if (!isLoopback(host)) {
      log({ event: 'blocked', via: 'dns.promises.lookup', host: String(host) });
      return Promise.reject(refused(host, 'ENOTFOUND'));
    }
    return origP.call(this, host, opts);
  };
}
const origConnect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function connect(...args) {
  let opts = args[0];
  if (Array.isArray(opts)) opts = opts[0];  // internal normalized form
  let host, port, path;
  if (opts !== null && typeof opts === 'object') { host = opts.host; port = opts.port; path = opts.path; }
  else if (typeof opts === 'number' || (typeof opts === 'string' && /^\d+$/.test(opts))) {
    port = opts; host = typeof args[1] === 'string' ? args[1] : undefined;
  } else if (typeof opts === 'string') { path = opts; }
  if (path === undefined && !isLoopback(host)) {
    log({ event: 'blocked', via: 'net.connect', host: String(host), port: port });
    const sock = this;
    process.nextTick(() => sock.destroy(refused(host, 'ECONNREFUSED')));
    return this;
  }
  if (path === undefined) log({ event: 'connect', host: String(host || 'localhost'), port: port });
  return origConnect.apply(this, args);
};
"""

SANDBOX_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-e2e-test",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CI": "",  # some versions change behaviour under CI; keep it unset (see env())
    "TERM": "dumb",
    "NO_COLOR": "1",
    "LANG": "C.UTF-8",
    "TZ": "UTC",
}


def project_dir_name(cwd: str) -> str:
    """The folder name Claude Code uses for a project: every char outside [A-Za-z0-9] → ``-``."""
    return re.sub(r"[^a-zA-Z0-9]", "-", cwd)


def node_platform() -> str:
    """``x64-linux``-style name of vendor/ripgrep's folder for this machine."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    system = {"linux": "linux", "darwin": "darwin", "windows": "win32"}.get(
        platform.system().lower(), platform.system().lower()
    )
    return f"{arch}-{system}"


@dataclass
class RunResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    env: dict[str, str] = field(repr=False, default_factory=dict)

    def output_json(self) -> dict | None:
        """The ``--output-format json`` result object, when stdout holds one."""
        for line in reversed(self.stdout.strip().splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    continue
        return None

    def describe(self) -> str:
        def tail(s):
            return "\n".join(s.strip().splitlines()[-15:])

        return (
            f"exit {self.returncode} after {self.seconds:.1f}s\n--- stdout (tail)\n"
            f"{tail(self.stdout)}\n--- stderr (tail)\n{tail(self.stderr)}"
        )


class Sandbox:
    """One sandbox around one ``cli.js`` copy; many runs (sessions) can share it."""

    def __init__(self, root: Path, cli_js: Path, node: str = "node") -> None:
        self.root = Path(root)
        self.node = node
        self.pkg = self.root / "pkg"
        self.home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.proj = self.root / "proj"
        self.guard = self.root / "guard.cjs"
        self.netlog = self.root / "net.jsonl"
        for d in (self.pkg, self.home, self.tmp, self.proj):
            d.mkdir(parents=True, exist_ok=True)
        self.guard.write_text(GUARD_JS)
        self.cli = self.pkg / "cli.js"
        copy_install(Path(cli_js), self.pkg)

    @property
    def projects_dir(self) -> Path:
        return self.home / ".claude" / "projects" / project_dir_name(str(self.proj))

    def session_file(self, session_id: str) -> Path:
        return self.projects_dir / f"{session_id}.jsonl"

    def tool_results_dir(self, session_id: str) -> Path:
        """Where 2.1.x micro-compaction saves cleared results (named in the pointer text)."""
        return self.projects_dir / session_id / "tool-results"

    def env(self, base_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "ANTHROPIC_BASE_URL": base_url,
            "NODE_OPTIONS": f"--require {self.guard}",
            "NETLOG_FILE": str(self.netlog),
            **{k: v for k, v in SANDBOX_ENV.items() if v},
        }
        for k, v in (extra or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        return env

    def run(
        self,
        args: Sequence[str],
        base_url: str,
        extra_env: Mapping[str, str] | None = None,
        timeout: float = 120,
        stdin: str | None = None,
    ) -> RunResult:
        """``node cli.js ARGS`` in ``proj/``; the process group is killed on timeout.

        ``stdin``: text written to the process's standard input (then closed), e.g. the user
        messages of ``--input-format stream-json``; else it reads nothing (``/dev/null``)."""
        env = self.env(base_url, extra_env)
        cmd = self.command(args, base_url)
        t0 = time.monotonic()
        with self.network(base_url):
            return self._run(cmd, env, stdin, timeout, t0)

    def command(self, args: Sequence[str], base_url: str) -> list[str]:
        """The process to start: ``node cli.js ARGS``."""
        return [self.node, str(self.cli), *args]

    def network(self, base_url: str) -> contextlib.AbstractContextManager:
        """What must run beside the process (nothing here: the guard is in-process)."""
        return contextlib.nullcontext()

    def _run(
        self, cmd: list[str], env: dict[str, str], stdin: str | None, timeout: float, t0: float
    ) -> RunResult:
        proc = subprocess.Popen(
            cmd,
            cwd=self.proj,
            env=env,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            err += f"\n[ctxpatch e2e] killed after {timeout}s"
        except BaseException:
            _kill_group(proc)
            proc.communicate()
            raise
        finally:
            _kill_group(proc)  # whatever node spawned and left behind (Bash tool shells)
        return RunResult(cmd, proc.returncode, out, err, time.monotonic() - t0, env)

    def resume(
        self,
        session_id: str,
        prompt: str,
        base_url: str,
        extra_env: Mapping[str, str] | None = None,
        *,
        allowed_tools: str | None = None,
        timeout: float = 120,
    ) -> RunResult:
        args = ["-p", prompt, "--resume", session_id, "--output-format", "json"]
        if allowed_tools:
            args += ["--allowedTools", allowed_tools]
        return self.run(args, base_url, extra_env, timeout)

    def net_events(self) -> list[dict]:
        if not self.netlog.exists():
            return []
        return [json.loads(x) for x in self.netlog.read_text().splitlines() if x.strip()]


class NativeSandbox(Sandbox):
    """A sandbox around a native (Bun) ``claude`` executable, run where it lies (never copied,
    never written) inside a loopback-only network namespace (:mod:`lab.netns`).

    Same layout and environment as :class:`Sandbox` minus ``pkg/`` and the node guard:
    ``NODE_OPTIONS`` means nothing to a Bun binary, the namespace is the guard; ``net.jsonl``
    gets the namespace's interfaces and every connection forwarded to the mock."""

    def __init__(self, root: Path, binary: Path) -> None:
        self.root = Path(root)
        self.node = ""
        self.binary = Path(binary)
        self.pkg = self.binary.parent
        self.cli = self.binary
        self.home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.proj = self.root / "proj"
        self.guard = self.root / "guard.cjs"  # unused: kept so the attribute exists
        self.netlog = self.root / "net.jsonl"
        self.socket = self.root / "mock.sock"
        for d in (self.home, self.tmp, self.proj):
            d.mkdir(parents=True, exist_ok=True)

    def env(self, base_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = super().env(base_url, extra)
        env.pop("NODE_OPTIONS", None)
        return env

    def command(self, args: Sequence[str], base_url: str) -> list[str]:
        from lab import netns

        return netns.wrap([str(self.binary), *args], _port(base_url), self.socket)

    def network(self, base_url: str) -> contextlib.AbstractContextManager:
        from lab import netns

        return netns.UnixBridge(self.socket, _port(base_url))


class GatewaySandbox(NativeSandbox):
    """A :class:`NativeSandbox` whose binary runs behind ``ctxpatch run`` (the real command:
    ``python -m ctxpatch run --log LOG -- BINARY ARGS``), both inside the same loopback-only
    namespace: the gateway listens on the namespace's 127.0.0.1 (a free port), the binary gets
    ``ANTHROPIC_BASE_URL`` pointing at it, and the gateway's upstream is the caller's
    ``ANTHROPIC_BASE_URL``, the mock, reached through the bridge like a direct run. So what the
    mock sees is what the gateway forwards, and a direct run of the same sandbox
    (:class:`NativeSandbox`) is what the binary sends.

    ``PYTHONPATH`` names the folder this ``lab`` package was imported from, so the gateway
    is the code under test (not another installed copy); ``gateway.log`` is its log."""

    def __init__(self, root: Path, binary: Path) -> None:
        super().__init__(root, binary)
        self.gateway_log = self.root / "gateway.log"

    def env(self, base_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = super().env(base_url, extra)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
        return env

    def command(self, args: Sequence[str], base_url: str) -> list[str]:
        import sys

        from lab import netns

        ctxpatch = [sys.executable, "-m", "ctxpatch", "run", "--log", str(self.gateway_log), "--"]
        return netns.wrap([*ctxpatch, str(self.binary), *args], _port(base_url), self.socket)


def _port(base_url: str) -> int:
    from urllib.parse import urlsplit

    port = urlsplit(base_url).port
    if port is None:
        raise ValueError(f"the mock's base URL has no port: {base_url!r}")
    return port


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group the run started (node and anything it spawned), by its id."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, 9)


def copy_install(cli_js: Path, dest: Path) -> Path:
    """Copy ``cli.js`` and what it needs at run time into ``dest``.

    * ``package.json``: the package's own when it sits beside ``cli.js`` (it says
      ``"type": "module"``), else a minimal ``{"type": "module"}``;
    * ``vendor/ripgrep/<platform>/`` (Grep/Glob spawn it) when present;
    * ``yoga.wasm`` (Claude Code <= 2.0.0 refuses to start without it) when present.
    """
    src_dir = cli_js.parent
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cli_js, dest / "cli.js")
    (dest / "cli.js").chmod(0o755)
    pj = src_dir / "package.json"
    meta: dict = {}
    if pj.is_file():
        try:
            meta = json.loads(pj.read_text())
        except ValueError:
            meta = {}
    meta = {k: meta[k] for k in ("name", "version") if k in meta}
    (dest / "package.json").write_text(json.dumps({**meta, "type": "module"}))
    rg = src_dir / "vendor" / "ripgrep"
    if rg.is_dir():
        plat = rg / node_platform()
        (dest / "vendor" / "ripgrep").mkdir(parents=True, exist_ok=True)
        if plat.is_dir():
            shutil.copytree(plat, dest / "vendor" / "ripgrep" / plat.name, dirs_exist_ok=True)
        for extra in ("COPYING",):
            if (rg / extra).is_file():
                shutil.copyfile(rg / extra, dest / "vendor" / "ripgrep" / extra)
    for wasm in ("yoga.wasm",):
        if (src_dir / wasm).is_file():
            shutil.copyfile(src_dir / wasm, dest / wasm)
    return dest / "cli.js"
