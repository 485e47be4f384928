"""One dated price table per model, in US dollars per million tokens (MTok).

Each model has five prices: base input, cache write with the 5-minute lifetime, cache write with
the 1-hour lifetime, cache read (hits and refreshes) and output. The built-in table is
Anthropic's published list prices as of :data:`PRICES_DATE` (:data:`PRICES_SOURCE`); it is a
snapshot, so a user whose prices differ (a newer model, a negotiated rate, a price change) gives a
file with ``--prices FILE`` or ``CTXPATCH_PRICES=FILE``. The file (TOML, or JSON when it ends in
``.json``) replaces or adds models and may restate the date::

    date = "2026-12-01"
    [models."claude-opus-4-6"]
    input = 5.0
    cache_write_5m = 6.25
    cache_write_1h = 10.0
    cache_read = 0.5
    output = 25.0

A model id is matched by its longest table key that is a prefix of it after the build date
(``-20251101``) and a ``[1m]`` suffix are stripped, so ``claude-opus-4-5-20251101`` is priced as
``claude-opus-4-5``. A bare alias (``opus``, ``sonnet``, ``haiku``, ``fable``) is priced as the
model it named on the table's date (:data:`ALIASES`). A model the table does not know has no
price: ``cost_usd`` returns ``None`` and reports say "unpriced" rather than guess.

Not modelled: long-context surcharges (1M-window betas above 200K input), batch discounts,
regional endpoints, fast modes, the prompt-length tiers of some small models. Prices are list
prices; a subscription (Pro/Max) is billed differently, so dollars there are what the same usage
would cost on the API.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from ctxpatch.errors import UsageError

PRICES_DATE = "2026-11-25"
PRICES_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing"
PRICES_ENV = "CTXPATCH_PRICES"
MTOK = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _std(base: float, output: float, read: float | None = None) -> Price:
    """The published structure: 5-minute write 1.25x input, 1-hour write 2x, read 0.1x."""
    return Price(base, base * 1.25, base * 2.0, base * 0.1 if read is None else read, output)


# Anthropic's list prices on PRICES_DATE (PRICES_SOURCE and the models' overview pages).
BUILTIN: dict[str, Price] = {
    "claude-fable-5-1": _std(10.0, 50.0, read=0.25),
    "claude-mythos-5-1": _std(10.0, 50.0, read=0.25),
    "claude-fable-5": _std(10.0, 50.0),
    "claude-mythos-5": _std(10.0, 50.0),
    "claude-opus-5-5": _std(4.0, 20.0, read=0.20),
    "claude-opus-5": _std(5.0, 25.0),
    "claude-opus-4-8": _std(5.0, 25.0),
    "claude-opus-4-7": _std(5.0, 25.0),
    "claude-opus-4-6": _std(5.0, 25.0),
    "claude-opus-4-5": _std(5.0, 25.0),
    "claude-opus-4-1": _std(15.0, 75.0),
    "claude-opus-4": _std(15.0, 75.0),
    "claude-3-opus": _std(15.0, 75.0),
    "claude-sonnet-5-5": _std(2.0, 10.0, read=0.10),
    "claude-sonnet-5": _std(2.0, 10.0),
    "claude-sonnet-4": _std(3.0, 15.0),  # 4, 4.5, 4.6
    "claude-3-7-sonnet": _std(3.0, 15.0),
    "claude-3-5-sonnet": _std(3.0, 15.0),
    "claude-haiku-4-5": _std(1.0, 5.0),
    "claude-3-5-haiku": _std(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 0.30, 0.50, 0.03, 1.25),
}
# What Claude Code's aliases named on PRICES_DATE.
ALIASES: dict[str, str] = {
    "fable": "claude-fable-5-1",
    "opus": "claude-opus-5-5",
    "sonnet": "claude-sonnet-5-5",
    "haiku": "claude-haiku-4-5",
}


@dataclass(frozen=True)
class PriceTable:
    date: str
    source: str
    models: Mapping[str, Price]
    aliases: Mapping[str, str]

    def lookup(self, model: str | None) -> Price | None:
        key = model_key(model)
        if not key:
            return None
        key = self.aliases.get(key, key)
        best = ""
        for name in self.models:
            if (key == name or key.startswith(name + "-")) and len(name) > len(best):
                best = name
        return self.models[best] if best else None

    def describe(self) -> dict[str, Any]:
        return {"date": self.date, "source": self.source}


_DATE_SUFFIX = re.compile(r"-\d{8}$")


def model_key(model: str | None) -> str:
    """``claude-opus-4-5-20251101[1m]`` -> ``claude-opus-4-5``; ``None`` -> ``""``."""
    if not model:
        return ""
    m = model.strip().lower()
    m = re.sub(r"\[[^\]]*\]$", "", m)
    return _DATE_SUFFIX.sub("", m)


@dataclass(frozen=True)
class Usage:
    """The billed numbers of one request (the API's ``usage`` object)."""

    input_tokens: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    output_tokens: int = 0

    @classmethod
    def from_api(cls, usage: Mapping[str, Any]) -> Usage:
        """From an API ``usage`` object: a ``cache_creation`` split wins over the total, which
        otherwise counts as 5-minute writes (Claude Code's default lifetime)."""

        def num(m: Mapping[str, Any] | None, k: str) -> int:
            v = m.get(k) if isinstance(m, Mapping) else None
            return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0

        split = usage.get("cache_creation")
        w5 = num(split, "ephemeral_5m_input_tokens")
        w1 = num(split, "ephemeral_1h_input_tokens")
        total = num(usage, "cache_creation_input_tokens")
        if w5 + w1 == 0:
            w5 = total
        return cls(
            input_tokens=num(usage, "input_tokens"),
            cache_write_5m=w5,
            cache_write_1h=w1,
            cache_read=num(usage, "cache_read_input_tokens"),
            output_tokens=num(usage, "output_tokens"),
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def cost_usd(
    usage: Usage | Mapping[str, Any], model: str | None, table: PriceTable | None = None
) -> float | None:
    """Dollars of one request's (or a sum of requests') usage; ``None`` when the model has no
    price in the table."""
    u = usage if isinstance(usage, Usage) else Usage.from_api(usage)
    p = (table or default_table()).lookup(model)
    if p is None:
        return None
    return (
        u.input_tokens * p.input
        + u.cache_write_5m * p.cache_write_5m
        + u.cache_write_1h * p.cache_write_1h
        + u.cache_read * p.cache_read
        + u.output_tokens * p.output
    ) / MTOK


def builtin_table() -> PriceTable:
    return PriceTable(PRICES_DATE, PRICES_SOURCE, dict(BUILTIN), dict(ALIASES))


def _bad(path: Path, why: str) -> UsageError:
    return UsageError(
        f"cannot use the price file {path}",
        why=why,
        hint='give a TOML (or .json) file with `date = "YYYY-MM-DD"` and one '
        '[models."<model id>"] table per model with input, cache_write_5m, cache_write_1h, '
        "cache_read and output in USD per million tokens (usage/prices.py shows an example)",
    )


def load_table(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The built-in table, with ``path`` (or ``$CTXPATCH_PRICES``) laid over it."""
    if path is None:
        path = os.environ.get(PRICES_ENV) or None
    base = builtin_table()
    if path is None:
        return base
    p = Path(path).expanduser()
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise _bad(p, e.strerror or str(e)) from e
    try:
        data = json.loads(raw) if p.suffix.lower() == ".json" else tomllib.loads(raw.decode())
    except (ValueError, UnicodeDecodeError) as e:
        raise _bad(p, f"not valid {'JSON' if p.suffix.lower() == '.json' else 'TOML'}: {e}") from e
    if not isinstance(data, dict):
        raise _bad(p, "the top level is not a table")
    models = dict(base.models)
    given = data.get("models", {})
    if not isinstance(given, dict):
        raise _bad(p, "`models` is not a table")
    names = [f.name for f in fields(Price)]
    for model, row in given.items():
        if not isinstance(row, dict):
            raise _bad(p, f"models.{model} is not a table")
        missing = [n for n in names if n not in row]
        unknown = sorted(set(row) - set(names))
        if missing or unknown:
            raise _bad(
                p, f"models.{model}: missing {missing or 'none'}, unknown {unknown or 'none'}"
            )
        vals = [row[n] for n in names]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in vals):
            raise _bad(p, f"models.{model}: every price must be a number >= 0")
        models[model_key(str(model))] = Price(*(float(v) for v in vals))
    date = data.get("date", base.date)
    if not isinstance(date, str):
        date = str(date)  # TOML reads an unquoted date as a date
    aliases = dict(base.aliases)
    extra = data.get("aliases", {})
    if isinstance(extra, dict):
        aliases.update({str(k).lower(): model_key(str(v)) for k, v in extra.items()})
    return PriceTable(date, str(p), models, aliases)


@lru_cache(maxsize=1)
def default_table() -> PriceTable:
    """The table ``cost_usd`` uses without one: built-in + ``$CTXPATCH_PRICES`` (read once)."""
    return load_table()
