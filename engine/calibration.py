"""Per-message token costs fitted on a session's recorded usage (the replays' prompt sizes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.javascript import js_json_stringify
from engine.profiles import Profile
from engine.simulate import LINE_KEY, memory_records
from engine.tokens import count_text, raw_message_tokens
from engine.transcript import Transcript, is_compact_boundary


def full_estimate(m: Mapping[str, Any]) -> int:
    """Every block of a message at chars/4 (text, thinking and tool_use as JSON, strings too)."""
    content = (m.get("message") or {}).get("content")
    if isinstance(content, str):
        return count_text(content)
    if m.get("type") == "attachment":
        return count_text(js_json_stringify(m.get("attachment")))
    return raw_message_tokens(m)


@dataclass(frozen=True)
class Calibration:
    """Per-line token costs fitted on the recorded usage, and the fixed prompt overhead."""

    overhead: int
    cost: dict[int, float]
    ratio: float  # recorded tokens per estimated token, for messages the session never had


def calibrate(tr: Transcript, profile: Profile | None = None) -> Calibration:
    """Split each recorded prompt increase over the messages added since the previous request.

    Within one compaction segment the prompt of request k is the prompt of request k-1 plus the
    messages appended in between (the previous reply and the tool results / prompts after it);
    the increase is shared among them in proportion to their chars/4 estimate. The first
    request's prompt minus its messages' estimate is the overhead (system prompt and tools).
    ``profile``: the session's, so the records are the ones the replays hold in memory
    (``memory_records``); the fit reads the recorded prompts, which no version rule changes.
    """
    cost: dict[int, float] = {}
    overhead: int | None = None
    pending: list[dict] = []
    prev_prompt: int | None = None
    fitted = est_total = 0.0
    for rec in memory_records(tr, profile):
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
