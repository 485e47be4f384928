"""What the engine says the main-loop request must carry, and the byte-for-byte comparison.

Prediction (:func:`expected_messages`), in the order ``cli.js`` does it before the request:

1. the resumed transcript's records, plus the new prompt as a user record;
2. legacy micro-compaction (``engine.claude_code.microcompact``) under the version's profile and thresholds,
   with the real tool-results folder of the session for the 2.1.x ``<persisted-output>`` pointer;
3. patched only: the text prune (``engine.twins.textprune.prune``) with the ``CLAUDE_TEXT_PRUNE_*``
   settings of the run;
4. flattening to API messages (``engine.claude_code.flatten``), with a placeholder ``isMeta`` reminder merged
   where the CLI puts its own (see VOLATILE).

VOLATILE (what the comparison ignores, on both sides, and nothing else):

* ``cache_control`` keys of content blocks: the CLI's prompt-caching placement, not content.
  The CLI puts one on the last block of the last message, which turns that message's string
  content into a text block: the prediction models that conversion, it does not ignore it;
* user text blocks whose text starts with ``<system-reminder>``: context the CLI injects (date,
  CLAUDE.md, skills list, TodoWrite nudge). They may only sit at the start of the first message
  and in the new prompt's message; one anywhere else is a difference. Where the captured request
  has them, the prediction merges a placeholder meta message at the same place, so the string →
  text-block conversion that merging causes is predicted, not ignored;
* a first user message ``<available-deferred-tools>…`` (2.1.69 lists the tools it defers
  behind ``ToolSearch`` there).

Everything else (message count, roles, block order, every key and value, key order) must match
exactly: :func:`first_difference` names the first differing message and block.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.claude_code.flatten import flatten
from engine.claude_code.microcompact import MicroCompactResult, microcompact
from engine.claude_code.thresholds import Thresholds
from engine.profiles import Profile

REMINDER_PREFIX = "<system-reminder>"
COMPACT_PLACEHOLDER = (
    "Your task is to create a detailed summary of the conversation so far "
    "(placeholder for the summarisation prompt)"
)
VOLATILE_KEYS = frozenset({"cache_control"})


def prompt_record(text: str) -> dict:
    """The new prompt as the CLI appends it (a typed user message, string content)."""
    return {"type": "user", "message": {"role": "user", "content": text}}


def reminder_record() -> dict:
    return {
        "type": "user",
        "isMeta": True,
        "message": {
            "role": "user",
            "content": [
                {"type": "text", "text": REMINDER_PREFIX + "\n(injected by the CLI: volatile)"}
            ],
        },
    }


def is_reminder(block: Any) -> bool:
    return (
        isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and block["text"].startswith(REMINDER_PREFIX)
    )


def reminder_positions(api_messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of captured messages that hold at least one injected reminder block."""
    out = []
    for i, m in enumerate(api_messages):
        c = m.get("content")
        if m.get("role") == "user" and isinstance(c, list) and any(is_reminder(b) for b in c):
            out.append(i)
    return out


DEFERRED_TOOLS_PREFIX = "<available-deferred-tools>"


def without_deferred_tools(api_messages: Sequence[Mapping[str, Any]]) -> list:
    """The messages without a leading ``<available-deferred-tools>`` user message (2.1.69)."""
    msgs = list(api_messages)
    if msgs and msgs[0].get("role") == "user":
        c0 = msgs[0].get("content")
        if isinstance(c0, str) and c0.startswith(DEFERRED_TOOLS_PREFIX):
            return msgs[1:]
    return msgs


def strip_volatile(api_messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    """A deep copy without ``cache_control`` keys, reminder blocks and a leading deferred-tools
    message."""
    out: list[dict] = []
    for m in without_deferred_tools(api_messages):
        m2 = copy.deepcopy(dict(m))
        c = m2.get("content")
        if isinstance(c, list):
            blocks = []
            for b in c:
                if m2.get("role") == "user" and is_reminder(b):
                    continue
                if isinstance(b, dict):
                    b = {k: v for k, v in b.items() if k not in VOLATILE_KEYS}
                blocks.append(b)
            m2["content"] = blocks
        out.append(m2)
    return out


@dataclass
class Prediction:
    api_messages: list[dict]  # flattened, volatile parts stripped
    mc: MicroCompactResult
    prune: Any = None  # engine.twins.textprune.PruneOutcome when patched
    records_sent: list[dict] = field(default_factory=list)  # before flattening


def expected_messages(
    records: Sequence[Mapping[str, Any]],
    prompt: str,
    profile: Profile,
    thresholds: Thresholds,
    *,
    persist_dir: str,
    prune_env: Mapping[str, str] | None = None,
    reminders_first: bool = True,
    reminders_last: bool = True,
    style: Mapping[str, bool] | None = None,
    compact_prompt: bool = False,
    compaction_through_loop: bool = False,
) -> Prediction:
    """The engine's prediction of the first main-loop request after ``--resume`` + ``prompt``."""
    msgs = [dict(r) for r in records] + [prompt_record(prompt)]
    mc = microcompact(msgs, profile, thresholds, persist_dir=persist_dir)
    sent = mc.messages
    outcome = None
    if prune_env is not None:
        from engine.twins.textprune import prune_detailed

        outcome = prune_detailed(sent, prune_env)
        sent = outcome.messages
    with_meta = list(sent)
    if compact_prompt:  # the summarisation request appends its prompt as a user message
        with_meta.append(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": COMPACT_PLACEHOLDER}],
                },
            }
        )
        if prune_env is not None and compaction_through_loop:
            from engine.twins.textprune import prune_detailed

            # the summary prompt is one more turn start: the cutoff can move on
            with_meta = list(prune_detailed(with_meta, prune_env).messages)
    if reminders_last:
        with_meta.insert(len(sent) - 1, reminder_record())
    if reminders_first:
        with_meta.insert(0, reminder_record())
    flat = flatten(with_meta, **dict(style or {}))
    if flat and isinstance(flat[-1]["content"], str):  # cache_control needs a block to sit on
        flat[-1] = {**flat[-1], "content": [{"type": "text", "text": flat[-1]["content"]}]}
    api = strip_volatile(flat)
    return Prediction(api, mc, outcome, list(sent))


def compaction_runs_the_loop(version: str) -> bool:
    """Whether the summarisation request is made by a forked query loop (so a patched cli.js
    prunes again, with the summary prompt as one more turn): the profile's
    ``compaction_through_loop`` (2.1.86 on; see :mod:`engine.profiles`).

    Seen on real patched runs: 2.1.86, 2.1.88, 2.1.89, 2.1.90 and 2.1.112 summarise through the
    loop (the summarised history is pruned with the cutoff one turn further on); 2.0.76, 2.1.7,
    2.1.30, 2.1.50, 2.1.68, 2.1.77, 2.1.78, 2.1.81, 2.1.84 and 2.1.85 call the model directly
    (pruned once).
    """
    from engine.profiles import profile_for

    return profile_for(version).compaction_through_loop


def canonical(obj: Any) -> str:
    """The bytes compared: compact JSON, key order kept, non-ASCII as is."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _short(obj: Any, n: int = 300) -> str:
    s = canonical(obj)
    return s if len(s) <= n else s[: n // 2] + f" …[{len(s)} chars]… " + s[-n // 2 :]


def first_difference(expected: Sequence[Any], actual: Sequence[Any]) -> str | None:
    """``None`` when equal byte for byte, else where and how they first differ."""
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if canonical(e) == canonical(a):
            continue
        where = f"message {i} (role {e.get('role')!r} expected, {a.get('role')!r} sent)"
        ec, ac = e.get("content"), a.get("content")
        if isinstance(ec, list) and isinstance(ac, list):
            for j, (eb, ab) in enumerate(zip(ec, ac, strict=False)):
                if canonical(eb) != canonical(ab):
                    hint = ""
                    if eb == ab:
                        hint = " (same keys and values, different key order)"
                    return (
                        f"{where}, block {j}{hint}:\n  expected {_short(eb)}\n"
                        f"  sent     {_short(ab)}"
                    )
            return (
                f"{where}: {len(ec)} blocks expected, {len(ac)} sent; first extra: "
                f"{_short((ec if len(ec) > len(ac) else ac)[min(len(ec), len(ac))])}"
            )
        return f"{where}:\n  expected content {_short(ec)}\n  sent     content {_short(ac)}"
    if len(expected) != len(actual):
        longer = expected if len(expected) > len(actual) else actual
        extra = longer[min(len(expected), len(actual))]
        return (
            f"{len(expected)} messages expected, {len(actual)} sent; first extra "
            f"({'expected' if longer is expected else 'sent'}) message "
            f"{min(len(expected), len(actual))}: {_short(extra)}"
        )
    return None


def tool_results(api_messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``tool_use_id`` → content of every tool_result sent."""
    out: dict[str, Any] = {}
    for m in api_messages:
        c = m.get("content")
        for b in c if isinstance(c, list) else []:
            if isinstance(b, Mapping) and b.get("type") == "tool_result":
                out[str(b.get("tool_use_id"))] = b.get("content")
    return out
