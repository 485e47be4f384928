"""The token count behind the auto-compact and micro-compact decisions.

* ``autocompact_tokens`` mirrors ``vv`` (2.1.39) / ``HKA`` (2.1.7) / ``gK`` (2.0.76): the last
  real API usage (input + cache creation + cache read + output of the newest assistant message
  that has one and is not ``<synthetic>``), plus, from 2.1.2 on, the newer-messages estimate of
  everything after it; with no usage at all, the estimate of everything. 2.1.64 (``PN``) and
  2.1.69+ (``XV`` ... ``vJ`` in 2.1.112) start the newer estimate after the first record of the
  newest reply's ``message.id`` (``newer_from_message_start``); records of other replies stop
  the walk back, records without an id (users, attachments, ``<synthetic>`` replies) do not.
* Before that (``newer_from_message_start`` off), "after the usage" is in the order of the query
  loop's own list: every version from 2.0.76 to 2.1.330 sends the next request of a round on
  ``[...messages, ...assistantMessages, ...toolResults]`` (``let k=[],y=[]`` ...
  ``messages:[...P,...k,...y]``, read in 2.0.76, 2.1.7, 2.1.29-2.1.33, 2.1.44, 2.1.63, 2.1.69):
  a reply split over several records (parallel tool calls) first, then all its tool results.
  The transcript (the REPL's order) writes each result after its own call, so a result written
  between two records of the newest reply is newer than its usage all the same
  (:func:`newer_messages`; an unseen 2.1.32 session's boundary: to the token). A new prompt
  after the reply starts a new query on the REPL's list, whose order the transcript keeps.
* ``last_usage_tokens`` mirrors ``PZ`` (2.1.39): the last usage alone, used by micro-compaction.
* 2.1.284+ (``Profile.count_adds_server_cleared``, ``YG`` in 2.1.330) adds back what server-side
  clearing removed, as the reply's record says: the ``cleared_input_tokens`` of the
  ``clear_tool_uses_20250919`` entries of its ``message.context_management.applied_edits``
  (:func:`server_cleared_tokens`). Claude Code records that field only for an edit it built
  itself (its "tool-result clearing after idle"; ``xq`` in 2.1.330 is true only when the sent
  ``context_management`` is its own): an edit added on the way (``ctxpatch run``, the gateway)
  leaves it ``null``, so that clearing lowers the count there too (measured on the real 2.1.330,
  tests/e2e/test_native_gateway.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.api.previous_thinking import starts_turn
from engine.profiles import Profile
from engine.tokens import estimate_newer, usage_total

SYNTHETIC_MODEL = "<synthetic>"


def message_usage(msg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``wp``: the usage of a real assistant reply, else ``None``."""
    if msg.get("type") != "assistant" or msg.get("isApiErrorMessage"):
        return None
    inner = msg.get("message") or {}
    if "usage" not in inner or inner.get("model") == SYNTHETIC_MODEL:
        return None
    return inner.get("usage") or None


def last_usage_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if message_usage(messages[i]) is not None:
            return i
    return None


def last_usage_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """``PZ``: usage total of the newest assistant reply, 0 when there is none."""
    i = last_usage_index(messages)
    return usage_total(message_usage(messages[i]) or {}) if i is not None else 0


def _reply_id(msg: Mapping[str, Any]) -> Any:
    """``OM4`` (2.1.64) / ``KZ4`` (2.1.112): the ``message.id`` of a non-synthetic assistant
    record, else ``None``."""
    inner = msg.get("message") or {}
    if msg.get("type") != "assistant" or inner.get("model") == SYNTHETIC_MODEL:
        return None
    return inner.get("id")


def server_cleared_tokens(msg: Mapping[str, Any]) -> int:
    """What the record says server-side clearing removed from its prompt (``eCt``, 2.1.330):
    the sum of ``cleared_input_tokens`` over the ``clear_tool_uses_20250919`` entries of
    ``message.context_management.applied_edits``; 0 when the record has none."""
    cm = (msg.get("message") or {}).get("context_management")
    edits = cm.get("applied_edits") if isinstance(cm, Mapping) else None
    total = 0
    for e in edits if isinstance(edits, list) else []:
        if isinstance(e, Mapping) and e.get("type") == "clear_tool_uses_20250919":
            n = e.get("cleared_input_tokens")
            total += n if isinstance(n, int) and not isinstance(n, bool) else 0
    return total


def autocompact_tokens(messages: Sequence[Mapping[str, Any]], profile: Profile) -> int:
    """``vv``/``HKA``/``gK``: the number compared with the auto-compact threshold."""
    i = last_usage_index(messages)
    if profile.count_mode == "usage":
        return usage_total(message_usage(messages[i]) or {}) if i is not None else 0
    if i is None:
        return estimate_newer(messages, profile)
    base = usage_total(message_usage(messages[i]) or {})
    if profile.count_adds_server_cleared:
        base += server_cleared_tokens(messages[i])
    return base + estimate_newer(newer_messages(messages, i, profile), profile)


def reply_start(messages: Sequence[Mapping[str, Any]], i: int) -> int:
    """The index of the first record of the reply whose record ``messages[i]`` is (same
    ``message.id``), walking back over records without an id; another reply's record stops the
    walk (``PN`` in 2.1.64)."""
    start = i
    mid = (messages[i].get("message") or {}).get("id")
    j = i - 1
    while mid and j >= 0:
        other = _reply_id(messages[j])
        if other == mid:
            start = j
        elif other is not None:
            break
        j -= 1
    return start


def newer_messages(
    messages: Sequence[Mapping[str, Any]], i: int, profile: Profile
) -> Sequence[Mapping[str, Any]]:
    """What the count estimates on top of the usage of ``messages[i]`` (the newest reply with
    one), in any order (the estimate is a sum). With ``newer_from_message_start``: everything
    after the reply's first record. Before: everything after its last record in the query loop's
    order, that is, within a round, also the records the transcript holds between the reply's
    records that are not the reply's (its tool results); after a new prompt, the transcript's
    order."""
    if profile.newer_from_message_start:
        return messages[reply_start(messages, i) + 1 :]
    after = messages[i + 1 :]
    start = reply_start(messages, i)
    if start == i or any(starts_turn(m) for m in after):
        return after
    mid = (messages[i].get("message") or {}).get("id")
    between = [m for m in messages[start + 1 : i] if _reply_id(m) != mid]
    return [*between, *after]
