"""The server edit at the mechanism's limit: clearing on at every request, every tool use and
input it may clear. The oracle fits its plan with it; the counterfactual replay's floor (what Claude
Code's count would be had every request cleared all it may) uses the same knobs."""

from __future__ import annotations

from collections.abc import Mapping

# the edit the oracle fits: always on (its plan decides), inputs cleared with the results
ORACLE_ENV = {
    "CLAUDE_CTX_CLEAR_TRIGGER": "1",
    "CLAUDE_CTX_CLEAR_KEEP": "0",
    "CLAUDE_CTX_CLEAR_STEP": "1",
    "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "1",
}


def limit_env(clear_env: Mapping[str, str] | None) -> dict[str, str]:
    """The knobs of the edit at the mechanism's limit (``ORACLE_ENV``), with what ``clear_env``
    says the edit may clear (``CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS``, ``CLAUDE_CTX_CLEAR_TOOL_INPUTS``)."""
    env = {**ORACLE_ENV}
    for name in ("CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS", "CLAUDE_CTX_CLEAR_TOOL_INPUTS"):
        if clear_env and clear_env.get(name):
            env[name] = clear_env[name]
    return env
