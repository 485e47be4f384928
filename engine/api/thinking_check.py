"""A model of the API's preserved-thinking check, and of the requests Claude Code sends.

Used to prove (tests) and measure (``bench/thinking_prune.py``) that a prune of the message list
never sends a request the binding check rejects. Pure functions over Claude Code message lists
(``{type, message: {role, content, id?}, ...}``); no I/O.

The check (``../shared/research/api-2026.md``, "Preserved thinking"), as modelled here:

- each ``thinking`` / ``redacted_thinking`` block is bound to everything before it when it was
  produced: the request's conversation plus the blocks of the same reply before it;
- a later request must present, before the block, the same conversation, compared with what the
  API ignores removed: ``cache_control``, string content vs one text block, leading/trailing
  whitespace of text, whitespace-only text blocks, key order, and the thinking blocks themselves;
  message boundaries are not compared (Claude Code merges consecutive records of one role, and a
  removed thinking-only record joins its neighbours);
- removing thinking blocks is accepted only as a contiguous run from the front or a trailing run
  (the blocks sent must be a contiguous run of those the conversation produced so far);
- inside a tool round (the request continues after tool results), the last reply's thinking must
  be sent intact.

Claude Code's side (:func:`replay`): one request per assistant reply (the records sharing a
``message.id``). A request after a typed prompt starts from the full history (the REPL keeps
every record as produced); a request that continues a tool round starts from the list the
previous request *sent* plus the records appended since (``query()`` recurses with
``[...messagesForQuery, ...assistantMessages, ...toolResults]`` and the prune's result is
``messagesForQuery``: checked in 2.1.112).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.twins.textprune_estimate import estimate_tokens

THINKING_TYPES = ("thinking", "redacted_thinking")
CACHE_READ, CACHE_WRITE = 0.1, 1.25

Prune = Callable[[list[Any]], list[Any]]


def _content(msg: object) -> Any:
    if not isinstance(msg, dict) or msg.get("type") not in ("user", "assistant"):
        return None
    message = msg.get("message")
    return message.get("content") if isinstance(message, dict) else None


def _blocks(msg: object) -> list[Any]:
    content = _content(msg)
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def thinking_key(block: object) -> str | None:
    """The identity of a thinking block (its signature, or a redacted block's data)."""
    if not isinstance(block, dict) or block.get("type") not in THINKING_TYPES:
        return None
    value = block.get("signature") if block["type"] == "thinking" else block.get("data")
    return json.dumps([block["type"], value, block.get("thinking")], sort_keys=True)


def _compared(block: object) -> str | None:
    """What the check compares of one non-thinking block (``None``: ignored)."""
    if isinstance(block, dict):
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            stripped = block["text"].strip()
            return json.dumps(["text", stripped]) if stripped else None
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True)


def _role(msg: dict[str, Any]) -> str:
    return "assistant" if msg.get("type") == "assistant" else "user"


def reply_starts(history: Sequence[Any]) -> list[int]:
    """The index of the first record of every assistant reply (records sharing ``message.id``)."""
    seen: set[str] = set()
    starts = []
    for i, msg in enumerate(history):
        if not isinstance(msg, dict) or msg.get("type") != "assistant":
            continue
        message = msg.get("message")
        mid = message.get("id") if isinstance(message, dict) else None
        if isinstance(mid, str):
            if mid in seen:
                continue
            seen.add(mid)
        starts.append(i)
    return starts


def reply_records(history: Sequence[Any], start: int) -> list[int]:
    """Indices of the records of the reply starting at ``start``."""
    message = history[start].get("message") or {}
    mid = message.get("id")
    if not isinstance(mid, str):
        return [start]
    return [
        i
        for i in range(start, len(history))
        if isinstance(history[i], dict)
        and history[i].get("type") == "assistant"
        and isinstance(history[i].get("message"), dict)
        and history[i]["message"].get("id") == mid
    ]


def in_tool_round(history: Sequence[Any], end: int) -> bool:
    """Whether the request ``history[0:end]`` continues a tool round (tool results since the
    last assistant record)."""
    for i in range(end - 1, -1, -1):
        msg = history[i]
        if isinstance(msg, dict) and msg.get("type") == "assistant":
            return False
        content = _content(msg)
        if (
            isinstance(msg, dict)
            and msg.get("type") == "user"
            and isinstance(content, list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        ):
            return True
    return False


@dataclass(frozen=True)
class Request:
    start: int  # index in the history of the reply this request produced
    continuation: bool  # inside a tool round: built from the previous request's result
    sent: list[Any]


def replay(history: Sequence[Any], prune: Prune) -> list[Request]:
    """Every request Claude Code sends for ``history`` with ``prune`` in its query loop."""
    requests: list[Request] = []
    previous: Request | None = None
    for start in reply_starts(history):
        continuation = previous is not None and in_tool_round(history, start)
        if previous is not None and continuation:
            given = list(previous.sent) + list(history[previous.start : start])
        else:
            given = list(history[:start])
        request = Request(start, continuation, prune(given))
        requests.append(request)
        previous = request
    return requests


@dataclass
class Report:
    requests: int = 0
    rejected_requests: int = 0  # at least one block bound to a different conversation (HTTP 400)
    mismatched_blocks: int = 0  # blocks a drop_block account would lose
    not_contiguous: int = 0  # requests whose thinking blocks are not one contiguous run
    round_broken: int = 0  # tool-round requests without the last reply's thinking
    dropped_blocks: int = 0  # distinct blocks the client left out of a later request
    tokens_sent: int = 0
    cache_breaks: int = 0
    cost: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return (
            not (self.rejected_requests or self.mismatched_blocks or self.not_contiguous)
            and not self.round_broken
        )


def check(history: Sequence[Any], requests: Sequence[Request]) -> Report:
    """Run the modelled binding check over the requests of one session, and price them."""
    report = Report()
    bound: dict[str, tuple[str, ...]] = {}  # thinking key -> compared prefix when produced
    order: list[str] = []  # thinking keys in the order the replies produced them
    dropped: set[str] = set()
    for request in requests:
        report.requests += 1
        flat: list[str] = []
        present: list[str] = []
        rejected = False
        for msg in request.sent:
            for block in _blocks(msg):
                key = thinking_key(block)
                if key is None:
                    compared = _compared(block)
                    if compared is not None:
                        flat.append(_role(msg) + ":" + compared)
                    continue
                present.append(key)
                if key in bound and bound[key] != tuple(flat):
                    report.mismatched_blocks += 1
                    rejected = True
                    if len(report.problems) < 5:
                        report.problems.append(f"request at {request.start}: block {len(present)}")
        report.rejected_requests += rejected
        known = [k for k in order if k in bound]
        in_conversation = [k for k in known if k in present or k in _keys_before(history, request)]
        positions = [in_conversation.index(k) for k in present if k in in_conversation]
        if positions and positions != list(range(positions[0], positions[0] + len(positions))):
            report.not_contiguous += 1
        dropped.update(k for k in in_conversation if k not in present)
        if request.continuation:
            last = _last_reply_thinking(history, request.start)
            if any(k not in present for k in last):
                report.round_broken += 1
        # the reply of this request: its thinking is bound to what was sent plus its own blocks
        own = list(flat)
        for i in reply_records(history, request.start):
            for block in _blocks(history[i]):
                key = thinking_key(block)
                if key is None:
                    compared = _compared(block)
                    if compared is not None:
                        own.append("assistant:" + compared)
                elif key not in bound:
                    bound[key] = tuple(own)
                    order.append(key)
    report.dropped_blocks = len(dropped)
    priced = price(r.sent for r in requests)
    report.tokens_sent, report.cache_breaks, report.cost = priced.sent, priced.breaks, priced.cost
    return report


@dataclass(frozen=True)
class Price:
    sent: int  # estimated tokens sent, all requests
    breaks: int  # requests whose message prefix changed before the previous request's end
    cost: float  # input-token equivalents at prompt-cache prices


def price(requests: Iterable[Sequence[Any]]) -> Price:
    """Price successive requests (message lists) like the prompt cache: the longest prefix of
    messages identical to the previous request is read (``CACHE_READ``), the rest written
    (``CACHE_WRITE``)."""
    sent = breaks = 0
    cost = 0.0
    previous_keys: list[str] = []
    for msgs in requests:
        keys = [json.dumps(m, sort_keys=True) for m in msgs]
        common = 0
        while common < min(len(keys), len(previous_keys)) and keys[common] == previous_keys[common]:
            common += 1
        if previous_keys and common < len(previous_keys):
            breaks += 1
        total = estimate_tokens(list(msgs))
        cached = estimate_tokens(list(msgs[:common]))
        sent += total
        cost += CACHE_READ * cached + CACHE_WRITE * (total - cached)
        previous_keys = keys
    return Price(sent, breaks, cost)


def _keys_before(history: Sequence[Any], request: Request) -> set[str]:
    keys = set()
    for msg in history[: request.start]:
        for block in _blocks(msg):
            key = thinking_key(block)
            if key is not None:
                keys.add(key)
    return keys


def _last_reply_thinking(history: Sequence[Any], end: int) -> list[str]:
    starts = [s for s in reply_starts(history) if s < end]
    if not starts:
        return []
    keys = []
    for i in reply_records(history, starts[-1]):
        if i >= end:
            break
        for block in _blocks(history[i]):
            key = thinking_key(block)
            if key is not None:
                keys.append(key)
    return keys
