"""The Claude Agent SDK one-liner: server-side tool-result clearing for every session.

    import ctxpatch.agent_sdk; ctxpatch.agent_sdk.enable()

Every session the Python ``claude-agent-sdk`` starts in this process afterwards (``query()``,
``ClaudeSDKClient``) runs its Claude Code behind a loopback gateway that adds the
``clear_tool_uses_20250919`` edit (the ``CLAUDE_CTX_CLEAR_*`` knobs apply). The SDK's files are
not touched (one method is wrapped in memory). Where the requests went before stays where they
go: ``ClaudeAgentOptions(env={"ANTHROPIC_BASE_URL": ...})``, else an exported
``ANTHROPIC_BASE_URL``, else the Anthropic API becomes the gateway's upstream.
``disable()`` undoes it for every later session. The SDK is not a dependency of ctxpatch: it is
imported by ``enable()``, with a clear error when it is missing. How: :mod:`gateway.sdk`.
"""

from __future__ import annotations

from gateway.sdk import disable, enable, enabled, gateway_urls

__all__ = ["disable", "enable", "enabled", "gateway_urls"]
