"""Replay a session request by request under a version profile.

Scenarios
    ``recorded``: follows the session as it happened. Before every API request (the first line
    of each reply ``message.id``) it forms the count ``cli.js`` forms (``engine.claude_code.count``: last
    usage + newer-messages estimate in 2.1.2+), compares it with the thresholds, and says which
    mechanism fires. Each ``compact_boundary`` line is checked: an ``auto`` one must be predicted
    there (the check that fired ran on the messages before it), a ``manual`` one is reported as
    manual. Micro-compaction is reported as predicted by the local logic and as ``observed`` only
    when the recorded usage drops accordingly (2.1.30-2.1.68 have a remote kill switch).
    ``unpatched`` / ``text_prune`` / ``server_clearing`` / ``patched``: counterfactual replays
    of the same conversation under given knobs (``engine.replay.counterfactual``).
    ``oracle``: the cheapest clearing schedule in hindsight (``engine.replay.oracle``).

Every request carries its cache read / write and cost (``engine.api.prompt_cache``: recorded from
the usage, replayed from the earlier cache entries the prompt still starts with).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.api.prompt_cache import caches_for_an_hour, recorded_write_price, write_price
from engine.claude_code.count import autocompact_tokens, last_usage_index, last_usage_tokens
from engine.claude_code.thresholds import Thresholds, compute_thresholds
from engine.profiles import Profile
from engine.replay.auto_compact_off import seen_off
from engine.replay.compaction_cost import CompactionCall, compaction_call, summary_text
from engine.replay.microcompact_incremental import IncrementalMicrocompact
from engine.replay.model import Event, Request, Simulation
from engine.transcript import Reply, Transcript, is_compact_boundary, is_sidechain

IN_MEMORY_TYPES = frozenset({"user", "assistant", "system", "attachment"})
LINE_KEY = "__line"
CACHE_BREAK_RATIO = 0.98  # recorded: cache read below 98% of the previous prompt


# --- in-memory message list ------------------------------------------------------------------


def memory_output(reply: Reply, profile: Profile | None) -> int:
    """The ``output_tokens`` cli.js keeps in memory for ``reply``: the final count, or where
    ``profile.usage_final_in_memory`` is off (2.1.8-2.1.29) the ``message_start`` placeholder.
    The recorded scenario and the counterfactual replays both count with it."""
    if profile is None or profile.usage_final_in_memory:
        return reply.count_output
    return reply.start_output


def memory_records(tr: Transcript, profile: Profile | None = None) -> list[dict]:
    """Copies of the main-chain records cli.js keeps in memory, tagged with their line.

    The last line of each reply gets the reply's final usage (see ``transcript.Reply``), except
    where ``profile.usage_final_in_memory`` is off (2.1.8-2.1.29): there cli.js keeps the
    ``message_start`` usage the file recorded.
    """
    final = profile is None or profile.usage_final_in_memory
    out: list[dict] = []
    for i, rec in enumerate(tr.records, 1):
        if not rec or is_sidechain(rec) or rec.get("type") not in IN_MEMORY_TYPES:
            continue
        copy = {**rec, LINE_KEY: i}
        k = tr.reply_of_line.get(i)
        if final and k is not None and tr.replies[k].lines[-1] == i:
            copy["message"] = {**rec["message"], "usage": tr.replies[k].count_usage}
        out.append(copy)
    return out


def unwritten_tail(
    boundary: Mapping[str, Any],
    written: set,
    profile: Profile,
    unanswered: Sequence[tuple[int, str, str]] = (),
) -> str:
    """Why the count may lack messages cli.js counted, or "" when nothing says so.

    A ``compact_boundary`` names the last message cli.js compacted in ``logicalParentUuid``
    (``A[A.length-1]?.uuid`` of the messages it compacted, read in 2.1.25 and 2.1.33). When that
    uuid is no line of the file, cli.js held a message it never wrote:

    * the result of the newest reply's tool call (``unanswered``, from
      :func:`unanswered_tool_calls`): the compaction ran on the messages of the next loop, the
      tool results included, and every version's estimate counts a ``tool_result`` at chars/4;
      of the shared sessions' auto-compactions that follow a tool call, 7 of the 18 of
      2.1.25-2.1.49 lack it (before none of the 18 of 2.0.65-2.1.17), the compact summary
      quoting what it held (9d7a9d52). What drops it is not known: the real 2.1.25 REPL
      against the lab's mock writes it (a Read or a Grep after thinking, streaming tool
      execution on, a PostToolUse hook, a 20 s compaction, resumed from 9d7a9d52's first 379
      lines); the 7 were all captured by Entire's checkpoints, as were 15 of the 18 that keep it;
    * up to 2.1.96 an attachment (IDE/LSP diagnostics, a task reminder, a queued prompt ...):
      the transcript writer drops every attachment for users outside Anthropic
      (``type==="attachment"&&userType!=="ant"``; 2.1.27 and 2.1.40-2.1.96 keep
      ``hook_additional_context`` under ``CLAUDE_CODE_SAVE_HOOK_ADDITIONAL_CONTEXT``; 2.1.97+
      drop a set of types that is empty). From 2.1.33 (``Profile.newer_counts_attachments``)
      the count adds such a record's JSON at chars/4; before, an attachment counts 0 (``L_6``
      in 2.1.25 counts user and assistant messages only).

    Either way the real ``preTokens`` holds tokens no replay of the file can see.
    """
    parent = boundary.get("logicalParentUuid")
    if not parent or parent in written:
        return ""
    if unanswered:
        calls = ", ".join(f"the {name} call at line {ln} ({tid})" for ln, tid, name in unanswered)
        return (
            f"the last message cli.js counted (logicalParentUuid {parent}) is not in the file, "
            f"nor is the result of {calls}: cli.js held that tool result (the compaction runs "
            "on the next request's messages) and counted it at chars/4, but the file does not "
            "hold it, so the count here lacks its tokens"
        )
    if not profile.newer_counts_attachments:
        return ""
    return (
        f"the last message cli.js counted (logicalParentUuid {parent}) is not in the file: "
        "cli.js did not write it (an attachment, up to 2.1.96), so the count here lacks its tokens"
    )


def unanswered_tool_calls(
    records: Sequence[Mapping[str, Any] | None], line: int
) -> tuple[tuple[int, str, str], ...]:
    """The tool calls of the newest main-chain reply before ``line`` (1-based) whose
    ``tool_result`` is no line of the file: ``(line, tool_use id, tool name)`` each.

    The reply is the newest assistant record with usage before ``line`` and every record with its
    ``message.id``; a result counts wherever it is in the file.
    """
    mid: Any = None
    calls: list[tuple[int, str, str]] = []
    for i in range(min(line, len(records) + 1) - 1, 0, -1):
        rec = records[i - 1]
        if not rec or rec.get("isSidechain"):
            continue
        inner = rec.get("message") or {}
        if rec.get("type") != "assistant" or not isinstance(inner, Mapping):
            continue
        if mid is None:
            if not inner.get("usage"):
                continue
            mid = inner.get("id") or object()
        elif inner.get("id") != mid:
            break
        content = inner.get("content")
        for b in content if isinstance(content, list) else []:
            if isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("id"):
                calls.append((i, str(b["id"]), str(b.get("name") or "?")))
        if not inner.get("id"):
            break
    if not calls:
        return ()
    answered = set()
    for rec in records:
        content = ((rec or {}).get("message") or {}).get("content")
        for b in content if isinstance(content, list) else []:
            if isinstance(b, Mapping) and b.get("type") == "tool_result":
                answered.add(b.get("tool_use_id"))
    return tuple(sorted(c for c in calls if c[1] not in answered))


def queued_prompt_evidence(records: Sequence[Mapping[str, Any] | None], line: int) -> str:
    """Which queued prompt cli.js attached just before the boundary at ``line`` (1-based), or "".

    A prompt typed while the model works is queued (``queue-operation`` ``enqueue``) and, when
    taken off the queue mid-turn (``remove`` / ``dequeue``), sent as a ``queued_command``
    attachment, which the writer drops (see :func:`unwritten_tail`). The enqueue record keeps the
    prompt only when it is a string (``typeof A.value==="string"?A.value:void 0``, read in
    2.1.42): a prompt with a pasted image has none, and up to 2.1.44 the count adds the
    attachment's JSON at chars/4, the image's base64 included, which no replay of the file sees.
    Looks back from the boundary to the newest reply with usage.
    """
    taken: int | None = None
    for i in range(line - 1, 0, -1):
        rec = records[i - 1] if i - 1 < len(records) else None
        if not rec:
            continue
        if rec.get("type") == "assistant" and (rec.get("message") or {}).get("usage"):
            break
        if rec.get("type") == "queue-operation" and rec.get("operation") in ("remove", "dequeue"):
            taken = i
            break
    if taken is None:
        return ""
    for i in range(taken - 1, 0, -1):
        rec = records[i - 1]
        if not rec or rec.get("type") != "queue-operation":
            continue
        op = rec.get("operation")
        if op == "enqueue":
            if isinstance(rec.get("content"), str):
                return ""
            return (
                f"a queued prompt that is not plain text (its enqueue at line {i} holds no "
                f"content: cli.js records it only for a string, e.g. not with a pasted image) was "
                f"attached at line {taken}"
            )
        if op in ("remove", "dequeue", "popAll"):
            break
    return f"a queued prompt was attached at line {taken} and its enqueue is not in the file"


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
    tr: Transcript,
    profile: Profile,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
    overhead: float = 0.0,
) -> Simulation:
    """Explain the session as it happened (see the module docstring).

    ``overhead``: the fixed prefix (``Calibration.overhead``) a compaction's summary request
    with its own system prompt does not send (``engine.replay.session.simulate`` passes it)."""
    env = dict(env or {})
    model = model or tr.model or "claude-opus-4-6"
    th = compute_thresholds(profile, model, env)
    th = seen_off(tr, profile, model, env, th)
    context: list[dict] = []
    requests: list[Request] = []
    events: list[Event] = []
    cleared: frozenset[str] = frozenset()
    mc_seen_off = False
    prev_prompt: int | None = None
    compactions: list[tuple[int, float, int]] = []  # line, count, previous prompt
    written = {r.get("uuid") for r in tr.records if r}
    one_hour = caches_for_an_hour(r.usage for r in tr.replies)
    # engine.claude_code.microcompact.microcompact, from state kept across the requests
    micro = IncrementalMicrocompact(profile, th)
    for rec in memory_records(tr, profile):
        line = rec[LINE_KEY]
        if is_compact_boundary(rec):
            meta = rec.get("compactMetadata") or {}
            trigger = str(meta.get("trigger") or "?")
            tokens = autocompact_tokens(context, profile)
            pre = meta.get("preTokens")
            kind = "auto_compact" if trigger == "auto" else "manual_compact"
            predicted: bool | None = False
            note = f"trigger {trigger}"
            if trigger == "auto" and last_usage_index(context) is None:
                # carried over: the file holds no API usage before this boundary (it starts
                # with one, or mid-session), so the count cli.js formed cannot be rebuilt
                predicted = None
                note = (
                    "not checkable: no API usage before this boundary in the file "
                    "(carried over from an earlier session file)"
                )
            elif trigger == "auto":
                predicted = th.auto_compact_enabled and tokens >= th.auto_compact
                notes = [] if predicted else ["recorded but not predicted"]
                parent = rec.get("logicalParentUuid")
                calls = (
                    unanswered_tool_calls(tr.records, line)
                    if parent and parent not in written
                    else ()
                )
                unwritten = unwritten_tail(rec, written, profile, calls)
                if unwritten:
                    notes.append(unwritten)
                    queued = queued_prompt_evidence(tr.records, line)
                    if queued:
                        notes.append(queued)
                note = "; ".join(notes)
            events.append(
                Event(
                    kind,
                    line,
                    tokens,
                    th.auto_compact,
                    recorded=True,
                    predicted=predicted,
                    pre_tokens=pre,
                    note=note,
                )
            )
            compactions.append((line, pre if isinstance(pre, int) else tokens, prev_prompt or 0))
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
                res = micro.run(context, cleared)
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
                    cache_read=read,
                    cache_write=int(u.get("cache_creation_input_tokens") or 0),
                    write_price=recorded_write_price(u, one_hour),
                )
            )
            prev_prompt = reply.prompt_tokens
        context.append(rec)
    summaries = _compaction_calls(tr, profile, compactions, overhead, write_price(one_hour))
    return Simulation(
        profile, "recorded", model, th, tuple(requests), tuple(events), {"env": env}, summaries
    )


def _compaction_calls(
    tr: Transcript,
    profile: Profile,
    compactions: Sequence[tuple[int, float, int]],
    overhead: float,
    write_at: float,
) -> tuple[CompactionCall, ...]:
    """The file's compactions' summary requests (no record holds their usage), priced as the
    counterfactual replays price theirs: ``preTokens``, the stored summary, the fixed prefix."""
    return tuple(
        compaction_call(
            profile,
            line,
            count,
            previous,
            overhead,
            summary_text(tr.records[line : line + 5]),
            write_at,
        )
        for line, count, previous in compactions
    )
