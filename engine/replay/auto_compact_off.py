"""Whether a session ran with auto-compaction off, read from its own file.

Claude Code checks its count before every request of the main chain and compacts from the
threshold on, and its count starts from the newest reply's usage (:mod:`engine.claude_code.count`).
So a reply whose recorded prompt alone (input + cache read + cache write, no estimate) reached
the threshold, followed by a new turn (a typed prompt and its request) with no compaction
between, shows that auto-compaction did not run at that size: the ``autoCompactEnabled`` setting was off (Claude Code
keeps it in its config, not in the transcript), or the window was larger than the model's default
(a 1M beta the transcript does not name either). The replays then model the session with
auto-compaction off (``compute_thresholds(..., auto_compact_setting=False)``), so they neither
predict nor replay a compaction the real program would not have made.

Seen in sessions this repository had never seen (M-Thisness/M-Claude's Archives, 2.1.6,
claude-sonnet-4-5): prompts of up to 165,000 and 186,000 tokens past the 155,000 threshold and no
compaction, where the recorded replay predicted 11 and 39 compactions that did not happen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from engine.api.previous_thinking import starts_turn
from engine.claude_code.thresholds import Thresholds, compute_thresholds
from engine.profiles import Profile
from engine.tokens import usage_prompt
from engine.transcript import Transcript, is_compact_boundary, is_sidechain


def ran_past_threshold(tr: Transcript, threshold: int) -> int | None:
    """The line of the first main-chain reply whose recorded prompt reached ``threshold`` and
    after which the session went on into a new turn (a typed prompt, then a main-chain request)
    with no compaction between; None when there is none. A new turn, not only the next request:
    every version checks the count before a typed prompt's request, and a round's own requests
    are not needed as evidence."""
    boundaries = {b.line for b in tr.boundaries}
    starts = {r.lines[0] for r in tr.replies}
    settled = 0  # replies ending before this line have no evidence: a scan passed them already
    for reply in tr.replies:
        if reply.lines[-1] < settled or usage_prompt(reply.usage) < threshold:
            continue
        typed = False
        for line in range(reply.lines[-1] + 1, len(tr.records) + 1):
            rec = tr.records[line - 1]
            if line in boundaries or is_compact_boundary(rec):
                settled = line  # every reply before it stops at this boundary too
                break
            if typed and line in starts:
                return reply.lines[-1]
            if not is_sidechain(rec) and starts_turn(rec):
                typed = True
        else:
            return None  # the file ends without that evidence: so does every later scan
    return None


def seen_off(
    tr: Transcript,
    profile: Profile,
    model: str,
    env: Mapping[str, str],
    th: Thresholds,
) -> Thresholds:
    """``th``, or the thresholds with auto-compaction off when the session ran past ``th``'s
    threshold without a compaction (:func:`ran_past_threshold`), the line named in ``explain``."""
    if not th.auto_compact_enabled:
        return th
    line = ran_past_threshold(tr, th.auto_compact)
    if line is None:
        return th
    off = compute_thresholds(profile, model, env, auto_compact_setting=False)
    why = (
        f"the session ran past the auto-compact threshold {th.auto_compact:,} at line {line} and "
        "went on without a compaction: auto-compaction was off (autoCompactEnabled, which the "
        "transcript does not record) or the window larger than the model's default"
    )
    return replace(off, explain=(*off.explain, why))
