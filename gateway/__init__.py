"""``ctxpatch gateway`` and ``ctxpatch run``: server-side tool-result clearing without patching.

A loopback HTTP gateway (127.0.0.1 only) between Claude Code (or an Agent SDK) and the API. It
forwards every request unchanged, except that a ``POST /v1/messages`` gets the
``clear_tool_uses_20250919`` edit in ``context_management`` and the
``context-management-2025-06-27`` beta in ``anthropic-beta`` (both merged with what the client
sends; messages are never touched). Modules:

* :mod:`gateway.rewrite`: the pure decision and body rewrite (no I/O);
* :mod:`gateway.toplevel`: where the top-level members of a JSON body are, by byte offset,
  without parsing the large ones (what makes the splice exact and cheap);
* :mod:`gateway.redact`: headers as they may be logged (credentials hidden);
* :mod:`gateway.server`: the aiohttp server and client that stream requests and replies through;
* :mod:`gateway.reply_prompt`: the prompt a reply reports, read as it passes (the near move);
* :mod:`gateway.run`: ``ctxpatch run -- claude ...`` (a gateway for the lifetime of one command);
* :mod:`gateway.fallback`: ``run --fallback`` (the command without the gateway when it cannot
  start: one warning line, then the plain command);
* :mod:`gateway.launch`: ``ctxpatch run``'s entry, importing the gateway inside that fallback;
* :mod:`gateway.shell_init`: ``ctxpatch shell-init bash|zsh|fish`` (``claude`` through ``run
  --fallback`` in every interactive shell) and where its line is in the user's rc files.
"""
