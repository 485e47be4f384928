"""What one extractor read: its constants, the functions it went through, and what it could not read.

Every extractor (:mod:`.thresholds`, :mod:`.counter`, :mod:`.microcompact`, :mod:`.estimator`,
:mod:`.session_memory`) returns a frozen subclass of :class:`Finding` with its own typed fields;
``features()`` gives those fields under the keys of the ``features`` object of
``ctxpatch inspect --json`` (a key is absent when the extractor could not read it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from patcher.inspect.jsconst import Constant, Unresolved


@dataclass(frozen=True)
class Finding:
    constants: dict[str, Constant] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)  # role -> minified name
    unresolved: tuple[str, ...] = ()  # what could not be read, and why

    def features(self) -> dict[str, Any]:
        raise NotImplementedError


class Notes:
    """The mutable notebook an extractor fills while it reads, frozen into its Finding."""

    def __init__(self) -> None:
        self.constants: dict[str, Constant] = {}
        self.functions: dict[str, str] = {}
        self.unresolved: list[str] = []

    def set(self, key: str, get: Callable[[], Constant]) -> None:
        """Record the constant ``get()`` reads, or why it could not be read."""
        try:
            self.constants[key] = get()
        except Unresolved as e:
            self.unresolved.append(f"{key}: {e}")

    def common(self) -> dict[str, Any]:
        """The keyword arguments every Finding takes."""
        return {
            "constants": dict(self.constants),
            "functions": dict(self.functions),
            "unresolved": tuple(self.unresolved),
        }


def present(**values: Any) -> dict[str, Any]:
    """``values`` without the ones that were not read (None)."""
    return {k: v for k, v in values.items() if v is not None}
