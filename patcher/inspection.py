"""One ``inspect`` report for a ``cli.js`` file and a native build (:class:`Inspection`).

What was read is the findings of one reader (:class:`FindingsReader`: the cli.js inspector's
:class:`patcher.inspect.Report`, or the :class:`patcher.native.levels.Levels` of a later native
build) and their comparison with the engine (the one drift table, :mod:`patcher.inspect.drift`):
:func:`read` makes both, for an npm ``cli.js`` (:func:`inspect_cli_js`) and a native build
(:func:`patcher.native.inspect.inspect_app`) alike. Around them, one optional part says where
they were read: a ``cli.js`` file (:class:`CliJsFile`: its path, npm package, a note) or a
native build (:class:`NativePart`: the container, the lever and its facts, the warnings). Each
kind keeps its ``--json`` shape (:meth:`Inspection.to_json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ctxpatch.errors import ExitCode
from patcher import inspect as cli_js_inspector
from patcher.inspect.drift import compare
from patcher.native.app import Source
from patcher.native.levels import extract

if TYPE_CHECKING:
    from patcher.inspect.drift import Findings
    from patcher.inspect.report import Comparison, Drift
    from patcher.native.levers import Lever, LeverFacts


class FindingsReader(Protocol):
    """Reads Claude Code's sources (a cli.js, or a native build's modules) into findings of its
    ``kind``."""

    kind: str

    def read(self, sources: Sequence[Source], version: str | None) -> Findings: ...


class CliJsReader:
    """The ``cli.js`` inspector (:mod:`patcher.inspect`): an npm cli.js, or a single-module
    native build's."""

    kind = "cli.js"

    def read(self, sources: Sequence[Source], version: str | None) -> Findings:
        return cli_js_inspector.inspect(sources[0].data, version)


class LevelsReader:
    """The levels reader (:mod:`patcher.native.levels`), across every module."""

    kind = "levels"

    def read(self, sources: Sequence[Source], version: str | None) -> Findings:
        return extract(sources)


@dataclass(frozen=True)
class CliJsFile:
    """The cli.js file the findings were read from."""

    path: str
    package: str | None = None  # name@version of its npm package
    note: str = ""  # e.g. patched by ctxpatch: the original it records was read


@dataclass(frozen=True)
class Container:
    """The native build around the JavaScript: what ``inspect`` says before reading it."""

    path: str
    container: str
    layout: str
    version: str | None
    modules: int
    js_modules: int
    js_bytes: int


@dataclass(frozen=True)
class NativePart:
    """What only a native build has: the container, the lever (:mod:`patcher.native.levers`)
    and the warnings (a version newer than every profile)."""

    build: Container
    facts: LeverFacts
    lever: Lever
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Inspection:
    findings: Findings
    comparison: Comparison
    file: CliJsFile | None = None  # a cli.js
    native: NativePart | None = None  # a native build

    @property
    def path(self) -> str:
        where = self.native.build if self.native is not None else self.file
        return "" if where is None else where.path

    @property
    def version(self) -> str | None:
        if self.native is not None:
            return self.native.build.version
        return getattr(self.findings, "version", None)

    @property
    def reader(self) -> str:
        return self.findings.kind

    @property
    def report(self) -> dict[str, Any]:
        """The reader's own JSON; a cli.js report's has always held the comparison too, before
        ``unresolved``."""
        doc = self.findings.to_json()
        if self.findings.kind == CliJsReader.kind:
            unresolved = doc.pop("unresolved")
            doc.update(self.comparison.to_json(), unresolved=unresolved)
        return doc

    @property
    def warnings(self) -> tuple[str, ...]:
        return () if self.native is None else self.native.warnings

    @property
    def profile(self) -> str | None:
        return self.comparison.profile

    @property
    def profile_range(self) -> str | None:
        return self.comparison.profile_range

    @property
    def profile_problem(self) -> str:
        return self.comparison.profile_problem

    @property
    def compared(self) -> list[str]:
        return list(self.comparison.compared)

    @property
    def drift(self) -> list[Drift]:
        return list(self.comparison.drift)

    def exit_code(self, strict: bool = False) -> int:
        """CHANGE_NEEDED on drift, or with ``strict`` on a warning (the native version is newer
        than every engine profile); else 0."""
        return int(ExitCode.CHANGE_NEEDED) if self.drift or (strict and self.warnings) else 0

    def to_json(self) -> dict[str, Any]:
        """A cli.js: its path, package and note, then the reader's JSON (with the comparison);
        a native build: the container, the reader and its JSON, the comparison,
        the warnings and the lever."""
        if self.native is None:
            f = self.file or CliJsFile("")
            return {"path": f.path, "package": f.package, "note": f.note, **self.report}
        n = self.native
        return {
            **asdict(n.build),
            "reader": self.reader,
            "report": self.report,
            "profile": self.profile,
            "profile_range": self.profile_range,
            "profile_problem": self.profile_problem,
            "compared": self.compared,
            "drift": [asdict(d) for d in self.drift],
            "warnings": list(n.warnings),
            "lever": {"lever": n.lever.name, "why": n.lever.why, "facts": n.facts.to_json()},
        }


def read(
    reader: FindingsReader,
    sources: Sequence[Source],
    version: str | None,
    *,
    file: CliJsFile | None = None,
    native: NativePart | None = None,
) -> Inspection:
    """The findings of ``reader`` on ``sources`` compared with the engine's profile for the
    version they were read as (a cli.js report's own: the file's header when ``version`` is
    None), where they were read around them."""
    findings = reader.read(sources, version)
    seen_as = getattr(findings, "version", None) or version
    return Inspection(findings, compare(findings, seen_as), file=file, native=native)


def inspect_cli_js(
    data: bytes, version: str | None = None, file: CliJsFile | None = None
) -> Inspection:
    """``inspect`` of a whole cli.js (``data``) as Claude Code ``version`` (default: its header)."""
    return read(CliJsReader(), [Source(file.path if file else "cli.js", data)], version, file=file)
