"""Dollars of a session: what it really used (its transcript's usage) and what each replay would
have used, priced with :mod:`usage.prices`.

A replayed request (``engine.replay.model.Request``) is billed as ``prompt - cache_read -
cache_write`` uncached input, ``cache_write`` written, ``cache_read`` read and its recorded
output. The engine does not model the cache's lifetime: a replay's writes are priced at the
lifetime the real session wrote most (Claude Code uses the 1-hour cache for some accounts), so a
scenario is never cheaper only because of a lifetime it would not have used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from engine.replay.model import Simulation
from engine.transcript import Transcript
from usage.prices import PriceTable, Usage, cost_usd


def recorded_usage(tr: Transcript) -> dict[str, Usage]:
    """The main chain's real usage, per model (the transcript's replies)."""
    out: dict[str, Usage] = {}
    for r in tr.replies:
        out[r.model] = out.get(r.model, Usage()) + Usage.from_api(r.usage)
    return out


def one_hour_cache(used: Iterable[Usage]) -> bool:
    """Whether the session wrote more to the 1-hour cache than to the 5-minute one."""
    total = sum(used, Usage())
    return total.cache_write_1h > total.cache_write_5m


def _usage(uncached: int, write: int, read: int, output: int, one_hour: bool) -> Usage:
    if one_hour:
        return Usage(uncached, 0, write, read, output)
    return Usage(uncached, write, 0, read, output)


def compaction_usage(sim: Simulation, one_hour: bool = False) -> Usage:
    """The summary requests of a simulation's compactions (engine.replay.compaction_cost),
    which no request record of the transcript holds."""
    return _usage(
        0,
        sum(c.cache_write for c in sim.compactions),
        sum(c.cache_read for c in sim.compactions),
        sum(c.output_tokens for c in sim.compactions),
        one_hour,
    )


def replay_usage(sim: Simulation, one_hour: bool = False) -> Usage:
    """A replay's requests, and its compactions' summary requests, summed as the API would
    bill them."""
    uncached = write = read = output = 0
    for r in sim.requests:
        uncached += r.prompt_tokens - r.cache_read - r.cache_write
        write += r.cache_write
        read += r.cache_read
        output += r.output_tokens
    return _usage(uncached, write, read, output, one_hour) + compaction_usage(sim, one_hour)


@dataclass(frozen=True)
class Priced:
    usd: float | None  # None: some usage has no price (its model is not in the table)
    unpriced: tuple[str, ...] = ()


def price_by_model(usage: Mapping[str, Usage], table: PriceTable) -> Priced:
    total = 0.0
    missing: list[str] = []
    for model, u in usage.items():
        c = cost_usd(u, model, table)
        if c is None:
            missing.append(model or "(no model)")
        else:
            total += c
    return Priced(None if missing else total, tuple(missing))


def usd(value: float | None) -> float | None:
    """Dollars as reports give them: to the cent's hundredth."""
    return None if value is None else round(value, 4)


def fmt_usd(value: float | None) -> str:
    if value is None:
        return "unpriced"
    return f"${value:,.2f}" if abs(value) >= 0.995 or value == 0 else f"${value:.3f}"


@dataclass(frozen=True)
class SimulationDollars:
    """Dollars of ``simulate``'s scenarios: ``recorded`` from the transcript's real usage, a
    replay from its requests (:func:`replay_usage`), at the session's model's prices."""

    by_scenario: dict[str, dict[str, object]]
    date: str

    def of(self, scenario: str) -> dict[str, object]:
        return self.by_scenario[scenario]

    def saved(self, base: str, other: str) -> float | None:
        a, b = self.by_scenario[base]["usd"], self.by_scenario[other]["usd"]
        if not isinstance(a, float) or not isinstance(b, float):
            return None
        return usd(a - b)

    def render(self, installed: str | None = "patched") -> str:
        """The dollars line; ``installed``: the scenario ctxpatch installs for the session's
        version (``usage.report.with_scenario``), whose saving against unpatched it adds."""
        items = list(self.by_scenario.items())
        text = ", ".join(f"{name} {fmt_usd(d['usd'])}" for name, d in items)  # type: ignore[arg-type]
        line = f"dollars (prices of {self.date}, output included): {text}"
        if installed and "unpatched" in self.by_scenario and installed in self.by_scenario:
            saved = fmt_usd(self.saved("unpatched", installed))
            line += f"; {installed} saves {saved} against unpatched"
        return line


def simulation_dollars(
    tr: Transcript, sims: Iterable[Simulation], table: PriceTable
) -> SimulationDollars:
    used = recorded_usage(tr)
    hour = one_hour_cache(used.values())
    out: dict[str, dict[str, object]] = {}
    for s in sims:
        if s.scenario == "recorded":
            calls = compaction_usage(s, hour)
            paid = {**used, s.model: used.get(s.model, Usage()) + calls} if s.compactions else used
            priced = price_by_model(paid, table)
            total = sum(paid.values(), Usage())
            out[s.scenario] = {
                "usd": usd(priced.usd),
                "usage": total.as_dict(),
                "model": s.model,
                **({"unpriced_models": list(priced.unpriced)} if priced.unpriced else {}),
            }
        else:
            u = replay_usage(s, hour)
            out[s.scenario] = {
                "usd": usd(cost_usd(u, s.model, table)),
                "usage": u.as_dict(),
                "model": s.model,
            }
    return SimulationDollars(out, table.date)
