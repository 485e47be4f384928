"""The recall tools' definitions, on every request of a session ``ctxpatch apply`` set up.

``ctxpatch apply`` registers recall's MCP server (``ctxpatch mcp``, key ``ctxpatch``) with the
clearing, unless ``--no-recall``. Claude Code then sends its two tool definitions
(``mcp__ctxpatch__search`` and ``mcp__ctxpatch__get``: name, description, input schema) in the
``tools`` of every request, a fixed part of the prompt like the system prompt. The replays with
ctxpatch (``server_clearing``, ``patched``, and the oracle's plan, which replays them) add it to
every prompt; ``unpatched`` and ``text_prune`` do not.

``RECALL_TOOLS_ESTIMATE`` is the chars/4 estimate (``engine.tokens.count_text``) of the
definitions' JSON as Claude Code sends them; the replay scales it by the session's calibration
ratio, as any text the recorded session never held. With Claude Code's tool search (deferred MCP
tools) only the names ride along: ``RECALL_TOOLS_DEFERRED_ESTIMATE``. The engine may not import
``recall`` (the layers, pyproject's import contract), so both are numbers here;
tests/recall/test_recall_tools_count.py derives them from ``recall.mcp_server.TOOLS`` and fails
when the definitions change without these. ``bench/bench_recall.py`` prints the same with a real
tokenizer (o200k_base: 189 and 15 tokens). Which of the two a session's requests carry depends
on its version (``Profile.tool_search_defers_mcp``): :func:`recall_tools_for`.
"""

from __future__ import annotations

from engine.profiles import Profile

RECALL_TOOLS_ESTIMATE = 202  # chars/4 of the two definitions as sent (807 bytes of JSON)
RECALL_TOOLS_DEFERRED_ESTIMATE = 10  # chars/4 of their two names, with tool search


def recall_tools_for(profile: Profile) -> int:
    """The chars/4 recall's tools add to every request of a session with ctxpatch, as the
    session's Claude Code sends them (``Profile.tool_search_defers_mcp``: talking to Anthropic's
    API, tool search defers MCP tools from 2.1.69 on, and a native build behind ``ctxpatch run``
    keeps it so): their names only (:data:`RECALL_TOOLS_DEFERRED_ESTIMATE`), else both
    definitions (:data:`RECALL_TOOLS_ESTIMATE`)."""
    if profile.tool_search_defers_mcp:
        return RECALL_TOOLS_DEFERRED_ESTIMATE
    return RECALL_TOOLS_ESTIMATE


def recall_tools_tokens(estimate: int, ratio: float) -> int:
    """The tokens ``estimate`` (chars/4) of definitions add to a prompt, at the session's ratio."""
    return round(estimate * ratio)
