"""The findings of the ``cli.js`` inspector (:class:`Report`) and the shape of a comparison with
the engine (:class:`Comparison`, computed by :mod:`patcher.inspect.drift`); the two meet in one
:class:`patcher.inspection.Inspection`."""

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

    def to_json(self) -> dict[str, Any]:
        """In the order a cli.js report's ``--json`` has always printed them."""
        return {
            "profile": self.profile,
            "profile_range": self.profile_range,
            "profile_problem": self.profile_problem,
            "drift": [asdict(d) for d in self.drift],
            "compared": list(self.compared),
        }


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

    def to_json(self) -> dict[str, Any]:
        """The findings (an :class:`patcher.inspection.Inspection` adds its comparison)."""
        doc: dict[str, Any] = {}
        for key in _JSON_KEYS:
            value = getattr(self, key)
            if key == "constants":
                value = {k: v.to_json() for k, v in value.items()}
            elif isinstance(value, dict):
                value = dict(value)
            doc[key] = value
        return doc
