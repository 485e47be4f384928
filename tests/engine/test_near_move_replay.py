"""The near move in the replay, on the real session where the free move alone left a compaction:
entireio/cli 9d7a9d52 (2.1.25, Claude Code's threshold 167,000). With the near move off
(CLAUDE_CTX_CLEAR_MARGIN=0) the paid policy's last move leaves the count to reach the threshold at
line 1079; with the default margin the replies' prompts near the threshold make the next requests
clear all they may, and the session ends without a compaction. The replay tells the policy every
reply's prompt: the near moves are on requests whose previous prompt reached the level."""

from __future__ import annotations

from engine.profiles import profile_for
from engine.replay.session import simulate
from engine.transcript import load_transcript
from engine.twins.free_moves import DEFAULT_MARGIN, near_level

from .conftest import PUBLIC, need_shared

SESSION = "entireio__cli__9d7a9d52-7eb4-427d-847d-ee5451884f3d.jsonl.xz"


def test_the_near_move_avoids_the_compaction_the_free_move_left() -> None:
    tr = load_transcript(need_shared(PUBLIC / SESSION))
    profile = profile_for(tr.version)
    off = simulate(tr, profile, "patched", clear_env={"CLAUDE_CTX_CLEAR_MARGIN": "0"})
    on = simulate(tr, profile, "patched")
    threshold = on.thresholds.auto_compact
    assert threshold == 167_000
    assert [e.line for e in off.events if e.kind == "auto_compact"] == [1079]
    assert on.summary["auto_compactions"] == 0
    assert max(r.tokens for r in on.requests) < threshold
    level = near_level(on.model or "", (), DEFAULT_MARGIN)
    assert level == threshold - DEFAULT_MARGIN
    # every cache break of the near-move run that the run without it has not is a request whose
    # previous prompt had reached the level (a near move), and there is at least one
    breaks_off = {r.line for r in off.requests if r.cache_break}
    new_breaks = [
        i for i, r in enumerate(on.requests) if r.cache_break and r.line not in breaks_off
    ]
    assert new_breaks
    for i in new_breaks:
        assert i > 0 and on.requests[i - 1].prompt_tokens >= level, on.requests[i].line
