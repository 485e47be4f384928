"""One ``inspect`` report for a ``cli.js`` file and a native build (:class:`Inspection`).

What was read is the findings of one reader (a :class:`patcher.inspect.Report` of the cli.js
inspector, or the :class:`patcher.native.levels.Levels` of a later native build: see
:class:`patcher.native.inspect.FindingsReader`) and their comparison with the engine (the one
drift table, :mod:`patcher.inspect.drift`). Around them, one optional part says where they were
read: a ``cli.js`` file (:class:`CliJsFile`: its path, npm package, a note) or a native build
(:class:`NativePart`: the container, the lever and its facts, the warnings). Each kind keeps its
``--json`` shape (:meth:`Inspection.to_json`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ctxpatch.errors import ExitCode

if TYPE_CHECKING:
    from patcher.inspect.drift import Findings
    from patcher.inspect.report import Comparison, Drift
    from patcher.native.levers import Lever, LeverFacts


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
        """The reader's own JSON."""
        return self.findings.to_json()

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
        """A cli.js: its path, package and note, then the reader's JSON (which holds the
        comparison); a native build: the container, the reader and its JSON, the comparison,
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
