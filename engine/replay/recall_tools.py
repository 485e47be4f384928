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
on its version: :func:`recall_tools_for`.
"""

from __future__ import annotations

RECALL_TOOLS_ESTIMATE = 202  # chars/4 of the two definitions as sent (807 bytes of JSON)
RECALL_TOOLS_DEFERRED_ESTIMATE = 10  # chars/4 of their two names, with tool search


def recall_tools_for(version: str | None) -> int:
    """The chars/4 recall's tools add to every request of a session of Claude Code ``version``
    with ctxpatch, as the real programs send them (``tests/e2e/test_recall_real.py``):

    * a native build (2.1.113 on) runs behind ``ctxpatch run``, which turns Claude Code's tool
      search on when the upstream is Anthropic's API (``ENABLE_TOOL_SEARCH=true``,
      ``gateway.run``), and 2.1.330 on keep it on through any base URL: the definitions stay
      out of ``tools``, and only the two names ride along in the list of deferred tools
      (:data:`RECALL_TOOLS_DEFERRED_ESTIMATE`; measured on 2.1.113, 2.1.330 and 2.1.332);
    * a ``cli.js`` build (up to 2.1.112), or a session without a readable version, counts both
      definitions whole (:data:`RECALL_TOOLS_ESTIMATE`): 2.1.112 sends them so through a base
      URL that is not Anthropic's (measured); talking to Anthropic's API, its automatic tool
      search may defer them too, which nothing here measured, so the replay takes the dearer
      case."""
    from engine.versions import is_native

    try:
        native = version is not None and is_native(version)
    except ValueError:
        native = False
    return RECALL_TOOLS_DEFERRED_ESTIMATE if native else RECALL_TOOLS_ESTIMATE


def recall_tools_tokens(estimate: int, ratio: float) -> int:
    """The tokens ``estimate`` (chars/4) of definitions add to a prompt, at the session's ratio."""
    return round(estimate * ratio)
