"""Legacy micro-compaction replayed request after request in time linear in the requests.

:func:`engine.claude_code.microcompact.microcompact` is the specification: on every request it
walks the whole history for the candidate tool uses and their result sizes, looks for answered
images, and copies every message whose results an earlier run cleared (new objects on every
request, so that nothing the replay keeps by identity survives them). :class:`IncrementalMicrocompact`
returns an equal :class:`~engine.claude_code.microcompact.MicroCompactResult` from state kept
across the requests of one replay:

* the candidates (``ids``), their result sizes and their total grow as messages are appended
  (messages are never mutated; a message is known by identity); when the history is not the
  previous one plus new messages, or the ids cleared before (``already``) changed, the state is
  rebuilt from the start;
* the selection stops at the first candidate it no longer clears (``select_clear`` clears a
  prefix: once ``total - saved`` is at or below the target it stays there), and is not made at
  all when the last usage is below the warning threshold (the run is cancelled whatever it
  would clear);
* the answered user messages with images are those before the last assistant message;
* the copy of a message whose results were cleared is made once and handed out again while the
  same results are cleared in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.claude_code.count import last_usage_tokens
from engine.claude_code.microcompact import (
    MicroCompactResult,
    is_replaced,
    microcompact,
    persisted_pointer,
)
from engine.claude_code.thresholds import Thresholds
from engine.identity_memo import shared_prefix
from engine.profiles import CLEARED_TEXT, Profile
from engine.tokens import tool_result_tokens


class IncrementalMicrocompact:
    """``microcompact(messages, profile, thresholds, already)`` for the successive requests of
    one replay (see the module docstring); ``persist_dir`` and ``manual_target`` as the
    specification's defaults."""

    def __init__(self, profile: Profile, thresholds: Thresholds) -> None:
        self.profile = profile
        self.thresholds = thresholds
        self.tools = frozenset(profile.mc_tools)
        self._sent: list[Mapping[str, Any]] = []
        self._already: frozenset[str] | None = None
        self._copies: dict[int, tuple[Any, frozenset[Any], bool, Any]] = {}
        self._reset()

    def _reset(self) -> None:
        self._sent = []
        self.ids: list[str] = []
        self.idset: set[str] = set()
        self.sizes: dict[str, int] = {}
        self.total = 0
        self.images: list[tuple[int, int]] = []  # (user message index, image tokens)
        self.last_assistant = -1
        self.out: list[Any] = []  # the messages as the specification returns them (no image rule)
        self.touched: list[int] = []  # indices of ``out`` that are copies

    # --- the history --------------------------------------------------------------------------

    def _add(self, i: int, m: Mapping[str, Any], already: frozenset[str]) -> None:
        kind = m.get("type")
        if kind == "assistant":
            self.last_assistant = i
        if kind not in ("user", "assistant"):
            return
        content = (m.get("message") or {}).get("content")
        if not isinstance(content, list):
            return
        profile = self.profile
        for b in content:
            if not isinstance(b, Mapping):
                continue
            if b.get("type") == "tool_use" and b.get("name") in self.tools:
                tool_id = b.get("id")
                if isinstance(tool_id, str) and tool_id not in already:
                    self.ids.append(tool_id)
                    self.idset.add(tool_id)
            elif b.get("type") == "tool_result" and b.get("tool_use_id") in self.idset:
                tid = b["tool_use_id"]
                size = tool_result_tokens(
                    b, profile.image_tokens, profile.estimate_counts_documents
                )
                self.total += size - self.sizes.get(tid, 0)
                self.sizes[tid] = size
        if kind == "user" and profile.mc_clears_images:
            n = sum(
                profile.image_tokens
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "image"
            )
            if n:
                self.images.append((i, n))

    def _sync(self, messages: Sequence[Mapping[str, Any]], already: frozenset[str]) -> int:
        """Bring the state to ``messages``; the number of leading messages kept."""
        old = self._sent
        n = len(old)
        if already != self._already or not (
            len(messages) >= n and shared_prefix(messages, old) == n
        ):
            self._reset()
            self._already = already
            n = 0
        for i in range(n, len(messages)):
            self._add(i, messages[i], already)
        self._sent = list(messages)
        return n

    # --- the run ------------------------------------------------------------------------------

    def _select(self, keep: int, target: int) -> tuple[set[str], int]:
        """``select_clear(ids, sizes, keep, target)``, stopping where it stops clearing."""
        ids, sizes, total = self.ids, self.sizes, self.total
        kept = set(ids[-keep:]) if keep > 0 else set()
        saved = 0
        clear: set[str] = set()
        for i in ids:
            if i in kept:
                continue
            if total - saved <= target:
                break
            clear.add(i)
            saved += sizes.get(i, 0)
        return clear, saved

    def _copy(self, m: Mapping[str, Any], gone: frozenset[str] | set[str], image: bool) -> Any:
        """The specification's rewrite of user message ``m`` (itself when nothing changes)."""
        content = (m.get("message") or {}).get("content") if m.get("type") == "user" else None
        if not isinstance(content, list):
            return m
        hit_ids = frozenset(
            b.get("tool_use_id")
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "tool_result"
        ).intersection(gone)
        if not hit_ids and not image:
            return m
        cached = self._copies.get(id(m))
        if cached is not None and cached[0] is m and cached[1] == hit_ids and cached[2] == image:
            return cached[3]
        profile = self.profile
        changed = False
        blocks = []
        for b in content:
            if isinstance(b, Mapping) and b.get("type") == "image" and image:
                blocks.append({"type": "text", "text": "[image]"})
                changed = True
            elif (
                isinstance(b, Mapping)
                and b.get("type") == "tool_result"
                and b.get("tool_use_id") in hit_ids
                and b.get("content")
                and not is_replaced(b.get("content"))
            ):
                text = (
                    persisted_pointer(b["tool_use_id"])
                    if profile.mc_replacement == "persisted"
                    else CLEARED_TEXT
                )
                blocks.append({**b, "content": text})
                changed = True
            else:
                blocks.append(b)
        new: Any = m
        if changed:
            new = {**m, "message": {**m["message"], "content": blocks}}
            new.pop("toolUseResult", None)
        self._copies[id(m)] = (m, hit_ids, image, new)
        return new

    def run(
        self, messages: Sequence[Mapping[str, Any]], already: frozenset[str] = frozenset()
    ) -> MicroCompactResult:
        profile, th = self.profile, self.thresholds
        if profile.microcompact != "legacy" or not th.microcompact_enabled:
            return microcompact(messages, profile, th, already)
        kept = self._sync(messages, already)
        last = last_usage_tokens(messages)
        if last < th.warning:
            clear: set[str] = set()
            saved = 0
            reason = f"last usage {last} below warning {th.warning}"
        else:
            clear, saved = self._select(profile.mc_keep, profile.mc_target)
            reason = "fired"
            if saved < profile.mc_min_saving:
                clear, saved, reason = set(), 0, f"saving {saved} below {profile.mc_min_saving}"
        images = {i: n for i, n in self.images if i < self.last_assistant}
        if clear or images:
            # a run that fires (or clears images): the whole history, as the specification
            out = self._rewrite(messages, already | clear, images)
            self._sent = []  # rebuilt next time (the history becomes these messages)
            self._already = None
        else:
            # nothing new cleared: earlier copies kept, new messages rewritten as needed
            out, touched = self.out, self.touched
            del out[kept:]
            while touched and touched[-1] >= kept:
                touched.pop()
            for i in range(kept, len(messages)):
                new = self._copy(messages[i], already, False)
                if new is not messages[i]:
                    touched.append(i)
                out.append(new)
        fired = bool(clear) or bool(images)
        return MicroCompactResult(
            list(out),
            tuple(i for i in self.ids if i in clear) if clear else (),
            saved,
            self.total,
            len(images),
            sum(images.values()),
            fired,
            reason if fired or reason != "fired" else "nothing to clear",
        )

    def _rewrite(
        self,
        messages: Sequence[Mapping[str, Any]],
        gone: frozenset[str] | set[str],
        images: Mapping[int, int],
    ) -> list[Any]:
        return [self._copy(m, gone, i in images) for i, m in enumerate(messages)]
