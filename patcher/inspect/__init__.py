"""``ctxpatch inspect``: what a ``cli.js`` really does about compaction, read by meaning.

Pure: ``inspect(data)`` takes the bytes of a ``cli.js`` and returns its findings, a
:class:`Report`. No I/O. Compared with the engine, they make one
:class:`patcher.inspection.Inspection` (:func:`patcher.inspection.inspect_cli_js`).

Every constant is reached through the code that uses it, never by searching for its value (20000
is the warning offset, the error offset, the output-reserve cap and the micro-compaction minimum
saving all at once). The anchors are meanings rather than minified names
(``shared/research/versions.md`` §7.1). One module per job:

* :mod:`.jsconst` evaluates constant expressions and follows locals and module constants;
* one extractor per mechanism, each returning a typed frozen :class:`.finding.Finding`:
  :mod:`.thresholds` (warning state, threshold, effective window, blocking limit),
  :mod:`.counter` (the auto-compact token count), :mod:`.microcompact`, :mod:`.estimator`
  (the x4/3 message estimate), :mod:`.session_memory`;
* :mod:`.drift` compares findings with the engine's profile (one table of fields);
* :mod:`.render` prints it.

Only functions around the anchors are parsed (windowed tree-sitter parses, see
:mod:`patcher.jsparse`): never the whole file.
"""

from __future__ import annotations

from typing import Any

from patcher import callsite
from patcher.bundle import version_of
from patcher.inspect import counter, estimator, microcompact, session_memory, thresholds
from patcher.inspect.jsconst import Constant, Reader, env_read
from patcher.inspect.render import render
from patcher.inspect.report import Comparison, Drift, Report
from patcher.markers import sha256

__all__ = [
    "ENV_VARS",
    "Comparison",
    "Constant",
    "Drift",
    "Report",
    "inspect",
    "render",
    "sha256",
]

ENV_VARS = (
    "DISABLE_COMPACT",
    "DISABLE_AUTO_COMPACT",
    "DISABLE_MICROCOMPACT",
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
    "CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    "CLAUDE_CODE_MAX_CONTEXT_TOKENS",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "ENABLE_CLAUDE_CODE_SM_COMPACT",
    "DISABLE_CLAUDE_CODE_SM_COMPACT",
    "CLAUDE_CODE_DISABLE_1M_CONTEXT",
    "USE_API_CONTEXT_MANAGEMENT",
)


def inspect(data: bytes, version: str | None = None) -> Report:
    """Read ``data`` (a whole ``cli.js``) as Claude Code ``version`` (default: the version the
    file declares)."""
    r = Reader(data)
    found = callsite.search(data)
    site: dict[str, Any] = {}
    shape, problem = None, ""
    if len(found.candidates) == 1:
        c = found.candidates[0]
        shape = c.shape
        site = {
            "callee": c.callee,
            "generator": c.generator,
            "messages_var": c.messages_var,
            "byte": c.call_start,
        }
    elif found.candidates:
        problem = f"{len(found.candidates)} candidate call sites (ambiguous)"
    else:
        problem = (
            "no micro-compaction function"
            if not found.mc_functions and not found.deps_calls
            else "micro-compaction found but no query-loop call of it"
        )
    t = thresholds.extract(r)
    return Report(
        version=version or version_of(data),
        sha256=sha256(data),
        size=len(data),
        thresholds=t,
        counter=counter.extract(r, t.functions.get("warning_state")),
        micro=microcompact.extract(r, found),
        estimator=estimator.extract(r),
        session_memory=session_memory.extract(r),
        shape=shape,
        call_site=site,
        locate_problem=problem,
        env_vars={v: env_read(data, v) for v in ENV_VARS},
    )
