"""The report of ``ctxpatch inspect``: what was read, and how it compares with the engine."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from patcher.inspect.counter import Counter
from patcher.inspect.estimator import Estimator
from patcher.inspect.finding import Finding
from patcher.inspect.jsconst import Constant
from patcher.inspect.microcompact import MicroCompaction
from patcher.inspect.session_memory import SessionMemory
from patcher.inspect.thresholds import Thresholds

# ``--json`` keys, in order (``features`` is the union of the findings' features)
_JSON_KEYS = (
    "version",
    "sha256",
    "size",
    "shape",
    "call_site",
    "locate_problem",
    "era",
    "functions",
    "constants",
    "features",
    "env_vars",
    "profile",
    "profile_range",
    "profile_problem",
    "drift",
    "compared",
    "unresolved",
)


@dataclass(frozen=True)
class Drift:
    field: str
    file: Any
    profile: Any

    def __str__(self) -> str:
        return f"{self.field}: file {self.file!r} != profile {self.profile!r}"


@dataclass(frozen=True)
class Comparison:
    """The engine profile a report was compared with, and the differences."""

    profile: str | None = None  # the engine profile compared with, "1.0.80" ...
    profile_range: str | None = None
    profile_problem: str = ""  # why no profile was compared
    drift: tuple[Drift, ...] = ()
    compared: tuple[str, ...] = ()  # profile fields compared


@dataclass(frozen=True)
class Report:
    """The findings of the ``cli.js`` inspector (``kind`` "cli.js"; the drift table's key)."""

    kind: ClassVar[str] = "cli.js"
    version: str | None
    sha256: str
    size: int
    thresholds: Thresholds = field(default_factory=Thresholds)
    counter: Counter = field(default_factory=Counter)
    micro: MicroCompaction = field(default_factory=MicroCompaction)
    estimator: Estimator = field(default_factory=Estimator)
    session_memory: SessionMemory = field(default_factory=SessionMemory)
    shape: str | None = None  # call-site shape of the query loop's MC call (S0..S6)
    call_site: dict[str, Any] = field(default_factory=dict)
    locate_problem: str = ""  # why no single call site, when there is none
    env_vars: dict[str, bool] = field(default_factory=dict)
    comparison: Comparison = field(default_factory=Comparison)

    # --- the findings together ---------------------------------------------------------------

    @property
    def findings(self) -> tuple[Finding, ...]:
        """In the order they are read (their ``unresolved`` notes keep that order)."""
        return (self.thresholds, self.counter, self.micro, self.estimator, self.session_memory)

    @property
    def era(self) -> str:
        return self.thresholds.era

    @property
    def constants(self) -> dict[str, Constant]:
        return {k: v for f in self.findings for k, v in f.constants.items()}

    @property
    def functions(self) -> dict[str, str]:
        return {k: v for f in self.findings for k, v in f.functions.items()}

    @property
    def features(self) -> dict[str, Any]:
        """What ``--json`` prints as ``features`` (read the typed findings in code)."""
        return {k: v for f in self.findings for k, v in f.features().items()}

    @property
    def unresolved(self) -> list[str]:
        return [u for f in self.findings for u in f.unresolved]

    def value(self, name: str) -> Any:
        c = self.constants.get(name)
        return None if c is None else c.value

    # --- the comparison ----------------------------------------------------------------------

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
    def drift(self) -> list[Drift]:
        return list(self.comparison.drift)

    @property
    def compared(self) -> list[str]:
        return list(self.comparison.compared)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        for key in _JSON_KEYS:
            value = getattr(self, key)
            if key == "constants":
                value = {k: v.to_json() for k, v in value.items()}
            elif key == "drift":
                value = [asdict(d) for d in value]
            elif isinstance(value, dict):
                value = dict(value)
            doc[key] = value
        return doc
