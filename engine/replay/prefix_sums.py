"""Prefix sums of a replay's per-message costs, carried from request to request.

A replayed request sums its messages' costs several times over: the prompt the server counts
(``overhead + sum(costs)``), the prompt after the server's edit, what the prompt cache reads
(the costs of the earlier prompt it extends, ``sum(costs[:n])``). Each is a pass over the whole
history, so a replay of ``n`` requests over a history that keeps growing does ``O(n²)`` work.
The stages that make the costs (:class:`engine.replay.prompt_parts.PromptParts`,
:class:`engine.replay.clearing_incremental.IncrementalClearing`) know how many leading costs are
the previous request's; :class:`PrefixSums` keeps the sums of those and adds the rest, in the
order ``sum`` adds them: ``table()[k] == sum(costs[:k])``, bit for bit, where ``sum`` adds floats
one after the other (3.11; from 3.12 ``sum`` compensates its rounding errors, and the table is
not offered: the callers sum as before).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import accumulate


def _sum_is_plain() -> bool:
    """Whether ``sum`` adds floats one after the other as ``+`` does (3.11; 3.12 on compensates
    the rounding errors: Neumaier's summation, which gives 1.0 here)."""
    return sum([1e100, 1.0, -1e100]) == 0.0


PLAIN_SUM = _sum_is_plain()


class PrefixSums:
    """``sum(values[:k])`` for every ``k`` of the list last given, from the previous list's."""

    __slots__ = ("_sums",)

    def __init__(self) -> None:
        self._sums: list[float] = [0.0]

    def update(self, values: Sequence[float], kept: int) -> None:
        """Bring the sums to ``values``, whose first ``kept`` values are those of the list last
        given (the same numbers, in the same places)."""
        if not PLAIN_SUM:
            return
        sums = self._sums
        kept = min(kept, len(sums) - 1)
        del sums[kept + 1 :]
        more = accumulate(values[kept:], operator.add, initial=sums[kept])
        next(more)  # the initial value, already in place
        sums.extend(more)

    def table(self) -> Sequence[float] | None:
        """``table()[k] == sum(values[:k])`` for the list last given (its own list: read it
        before the next :meth:`update`), or ``None`` where ``sum`` does not add that way."""
        return self._sums if PLAIN_SUM else None


def summed(values: Sequence[float], sums: Sequence[float] | None) -> float:
    """``sum(values)``, from the prefix sums of ``values`` when given."""
    return sum(values) if sums is None else sums[len(values)]
