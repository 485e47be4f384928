"""``ctxpatch verify``: prove on the user's own install that the patched cli.js prunes as predicted.

1. The file must be patched with the current snippet (``ops.check_file``), and node must exist.
2. ``cli.js`` (+ ``vendor/ripgrep`` for this platform, ``yoga.wasm`` for <= 2.0.0) is copied into
   a temporary sandbox: its own ``HOME``, ``TMPDIR`` and project folder, an environment built from
   nothing but ``PATH``, and a node preload that refuses every non-loopback connection. The
   user's ``~/.claude`` and network are never touched; the sandbox is deleted afterwards.
3. A generated 9-turn session (long prompts and replies, 18 tool results) is resumed with
   ``-p continue`` against the loopback mock, with the prune knobs set low
   (``KEEP=2 STEP=3 MAX_CHARS=60 THRESHOLD=1000``) and, where micro-compaction is live, the last
   usage at the engine's micro-compaction boundary, so both mechanisms fire.
4. The captured main-loop ``messages`` are compared with the engine's prediction (micro-compaction,
   then ``engine.twins.textprune``, then ``engine.claude_code.flatten``) byte for byte, except the fields
   ``lab.predict`` documents as volatile.

5. Where ``apply`` installed server-side clearing, a second run in the same sandbox
   (:mod:`lab.verify_thinking`): a thinking-on session under the enforced
   preserved-thinking check, usage following the edited prompt. Three proofs: the clearing edit
   is sent with its beta (``clearing_sent``), the mock's clearing shows up in Claude Code's next
   token count (``clearing_counted``), and 0 HTTP 400 / 0 dropped thinking blocks
   (``thinking_check``).

PASS needs: exit 0, a main-loop request, text actually pruned in it, nothing sent anywhere but
127.0.0.1, no difference from the prediction, and (where the clearing is installed) the three
proofs.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ctxpatch.errors import NodeMissing, NotPatched, Unsupported
from engine.profiles import profile_for
from engine.twins.textprune_shorten import MARKER
from lab.harness import Case, Outcome, engine_boundaries, run_case
from lab.mock import MockServer
from lab.sandbox import Sandbox
from lab.scenarios import turns_session
from lab.verify_thinking import has_clearing, run_thinking_proof
from patcher import ops
from patcher.native.newer import newer_than_profiles
from patcher.result import Result

KNOBS = {
    "CLAUDE_TEXT_PRUNE_KEEP": "2",
    "CLAUDE_TEXT_PRUNE_STEP": "3",
    "CLAUDE_TEXT_PRUNE_MAX_CHARS": "60",
    "CLAUDE_TEXT_PRUNE_THRESHOLD": "1000",
}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class NativeRun:
    """What only the verify of a native build has (:mod:`lab.verify_native`): the warnings
    about its version (newer than every engine profile)."""

    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, version: str | None) -> NativeRun:
        newer = newer_than_profiles(version)
        return cls((newer,) if newer else ())


@dataclass
class VerifyReport:
    """The outcome of ``verify`` on one install: a patched cli.js's, or with its optional
    ``native`` part a native build's (run through the gateway)."""

    path: str
    version: str | None
    shape: str | None
    passed: bool
    seconds: float
    checks: list[Check] = field(default_factory=list)
    sent: dict[str, object] = field(default_factory=dict)
    difference: str | None = None
    log: str = ""
    proofs: dict[str, dict[str, object]] = field(default_factory=dict)
    native: NativeRun | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def to_json(self) -> dict[str, object]:
        """Every field but ``native``, the verdict and the exit code; a native build's warnings
        last."""
        d = asdict(self)
        del d["native"]
        d["verdict"] = "PASS" if self.passed else "FAIL"
        d["exit_code"] = self.exit_code
        if self.native is not None:
            d["warnings"] = list(self.native.warnings)
        return d

    def render(self) -> str:
        lines = self._cli_js_head() if self.native is None else self._native_head(self.native)
        for c in self.checks:
            lines.append(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}: {c.detail}")
        if "server_clearing" in self.proofs:
            lines.append(f"  server clearing: {self.proofs['server_clearing']['detail']}")
        if self.difference:
            lines.append("  first difference: " + self.difference)
        if not self.passed and self.log:
            lines.append("  details:\n    " + self.log.replace("\n", "\n    "))
        return "\n".join(lines)

    def _native_head(self, native: NativeRun) -> list[str]:
        return [
            f"{'PASS' if self.passed else 'FAIL'}  {self.path}"
            f"  (Claude Code {self.version}, native: server-side clearing through `ctxpatch run`)",
            f"  sandbox run: {self.seconds:.1f}s in a loopback-only network namespace; thinking "
            "on, the preserved-thinking check enforced by the mock; clearing knobs TRIGGER=1000 "
            "KEEP=1 STEP=1",
            *(f"  warning: {w}" for w in native.warnings),
        ]

    def _cli_js_head(self) -> list[str]:
        s = self.sent
        turns = s.get("turns")
        resumed = turns - 1 if isinstance(turns, int) else "?"
        lines = [
            (
                f"{'PASS' if self.passed else 'FAIL'}  {self.path}"
                f"  (Claude Code {self.version}, shape {self.shape})"
            ),
            f"  sandbox run: {self.seconds:.1f}s; knobs "
            + " ".join(f"{k.removeprefix('CLAUDE_TEXT_PRUNE_')}={v}" for k, v in KNOBS.items()),
        ]
        if s:
            lines += [
                (
                    f"  session: {s.get('turns')} turns ({resumed} resumed + the new "
                    f"prompt), {s.get('tool_results')} tool results, last usage {s.get('last_usage')}"
                ),
                f"  micro-compaction: {s.get('microcompaction')}",
                (
                    f"  text prune: {s.get('blocks_pruned')} text blocks shortened in "
                    f"{s.get('messages_pruned')} messages; cutoff at turn {s.get('cutoff_turn')} of "
                    f"{s.get('turns')} (KEEP 2, STEP 3): turns {s.get('cutoff_turn')}-{s.get('turns')}"
                    " sent intact"
                ),
                (
                    f"  request: {s.get('api_messages')} messages, "
                    f"{s.get('request_bytes')} bytes to 127.0.0.1"
                ),
            ]
        return lines


def find_node() -> str:
    node = shutil.which("node")
    if node is None:
        raise NodeMissing(
            "node is not installed",
            why="verify runs your cli.js for real, and cli.js is a Node.js program",
            hint="install Node.js 18 or newer (https://nodejs.org or your package manager), "
            "then run ctxpatch verify again",
        )
    return node


def require_patched(cli_js: Path) -> Result:
    """The check result of a file patched with the current snippet; else a refusal."""
    result = ops.check_file(cli_js)
    if result.state == "PATCHED":
        return result
    if result.state == "UNSUPPORTED":
        raise Unsupported(
            f"{cli_js} cannot take the patch",
            why=result.reason or "no micro-compaction call site",
            hint="ctxpatch supports Claude Code 1.0.60-2.1.112 cli.js builds",
        )
    why = {
        "UNPATCHED": "the file is not patched",
        "OUTDATED": "the file carries an older ctxpatch snippet",
        "FOREIGN": "the file was changed by another tool",
    }.get(result.state, result.reason or result.state)
    raise NotPatched(
        f"{cli_js} is not patched by this ctxpatch",
        why=why,
        hint=f"run `ctxpatch apply --path {cli_js}` first, then `ctxpatch verify`",
        state=result.state,
    )


def require_profile(version: str, *, hint: str) -> None:
    """Unsupported (with ``hint``) unless the engine has a profile for ``version``: verify
    compares what Claude Code sends with what the engine predicts."""
    try:
        profile_for(version)
    except ValueError as e:
        raise Unsupported(
            f"verify cannot predict what Claude Code {version} sends", why=str(e), hint=hint
        ) from None


def verify_install(cli_js: Path, *, timeout: float = 120) -> VerifyReport:
    """Run the proof on ``cli_js`` (see the module docstring); raises CtxpatchError on refusal."""
    cli_js = Path(cli_js)
    if cli_js.is_dir():
        cli_js = cli_js / "cli.js"
    node = find_node()
    checked = require_patched(cli_js)
    version = checked.version
    if not version:
        raise NotPatched(
            f"cannot tell the Claude Code version of {cli_js}",
            why="the file has no version header",
            hint="verify needs a published cli.js (it picks the engine profile by version)",
        )
    require_profile(
        version,
        hint="the patch itself can still be checked with `ctxpatch check`; verify needs "
        "Claude Code 1.0.80 or newer",
    )
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="ctxpatch-verify-"))
    try:
        sandbox = Sandbox(root, cli_js, node)
        session = turns_session(str(sandbox.proj), version=version)
        b = engine_boundaries(session, version)
        usage = b.microcompact if b.microcompact is not None else b.thresholds.warning
        session.set_last_usage(usage)
        with MockServer() as mock:
            outcome = run_case(
                sandbox,
                mock,
                Case("verify", session, prune_env=dict(KNOBS)),
                version,
                timeout=timeout,
            )
            report = _report(cli_js, checked, outcome, sandbox)
            if has_clearing(cli_js):
                proofs, turns = run_thinking_proof(sandbox, mock, version, timeout)
                for p in proofs:
                    report.checks.append(Check(p.name.replace("_", " "), p.ok, p.detail))
                    report.proofs[p.name] = p.to_json()
                if not all(p.ok for p in proofs):
                    report.log = (report.log + "\n" if report.log else "") + turns.describe()
            else:
                report.proofs["server_clearing"] = {
                    "ok": True,
                    "detail": "not installed in this cli.js (see `ctxpatch check`)",
                }
            report.passed = all(c.ok for c in report.checks)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.seconds = time.monotonic() - t0
    return report


def _report(cli_js: Path, checked: Result, o: Outcome, sandbox: Sandbox) -> VerifyReport:
    rep = VerifyReport(str(cli_js), checked.version, checked.shape, False, 0.0)
    checks = rep.checks
    checks.append(
        Check(
            "cli.js ran", o.run.returncode == 0, f"exit {o.run.returncode} in {o.run.seconds:.1f}s"
        )
    )
    checks.append(
        Check(
            "main-loop request captured",
            o.main is not None,
            f"{len(o.requests)} requests to the mock "
            f"({', '.join(r.kind for r in o.requests) or 'none'})",
        )
    )
    net = sandbox.net_events()
    leaks = [
        e
        for e in net
        if e.get("event") == "connect"
        and not str(e.get("host", "")).startswith(("127.", "localhost", "::1"))
    ]
    blocked = sorted({str(e.get("host")) for e in net if e.get("event") == "blocked"})
    checks.append(
        Check(
            "offline",
            not leaks,
            "only 127.0.0.1 was contacted"
            + (f"; refused by the guard: {', '.join(blocked)}" if blocked else "")
            if not leaks
            else f"connections to {leaks}",
        )
    )
    prune = o.prediction.prune
    pruned_sent = sum(
        MARKER in (b.get("text") or "")
        for m in o.sent or []
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict)
    ) + sum(MARKER in m["content"] for m in o.sent or [] if isinstance(m.get("content"), str))
    checks.append(
        Check(
            "text prune fired",
            pruned_sent > 0,
            f"{pruned_sent} shortened texts in the request (engine: "
            f"{prune.blocks_pruned if prune else 0})",
        )
    )
    checks.append(
        Check(
            "request equals the engine's prediction",
            o.diff is None and o.sent is not None,
            "byte for byte (volatile: cache_control, the CLI's <system-reminder> blocks)"
            if o.diff is None
            else "differs",
        )
    )
    rep.difference = o.diff
    rep.passed = all(c.ok for c in checks)
    starts = [
        i for i, r in enumerate(o.prediction.records_sent) if r.get("type") == "user" and _typed(r)
    ]
    cutoff_turn = starts.index(prune.cutoff) + 1 if prune and prune.cutoff in starts else None
    mc = o.prediction.mc
    rep.sent = {
        "turns": len(starts),
        "tool_results": sum(
            1
            for r in o.prediction.records_sent
            for b in _blocks(r)
            if b.get("type") == "tool_result"
        ),
        "last_usage": o.mc_tokens,
        "microcompaction": (
            f"cleared {len(o.cleared_sent)} old tool results (engine: {len(mc.cleared)})"
            if mc.fired or o.cleared_sent
            else "not live in this version"
            if not o.thresholds.microcompact_enabled
            else "did not fire"
        ),
        "blocks_pruned": pruned_sent,
        "messages_pruned": prune.messages_changed if prune else 0,
        "cutoff_turn": cutoff_turn,
        "api_messages": len(o.sent or []),
        "request_bytes": int(o.main.headers.get("content-length") or 0) if o.main else 0,
        "prune_reason": prune.reason if prune else None,
    }
    if not rep.passed:
        rep.log = o.explain()
    return rep


def _blocks(r: dict) -> list[dict]:
    c = (r.get("message") or {}).get("content")
    return [b for b in c if isinstance(b, dict)] if isinstance(c, list) else []


def _typed(r: dict) -> bool:
    from engine.twins.textprune_turns import is_turn_start

    return is_turn_start(r)
