"""Per-message token costs fitted on a session's recorded usage (the replays' prompt sizes)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from engine.api.previous_thinking import (
    main_model,
    starts_turn,
    strips_previous_thinking,
    thinking_share,
)
from engine.api.prompt_cache import caches_for_an_hour, write_price
from engine.javascript import js_json_stringify
from engine.profiles import Profile, parse_version
from engine.replay.prefix_sums import PLAIN_SUM
from engine.replay.recorded import LINE_KEY, memory_records
from engine.tokens import count_text, raw_message_tokens
from engine.transcript import Transcript, is_compact_boundary

T = TypeVar("T")

NO_RESPONSE = "No response requested."  # the assistant record a resumed session gets (synthetic)


def _per_line(fn: Callable[[Mapping[str, Any]], T]) -> Callable[[Mapping[str, Any]], T]:
    """``fn`` of a record, computed once per transcript line (records are never mutated)."""
    memo: dict[int, T] = {}

    def get(m: Mapping[str, Any]) -> T:
        line = m[LINE_KEY]
        if line not in memo:
            memo[line] = fn(m)
        return memo[line]

    return get


def full_estimate(m: Mapping[str, Any]) -> int:
    """Every block of a message at chars/4 (text, thinking and tool_use as JSON, strings too)."""
    content = (m.get("message") or {}).get("content")
    if isinstance(content, str):
        return count_text(content)
    if m.get("type") == "attachment":
        return count_text(js_json_stringify(m.get("attachment")))
    return raw_message_tokens(m)


@dataclass(frozen=True)
class Resume:
    """A new process of the same session (``--resume``/``--continue``): from the request at
    ``line`` on, the records of the ended process (lines ``first`` .. ``last``) cost ``factor``
    of their fitted cost, because what Claude Code held for them in memory but never wrote
    (attachments, up to 2.1.96) is not reloaded."""

    line: int
    first: int
    last: int
    factor: float


@dataclass(frozen=True)
class Calibration:
    """Per-line token costs fitted on the recorded usage, and the fixed prompt overhead."""

    overhead: int  # system prompt, tools and what Claude Code prepends to every request
    cost: dict[int, float]
    ratio: float  # recorded tokens per estimated token, for messages the session never had
    # history the file does not hold (it starts mid-conversation): in the prompt until the
    # first compaction, measured as the first prompt's excess over the post-compaction one
    carried: int = 0
    # the recorded prompts leave out the thinking of turns before the last human prompt (the
    # session's main model's rule, engine.api.previous_thinking); each thinking record's cost is
    # the tokens it added while it counted
    strips_thinking: bool = False
    resumes: tuple[Resume, ...] = ()
    # the part of ``overhead`` a request still reads from the cache after a break (a change
    # before its last breakpoint): the tools and the system prompt up to its cache breakpoint;
    # the rest (the system prompt after it, the context Claude Code prepends) is written again.
    # ``None``: all of it (a calibration built by hand); ``calibrate`` always sets it
    # (``break_read``)
    stable: int | None = None
    # the session caches for an hour (``ttl: "1h"``): a write costs 2.0x, not 1.25x
    # (engine.api.prompt_cache.caches_for_an_hour of the recorded usage)
    one_hour: bool = False

    @property
    def write_price(self) -> float:
        """What a cache write costs in this session (:func:`engine.api.prompt_cache.write_price`)."""
        return write_price(self.one_hour)

    @property
    def break_prefix(self) -> int:
        """What a request whose prompt changed before its last breakpoint still reads."""
        return self.overhead if self.stable is None else min(self.stable, self.overhead)

    def resume_factor(self, line: int | None, at: int) -> float:
        """The share of record ``line``'s cost still in the prompt of the request at ``at``."""
        if line is None:
            return 1.0
        for r in self.resumes:
            if r.first <= line <= r.last and r.line <= at:
                return r.factor
        return 1.0


def is_resume_marker(rec: Mapping[str, Any]) -> bool:
    """The synthetic ``No response requested.`` reply a resumed session gets, or ``/exit``."""
    msg = rec.get("message") or {}
    content = msg.get("content")
    if rec.get("type") == "assistant" and msg.get("model") == "<synthetic>":
        texts = content if isinstance(content, list) else []
        return any(isinstance(b, Mapping) and b.get("text") == NO_RESPONSE for b in texts)
    if rec.get("type") == "user" and isinstance(content, str):
        return content.lstrip().startswith("<command-name>/exit</command-name>")
    return False


def calibrate(tr: Transcript, profile: Profile | None = None) -> Calibration:
    """Split each recorded prompt increase over the messages added since the previous request.

    Within one compaction segment the prompt of request k is the prompt of request k-1 plus the
    messages appended in between (the previous reply and the tool results / prompts after it);
    the increase is shared among them in proportion to their chars/4 estimate. The first
    request's prompt minus its messages' estimate is the overhead (system prompt and tools).
    ``profile``: the session's, so the records are the ones the replays hold in memory
    (``memory_records``); the fit reads the recorded prompts, which no version rule changes.

    What the prompt leaves out is fitted too, each from its cause: on models that keep only
    the thinking of the turn in progress (``engine.api.previous_thinking``) a new human prompt
    removes the earlier turns' thinking (the increase is the new messages minus it); a resumed
    process (``Resume``) loses what the ended one held unwritten; a file that starts in the
    middle of a conversation carries history whose tokens sit in its first prompt
    (``Calibration.carried``: when that prompt is larger than the first prompt after a
    compaction, the fixed overhead can only be the latter's, less its own messages).
    """
    records = memory_records(tr, profile)
    cal = _fit(tr, records, None)
    post = _first_after_compaction(tr, records)
    if post is not None and cal.overhead > post[0]:
        prompt, estimate, cache_read = post
        fixed = max(cache_read, round(prompt - cal.ratio * estimate))
        if fixed < cal.overhead:
            cal = _fit(tr, records, fixed)
    one_hour = caches_for_an_hour(r.usage for r in tr.replies)
    return replace(cal, stable=break_read(tr, cal.overhead), one_hour=one_hour)


# The share of the fixed overhead a request still reads after a cache break, per era of Claude
# Code, for a file that shows no break read of its own (``break_read``): the median of the
# measured ``cache_read`` of the first request after a compaction over ``overhead`` in the
# shared real sessions of that era (docs/clearing-defaults.md lists them). Where the system
# prompt's breakpoint sits moved between versions: 2.1.33-2.1.38 read only the tools and the
# start of the system prompt (16.6K of 42-43K in all six sessions of that era).
ERA_BREAK_SHARE: tuple[tuple[tuple[int, ...], int], ...] = (
    ((2, 1, 17), 84),  # up to 2.1.16: 0.76-2.1.7, 11 sessions (81-100%)
    ((2, 1, 33), 66),  # 2.1.17-2.1.32: 6 sessions (47-76%)
    ((2, 1, 39), 39),  # 2.1.33-2.1.38: 7 sessions (38-61%)
)
LATER_BREAK_SHARE = 83  # 2.1.39 on: 7 sessions (64-96%)


def era_break_share(version: str | None) -> int:
    """Percent of the overhead read after a break on ``version`` (``ERA_BREAK_SHARE``)."""
    try:
        v = parse_version(version or "")
    except ValueError:
        return LATER_BREAK_SHARE
    for before, share in ERA_BREAK_SHARE:
        if v < before:
            return share
    return LATER_BREAK_SHARE


def break_read(tr: Transcript, overhead: int) -> int:
    """The prefix a request of this session still reads from the cache after a break, measured
    where the file shows one: the ``cache_read_input_tokens`` of the first request after a
    compaction (the system prompt and tools unchanged, every message new); else the most
    frequent positive read, no larger than ``overhead``, of a request that read less than 98%
    of the previous prompt (a read of 0 is an expired cache, not a break; a larger one reached
    a breakpoint among the messages); else the era's share of ``overhead``
    (``era_break_share``). Never more than ``overhead``."""
    after: list[int] = []
    others: list[int] = []
    lines = sorted(b.line for b in tr.boundaries)
    prev: tuple[int, int] | None = None
    for reply in tr.replies:
        read = int(reply.usage.get("cache_read_input_tokens") or 0)
        if prev is not None and read > 0:
            i = bisect_left(lines, prev[0])
            if i < len(lines) and lines[i] < reply.line:
                after.append(read)
            elif read < 0.98 * prev[1] and read <= overhead:
                others.append(read)
        prev = (reply.line, reply.prompt_tokens)
    if after:
        return min(after[0], overhead)
    if others:
        common = max(sorted(set(others)), key=others.count)
        return min(common, overhead)
    return overhead * era_break_share(tr.version) // 100


def _first_after_compaction(tr: Transcript, records: Sequence[dict]) -> tuple[int, int, int] | None:
    """(prompt, chars/4 of its messages, cache read) of the first request after a boundary."""
    after = False
    estimate = 0
    for rec in records:
        if is_compact_boundary(rec):
            after, estimate = True, 0
            continue
        if not after:
            continue
        k = tr.reply_of_line.get(rec[LINE_KEY])
        if k is not None and tr.replies[k].line == rec[LINE_KEY]:
            u = tr.replies[k].usage
            return tr.replies[k].prompt_tokens, estimate, int(u.get("cache_read_input_tokens") or 0)
        estimate += full_estimate(rec)
    return None


def _fit(tr: Transcript, records: Sequence[dict], fixed: int | None) -> Calibration:
    """One pass of ``calibrate``; ``fixed``: the overhead after a compaction when the first
    prompt also carries history (else the first prompt's overhead throughout).

    The thinking records already fitted that request k counts add ``T_k`` to its prompt (on a
    model that leaves out earlier turns' thinking, the current turn's only; the session's main
    model decides, ``previous_thinking.main_model``), so the messages added since request k-1
    cost ``prompt_k - prompt_k-1 - (T_k - T_k-1)``.
    """
    cost: dict[int, float] = {}
    overhead: int | None = None
    pending: list[dict] = []
    prev_prompt: int | None = None
    fitted = est_total = 0.0
    thinking: list[int] = []  # thinking records fitted in this segment
    turn_from = 0  # line of the last human prompt fitted: thinking before it is an earlier turn's
    counted_before = 0.0  # T of the previous request
    strip = strips_previous_thinking(main_model(r.model for r in tr.replies), tr.version)
    process: list[int] = []  # records fitted since the process (or the segment) began
    resumes: list[Resume] = []
    by_line = {r[LINE_KEY]: r for r in records}
    # per line, computed once (records are never mutated): the thinking share, the estimate
    share_of = _per_line(thinking_share)
    estimate_of = _per_line(full_estimate)

    # cost x thinking share of each record in ``thinking`` (the same order): what it adds to a
    # prompt that counts it; a prompt that leaves it out (``left_out``) adds 0.0 for it, so the
    # sum over the counted suffix is the sum over all of them, float for float
    terms: list[float] = []
    # their running sum, added as ``sum`` adds them (where it adds one float after the other:
    # engine.replay.prefix_sums.PLAIN_SUM): without ``strip`` every request counts them all, and
    # summing the list again per request made the fit quadratic in a segment's requests
    terms_sum = 0.0
    for rec in records:
        line = rec[LINE_KEY]
        if is_compact_boundary(rec):
            for m in pending:
                cost[m[LINE_KEY]] = float(full_estimate(m))
            pending, prev_prompt, thinking, process, terms = [rec], None, [], [], []
            terms_sum = 0.0
            turn_from, counted_before = line, 0.0
            continue
        k = tr.reply_of_line.get(line)
        if k is not None and tr.replies[k].line == line:
            prompt = tr.replies[k].prompt_tokens
            ratio = fitted / est_total if est_total else 1.0
            last_turn = max((i for i, m in enumerate(pending) if starts_turn(m)), default=-1)
            since = pending[last_turn][LINE_KEY] if last_turn >= 0 else turn_from

            def left_out(n: int, since: int = since) -> float:
                """The share of fitted thinking record ``n`` this request leaves out."""
                return share_of(by_line[n]) if strip and n < since else 0.0

            # sum(cost[n] * (share(n) - left_out(n)) for n in thinking): the records left out
            # (lines before ``since``, a prefix of ``thinking``) add exactly 0.0
            if strip or not PLAIN_SUM:
                counted_now = sum(terms[bisect_left(thinking, since) if strip else 0 :])
            else:  # sum(terms): 0 for none, else 0.0 + terms[0] + terms[1] + ...
                counted_now = terms_sum if terms else 0
            # thinking that ended before this prompt, on a model that leaves it out: not in
            # this prompt, so its cost cannot be fitted here
            never = (
                {i for i, m in enumerate(pending[:last_turn]) if share_of(m) == 1.0}
                if strip and last_turn >= 0
                else set()
            )
            counted = [(i, m) for i, m in enumerate(pending) if i not in never]
            delta: float
            if prev_prompt is None:
                if overhead is None:
                    overhead = max(0, prompt - sum(estimate_of(m) for _, m in counted))
                    delta = prompt - overhead
                else:
                    delta = prompt - (fixed if fixed is not None else overhead)
                delta -= counted_now
            else:
                delta = prompt - prev_prompt - (counted_now - counted_before)
                if process and any(is_resume_marker(m) for m in pending):
                    lost = delta - ratio * sum(estimate_of(m) for _, m in counted)
                    held = sum(cost[n] * (1 - left_out(n)) for n in process)
                    if lost < 0 and held > 0:
                        f = max(0.0, 1 + lost / held)
                        resumes.append(Resume(line, process[0], process[-1], f))
                        delta -= lost
                    process = []
            weights = [max(1, estimate_of(m)) for _, m in counted]
            total_w = sum(weights)
            for i in never:
                cost[pending[i][LINE_KEY]] = ratio * estimate_of(pending[i])
            new_thinking = 0.0
            for (_, m), w in zip(counted, weights, strict=True):
                c = delta * w / total_w if delta > 0 and total_w else float(estimate_of(m))
                cost[m[LINE_KEY]] = c
                fitted += c
                est_total += estimate_of(m)
                process.append(m[LINE_KEY])
                new_thinking += c * share_of(m)
            for m in pending:
                if share_of(m) > 0:
                    thinking.append(m[LINE_KEY])
                    terms.append(cost[m[LINE_KEY]] * share_of(m))
                    terms_sum += terms[-1]
            counted_before = counted_now + new_thinking
            if last_turn >= 0:
                turn_from = since
            pending, prev_prompt = [], prompt
        pending.append(rec)
    for m in pending:
        cost[m[LINE_KEY]] = float(full_estimate(m))
    first = overhead or 0
    base = fixed if fixed is not None else first
    return Calibration(
        base,
        cost,
        fitted / est_total if est_total else 1.0,
        carried=first - base,
        strips_thinking=strip,
        resumes=tuple(resumes),
    )
