"""What a replay produces: its requests, its events and the whole simulation (a leaf: the
recorded replay, the counterfactual replays, calibration and the reports all import it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from engine.api.prompt_cache import WRITE_PRICE, price
from engine.claude_code.thresholds import Thresholds
from engine.profiles import Profile
from engine.replay.compaction_cost import CompactionCall

Scenario = Literal["recorded", "unpatched", "text_prune", "server_clearing", "patched", "oracle"]
# Session-memory compaction (engine.claude_code.session_memory) is not replayed: it needs the session-memory
# summary, which a transcript does not hold, and it is off unless remote flags (off offline) or
# ENABLE_CLAUDE_CODE_SM_COMPACT turn it on. The README lists these kinds.
# why an auto-compaction with unseen history in the prompt was not avoided (``Event.cause``):
# ``unseen_history``: even clearing every tool use the file shows leaves the count at the
# threshold, and without the unseen history it would be below (the real client sends that history
# as messages, whose tool uses the clearing would have cleared too: the replay cannot tell how
# many); ``unclearable``: at the threshold even without the unseen history; ``not_cleared``:
# clearing all it may at the previous request would have kept the count below the threshold
COMPACTION_CAUSES = ("unseen_history", "unclearable", "not_cleared")
EVENT_KINDS = (
    "micro_compact",
    "text_prune",
    "server_clear",
    "clear_stopped",
    "auto_compact",
    "blocking",
    "manual_compact",
)


@dataclass(frozen=True)
class Event:
    kind: str
    line: int
    tokens: int
    threshold: int | None = None
    saved_tokens: int | None = None
    recorded: bool | None = None
    predicted: bool | None = None
    pre_tokens: int | None = None
    note: str = ""
    # an auto-compaction while the prompt holds history the file does not hold (it starts
    # mid-conversation, ``Calibration.carried``): those tokens, Claude Code's count had the
    # previous request cleared every tool use it may (the mechanism's limit), and the cause
    # (``COMPACTION_CAUSES``); None for every other compaction
    unseen_tokens: int | None = None
    floor_tokens: int | None = None
    cause: str | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and v != ""}


@dataclass(frozen=True)
class Request:
    index: int
    line: int
    tokens: int  # the count cli.js compares with the thresholds before this request
    prompt_tokens: int  # what was (or would be) sent: input + cache creation + cache read
    output_tokens: int
    output_estimated: bool
    cache_break: bool
    events: tuple[str, ...]
    cache_read: int = 0  # prompt tokens read from the cache
    cache_write: int = 0  # prompt tokens written to the cache (the rest is uncached input)
    server_cleared: int = 0  # tokens the server's context editing cleared from this prompt
    # the cache had expired: the request came more than its lifetime after the previous one
    # (engine.api.prompt_cache.lifetime), so it read nothing
    cache_expired: bool = False
    # the price of a cache write (engine.api.prompt_cache.write_price: 2.0 in a session that
    # caches for an hour; a recorded request's own mix of the two)
    write_price: float = WRITE_PRICE

    @property
    def cost(self) -> float:
        """``engine.api.prompt_cache.price`` of this prompt, in base input-token units."""
        uncached = self.prompt_tokens - self.cache_read - self.cache_write
        return price(uncached, self.cache_write, self.cache_read, self.write_price)

    def as_dict(self, thresholds: Mapping[str, Any]) -> dict:
        d = asdict(self)
        if self.write_price == WRITE_PRICE:
            del d["write_price"]  # the 5-minute cache's: said only where it is another
        if not self.cache_expired:
            del d["cache_expired"]  # said only where the cache had expired
        d["events"] = list(self.events)
        d["cost"] = round(self.cost)
        d["thresholds"] = dict(thresholds)
        return d


@dataclass(frozen=True)
class Simulation:
    profile: Profile
    scenario: str
    model: str
    thresholds: Thresholds
    requests: tuple[Request, ...]
    events: tuple[Event, ...]
    knobs: dict = field(default_factory=dict)
    # the summary requests of the compactions (engine.replay.compaction_cost): API calls of their
    # own, in the cost
    compactions: tuple[CompactionCall, ...] = ()
    # history the file does not hold in the first prompt (``Calibration.carried``): > 0 only
    # for a file that starts mid-conversation; the summary then says how much, and how many
    # compactions it forced (``Event.cause``)
    unseen_tokens: int = 0

    def threshold_dict(self) -> dict:
        t = self.thresholds
        return {
            "auto_compact": t.auto_compact if t.auto_compact_enabled else None,
            "warning": t.warning,
            "error": t.error,
            "blocking": t.blocking,
        }

    @property
    def summary(self) -> dict:
        ev = self.events
        auto = [e for e in ev if e.kind == "auto_compact" and e.predicted]
        rec_auto = [e for e in ev if e.kind == "auto_compact" and e.recorded]
        return {
            "requests": len(self.requests),
            "auto_compactions": len(auto),
            "recorded_auto_compactions": len(rec_auto),
            "matched_auto_compactions": sum(
                1 for e in ev if e.kind == "auto_compact" and e.predicted and e.recorded
            ),
            "manual_compactions": sum(1 for e in ev if e.kind == "manual_compact"),
            "micro_compactions": sum(
                1 for e in ev if e.kind == "micro_compact" and e.recorded is not False
            ),
            # predicted by the local logic but absent from the recorded usage (switched off)
            "micro_compactions_not_observed": sum(
                1 for e in ev if e.kind == "micro_compact" and e.recorded is False
            ),
            "text_prunes": sum(1 for e in ev if e.kind == "text_prune"),
            "server_clears": sum(1 for e in ev if e.kind == "server_clear"),
            "blocking": sum(1 for e in ev if e.kind == "blocking"),
            "tokens_sent": sum(r.prompt_tokens for r in self.requests),
            "max_prompt_tokens": max((r.prompt_tokens for r in self.requests), default=0),
            "max_unedited_prompt_tokens": max(
                (r.prompt_tokens + r.server_cleared for r in self.requests), default=0
            ),
            "cache_breaks": sum(1 for r in self.requests if r.cache_break),
            "cache_expiries": sum(1 for r in self.requests if r.cache_expired),
            "cache_read_tokens": sum(r.cache_read for r in self.requests),
            "compaction_calls_cost": round(sum(c.cost for c in self.compactions)),
            "cost": round(
                sum(r.cost for r in self.requests) + sum(c.cost for c in self.compactions)
            ),
            "outputs_estimated": sum(1 for r in self.requests if r.output_estimated),
            **self._unseen_summary(auto),
        }

    def _unseen_summary(self, auto: list[Event]) -> dict:
        """The summary's fields of a file that starts mid-conversation (none for the others)."""
        if not self.unseen_tokens:
            return {}
        return {
            "unseen_history_tokens": self.unseen_tokens,
            "compactions_unseen_history": sum(1 for e in auto if e.cause == "unseen_history"),
        }

    def as_dict(self) -> dict:
        th = self.threshold_dict()
        return {
            "profile": {
                "name": self.profile.name,
                "range": self.profile.range,
                "verified_in": list(self.profile.verified_in),
                "notes": list(self.profile.notes),
            },
            "scenario": self.scenario,
            "model": self.model,
            "knobs": dict(self.knobs),
            "thresholds": self.thresholds.as_dict(),
            "requests": [r.as_dict(th) for r in self.requests],
            "events": [e.as_dict() for e in self.events],
            "compaction_calls": [c.as_dict() for c in self.compactions],
            "summary": self.summary,
        }
