"""The patch life cycle of ``ctxpatch regress`` on one published version.

fetch (``npm pack``, cached, locked against parallel runs) → locate → apply → check → apply
again (no change) → ESM node check of the patched file → revert (byte-identical) → drift
(:mod:`patcher.regress.drift`). The work happens on a copy in a scratch folder; the cache is
never modified except by ``prune``, which drops the files ctxpatch never reads from versions
this run downloaded.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from ctxpatch.errors import CtxpatchError, Unsupported
from patcher import clearsite, npmcache, ops, plan, selfcheck
from patcher.markers import sha256
from patcher.regress.drift import read_drift
from patcher.regress.outcome import Job, Outcome
from patcher.regress.selection import PACKAGES
from patcher.versions import version_of

KEEP_FILES = frozenset({"cli.js", "package.json"})


def fetch(job: Job, *, prune: bool = False, root: Path | None = None) -> Path:
    """The cached package folder (``npm pack`` on a miss), locked against parallel runs."""
    base = (root or npmcache.cache_root()) / "npm"
    slug = npmcache._slug(PACKAGES[job.package], job.version)
    with npmcache.fetch_lock(base, slug):
        existed = (base / slug / "package" / "package.json").is_file()
        folder = npmcache.package_dir(job.package, job.version, root, locked=True)
        if prune and not existed:
            _prune(folder)
            (base / f"{slug}.tgz").unlink(missing_ok=True)
    return folder


def _prune(folder: Path) -> None:
    for p in folder.iterdir():
        if p.name in KEEP_FILES:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def run_one(job: Job, *, prune: bool = False, node_check: bool = True) -> Outcome:
    """The whole cycle on one version. Never raises: failures are in the outcome."""
    out = Outcome(job.package, job.version)
    started = time.monotonic()
    try:
        _cycle(job, out, prune=prune, node_check=node_check)
    except Exception as e:  # a bug or an unexpected state: this version failed, the run goes on
        out.result = "fail"
        out.failed_step = out.failed_step or "internal"
        out.reason = out.reason or f"{type(e).__name__}: {e}"
    out.seconds = round(time.monotonic() - started, 2)
    return out


def _step(out: Outcome, name: str) -> None:
    out.failed_step = name  # cleared when the cycle completes


def _cycle(job: Job, out: Outcome, *, prune: bool, node_check: bool) -> None:
    _step(out, "fetch")
    try:
        folder = fetch(job, prune=prune)
    except CtxpatchError as e:
        out.result, out.reason = "fetch-failed", f"{e.what}: {e.why}"
        return
    out.steps["fetch"] = "ok"
    cli = folder / "cli.js"
    if not cli.is_file():
        out.result, out.failed_step = "native", None
        out.reason = "no cli.js in the package (native-binary era)"
        return
    data = cli.read_bytes()
    out.sha256, out.size = sha256(data), len(data)
    out.claude_code_version = version_of(data)

    _step(out, "locate")
    try:
        found = plan.locate(data, out.claude_code_version)
    except Unsupported as e:
        out.result, out.failed_step, out.reason = "unsupported", None, f"{e.what}: {e.why}"
        read_drift(data, out)
        return
    except CtxpatchError as e:
        out.reason = f"{e.what}: {e.why}"[:600]
        read_drift(data, out)
        return
    out.shape = found.shape
    clearing = clearsite.locate(data)
    out.clearing, out.clearing_reason = clearing.shape, clearing.reason[:600]
    out.steps["locate"] = "ok"

    with tempfile.TemporaryDirectory(prefix="ctxpatch-regress-") as tmp:
        work = Path(tmp) / "package"
        work.mkdir()
        target = work / "cli.js"
        shutil.copyfile(cli, target)
        target.chmod(0o755)
        shutil.copyfile(folder / "package.json", work / "package.json")

        _step(out, "apply")
        r = ops.apply_file(target, node_check=False)
        if r.action != "patched" or r.state != "PATCHED":
            return _fail(out, f"apply: {r.action} / {r.state}: {r.reason}")
        if r.clearing != out.clearing:
            return _fail(out, f"apply: clearing {r.clearing}, but the search found {out.clearing}")
        patched = target.read_bytes()
        if patched == data:
            return _fail(out, "apply: the file did not change")
        out.steps["apply"] = "ok"

        _step(out, "check")
        r = ops.check_file(target)
        if r.state != "PATCHED" or r.exit_code != 0:
            return _fail(out, f"check: {r.state} (exit {r.exit_code}): {r.reason}")
        out.steps["check"] = "ok"

        _step(out, "apply-again")
        r = ops.apply_file(target, node_check=False)
        if r.action != "already-patched" or target.read_bytes() != patched:
            return _fail(
                out,
                f"apply again: {r.action}, the file "
                f"{'changed' if target.read_bytes() != patched else 'kept'}",
            )
        out.steps["apply-again"] = "ok"

        _step(out, "node-check")
        node = selfcheck.node_binary()
        if not node_check:
            out.steps["node-check"] = "skipped: --no-node-check"
        elif node is None:
            out.steps["node-check"] = "skipped: node not found"
        else:
            res = selfcheck.node_check(patched, node)
            if not res.ok:
                return _fail(out, "node --input-type=module --check: " + res.message[:400])
            out.steps["node-check"] = "ok"

        _step(out, "revert")
        r = ops.revert_file(target)
        if r.action != "reverted" or target.read_bytes() != data:
            return _fail(out, f"revert: {r.action}; byte-identical: {target.read_bytes() == data}")
        out.steps["revert"] = "ok"

    _step(out, "inspect")
    read_drift(data, out)
    out.steps["inspect"] = "ok" if not out.drift else f"{len(out.drift)} drift"
    out.result, out.failed_step = "pass", None


def _fail(out: Outcome, reason: str) -> None:
    out.result = "fail"
    out.reason = reason[:600]
