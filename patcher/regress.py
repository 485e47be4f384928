"""``ctxpatch regress``: the whole patch life cycle on published versions, one by one.

Per version: fetch (``npm pack``, cached) → locate → apply → check → apply again (no change) →
ESM node check of the patched file → revert (byte-identical) → ``inspect`` drift against the
engine's profile. The work happens on a copy in a scratch folder; the cache is never modified
(except by ``prune``, which drops the files ctxpatch never reads from versions this run
downloaded).

Parallel-safe (one lock file per cached package, each version in its own scratch folder) and
resumable (``--json FILE --resume`` skips the patch cycle of versions already passed or refused
in FILE, re-reading only their drift with the current ``inspect``; FILE is rewritten after
every version).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patcher import __version__, clearsite, npmcache, ops, plan, selfcheck, snippet
from patcher.errors import CtxpatchError, FetchFailed, Unsupported, UsageError
from patcher.inspect import inspect
from patcher.markers import sha256
from patcher.versions import parse_version, version_of

PACKAGES = npmcache.SHORT  # "cc" / "sdk" -> npm name
FIRST = {"cc": "1.0.60", "sdk": "0.0.4"}  # first with micro-compaction (sdk: its first release)
LAST = {"cc": "2.1.112", "sdk": "0.2.112"}  # last with a cli.js
KEEP_FILES = frozenset({"cli.js", "package.json"})
OK_RESULTS = frozenset({"pass", "unsupported", "native"})  # not a failure
RESULTS = ("pass", "fail", "unsupported", "native", "fetch-failed")


@dataclass(frozen=True, order=True)
class Job:
    package: str  # "cc" | "sdk"
    version: str

    @property
    def key(self) -> str:
        return f"{self.package}@{self.version}"


@dataclass
class Outcome:
    package: str
    version: str
    result: str = "fail"  # pass | fail | unsupported | native | fetch-failed
    claude_code_version: str | None = None
    shape: str | None = None
    microcompact: str | None = None  # legacy | stub | time-based | None
    clearing: str | None = None  # request-builder shape of the clearing injection, or "none"
    clearing_reason: str = ""  # why not, where it is "none"
    sha256: str | None = None
    size: int | None = None
    failed_step: str | None = None
    reason: str = ""
    steps: dict[str, str] = field(default_factory=dict)  # step -> "ok" | "skipped: ..."
    profile: str | None = None
    drift: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def ok(self) -> bool:
        return self.result in OK_RESULTS and not self.drift

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------ selection


def published(package: str, *, refresh: bool = False) -> list[str]:
    """Stable published versions of ``package`` (oldest first), via ``npm view`` (cached)."""
    name = PACKAGES.get(package, package)
    cache = npmcache.cache_root() / f"versions-{name.replace('@', '').replace('/', '-')}.json"
    versions: list[str] | None = None
    if not refresh and cache.is_file() and time.time() - cache.stat().st_mtime < 6 * 3600:
        versions = json.loads(cache.read_text())
    if versions is None:
        npm = shutil.which("npm")
        proc = None
        if npm is not None:
            proc = subprocess.run(
                [npm, "view", name, "versions", "--json"],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        if proc is not None and proc.returncode == 0:
            versions = json.loads(proc.stdout)
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(".tmp")
            tmp.write_text(json.dumps(versions))
            tmp.replace(cache)
        elif cache.is_file():
            versions = json.loads(cache.read_text())
        else:
            raise FetchFailed(
                f"cannot list the published versions of {name}",
                why="npm is not on PATH" if npm is None else (proc.stderr if proc else "")[-300:],
                hint="install node/npm and check that the npm registry is reachable",
            )
    stable = [v for v in versions if "-" not in v and "+" not in v]
    return sorted(stable, key=parse_version)


SDK_0_2_LAST = 141  # agent-sdk 0.2.141 = cc 2.1.141; then 0.3.142 = 2.1.142


def to_package(version: str, package: str) -> str | None:
    """Map a version to ``package``'s numbering: cc 2.0.N = sdk 0.1.N, 2.1.N = 0.2.N up to
    2.1.141 and 0.3.N from 2.1.142 (the sdk's published list), 1.0.128 = sdk 0.0.4
    (versions.md §1). None when there is no counterpart."""
    v = parse_version(version)
    is_sdk = v[0] == 0
    if package == "sdk":
        if is_sdk:
            return version
        if v[:2] == (2, 0):
            return f"0.1.{v[2]}"
        if v[:2] == (2, 1):
            return f"0.2.{v[2]}" if v[2] <= SDK_0_2_LAST else f"0.3.{v[2]}"
        return "0.0.4" if v == (1, 0, 128) else None
    if not is_sdk:
        return version
    if v[:2] == (0, 1):
        return f"2.0.{v[2]}"
    if v[:2] in ((0, 2), (0, 3)):
        return f"2.1.{v[2]}"
    return "1.0.128" if v == (0, 0, 4) else None


def select(
    packages: Iterable[str],
    *,
    versions: str | None = None,
    all_: bool = False,
    sample: int | None = None,
    lister: Callable[[str], list[str]] = published,
) -> list[Job]:
    """The jobs for ``--versions`` / ``--all`` / ``--sample`` (none: the per-shape CI sample)."""
    packages = list(packages)
    if sum(x is not None and x is not False for x in (versions, all_ or None, sample)) > 1:
        raise UsageError("give only one of --versions, --all and --sample")
    jobs: list[Job] = []
    if versions is None and not all_ and sample is None:
        return sorted({Job(p, v) for p, v in npmcache.CI_SAMPLE if p in packages})
    for pkg in packages:
        if versions is not None:
            jobs += [Job(pkg, v) for v in _parse_spec(versions, pkg, lister)]
            continue
        known = lister(pkg)
        lo, hi = parse_version(FIRST[pkg]), parse_version(LAST[pkg])
        full = [v for v in known if lo <= parse_version(v) <= hi]
        if sample is not None:
            if sample < 1:
                raise UsageError("--sample needs a positive number of versions")
            full = _spread(full, sample)
        jobs += [Job(pkg, v) for v in full]
    return sorted(set(jobs), key=lambda j: (j.package, parse_version(j.version)))


def _parse_spec(spec: str, pkg: str, lister: Callable[[str], list[str]]) -> list[str]:
    out: list[str] = []
    known: list[str] | None = None
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if ".." in item:
            a, _, b = item.partition("..")
            for end in (a, b):
                if not _looks_like_version(end):
                    raise UsageError(f"--versions {item}: {end!r} is not a version (X.Y.Z)")
            lo_s, hi_s = to_package(a, pkg), to_package(b, pkg)
            if lo_s is None or hi_s is None:
                continue  # no counterpart in this package (e.g. cc 1.0.x for the sdk)
            if known is None:
                known = lister(pkg)
            lo, hi = parse_version(lo_s), parse_version(hi_s)
            if lo > hi:
                raise UsageError(f"--versions {item}: the range is empty ({a} > {b})")
            out += [v for v in known if lo <= parse_version(v) <= hi]
        else:
            if not _looks_like_version(item):
                raise UsageError(f"--versions {item}: not a version (X.Y.Z) or range (A..B)")
            mapped = to_package(item, pkg)
            if mapped is not None:
                out.append(mapped)
    return out


def _looks_like_version(s: str) -> bool:
    parts = s.strip().split(".")
    return len(parts) == 3 and all(p.isdigit() for p in parts)


def _spread(items: list[str], n: int) -> list[str]:
    """``n`` items evenly spread over ``items``, first and last included."""
    if n >= len(items):
        return list(items)
    if n == 1:
        return [items[-1]]
    step = (len(items) - 1) / (n - 1)
    return list(dict.fromkeys(items[round(i * step)] for i in range(n)))


# ------------------------------------------------------------------------------ one version


@contextmanager
def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch(job: Job, *, prune: bool = False, root: Path | None = None) -> Path:
    """The cached package folder (``npm pack`` on a miss), locked against parallel runs."""
    base = (root or npmcache.cache_root()) / "npm"
    slug = npmcache._slug(PACKAGES[job.package], job.version)
    with _lock(base / f".{slug}.lock"):
        existed = (base / slug / "package" / "package.json").is_file()
        folder = npmcache.package_dir(job.package, job.version, root)
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
        _inspect(data, out)
        return
    except CtxpatchError as e:
        out.reason = f"{e.what}: {e.why}"[:600]
        _inspect(data, out)
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
    _inspect(data, out)
    out.steps["inspect"] = "ok" if not out.drift else f"{len(out.drift)} drift"
    out.result, out.failed_step = "pass", None


def _inspect(data: bytes, out: Outcome) -> None:
    try:
        rep = inspect(data, out.claude_code_version)
    except Exception as e:  # inspect is a report: its own bug must not hide the patch result
        out.unresolved.append(f"inspect failed: {type(e).__name__}: {e}")
        return
    out.microcompact = rep.micro.kind
    out.profile = rep.profile
    out.drift = [str(d) for d in rep.drift]
    out.unresolved = list(rep.unresolved)
    if out.shape is None:
        out.shape = rep.shape


def refresh_inspect(o: Outcome) -> Outcome:
    """Re-read the drift of an earlier outcome with the current ``inspect`` (cache only, ~1 s)."""
    path = (
        npmcache.cache_root()
        / "npm"
        / npmcache._slug(PACKAGES[o.package], o.version)
        / "package"
        / "cli.js"
    )
    if o.result == "pass" and path.is_file():
        data = path.read_bytes()
        if o.sha256 in (None, sha256(data)):
            started = time.monotonic()
            _inspect(data, o)
            o.steps["inspect"] = "ok" if not o.drift else f"{len(o.drift)} drift"
            o.seconds = round(o.seconds + time.monotonic() - started, 2)
    return o


def _fail(out: Outcome, reason: str) -> None:
    out.result = "fail"
    out.reason = reason[:600]


# ------------------------------------------------------------------------------ many


@dataclass
class Run:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    started: float = field(default_factory=time.time)

    def summary(self) -> dict[str, Any]:
        counts = {r: 0 for r in RESULTS}
        for o in self.outcomes.values():
            counts[o.result] = counts.get(o.result, 0) + 1
        return {
            "versions": len(self.outcomes),
            "results": counts,
            "with_drift": sum(1 for o in self.outcomes.values() if o.drift),
            "failed": sorted(k for k, o in self.outcomes.items() if o.result not in OK_RESULTS),
            "ok": all(o.ok for o in self.outcomes.values()),
        }

    def to_json(self) -> dict[str, Any]:
        ordered = sorted(
            self.outcomes.values(), key=lambda o: (o.package, parse_version(o.version))
        )
        summary = self.summary()
        return {  # the envelope of every --json (patcher.cli.output), with the run's context
            "ctxpatch": __version__,
            "exit_code": 0 if summary["ok"] else 1,
            "snippet_sha256": snippet.sha(),
            "clear_snippet_sha256": snippet.clear_sha(),
            "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "summary": summary,
            "results": [o.to_json() for o in ordered],
        }

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        tmp.replace(path)


def load_previous(path: Path) -> dict[str, Outcome]:
    """Outcomes of an earlier run written to ``path`` (for ``--resume``); {} when unreadable."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("snippet_sha256") != snippet.sha():
        return {}  # another snippet: every version must be tried again
    if doc.get("clear_snippet_sha256") != snippet.clear_sha():
        return {}
    known = set(Outcome.__dataclass_fields__)
    out = {}
    for item in doc.get("results", []):
        if isinstance(item, dict) and {"package", "version"} <= set(item):
            o = Outcome(**{k: v for k, v in item.items() if k in known})
            out[o.key] = o
    return out


def run(
    jobs: list[Job],
    *,
    workers: int = 1,
    prune: bool = False,
    node_check: bool = True,
    json_path: Path | None = None,
    resume: bool = False,
    on_done: Callable[[Outcome, int, int], None] | None = None,
) -> Run:
    """Run ``jobs`` (``workers`` processes), calling ``on_done(outcome, done, total)``."""
    state = Run()
    todo = list(jobs)
    if resume and json_path is not None:
        previous = load_previous(json_path)
        wanted = {j.key for j in jobs}
        for key, o in previous.items():
            if key in wanted and o.result in OK_RESULTS:
                state.outcomes[key] = o
        todo = [j for j in jobs if j.key not in state.outcomes]
    resumed = list(state.outcomes.values())  # kept in the JSON until refreshed
    total = len(jobs)
    done = 0

    def finish(o: Outcome) -> None:
        nonlocal done
        state.outcomes[o.key] = o
        done += 1
        if json_path is not None:
            state.write(json_path)
        if on_done is not None:
            on_done(o, done, total)

    # versions that passed before keep their cycle result; their drift is read again (inspect
    # may have learnt something since), which costs about a second each
    if workers <= 1 or len(todo) + len(resumed) <= 1:
        for o in resumed:
            finish(refresh_inspect(o))
        for j in todo:
            finish(run_one(j, prune=prune, node_check=node_check))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures: dict[Future[Outcome], Job] = {
                pool.submit(refresh_inspect, o): Job(o.package, o.version) for o in resumed
            }
            futures.update(
                {pool.submit(run_one, j, prune=prune, node_check=node_check): j for j in todo}
            )
            pending = set(futures)
            from concurrent.futures import FIRST_COMPLETED, wait

            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    j = futures[f]
                    try:
                        o = f.result()
                    except Exception as e:  # the worker died (out of memory, killed)
                        o = Outcome(
                            j.package,
                            j.version,
                            failed_step="internal",
                            reason=f"worker failed: {type(e).__name__}: {e}",
                        )
                    finish(o)
    if json_path is not None:
        state.write(json_path)
    return state


# ------------------------------------------------------------------------------ rendering


def matrix(outcomes: Iterable[Outcome]) -> str:
    """One line per version: package, version, Claude Code version, shape, MC, the clearing
    injection's request-builder shape, result, drift."""
    rows = [
        (
            "package",
            "version",
            "claude-code",
            "shape",
            "mc",
            "clearing",
            "result",
            "drift",
            "seconds",
        )
    ]
    for o in sorted(outcomes, key=lambda o: (o.package, parse_version(o.version))):
        rows.append(
            (
                o.package,
                o.version,
                o.claude_code_version or "-",
                o.shape or "-",
                o.microcompact or "-",
                o.clearing or "-",
                o.result + (f" ({o.failed_step})" if o.result == "fail" and o.failed_step else ""),
                str(len(o.drift)) if o.drift else "-",
                f"{o.seconds:.1f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def details(outcomes: Iterable[Outcome]) -> str:
    """The reasons of failures and the drift, one block per version that has any."""
    blocks = []
    for o in sorted(outcomes, key=lambda o: (o.package, parse_version(o.version))):
        if o.result not in OK_RESULTS:
            blocks.append(f"{o.key}: {o.result} at {o.failed_step}: {o.reason}")
        if o.clearing == "none":
            blocks.append(f"{o.key}: no server-side clearing: {o.clearing_reason}")
        for d in o.drift:
            blocks.append(f"{o.key}: drift {d}")
    return "\n".join(blocks)
