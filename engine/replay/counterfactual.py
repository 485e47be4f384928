"""Counterfactual replays: the same conversation under other knobs and mechanisms.

Scenarios (``SCENARIOS``)
    ``unpatched``: Claude Code as it is, under ``env``.
    ``text_prune``: plus the text prune (``engine.twins.textprune``) after micro-compaction.
    ``server_clearing``: plus server-side tool-result clearing (``clear_tool_uses_20250919``,
    ``engine.api.server_clearing``) at the ``CLAUDE_CTX_CLEAR_*`` knobs (``clear_env``).
    ``patched``: everything ``ctxpatch apply`` installs: the text prune, then the clearing.

Prompt sizes come from per-message costs calibrated on the recorded usage
(``engine.replay.calibration``), so an unpatched replay with the recorded settings reproduces the
recorded numbers. What a prompt leaves out is replayed from its cause: the thinking of turns
before the last human prompt on models that keep only the turn in progress's
(``engine.api.previous_thinking``), what a resumed process did not reload
(``calibration.Resume``), history the file does not hold until the first compaction
(``Calibration.carried``); where the session compacted, the file's own boundary and summary
(their fitted costs hold what came back with them); a ``/compact`` the user typed, where it was
typed. Each request's usage, which Claude Code's next auto-compact count follows, is
the prompt as the server counts it: after its clearing, so clearing delays or avoids compaction
while Claude Code keeps (and sends) its full history (2.1.284+ adds the cleared tokens back only
for an edit it built itself, never for ctxpatch's: ``engine.claude_code.count``). Each request is priced like the prompt
cache (``engine.api.prompt_cache``).
"""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Mapping
from typing import Any

from engine.api.context_management import ClearToolUses, to_json
from engine.api.previous_thinking import (
    main_model,
    strips_previous_thinking,
    thinking_share,
)
from engine.api.prompt_cache import PromptCache, lifetime, seconds
from engine.api.server_clearing import BlockEstimates, ClearPolicy, clear_on_server
from engine.claude_code.compact import Summarizer, full_compact, offline_summary
from engine.claude_code.count import autocompact_tokens, last_usage_tokens
from engine.claude_code.thresholds import Thresholds, compute_thresholds, near_threshold
from engine.identity_memo import by_identity
from engine.javascript import js_json_stringify, utf16_len
from engine.profiles import Profile, parse_version
from engine.replay.auto_compact_off import seen_off
from engine.replay.calibration import Calibration, calibrate, full_estimate
from engine.replay.clearing_incremental import IncrementalClearing
from engine.replay.compaction_cost import CompactionCall, compaction_call, summary_text
from engine.replay.edit_limit import limit_env
from engine.replay.microcompact_incremental import IncrementalMicrocompact
from engine.replay.model import Event, Request, Simulation
from engine.replay.prefix_sums import summed
from engine.replay.prompt_parts import PromptParts, PruneSaving
from engine.replay.recall_tools import recall_tools_for, recall_tools_tokens
from engine.replay.recorded import (
    LINE_KEY,
    _mc_event,
    memory_output,
    memory_records,
    simulate_recorded,
)
from engine.transcript import Transcript, is_compact_boundary
from engine.twins.context_clear import (
    NEAR_WINDOW_CHARS_PER_TOKEN,
    WINDOW_GUARD_RECOVERS_FROM,
    guard_on,
    knobs_from_env,
    near_window_limit,
    step_from_env,
)
from engine.twins.conversation_policy import PaidPolicy, clear_policy_from_env
from engine.twins.policy import policy_from_env

SCENARIOS = ("unpatched", "text_prune", "server_clearing", "patched")
PRUNE_SCENARIOS = frozenset({"text_prune", "patched"})
CLEAR_SCENARIOS = frozenset({"server_clearing", "patched"})


def _load_textprune():
    try:
        return importlib.import_module("engine.twins.textprune_incremental")
    except ImportError as e:  # pragma: no cover - the twin ships with the engine
        raise RuntimeError(
            "engine.twins.textprune is missing: the text_prune and patched scenarios need it"
        ) from e


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


def _version_in(profile: Profile, version: str | None) -> str:
    """``version`` when ``profile``'s range holds it, else the profile's first version."""
    try:
        lo, hi = parse_version(profile.first), parse_version(profile.last)
        if version and lo <= parse_version(version) <= hi:
            return version
    except ValueError:
        pass
    return profile.first


def _compacted_records(records: list[dict]) -> dict[int, list[dict]]:
    """Each boundary's line → the file's boundary and summary records (in memory, with their
    lines): what a replay that compacts where the session did holds afterwards."""
    out: dict[int, list[dict]] = {}
    for i, rec in enumerate(records):
        if is_compact_boundary(rec):
            summary = next((r for r in records[i + 1 : i + 6] if r.get("isCompactSummary")), None)
            out[rec[LINE_KEY]] = [rec] if summary is None else [rec, summary]
    return out


OVERHEAD_CHARS_PER_TOKEN = 4
"""Characters a token of the system prompt and tool definitions as JSON (the transcript holds
their token count only, through the calibration's overhead; English and JSON schemas run 3.5-4.5
characters a token). Used only by the window guard's measure."""
WINDOW_GUARD_NOTE = (
    "the window guard (CLAUDE_CTX_CLEAR_WINDOW_GUARD=1): the request goes without the edit, "
    "so it reports the whole prompt and Claude Code compacts inside the window"
)


Sent = tuple[list[dict], list[float], float, int]
"""A request as sent: its records, their costs before the server's edit, the fixed part before
them (system prompt, tools, unseen history) and the prompt the server counted."""


def unseen_cause(
    tokens: int,
    threshold: int,
    unseen: int,
    previous: Sent | None,
    limit: ClearToolUses | None,
    estimate: BlockEstimates,
) -> dict[str, Any]:
    """``Event``'s fields of an auto-compaction at count ``tokens`` while the prompt holds
    ``unseen`` tokens of history the file does not hold (``engine.replay.model.COMPACTION_CAUSES``).

    The floor is the count had the previous request cleared every tool use the mechanism may
    (``limit``, the oracle's edit): Claude Code's count is that request's usage (the prompt the
    server counted) plus what came after it, and the history before it is the same whatever was
    cleared, so no clearing schedule compacts later than a count at the threshold says."""
    floor = tokens
    if previous is not None and limit is not None:
        sent, costs, base, prompt = previous
        view = clear_on_server(sent, costs, base, limit, estimate)
        floor = tokens - prompt + round(base + sum(view.costs))
    if floor < threshold:
        cause = "not_cleared"
    else:
        cause = "unseen_history" if floor - unseen < threshold else "unclearable"
    return {"unseen_tokens": unseen, "floor_tokens": floor, "cause": cause}


def window_guard_limit(
    env: Mapping[str, str], profile: Profile, version: str | None, model: str, th: Thresholds
) -> int | None:
    """The request size in characters from which the injected snippet (``nearWindow``) and the
    gateway (``gateway/window.py``) leave the edit out, when the guard is on and the build does
    not recover from ``prompt is too long`` by itself; else ``None``. The smaller of the
    snippet's limit (the window less 33000 at 3 characters a token) and the gateway's (Claude
    Code's own threshold at 3 bytes a token)."""
    if not guard_on(env):
        return None
    if parse_version(_version_in(profile, version)) >= WINDOW_GUARD_RECOVERS_FROM:
        return None
    limit = near_window_limit("[1m]" in model)
    if th.auto_compact_enabled:
        limit = min(limit, th.auto_compact * NEAR_WINDOW_CHARS_PER_TOKEN)
    return limit


def fixed_prefix(cal: Calibration, recall_tools: int) -> tuple[float, float]:
    """(the fixed part of every prompt, the part of it a request still reads after a cache
    break): the calibration's overhead and break prefix, plus recall's tools when registered
    (tool definitions come before the system prompt's breakpoint, so a break reads them)."""
    tools = recall_tools_tokens(recall_tools, cal.ratio)
    return cal.overhead + tools, cal.break_prefix + tools


def simulate_counterfactual(
    tr: Transcript,
    profile: Profile,
    scenario: str = "unpatched",
    model: str | None = None,
    env: Mapping[str, str] | None = None,
    prune_env: Mapping[str, str] | None = None,
    clear_env: Mapping[str, str] | None = None,
    microcompact_on: bool | None = None,
    summarizer: Summarizer | None = None,
    calibration: Calibration | None = None,
    clear_policy: ClearPolicy | None = None,
    recall_tools: int | None = None,
) -> Simulation:
    """Replay the conversation under ``env`` as ``scenario`` (see the module docstring).

    ``prune_env`` holds the ``CLAUDE_TEXT_PRUNE_*`` knobs, ``clear_env`` the
    ``CLAUDE_CTX_CLEAR_*`` ones (``engine.context_clear.knobs_from_env``; disabled there means
    no clearing). ``clear_policy`` (``engine.server_clearing.ClearPolicy``) fits the edit to
    each request instead of the STEP rule (the oracle's plan, the online policy).

    ``recall_tools`` is the chars/4 estimate of the recall tools' definitions every request
    carries (``engine.replay.recall_tools``): None means what the session's version sends in
    the scenarios with ctxpatch's clearing (``apply`` registers recall with it;
    ``recall_tools_for``: the definitions, or only their names where the version's tool search
    defers them) and 0 in the others;
    0 replays ``apply --no-recall``, ``RECALL_TOOLS_DEFERRED_ESTIMATE`` Claude Code's tool search.

    ``microcompact_on=None`` infers it from the recorded session (off when the local logic
    predicts a micro-compaction the recorded usage does not show). The summary of a compaction
    at the place the session really compacted is the real one; elsewhere ``summarizer`` (default
    ``offline_summary``).
    """
    env = dict(env or {})
    asked_model = model
    model = model or tr.model or "claude-opus-4-6"
    th = compute_thresholds(profile, model, env)
    th = seen_off(tr, profile, model, env, th)
    cal = calibration or calibrate(tr, profile)
    if recall_tools is None:
        recall_tools = recall_tools_for(profile) if scenario in CLEAR_SCENARIOS else 0
    # the fixed part of every prompt: system prompt, tools, and recall's tools when registered
    overhead, stable = fixed_prefix(cal, recall_tools)
    # the API leaves out the thinking of turns before the last human prompt on some models
    # (engine.api.previous_thinking): ``model`` when asked for, else the session's main model; the
    # session's own version when the profile holds it
    strip = strips_previous_thinking(
        asked_model or main_model(r.model for r in tr.replies), _version_in(profile, tr.version)
    )
    if microcompact_on is None:
        rec_sim = simulate_recorded(tr, profile, model, env)
        microcompact_on = not any(
            e.kind == "micro_compact" and e.recorded is False for e in rec_sim.events
        )
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}: expected one of {', '.join(SCENARIOS)}")
    prune_mod = _load_textprune() if scenario in PRUNE_SCENARIOS else None
    penv = dict(prune_env or {})
    # the text prune from state kept across the requests (engine.twins.textprune_incremental)
    pruner = prune_mod.IncrementalPrune(penv) if prune_mod is not None else None
    cenv = dict(clear_env or {})
    clear_edit = knobs_from_env(cenv) if scenario in CLEAR_SCENARIOS else None
    # the edit at the mechanism's limit: what an auto-compaction's floor clears (unseen_cause)
    limit_edit = knobs_from_env(limit_env(cenv))
    clear_step = step_from_env(cenv)
    if clear_policy is None and clear_edit is not None:
        # the online policy of the injected JavaScript (engine.twins.policy; CLAUDE_CTX_CLEAR_POLICY);
        # what a move writes again of the fixed prefix is what the request shows after the
        # system prompt's breakpoint (its system tail, the context prepended to the messages)
        # and the price of a write: the session's cache lifetime (its requests' ``ttl``)
        # (the near move's level: a native build's own threshold, as the gateway reads it off
        # the User-Agent; the injected JavaScript's rule for a cli.js build)
        near = near_threshold(th, _version_in(profile, tr.version))
        clear_policy = clear_policy_from_env(
            cenv, overhead, overhead - stable, cal.one_hour, model, near
        )
    estimate = BlockEstimates()
    # the fixed STEP rule and the paid policy replay incrementally (engine.replay.clearing_incremental);
    # any other policy (the oracle's plan) fits the edit to every request's messages: clear_on_server,
    # the specification
    clearing = (
        IncrementalClearing(
            clear_edit,
            estimate,
            clear_step,
            clear_policy if type(clear_policy) is PaidPolicy else None,
        )
        if clear_edit is not None and (clear_policy is None or type(clear_policy) is PaidPolicy)
        else None
    )
    guard_limit = (
        window_guard_limit(cenv, profile, tr.version, model, th) if clear_edit is not None else None
    )
    guarded = False  # the previous request went without the edit (the window guard)
    remembers = isinstance(clear_policy, PaidPolicy) and clear_policy.conversation is not None
    cache = PromptCache(overhead, stable, lifetime(cal.one_hour))
    # micro-compaction as engine.claude_code.microcompact, from state kept across the requests
    micro = IncrementalMicrocompact(profile, th)
    history: list[dict] = []
    requests: list[Request] = []
    events: list[Event] = []
    calls: list[CompactionCall] = []
    cleared: frozenset[str] = frozenset()
    prev_sig: list[Hashable] | None = None
    prev_n = 0
    prev_line = 0
    cost = cal.cost

    records = memory_records(tr, profile)
    compacted_at = _compacted_records(records)
    carried = cal.carried  # history the file does not hold, until the first compaction
    previous: Sent | None = None  # the last request, kept while the prompt holds ``carried``
    pristine = {m[LINE_KEY]: m for m in records}
    pristine_content = {line: _content(m) for line, m in pristine.items()}
    pristine_est: dict[int, int] = {}
    # content by id, and apart its estimate (engine.identity_memo: no pair to track)
    est_of: dict[int, Any] = {}
    est_memo: dict[int, int] = {}

    def changed(m: Mapping[str, Any]) -> bool:
        line = m.get(LINE_KEY)
        return line in pristine_content and _content(m) is not pristine_content[line]

    def estimate_of(m: Mapping[str, Any]) -> int:
        """``full_estimate`` memoised by content identity (contents are never mutated)."""
        c = _content(m)
        if c is not None and est_of.get(id(c)) is c:
            return est_memo[id(c)]
        value = full_estimate(m)
        if c is not None:
            est_of[id(c)] = c
            est_memo[id(c)] = value
        return value

    @by_identity
    def msg_cost(m: Mapping[str, Any]) -> float:
        """A message's cost in the prompt, memoised by identity (messages are never mutated)."""
        line = m.get(LINE_KEY)
        if line is None:
            return cal.ratio * full_estimate(m)
        base = cost.get(line, 0.0)
        if not changed(m):
            return base
        if line not in pristine_est:
            pristine_est[line] = full_estimate(pristine[line])
        before = pristine_est[line]
        return base * estimate_of(m) / before if before else base

    @by_identity
    def sig_key(m: Mapping[str, Any]) -> tuple[Any, int]:
        """A message's part of the prompt-cache signature, memoised by message identity."""
        return (m.get(LINE_KEY), estimate_of(m) if changed(m) else -1)

    # each sent message's live factor, cost and signature entry (engine.replay.prompt_parts)
    parts = PromptParts(cal, strip, msg_cost, sig_key, by_identity(thinking_share))
    prune_saving = PruneSaving(msg_cost)  # what the text prune took off each request

    @by_identity
    def msg_chars(m: Mapping[str, Any]) -> int:
        """A message's JSON as the injected code measures it (UTF-16 units), memoised."""
        return utf16_len(js_json_stringify({k: v for k, v in m.items() if k != LINE_KEY}))

    def request_chars(sent: list[dict], base: float) -> float:
        """The request's messages, system prompt and tools as JSON characters (the window
        guard's measure): the messages exactly, the system prompt and tools and any history
        the file does not hold (``base`` tokens) at :data:`OVERHEAD_CHARS_PER_TOKEN`."""
        return sum(map(msg_chars, sent)) + len(sent) + 1 + base * OVERHEAD_CHARS_PER_TOKEN

    def summary_call(at: int, tokens: float, compacted: list[dict]) -> CompactionCall:
        """The summary request of a compaction at ``at`` (engine.replay.compaction_cost)."""
        previous = requests[-1].prompt_tokens if requests else 0
        return compaction_call(
            profile, at, tokens, previous, overhead, summary_text(compacted), cal.write_price
        )

    current_usage: dict = {}
    stamp: float | None = None  # the time of the last record (a request's: the one before it)
    for rec in records:
        line = rec[LINE_KEY]
        asked_at, stamp = stamp, seconds(rec.get("timestamp")) or stamp
        if is_compact_boundary(rec):
            meta = rec.get("compactMetadata") or {}
            if meta.get("trigger") == "manual":
                # the user's /compact: replayed where it was typed, with the real summary
                tokens = autocompact_tokens(history, profile)
                history = list(compacted_at[line])
                calls.append(summary_call(line, tokens, history))
                cleared = frozenset()
                carried = 0
                events.append(
                    Event(
                        "manual_compact",
                        line,
                        tokens,
                        th.auto_compact,
                        recorded=True,
                        predicted=True,
                        pre_tokens=meta.get("preTokens"),
                        note="the user's /compact, replayed with the real summary",
                    )
                )
            continue
        if rec.get("isCompactSummary"):
            continue
        k = tr.reply_of_line.get(line)
        if k is not None and tr.replies[k].line == line:
            reply = tr.replies[k]
            names: list[str] = []
            tokens = autocompact_tokens(history, profile)
            if th.auto_compact_enabled and tokens >= th.auto_compact:
                why = (
                    unseen_cause(tokens, th.auto_compact, carried, previous, limit_edit, estimate)
                    if carried
                    else {}
                )
                real = _recorded_summary_before(tr, line, prev_line)
                at = next((b.line for b in tr.boundaries if prev_line < b.line < line), line)
                if real is not None and at in compacted_at:
                    # where the session compacted: its own boundary and summary (their fitted
                    # costs hold what came back with them), then what followed the boundary
                    tail = [m for m in history if (m.get(LINE_KEY) or 0) > at]
                    history = [*compacted_at[at], *tail]
                else:
                    summ = (
                        (lambda _m, _r=real: _r)
                        if real is not None
                        else (summarizer or offline_summary)
                    )
                    history = full_compact(history, profile, tokens, "auto", summ).messages
                calls.append(summary_call(at, tokens, history))
                cleared = frozenset()
                carried = 0
                events.append(
                    Event(
                        "auto_compact",
                        at,
                        tokens,
                        th.auto_compact,
                        recorded=at != line,
                        predicted=True,
                        note="real summary reused" if real is not None else "offline summary",
                        **why,
                    )
                )
                names.append("auto_compact")
                tokens = autocompact_tokens(history, profile)
            sent = history
            if microcompact_on:
                mc = micro.run(history, cleared)
                if mc.fired:
                    events.append(_mc_event(mc, line, last_usage_tokens(history), th, None))
                    names.append("micro_compact")
                    cleared = cleared | frozenset(mc.cleared)
                    # cli.js keeps the cleared messages: later requests send them cleared too
                    history = mc.messages
                    sent = history
                elif cleared:
                    sent = mc.messages
            if pruner is not None:
                pruned = pruner.prune(sent)
                if pruned is not sent:
                    saved = prune_saving(sent, pruned)
                    events.append(
                        Event("text_prune", line, tokens, None, saved_tokens=round(saved))
                    )
                    names.append("text_prune")
                    sent = pruned
            costs = parts.price(sent, line)
            priced = costs  # before the server's edit
            # the prefix sums of ``costs`` (engine.replay.prefix_sums), so that no sum below
            # runs over the whole history again; None: each sums the costs itself
            sums = parts.sums()
            base = overhead + carried
            on_server: dict[int, tuple[int, ...]] = {}
            server_cleared = 0
            stop = guard_limit is not None and request_chars(sent, base) >= guard_limit
            if stop and not guarded:
                events.append(Event("clear_stopped", line, tokens, None, note=WINDOW_GUARD_NOTE))
                names.append("clear_stopped")
            guarded = stop
            # a request the guard sends without the edit still passes the policy: the injected
            # code and the gateway remember it for the free move (engine.twins.free_moves)
            if remembers:
                # the request's time: the expiry move's clock (engine.twins.free_moves)
                clear_policy.asked(  # type: ignore[union-attr]
                    None if asked_at is None else round(asked_at * 1000)
                )
            if clear_edit is not None and (not stop or remembers):
                view = (
                    clearing.view(sent, costs, base, sums)
                    if clearing is not None
                    else clear_on_server(
                        sent, costs, base, clear_edit, estimate, clear_step, clear_policy
                    )
                )
                if not stop and view.cleared_tool_uses:
                    costs, on_server = view.costs, view.changed
                    sums = clearing.sums(costs) if clearing is not None else None
                    server_cleared = view.cleared_tokens
                    events.append(
                        Event(
                            "server_clear",
                            line,
                            tokens,
                            clear_edit.trigger_value,
                            saved_tokens=server_cleared,
                            note=f"{view.cleared_tool_uses} tool uses cleared by the server",
                        )
                    )
                    names.append("server_clear")
            prompt = round(base + summed(costs, sums))
            if remembers:
                # the reply's usage tells the policy's memory the prompt (the near move)
                clear_policy.observe(prompt)  # type: ignore[union-attr]
            sig = parts.signature(on_server)
            # sig[:prev_n] != prev_sig[:prev_n], compared from the first entry that is not the
            # very object of the previous signature (equal before it); the previous signature
            # as it was: its first ``prev_n`` entries (the parts may append to a list handed out)
            brk = prev_sig is not None and (
                len(sig) < prev_n or sig[parts.same : prev_n] != prev_sig[parts.same : prev_n]
            )
            blocks = parts.blocks()
            # the carried history (before the file's first message) is a fixed prefix too: read
            # from the cache like the system prompt (it was written on every request)
            read = cache.read(sig, costs, blocks, overhead + carried, sums, not brk, asked_at)
            read = min(prompt, round(read))
            prev_sig, prev_n = sig, len(sig)
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
                    cache_read=read,
                    cache_write=prompt - read,
                    server_cleared=server_cleared,
                    write_price=cal.write_price,
                    cache_expired=cache.expired,
                )
            )
            # The usage the API reports is the edited prompt's, and Claude Code counts it as it
            # is. 2.1.284+ adds back what the server cleared only for an edit it built itself
            # (it records applied_edits then; engine.count.server_cleared_tokens): ctxpatch's
            # edit (injected, or added by the gateway) leaves the record without them, so the
            # clearing delays compaction on every version (measured on the real 2.1.330).
            # the output Claude Code keeps in memory: the final count, or on 2.1.8-2.1.29 the
            # message_start placeholder (Profile.usage_final_in_memory), as in the recorded replay
            sim_usage = {
                "input_tokens": prompt,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": memory_output(reply, profile),
            }
            prev_line = line
            current_usage = sim_usage
            # copies: the replay appends to its history, the prompt parts to the costs
            previous = (list(sent), list(priced), base, prompt) if carried else None
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
        "prune_env": penv if scenario in PRUNE_SCENARIOS else {},
        "clear_env": cenv if scenario in CLEAR_SCENARIOS else {},
        "clear_edit": to_json(clear_edit) if clear_edit is not None else None,
        "clear_step": clear_step if clear_edit is not None else None,
        "clear_policy": policy_from_env(cenv) if clear_edit is not None else None,
        "microcompact": microcompact_on,
    }
    if recall_tools:
        knobs["recall_tools"] = recall_tools
    return Simulation(
        profile,
        scenario,
        model,
        th,
        tuple(requests),
        tuple(events),
        knobs,
        tuple(calls),
        unseen_tokens=cal.carried,
    )


def _content(m: Mapping[str, Any]) -> Any:
    return (
        (m.get("message") or {}).get("content")
        if m.get("type") != "attachment"
        else m.get("attachment")
    )
