"""The engine counts recall's tool definitions and instructions on every request of a replay
with ctxpatch (``engine.replay.recall_tools``); it may not import ``recall``, so its numbers are
checked here against the real ones: change ``TOOLS`` or ``INSTRUCTIONS`` and this fails until
the engine knows."""

from __future__ import annotations

import json

from engine.replay.recall_tools import (
    RECALL_DEFINITIONS,
    RECALL_INSTRUCTIONS,
    RECALL_NAMES,
    RECALL_TOOLS_DEFERRED_ESTIMATE,
    RECALL_TOOLS_ESTIMATE,
    recall_tools_tokens,
)
from engine.tokens import count_text
from recall.mcp_server import INSTRUCTIONS, TOOLS, definitions_as_sent, instructions_as_sent
from recall.registered import SERVER


def test_the_engine_counts_the_definitions_claude_code_sends() -> None:
    sent = definitions_as_sent(SERVER)
    assert [d["name"] for d in sent] == ["mcp__ctxpatch__search", "mcp__ctxpatch__get"]
    assert all(set(d) == {"name", "description", "input_schema"} for d in sent)
    assert count_text(json.dumps(sent, separators=(",", ":"))) == RECALL_DEFINITIONS
    names = "\n".join(str(d["name"]) for d in sent)  # with tool search: only the names
    assert count_text(names) == RECALL_NAMES
    assert [t["name"] for t in TOOLS] == ["search", "get"]
    shown = instructions_as_sent(SERVER)  # either way, under Claude Code's heading
    assert shown.endswith(f"\n\n## ctxpatch\n{INSTRUCTIONS}")
    assert count_text(shown) == RECALL_INSTRUCTIONS
    assert RECALL_TOOLS_ESTIMATE == RECALL_DEFINITIONS  # the definitions say it
    assert RECALL_TOOLS_DEFERRED_ESTIMATE == RECALL_NAMES + RECALL_INSTRUCTIONS


def test_scaled_like_any_text_the_session_never_held() -> None:
    assert recall_tools_tokens(RECALL_TOOLS_ESTIMATE, 1.0) == RECALL_TOOLS_ESTIMATE
    assert recall_tools_tokens(200, 1.5) == 300 and recall_tools_tokens(0, 1.7) == 0
