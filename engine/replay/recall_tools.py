"""What recall adds to every request of a session ``ctxpatch apply`` set up.

``ctxpatch apply`` registers recall's MCP server (``ctxpatch mcp``, key ``ctxpatch``) with the
clearing, unless ``--no-recall``. Claude Code then sends its two tool definitions
(``mcp__ctxpatch__search`` and ``mcp__ctxpatch__get``: name, description, input schema) in the
``tools`` of every request; from 2.1.69, whose tool search sends only their names, the server's
instructions instead say what they are for, under Claude Code's "# MCP Server Instructions"
heading (in the system prompt, or by 2.1.112 in a system reminder of the first message;
``recall.mcp_early.wants_instructions``): a fixed part of the prompt like the system prompt.
The replays with ctxpatch (``server_clearing``, ``patched``, and the oracle's plan, which
replays them) add it to every prompt; ``unpatched`` and ``text_prune`` do not.

The parts are chars/4 estimates (``engine.tokens.count_text``) of the text as Claude Code sends
it: ``RECALL_DEFINITIONS`` (the definitions' JSON), ``RECALL_NAMES`` (with Claude Code's tool
search, deferred MCP tools: only the names ride along) and ``RECALL_INSTRUCTIONS`` (the
instructions with their heading, sent with the names; a system reminder's tags, 9 more, are not
counted). The replay scales the sum by the session's calibration ratio, as any text the recorded
session never held. The engine may not import
``recall`` (the layers, pyproject's import contract), so they are numbers here;
tests/recall/test_recall_tools_count.py derives them from ``recall.mcp_server`` and fails when
the definitions or the instructions change without these. ``bench/bench_recall.py`` prints the
same with a real tokenizer (o200k_base). Which form a session's requests carry depends on its
version (``Profile.tool_search_defers_mcp``): :func:`recall_tools_for`.
"""

from __future__ import annotations

from engine.profiles import Profile

RECALL_DEFINITIONS = 202  # chars/4 of the two definitions as sent (807 bytes of JSON)
RECALL_NAMES = 10  # chars/4 of their two names, listed by tool search
RECALL_INSTRUCTIONS = 91  # chars/4 of the server's instructions under Claude Code's heading
RECALL_TOOLS_ESTIMATE = RECALL_DEFINITIONS  # without tool search: the definitions say it
RECALL_TOOLS_DEFERRED_ESTIMATE = RECALL_NAMES + RECALL_INSTRUCTIONS  # with it


def recall_tools_for(profile: Profile) -> int:
    """The chars/4 recall adds to every request of a session with ctxpatch, as the session's
    Claude Code sends its tools (``Profile.tool_search_defers_mcp``: talking to Anthropic's
    API, tool search defers MCP tools from 2.1.69 on, and a native build behind ``ctxpatch run``
    keeps it so): their names and the server's instructions
    (:data:`RECALL_TOOLS_DEFERRED_ESTIMATE`), else both definitions
    (:data:`RECALL_TOOLS_ESTIMATE`)."""
    if profile.tool_search_defers_mcp:
        return RECALL_TOOLS_DEFERRED_ESTIMATE
    return RECALL_TOOLS_ESTIMATE


def recall_tools_tokens(estimate: int, ratio: float) -> int:
    """The tokens ``estimate`` (chars/4) of definitions add to a prompt, at the session's ratio."""
    return round(estimate * ratio)
