"""``ctxpatch regress --native``: ``inspect`` over published native builds (never a patch).

Each version's platform package (``@anthropic-ai/claude-code-linux-x64`` by default) is fetched
through :func:`patcher.npmcache.native_binary` (tarball deleted once unpacked, at most
``NATIVE_KEEP`` versions kept), its JavaScript read out and inspected, and the drift from the
engine's profile recorded in the same :class:`patcher.regress.Outcome` records as the ``cli.js``
cycle. Results: ``pass`` (constants read, compared), ``fail`` (the binary or its compaction code
could not be read), ``fetch-failed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from ctxpatch.errors import CtxpatchError
from engine.versions import FIRST_NATIVE as CC_FIRST_NATIVE
from engine.versions import FIRST_NATIVE_SDK
from patcher import npmcache, regress
from patcher.native.app import read_app
from patcher.native.inspect import inspect_app, new_report
from patcher.native.reader import NativeBinary
from patcher.regress.drift import record
from patcher.versions import parse_version

FIRST_NATIVE = {"cc": CC_FIRST_NATIVE, "sdk": FIRST_NATIVE_SDK}


def select(
    packages: Iterable[str],
    *,
    versions: str | None = None,
    all_: bool = False,
    sample: int | None = None,
    lister: Callable[[str], list[str]] = regress.published,
) -> list[regress.Job]:
    """:func:`patcher.regress.select` over the native versions only (the CI sample: the native
    one, in each package's numbers)."""
    packages = list(packages)
    jobs = regress.select(
        packages,
        versions=versions,
        all_=all_,
        sample=sample,
        lister=lister,
        span={p: (v, None) for p, v in FIRST_NATIVE.items()},
        ci_sample=[
            (p, regress.to_package(v, p) or v)
            for _, v in npmcache.NATIVE_CI_SAMPLE
            for p in packages
        ],
    )
    return [j for j in jobs if parse_version(j.version) >= parse_version(FIRST_NATIVE[j.package])]


def run_one(job: regress.Job) -> regress.Outcome:
    out = regress.Outcome(job.package, job.version)
    started = time.monotonic()
    out.failed_step = "fetch"
    try:
        exe = npmcache.native_binary(job.package, job.version)
    except CtxpatchError as e:
        out.result, out.reason = "fetch-failed", f"{e.what}: {e.why}"
        out.seconds = round(time.monotonic() - started, 2)
        return out
    out.steps["fetch"] = "ok"
    out.failed_step = "inspect"
    try:
        with NativeBinary(exe) as nb:
            app = read_app(nb)
            build = new_report(nb, app, nb.location.container)
        out.size = nb.size
        rep = inspect_app(app, build)
    except CtxpatchError as e:
        out.reason = f"{e.what}: {e.why}"
    except Exception as e:  # inspect is a report: a bug here fails this version, not the run
        out.reason = f"{type(e).__name__}: {e}"
    else:
        out.claude_code_version = rep.version
        out.shape = f"native-{build.layout}"
        record(out, rep)
        out.steps["inspect"] = f"{rep.reader}: " + (
            "ok" if not rep.drift else f"{len(rep.drift)} drift"
        )
        if rep.profile is None:
            out.reason = rep.profile_problem
        else:
            out.result, out.failed_step = "pass", None
    out.seconds = round(time.monotonic() - started, 2)
    return out


def run(
    jobs: list[regress.Job],
    on_done: Callable[[regress.Outcome, int, int], None] | None = None,
) -> regress.Run:
    """One version after another (each is a 230-380 MB file: no parallel downloads)."""
    state = regress.Run()
    for i, job in enumerate(jobs, 1):
        o = run_one(job)
        state.outcomes[o.key] = o
        if on_done is not None:
            on_done(o, i, len(jobs))
    return state
