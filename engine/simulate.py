"""Replay a session request by request under a version profile.

Scenarios
    ``recorded``: follows the session as it happened. Before every API request (the first line
    of each reply ``message.id``) it forms the count ``cli.js`` forms (``engine.count``: last
    usage + newer-messages estimate in 2.1.2+), compares it with the thresholds, and says which
    mechanism fires. Each ``compact_boundary`` line is checked: an ``auto`` one must be predicted
    there (the check that fired ran on the messages before it), a ``manual`` one is reported as
    manual. Micro-compaction is reported as predicted by the local logic and as ``observed`` only
    when the recorded usage drops accordingly (2.1.30-2.1.68 have a remote kill switch).
    ``unpatched`` / ``patched``: counterfactual replays of the same conversation under given knobs;
    ``patched`` adds the text prune (``engine.textprune``) after micro-compaction, as the patch
    does. Prompt sizes come from per-message costs calibrated on the recorded usage, so an
    unpatched replay with the recorded settings reproduces the recorded numbers.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from engine.compact import Summarizer, full_compact, offline_summary
from engine.count import autocompact_tokens, last_usage_tokens
from engine.microcompact import microcompact
from engine.profiles import Profile
from engine.thresholds import Thresholds, compute_thresholds
from engine.tokens import raw_message_tokens
from engine.transcript import Transcript, is_compact_boundary, is_sidechain

Scenario = Literal["recorded", "unpatched", "patched"]
IN_MEMORY_TYPES = frozenset({"user", "assistant", "system", "attachment"})
LINE_KEY = "__line"
# Session-memory compaction (engine.session_memory) is not replayed: it needs the session-memory
# summary, which a transcript does not hold, and it is off unless remote flags (off offline) or
# ENABLE_CLAUDE_CODE_SM_COMPACT turn it on. The README lists these kinds.
EVENT_KINDS = (
    "micro_compact",
    "text_prune",
    "auto_compact",
    "blocking",
    "manual_compact",
)
CACHE_BREAK_RATIO = 0.98  # recorded: cache read below 98% of the previous prompt


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

    def as_dict(self, thresholds: Mapping[str, Any]) -> dict:
        d = asdict(self)
        d["events"] = list(self.events)
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
            "blocking": sum(1 for e in ev if e.kind == "blocking"),
            "tokens_sent": sum(r.prompt_tokens for r in self.requests),
            "max_prompt_tokens": max((r.prompt_tokens for r in self.requests), default=0),
            "cache_breaks": sum(1 for r in self.requests if r.cache_break),
            "outputs_estimated": sum(1 for r in self.requests if r.output_estimated),
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
            "summary": self.summary,
        }


# --- in-memory message list ------------------------------------------------------------------


def memory_records(tr: Transcript) -> list[dict]:
    """Copies of the main-chain records cli.js keeps in memory, tagged with their line.

    The last line of each reply gets the reply's final usage (see ``transcript.Reply``).
    """
    out: list[dict] = []
    for i, rec in enumerate(tr.records, 1):
        if not rec or is_sidechain(rec) or rec.get("type") not in IN_MEMORY_TYPES:
            continue
        copy = {**rec, LINE_KEY: i}
        k = tr.reply_of_line.get(i)
        if k is not None and tr.replies[k].lines[-1] == i:
            copy["message"] = {**rec["message"], "usage": tr.replies[k].usage}
        out.append(copy)
    return out


def _mc_event(
    res, line: int, tokens: int, th: Thresholds, recorded: bool | None, note: str = ""
) -> Event:
    extra = f"{len(res.cleared)} results of {res.candidate_tokens} candidate tokens cleared"
    return Event(
        "micro_compact",
        line,
        tokens,
        th.warning,
        saved_tokens=res.saved_tokens + res.image_tokens,
        recorded=recorded,
        predicted=True,
        note=f"{extra}; {note}" if note else extra,
    )


# --- recorded scenario -----------------------------------------------------------------------


def simulate_recorded(
    tr: Transcript, profile: Profile, model: str | None = None, env: Mapping[str, str] | None = None
) -> Simulation:
    """Explain the session as it happened (see the module docstring)."""
    env = dict(env or {})
    model = model or tr.model or "claude-opus-4-6"
    th = compute_thresholds(profile, model, env)
    context: list[dict] = []
    requests: list[Request] = []
    events: list[Event] = []
    cleared: frozenset[str] = frozenset()
    mc_seen_off = False
    prev_prompt: int | None = None
    for rec in memory_records(tr):
        line = rec[LINE_KEY]
        if is_compact_boundary(rec):
            meta = rec.get("compactMetadata") or {}
            trigger = str(meta.get("trigger") or "?")
            tokens = autocompact_tokens(context, profile)
            pre = meta.get("preTokens")
            if trigger == "auto":
                hit = th.auto_compact_enabled and tokens >= th.auto_compact
                events.append(
                    Event(
                        "auto_compact",
                        line,
                        tokens,
                        th.auto_compact,
                        recorded=True,
                        predicted=hit,
                        pre_tokens=pre,
                        note="" if hit else "recorded but not predicted",
                    )
                )
            else:
                events.append(
                    Event(
                        "manual_compact",
                        line,
                        tokens,
                        th.auto_compact,
                        recorded=True,
                        predicted=False,
                        pre_tokens=pre,
                        note=f"trigger {trigger}",
                    )
                )
            context = [rec]
            cleared = frozenset()
            prev_prompt = None
            continue
        k = tr.reply_of_line.get(line)
        if k is not None and tr.replies[k].line == line:
            reply = tr.replies[k]
            tokens = autocompact_tokens(context, profile)
            names: list[str] = []
            if profile.microcompact == "legacy" and th.microcompact_enabled and not mc_seen_off:
                res = microcompact(context, profile, th, cleared)
                if res.fired:
                    drop = (prev_prompt - reply.prompt_tokens) if prev_prompt is not None else 0
                    seen = drop >= min(res.saved_tokens, profile.mc_min_saving) // 2
                    note = (
                        ""
                        if seen
                        else (
                            "not observed in the recorded usage: micro-compaction was off "
                            "(remote kill switch tengu_cache_plum_violet"
                            + (", 2.1.30-2.1.68" if profile.mc_remote_kill_switch else "")
                            + ", or DISABLE_MICROCOMPACT)"
                        )
                    )
                    events.append(_mc_event(res, line, last_usage_tokens(context), th, seen, note))
                    names.append("micro_compact")
                    if seen:
                        context = res.messages
                        cleared = cleared | frozenset(res.cleared)
                    else:
                        mc_seen_off = True
            if th.auto_compact_enabled and tokens >= th.auto_compact:
                events.append(
                    Event(
                        "auto_compact",
                        line,
                        tokens,
                        th.auto_compact,
                        recorded=False,
                        predicted=True,
                        note="predicted but no compaction was recorded here",
                    )
                )
                names.append("auto_compact")
            if th.blocking is not None and tokens >= th.blocking:
                events.append(Event("blocking", line, tokens, th.blocking))
                names.append("blocking")
            u = reply.usage
            read = int(u.get("cache_read_input_tokens") or 0)
            brk = prev_prompt is not None and read < CACHE_BREAK_RATIO * prev_prompt
            requests.append(
                Request(
                    len(requests),
                    line,
                    tokens,
                    reply.prompt_tokens,
                    reply.output_tokens,
                    reply.output_estimated,
                    brk,
                    tuple(names),
                )
            )
            prev_prompt = reply.prompt_tokens
        context.append(rec)
    return Simulation(profile, "recorded", model, th, tuple(requests), tuple(events), {"env": env})


# --- counterfactual scenarios -----------------------------------------------------------------


def full_estimate(m: Mapping[str, Any]) -> int:
    """Every block of a message at chars/4 (text, thinking and tool_use as JSON, strings too)."""
    content = (m.get("message") or {}).get("content")
    if isinstance(content, str):
        from engine.tokens import count_text

        return count_text(content)
    if m.get("type") == "attachment":
        from engine.javascript import js_json_stringify
        from engine.tokens import count_text

        return count_text(js_json_stringify(m.get("attachment")))
    return raw_message_tokens(m)


@dataclass(frozen=True)
class Calibration:
    """Per-line token costs fitted on the recorded usage, and the fixed prompt overhead."""

    overhead: int
    cost: dict[int, float]
    ratio: float  # recorded tokens per estimated token, for messages the session never had


def calibrate(tr: Transcript) -> Calibration:
    """Split each recorded prompt increase over the messages added since the previous request.

    Within one compaction segment the prompt of request k is the prompt of request k-1 plus the
    messages appended in between (the previous reply and the tool results / prompts after it);
    the increase is shared among them in proportion to their chars/4 estimate. The first
    request's prompt minus its messages' estimate is the overhead (system prompt and tools).
    """
    cost: dict[int, float] = {}
    overhead: int | None = None
    pending: list[dict] = []
    prev_prompt: int | None = None
    fitted = est_total = 0.0
    for rec in memory_records(tr):
        line = rec[LINE_KEY]
        if is_compact_boundary(rec):
            for m in pending:
                cost[m[LINE_KEY]] = float(full_estimate(m))
            pending, prev_prompt = [rec], None
            continue
        k = tr.reply_of_line.get(line)
        if k is not None and tr.replies[k].line == line:
            prompt = tr.replies[k].prompt_tokens
            weights = [max(1, full_estimate(m)) for m in pending]
            if prev_prompt is None:
                if overhead is None:
                    overhead = max(0, prompt - sum(full_estimate(m) for m in pending))
                delta = prompt - overhead
            else:
                delta = prompt - prev_prompt
            total_w = sum(weights)
            for m, w in zip(pending, weights, strict=False):
                c = delta * w / total_w if delta > 0 and total_w else float(full_estimate(m))
                cost[m[LINE_KEY]] = c
                fitted += c
                est_total += full_estimate(m)
            pending, prev_prompt = [], prompt
        pending.append(rec)
    for m in pending:
        cost[m[LINE_KEY]] = float(full_estimate(m))
    return Calibration(overhead or 0, cost, fitted / est_total if est_total else 1.0)


def _load_textprune():
    try:
        return importlib.import_module("engine.textprune")
    except ImportError as e:  # pragma: no cover - the twin ships with the engine
        raise RuntimeError("engine.textprune is missing: the patched scenario needs it") from e


def _recorded_summary_before(tr: Transcript, line: int, prev_line: int) -> str | None:
    """The real summary text when the session compacted between two requests."""
    for b in tr.boundaries:
        if prev_line < b.line < line:
            for rec in tr.records[b.line : b.line + 5]:
                if rec.get("isCompactSummary"):
                    c = (rec.get("message") or {}).get("content")
                    if isinstance(c, str):
                        return c
                    if isinstance(c, list):
                        return "\n".join(x.get("text") or "" for x in c if isinstance(x, dict))
    return None


def simulate_counterfactual(
    tr: Transcript,
    profile: Profile,
    scenario: Scenario = "unpatched",
    model: str | None = None,
    env: Mapping[str, str] | None = None,
    prune_env: Mapping[str, str] | None = None,
    microcompact_on: bool | None = None,
    summarizer: Summarizer | None = None,
    calibration: Calibration | None = None,
) -> Simulation:
    """Replay the conversation under ``env`` (and the text prune when ``patched``).

    ``microcompact_on=None`` infers it from the recorded session (off when the local logic
    predicts a micro-compaction the recorded usage does not show). The summary of a compaction
    at the place the session really compacted is the real one; elsewhere ``summarizer`` (default
    ``offline_summary``).
    """
    env = dict(env or {})
    model = model or tr.model or "claude-opus-4-6"
    th = compute_thresholds(profile, model, env)
    cal = calibration or calibrate(tr)
    if microcompact_on is None:
        rec_sim = simulate_recorded(tr, profile, model, env)
        microcompact_on = not any(
            e.kind == "micro_compact" and e.recorded is False for e in rec_sim.events
        )
    prune_mod = _load_textprune() if scenario == "patched" else None
    penv = dict(prune_env or {})
    history: list[dict] = []
    requests: list[Request] = []
    events: list[Event] = []
    cleared: frozenset[str] = frozenset()
    prev_sig: list[tuple] | None = None
    prev_line = 0
    cost = cal.cost

    records = memory_records(tr)
    pristine = {m[LINE_KEY]: m for m in records}
    pristine_est: dict[int, int] = {}

    def changed(m: Mapping[str, Any]) -> bool:
        orig = pristine.get(m.get(LINE_KEY))
        return orig is not None and _content(m) is not _content(orig)

    def msg_cost(m: Mapping[str, Any]) -> float:
        line = m.get(LINE_KEY)
        if line is None:
            return cal.ratio * full_estimate(m)
        base = cost.get(line, 0.0)
        if not changed(m):
            return base
        if line not in pristine_est:
            pristine_est[line] = full_estimate(pristine[line])
        before = pristine_est[line]
        return base * full_estimate(m) / before if before else base

    current_usage: dict = {}
    for rec in records:
        line = rec[LINE_KEY]
        if is_compact_boundary(rec) or rec.get("isCompactSummary"):
            continue
        k = tr.reply_of_line.get(line)
        if k is not None and tr.replies[k].line == line:
            reply = tr.replies[k]
            names: list[str] = []
            tokens = autocompact_tokens(history, profile)
            if th.auto_compact_enabled and tokens >= th.auto_compact:
                real = _recorded_summary_before(tr, line, prev_line)
                summ = (
                    (lambda _m, _r=real: _r)
                    if real is not None
                    else (summarizer or offline_summary)
                )
                res = full_compact(history, profile, tokens, "auto", summ)
                history = res.messages
                cleared = frozenset()
                at = next((b.line for b in tr.boundaries if prev_line < b.line < line), line)
                events.append(
                    Event(
                        "auto_compact",
                        at,
                        tokens,
                        th.auto_compact,
                        recorded=at != line,
                        predicted=True,
                        note="real summary reused" if real is not None else "offline summary",
                    )
                )
                names.append("auto_compact")
                tokens = autocompact_tokens(history, profile)
            sent = history
            if microcompact_on:
                mc = microcompact(history, profile, th, cleared)
                if mc.fired:
                    events.append(_mc_event(mc, line, last_usage_tokens(history), th, None))
                    names.append("micro_compact")
                    cleared = cleared | frozenset(mc.cleared)
                    # cli.js keeps the cleared messages: later requests send them cleared too
                    history = mc.messages
                    sent = history
                elif cleared:
                    sent = mc.messages
            if prune_mod is not None:
                pruned = prune_mod.prune(sent, penv)
                if pruned is not sent:
                    saved = sum(
                        msg_cost(a) - msg_cost(b)
                        for a, b in zip(sent, pruned, strict=False)
                        if a is not b
                    )
                    events.append(
                        Event("text_prune", line, tokens, None, saved_tokens=round(saved))
                    )
                    names.append("text_prune")
                    sent = pruned
            prompt = round(cal.overhead + sum(msg_cost(m) for m in sent))
            sig = [(m.get(LINE_KEY), full_estimate(m) if changed(m) else -1) for m in sent]
            brk = prev_sig is not None and sig[: len(prev_sig)] != prev_sig
            prev_sig = sig
            if th.blocking is not None and tokens >= th.blocking:
                events.append(Event("blocking", line, tokens, th.blocking))
                names.append("blocking")
            requests.append(
                Request(
                    len(requests),
                    line,
                    tokens,
                    prompt,
                    reply.output_tokens,
                    reply.output_estimated,
                    brk,
                    tuple(names),
                )
            )
            sim_usage = {
                "input_tokens": prompt,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": reply.output_tokens,
            }
            prev_line = line
            current_usage = sim_usage
        if k is not None and tr.replies[k].lines[-1] == line:
            rec = {**rec, "message": {**rec["message"], "usage": current_usage}}
        elif k is not None:
            rec = {
                **rec,
                "message": {**rec["message"], "usage": {**current_usage, "output_tokens": 1}},
            }
        history.append(rec)
    knobs = {
        "env": env,
        "prune_env": penv if scenario == "patched" else {},
        "microcompact": microcompact_on,
    }
    return Simulation(profile, scenario, model, th, tuple(requests), tuple(events), knobs)


def _content(m: Mapping[str, Any]) -> Any:
    return (
        (m.get("message") or {}).get("content")
        if m.get("type") != "attachment"
        else m.get("attachment")
    )


def simulate(tr: Transcript, profile: Profile, scenario: Scenario = "recorded", **kw) -> Simulation:
    """Dispatch to ``simulate_recorded`` or ``simulate_counterfactual``."""
    if scenario == "recorded":
        return simulate_recorded(tr, profile, kw.get("model"), kw.get("env"))
    return simulate_counterfactual(tr, profile, scenario, **kw)
