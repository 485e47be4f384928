"""Which published versions ``ctxpatch regress`` runs: listing, the cc/sdk numbering, selection.

Pure except :func:`published` (``npm view``, cached for six hours in the npm-pack cache).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping

from ctxpatch.errors import FetchFailed, UsageError
from patcher import npmcache
from patcher.regress.outcome import Job
from patcher.versions import parse_version

PACKAGES = npmcache.SHORT  # "cc" / "sdk" -> npm name
FIRST = {"cc": "1.0.60", "sdk": "0.0.4"}  # first with micro-compaction (sdk: its first release)
LAST = {"cc": "2.1.112", "sdk": "0.2.112"}  # last with a cli.js
PATCHABLE: Mapping[str, tuple[str, str | None]] = {p: (FIRST[p], LAST[p]) for p in FIRST}
"""The versions with a ``cli.js`` to patch, per package (``--all``, ``--sample``)."""


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
    span: Mapping[str, tuple[str, str | None]] = PATCHABLE,
    ci_sample: Iterable[tuple[str, str]] = npmcache.CI_SAMPLE,
) -> list[Job]:
    """The jobs for ``--versions`` / ``--all`` / ``--sample`` (none: ``ci_sample``, by default
    the per-shape CI sample), oldest first per package.

    ``--all`` and ``--sample`` take the published versions inside ``span`` (per package: first,
    last or None for no end); ``--versions`` takes what it names, in or out of the span.
    """
    packages = list(packages)
    if sum(x is not None and x is not False for x in (versions, all_ or None, sample)) > 1:
        raise UsageError("give only one of --versions, --all and --sample")
    jobs: set[Job] = set()
    if versions is None and not all_ and sample is None:
        jobs = {Job(p, v) for p, v in ci_sample if p in packages}
    for pkg in packages:
        if versions is not None:
            jobs.update(Job(pkg, v) for v in parse_spec(versions, pkg, lister))
            continue
        if not all_ and sample is None:
            continue
        first, last = span[pkg]
        lo = parse_version(first)
        hi = parse_version(last) if last is not None else None
        full = [
            v
            for v in lister(pkg)
            if lo <= parse_version(v) and (hi is None or parse_version(v) <= hi)
        ]
        if sample is not None:
            if sample < 1:
                raise UsageError("--sample needs a positive number of versions")
            full = spread(full, sample)
        jobs.update(Job(pkg, v) for v in full)
    return sorted(jobs, key=lambda j: (j.package, parse_version(j.version)))


def parse_spec(spec: str, pkg: str, lister: Callable[[str], list[str]]) -> list[str]:
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


def spread(items: list[str], n: int) -> list[str]:
    """``n`` items evenly spread over ``items``, first and last included."""
    if n >= len(items):
        return list(items)
    if n == 1:
        return [items[-1]]
    step = (len(items) - 1) / (n - 1)
    return list(dict.fromkeys(items[round(i * step)] for i in range(n)))
