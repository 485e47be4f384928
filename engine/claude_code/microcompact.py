"""Legacy micro-compaction (1.0.60-2.1.68; ``pm`` in 2.1.39, ``lc`` in 2.1.7, ``Vd`` in 2.0.76).

1. Candidates: ``tool_use`` ids of the compactable tools not cleared before, in order; the size
   of each one's ``tool_result`` is chars/4 of its text, images 2000 (cached per id in cli.js).
2. The last ``keep`` (3) candidates are never touched.
3. Walking oldest → newest, a candidate is cleared while ``total - saved > target`` (40000).
4. Automatic runs are cancelled unless the last API usage is at or above the warning threshold
   and ``saved >= min_saving`` (20000).
5. Cleared results (and those cleared by earlier runs) get ``[Old tool result content cleared]``
   or, from 2.1.0, a ``<persisted-output>`` pointer to the file the result was saved to.
6. 2.1.39 also replaces images of already-answered user messages with ``[image]``.

Not modelled: dropping ``memory`` attachments and pruning ``readFileState``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.claude_code.count import last_usage_tokens
from engine.claude_code.thresholds import Thresholds
from engine.profiles import CLEARED_TEXT, Profile
from engine.tokens import tool_result_tokens

PERSISTED_OPEN = "<persisted-output>"
PERSISTED_CLOSE = "</persisted-output>"


def persisted_pointer(tool_use_id: str, directory: str = "~/.claude/tool-results") -> str:
    """The 2.1.x replacement text (the real path is the session's tool-results directory)."""
    return (
        f"{PERSISTED_OPEN}Tool result saved to: {directory}/{tool_use_id}.txt\n\n"
        f"Use Read to view{PERSISTED_CLOSE}"
    )


def is_replaced(content: Any) -> bool:
    """``XFY``: content already replaced by an earlier run."""
    return isinstance(content, str) and (content == CLEARED_TEXT or PERSISTED_OPEN in content)


@dataclass(frozen=True)
class MicroCompactResult:
    messages: list
    cleared: tuple[str, ...]  # ids cleared by this run
    saved_tokens: int
    candidate_tokens: int
    images_cleared: int
    image_tokens: int
    fired: bool
    reason: str


def compactable_results(
    messages: Sequence[Mapping[str, Any]], profile: Profile, already: frozenset[str] = frozenset()
) -> tuple[list[str], dict[str, int]]:
    """Candidate ids in order and their result sizes (steps 1 of ``pm``)."""
    ids: list[str] = []
    sizes: dict[str, int] = {}
    tools = set(profile.mc_tools)
    idset: set[str] = set()
    for m in messages:
        if m.get("type") not in ("user", "assistant"):
            continue
        content = (m.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, Mapping):
                continue
            if b.get("type") == "tool_use" and b.get("name") in tools:
                tool_id = b.get("id")  # always a string in a transcript (toolu_...)
                if isinstance(tool_id, str) and tool_id not in already:
                    ids.append(tool_id)
                    idset.add(tool_id)
            elif b.get("type") == "tool_result" and b.get("tool_use_id") in idset:
                sizes[b["tool_use_id"]] = tool_result_tokens(
                    b, profile.image_tokens, profile.estimate_counts_documents
                )
    return ids, sizes


def select_clear(ids: list[str], sizes: dict[str, int], keep: int, target: int) -> tuple[set, int]:
    """Steps 2-3: which ids to clear and the tokens saved."""
    kept = set(ids[-keep:]) if keep > 0 else set()
    total = sum(sizes.values())
    saved = 0
    clear: set[str] = set()
    for i in ids:
        if i in kept:
            continue
        if total - saved > target:
            clear.add(i)
            saved += sizes.get(i, 0)
    return clear, saved


def microcompact(
    messages: Sequence[Mapping[str, Any]],
    profile: Profile,
    thresholds: Thresholds,
    already: frozenset[str] = frozenset(),
    manual_target: int | None = None,
    persist_dir: str = "~/.claude/tool-results",
) -> MicroCompactResult:
    """One run of legacy micro-compaction; never mutates ``messages``."""
    msgs = list(messages)
    if profile.microcompact != "legacy" or not thresholds.microcompact_enabled:
        return MicroCompactResult(
            msgs, (), 0, 0, 0, 0, False, "no legacy micro-compaction in this profile or env"
        )
    ids, sizes = compactable_results(msgs, profile, already)
    clear, saved = select_clear(
        ids,
        sizes,
        profile.mc_keep,
        manual_target if manual_target is not None else profile.mc_target,
    )
    reason = "fired"
    if manual_target is None:
        last = last_usage_tokens(msgs)
        if last < thresholds.warning:
            clear, saved, reason = set(), 0, f"last usage {last} below warning {thresholds.warning}"
        elif saved < profile.mc_min_saving:
            clear, saved, reason = set(), 0, f"saving {saved} below {profile.mc_min_saving}"
    image_msgs: set[int] = set()
    image_tokens = 0
    if profile.mc_clears_images:
        pending: list[int] = []
        answered: set[int] = set()
        for i, m in enumerate(msgs):
            if m.get("type") == "user":
                pending.append(i)
            elif m.get("type") == "assistant" and pending:
                answered.update(pending)
                pending = []
        for i in sorted(answered):
            content = (msgs[i].get("message") or {}).get("content")
            if isinstance(content, list):
                n = sum(
                    profile.image_tokens
                    for b in content
                    if isinstance(b, Mapping) and b.get("type") == "image"
                )
                if n:
                    image_msgs.add(i)
                    image_tokens += n
    gone = set(already) | clear
    out: list = []
    for i, m in enumerate(msgs):
        content = (m.get("message") or {}).get("content") if m.get("type") == "user" else None
        if not isinstance(content, list):
            out.append(m)
            continue
        changed = False
        blocks = []
        for b in content:
            if isinstance(b, Mapping) and b.get("type") == "image" and i in image_msgs:
                blocks.append({"type": "text", "text": "[image]"})
                changed = True
            elif (
                isinstance(b, Mapping)
                and b.get("type") == "tool_result"
                and b.get("tool_use_id") in gone
                and b.get("content")
                and not is_replaced(b.get("content"))
            ):
                text = (
                    persisted_pointer(b["tool_use_id"], persist_dir)
                    if profile.mc_replacement == "persisted"
                    else CLEARED_TEXT
                )
                blocks.append({**b, "content": text})
                changed = True
            else:
                blocks.append(b)
        if changed:
            new = {**m, "message": {**m["message"], "content": blocks}}
            new.pop("toolUseResult", None)
            out.append(new)
        else:
            out.append(m)
    fired = bool(clear) or bool(image_msgs)
    return MicroCompactResult(
        out,
        tuple(i for i in ids if i in clear),
        saved,
        sum(sizes.values()),
        len(image_msgs),
        image_tokens,
        fired,
        reason if fired or reason != "fired" else "nothing to clear",
    )
