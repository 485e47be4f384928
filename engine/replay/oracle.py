"""The hindsight optimum of server-side clearing for one session (scenario ``oracle``).

Knowing the whole session, the oracle chooses before every request how many of the oldest tool
uses the ``clear_tool_uses_20250919`` edit clears (the *boundary* ``b``: the request's edit
keeps ``n - b`` of its ``n`` tool uses, never fewer than the round in progress), and whether the
text prune runs, so as to minimise the session's cost at prompt-cache prices
(``engine.api.prompt_cache``) without an auto-compaction wherever clearing can avoid one. The
formulation, its assumptions and why the dynamic programme is exact are in
``docs/oracle.md``; in short:

* The boundary only moves forward (clearing back costs a rewrite and frees nothing).
* A *probe* replay clears as much as the mechanism can at every request, so it compacts only
  where no schedule avoids it; it records each request's messages and their costs. Clearing a
  tool use frees a fixed amount of each request's prompt (its result's and input's share of
  their records' calibrated costs, as ``engine.api.server_clearing`` prices an edited record), so
  ``F_r(b)``, the tokens boundary ``b`` frees from request ``r``, is a prefix sum.
* Request ``r`` at boundary ``b`` costs, if the boundary stayed where it was,
  ``0.1 × read + 1.25 × (prompt - read)`` with ``read`` the previous prompt (as the probe's cache
  read says it is reachable; minus what ``b`` frees), and after a move
  ``0.1 × stable + 1.25 × (prompt - stable)`` (2.0 × for a write in a session that caches for an
  hour, ``Calibration.write_price``): the cleared part changes before every earlier
  cache breakpoint but the system prompt's, so only what that one caches (``stable``,
  ``Calibration.break_prefix``: the tools and the system prompt up to its breakpoint) is read
  and everything after it is written again. A request that came after the cache expired
  (``Request.cache_expired``) reads nothing either way, so a move there costs nothing more.
* Claude Code's count before request ``r + 1`` is the usage of request ``r`` (its edited prompt)
  plus what came after it, so "no auto-compaction" bounds ``F_r(b_r)`` from below.

The dynamic programme over (request, boundary) with these costs is exact for the model
(``O(requests × tool uses)``); the schedule it finds is then replayed by the engine
(:func:`engine.replay.simulate_counterfactual` with the plan as its ``clear_policy``), whose
figures are the scenario's. The oracle takes the cheaper of the schedules with and without the
text prune (at its knobs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.api.context_editing import CLEARED_INPUT, PLACEHOLDER, blocks_of, is_block, tool_uses
from engine.api.context_management import ClearToolUses
from engine.api.prompt_cache import LOOKBACK_BLOCKS, READ_PRICE, WRITE_PRICE
from engine.claude_code.compact import Summarizer
from engine.identity_memo import by_identity
from engine.profiles import Profile
from engine.replay.calibration import Calibration, calibrate
from engine.replay.edit_limit import limit_env
from engine.replay.model import Simulation
from engine.tokens import block_tokens
from engine.transcript import Transcript
from engine.twins.context_clear import trailing_results


@dataclass
class Observed:
    """One request as the probe saw it (before the server's edit)."""

    contents: list[tuple[Any, int]]  # each sent message's role and estimate (its cache key)
    costs: list[float]  # each message's cost in this prompt
    blocks: list[int]  # content blocks per message
    overhead: float  # the prompt's fixed part (system prompt, tools, carried history)
    freed: list[float]  # F(b): tokens freed from this prompt by clearing the b oldest uses
    limit: int  # the largest boundary this request can send (the round in progress kept)
    # of the overhead, what a request still reads after a break (Calibration.break_prefix;
    # None: all of it)
    stable: float | None = None
    write_at: float = WRITE_PRICE  # the price of a cache write (Calibration.write_price)

    @property
    def break_read(self) -> float:
        return self.overhead if self.stable is None else min(self.stable, self.overhead)


@dataclass
class Probe:
    """A :data:`~engine.api.server_clearing.ClearPolicy` that clears all it may and records."""

    seen: list[Observed] = field(default_factory=list)
    stable: float | None = None  # what a break still reads (None: the whole overhead)
    write_at: float = WRITE_PRICE  # the price of a cache write (Calibration.write_price)

    def __call__(
        self,
        edit: ClearToolUses,
        api: Sequence[Mapping[str, Any]],
        costs: Sequence[float],
        overhead: float,
    ) -> ClearToolUses:
        uses = tool_uses(api)
        limit = max(0, len(uses) - trailing_results(api))
        self.seen.append(
            Observed(
                [(m.get("role"), _estimate(m.get("content"))) for m in api],
                list(costs),
                [len(c) if isinstance(c := m.get("content"), list) else 1 for m in api],
                overhead,
                _freed(api, costs, uses[:limit]),
                limit,
                self.stable,
                self.write_at,
            )
        )
        return replace(edit, keep=len(uses) - limit)


@by_identity
def _estimate(content: Any) -> int:
    """A message's content as the cache tells it apart: its estimate (``engine.replay.counterfactual`` keys a
    changed message by its estimate too); memoised by identity (contents are never mutated)."""
    if isinstance(content, list):
        return sum(block_tokens(b) for b in content)
    return block_tokens(content) if isinstance(content, str) else 0


def _freed(
    api: Sequence[Mapping[str, Any]],
    costs: Sequence[float],
    uses: Sequence[tuple[int, int, Mapping[str, Any]]],
) -> list[float]:
    """Prefix sums of what clearing each use (its result and its input) frees from this prompt:
    a record's cost scaled by the estimate its changed blocks lose (``server_clearing``'s
    rule, additive over the blocks of one record)."""
    results: dict[Any, tuple[int, int]] = {}
    for i, m in enumerate(api):
        if m.get("role") == "user":
            for j, b in enumerate(blocks_of(m)):
                if is_block(b, "tool_result"):
                    results[b.get("tool_use_id")] = (i, j)
    totals: dict[int, float] = {}

    def share(i: int, old: Any, new: Any) -> float:
        if i not in totals:
            totals[i] = float(sum(block_tokens(b) for b in blocks_of(api[i])))
        before = totals[i]
        return costs[i] * (block_tokens(old) - block_tokens(new)) / before if before else 0.0

    out = [0.0]
    for i, _j, use in uses:
        gain = 0.0
        where = results.get(use.get("id"))
        if where is not None:
            res = blocks_of(api[where[0]])[where[1]]
            if res.get("content") != PLACEHOLDER:
                gain += share(where[0], res, {**res, "content": PLACEHOLDER})
        if use.get("input") != CLEARED_INPUT:
            gain += share(i, use, {**use, "input": dict(CLEARED_INPUT)})
        out.append(out[-1] + max(gain, 0.0))
    return out


@dataclass(frozen=True)
class Plan:
    boundaries: tuple[int, ...]  # per request: the oldest tool uses cleared
    model_cost: float  # the schedule's cost in the model (base input-token units)
    unavoidable: tuple[int, ...]  # requests before which no schedule avoids a compaction


def _read_reachable(prev: Observed | None, cur: Observed) -> bool:
    """Whether the previous prompt is a prefix of this one (same contents, same costs) that
    ends within the cache's lookback."""
    if prev is None:
        return False
    m = len(prev.contents)
    if m > len(cur.contents) or cur.contents[:m] != prev.contents:
        return False
    if cur.costs[:m] != prev.costs:
        return False
    return sum(cur.blocks[m:]) <= LOOKBACK_BLOCKS


@dataclass(frozen=True)
class _Request:
    """What the model needs of one request to price any boundary."""

    full: float  # the prompt with nothing cleared
    freed: list[float]  # F(b)
    limit: int
    reach: bool  # the previous prompt can be read when the boundary stays
    prefix: float  # what that read holds with nothing cleared
    move_read: float  # what is read after a move (the break prefix; 0 on the first request)
    bound: float | None  # F(b) must reach this (no compaction before the next request)
    unavoidable: bool  # not even clearing everything avoids the compaction
    write_at: float = WRITE_PRICE  # the price of a cache write

    def cost(self, b: int, stays: bool) -> float:
        """The request's cost at boundary ``b``; ``stays``: the boundary did not move."""
        prompt = self.full - self.freed[b]
        read = self.move_read  # after a move only the system prompt's breakpoint is still cached
        if stays and self.reach:
            read = min(prompt, self.prefix - self.freed[b])
        return READ_PRICE * read + self.write_at * (prompt - read)

    def allowed(self, b: int) -> bool:
        return self.bound is None or self.freed[b] >= self.bound


def _requests(
    seen: Sequence[Observed],
    counts: Sequence[int],
    prompts: Sequence[int],
    threshold: int | None,
    expired: Sequence[bool] = (),
) -> list[_Request]:
    """``expired``: per request, whether the cache had expired before it (the probe's
    ``Request.cache_expired``): it reads nothing, so a move there costs nothing more."""
    out = []
    prev: Observed | None = None
    n = len(seen)
    for r, cur in enumerate(seen):
        full = cur.overhead + sum(cur.costs)
        cold = r < len(expired) and expired[r]
        reach = not cold and _read_reachable(prev, cur)
        prefix = cur.overhead + sum(cur.costs[: len(prev.contents)]) if prev and reach else 0.0
        bound, unavoidable = None, False
        if threshold is not None and r < n - 1:
            # the count before request r + 1 is this request's (edited) prompt plus what came
            # after it: with F(b) cleared, the probe's count + its clearing - F(b)
            need = counts[r + 1] - prompts[r] + full - threshold + 1
            if need > cur.freed[-1]:
                unavoidable = True
            elif need > 0:
                bound = need
        out.append(
            _Request(
                full,
                cur.freed,
                cur.limit,
                reach,
                prefix,
                cur.break_read if r and not cold else 0.0,
                bound,
                unavoidable,
                cur.write_at,
            )
        )
        prev = cur
    return out


def schedule_cost(
    seen: Sequence[Observed],
    counts: Sequence[int],
    prompts: Sequence[int],
    threshold: int | None,
    boundaries: Sequence[int],
    expired: Sequence[bool] = (),
) -> tuple[float, bool]:
    """The model's cost of a schedule (boundaries clamped to each request's limit), and whether
    it keeps every avoidable compaction away."""
    total, ok, prev = 0.0, True, None
    reqs = _requests(seen, counts, prompts, threshold, expired)
    for q, b in zip(reqs, boundaries, strict=True):
        e = min(b, q.limit)
        total += q.cost(e, e == prev)
        ok = ok and q.allowed(e)
        prev = e
    return total, ok


def plan(
    seen: Sequence[Observed],
    counts: Sequence[int],
    prompts: Sequence[int],
    threshold: int | None,
    expired: Sequence[bool] = (),
) -> Plan:
    """The dynamic programme (module docstring). ``counts``/``prompts``: the probe's count before
    each request and its (edited) prompt; ``threshold``: the auto-compact threshold (``None``:
    off). ``O(requests × tool uses)``."""
    inf = math.inf
    reqs = _requests(seen, counts, prompts, threshold, expired)
    prev_cost: list[float] = []
    choice: list[list[int]] = []
    for r, q in enumerate(reqs):
        # prefix minimum of the previous row, with its argument
        best_before: list[tuple[float, int]] = []
        run = (inf, -1)
        for b, c in enumerate(prev_cost):
            if c < run[0]:
                run = (c, b)
            best_before.append(run)
        row: list[float] = []
        arg: list[int] = []
        for b in range(q.limit + 1):
            best, how = inf, -1
            if not q.allowed(b):
                pass
            elif r == 0:
                best, how = q.cost(b, False), b
            else:
                if b < len(prev_cost) and prev_cost[b] < inf:
                    best, how = prev_cost[b] + q.cost(b, True), b
                c, at = best_before[min(b, len(best_before)) - 1] if b > 0 else (inf, -1)
                if b == q.limit and len(prev_cost) > b + 1:
                    # the round in progress holds more results than the last: uses cleared
                    # before are kept again (a change of the prefix, priced like a move)
                    back = min(range(b + 1, len(prev_cost)), key=prev_cost.__getitem__)
                    if prev_cost[back] < c:
                        c, at = prev_cost[back], back
                if c + q.cost(b, False) < best:
                    best, how = c + q.cost(b, False), at
            row.append(best)
            arg.append(how)
        prev_cost = row
        choice.append(arg)
    end = min(range(len(prev_cost)), key=prev_cost.__getitem__)
    out = [end]
    for r in range(len(reqs) - 1, 0, -1):
        out.append(choice[r][out[-1]])
    unavoidable = tuple(r + 1 for r, q in enumerate(reqs) if q.unavoidable)
    return Plan(tuple(reversed(out)), prev_cost[end], unavoidable)


def _counts_before(sim: Simulation) -> list[int]:
    """Claude Code's count before each request of a replay, before any auto-compaction there (a
    request's ``tokens`` is the count after it; its event holds the one that compacted): where
    the probe compacts, the count that no clearing brought below the threshold."""
    before = iter([e.tokens for e in sim.events if e.kind == "auto_compact" and e.predicted])
    return [next(before) if "auto_compact" in q.events else q.tokens for q in sim.requests]


class Follow:
    """A :data:`~engine.api.server_clearing.ClearPolicy` that sends a plan's boundaries in order."""

    def __init__(self, boundaries: Sequence[int]) -> None:
        self.boundaries = list(boundaries)
        self.calls = 0

    def __call__(
        self,
        edit: ClearToolUses,
        api: Sequence[Mapping[str, Any]],
        costs: Sequence[float],
        overhead: float,
    ) -> ClearToolUses:
        b = self.boundaries[self.calls] if self.calls < len(self.boundaries) else 0
        self.calls += 1
        n = len(tool_uses(api))
        return replace(edit, keep=max(n - b, trailing_results(api), 0))


def simulate_oracle(
    tr: Transcript,
    profile: Profile,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
    prune_env: Mapping[str, str] | None = None,
    clear_env: Mapping[str, str] | None = None,
    microcompact_on: bool | None = None,
    summarizer: Summarizer | None = None,
    calibration: Calibration | None = None,
    recall_tools: int | None = None,
) -> Simulation:
    """The session under the hindsight-optimal clearing schedule (scenario ``oracle``).

    ``clear_env`` may name ``CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS`` / ``CLAUDE_CTX_CLEAR_TOOL_INPUTS``
    (what the edit may clear); the trigger, keep and step are the plan's."""
    from engine.replay.counterfactual import (
        CLEAR_SCENARIOS,
        fixed_prefix,
        simulate_counterfactual,
    )
    from engine.replay.recall_tools import recall_tools_for

    cal = calibration or calibrate(tr, profile)
    # both scenarios the oracle replays clear, so recall's tools ride along unless asked not to
    assert {"server_clearing", "patched"} <= CLEAR_SCENARIOS
    tools = recall_tools_for(profile) if recall_tools is None else recall_tools
    _, stable = fixed_prefix(cal, tools)
    cenv = limit_env(clear_env)
    kw: dict[str, Any] = {
        "model": model,
        "env": env,
        "prune_env": prune_env,
        "clear_env": cenv,
        "microcompact_on": microcompact_on,
        "summarizer": summarizer,
        "calibration": cal,
        "recall_tools": recall_tools,  # with ctxpatch: recall's tools ride along (None: default)
    }
    best: tuple[Simulation, Plan, bool] | None = None
    for scenario in ("server_clearing", "patched"):
        probe = Probe(stable=stable, write_at=cal.write_price)
        seen_sim = simulate_counterfactual(tr, profile, scenario, clear_policy=probe, **kw)
        th = seen_sim.thresholds
        p = plan(
            probe.seen,
            _counts_before(seen_sim),
            [q.prompt_tokens for q in seen_sim.requests],
            th.auto_compact if th.auto_compact_enabled else None,
            [q.cache_expired for q in seen_sim.requests],
        )
        sim = simulate_counterfactual(
            tr, profile, scenario, clear_policy=Follow(p.boundaries), **kw
        )
        key = (sim.summary["auto_compactions"], sim.summary["cost"])
        if best is None or key < (best[0].summary["auto_compactions"], best[0].summary["cost"]):
            best = (sim, p, scenario == "patched")
    assert best is not None
    sim, p, pruned = best
    moves = [r for r in range(1, len(p.boundaries)) if p.boundaries[r] != p.boundaries[r - 1]]
    if p.boundaries and p.boundaries[0]:
        moves.insert(0, 0)
    knobs = {
        **sim.knobs,
        "oracle": {
            "text_prune": pruned,
            "model_cost": round(p.model_cost),
            "moves": moves,
            "boundaries": list(p.boundaries),
            "unavoidable_compactions_before": list(p.unavoidable),
        },
    }
    if not pruned:
        knobs["prune_env"] = {}
    return replace(sim, scenario="oracle", knobs=knobs)
