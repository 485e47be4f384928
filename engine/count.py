"""The token count behind the auto-compact and micro-compact decisions.

* ``autocompact_tokens`` mirrors ``vv`` (2.1.39) / ``HKA`` (2.1.7) / ``gK`` (2.0.76): the last
  real API usage (input + cache creation + cache read + output of the newest assistant message
  that has one and is not ``<synthetic>``), plus, from 2.1.2 on, the newer-messages estimate of
  everything after it; with no usage at all, the estimate of everything. 2.1.64 (``PN``) and
  2.1.69+ (``XV`` ... ``vJ`` in 2.1.112) start the newer estimate after the first record of the
  newest reply's ``message.id`` (``newer_from_message_start``); records of other replies stop
  the walk back, records without an id (users, attachments, ``<synthetic>`` replies) do not.
* ``last_usage_tokens`` mirrors ``PZ`` (2.1.39): the last usage alone, used by micro-compaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


def autocompact_tokens(messages: Sequence[Mapping[str, Any]], profile: Profile) -> int:
    """``vv``/``HKA``/``gK``: the number compared with the auto-compact threshold."""
    i = last_usage_index(messages)
    if profile.count_mode == "usage":
        return usage_total(message_usage(messages[i]) or {}) if i is not None else 0
    if i is None:
        return estimate_newer(messages, profile)
    base = usage_total(message_usage(messages[i]) or {})
    start = i
    if profile.newer_from_message_start:
        mid = (messages[i].get("message") or {}).get("id")
        j = i - 1
        while mid and j >= 0:
            other = _reply_id(messages[j])
            if other == mid:
                start = j
            elif other is not None:
                break
            j -= 1
    return base + estimate_newer(messages[start + 1 :], profile)
