"""Recall: what clearing and compaction removed from the model's context, found again in Claude
Code's own session transcript.

* ``recall.extract``: the tool uses and results of transcript lines (pure);
* ``recall.index``: an SQLite FTS5 index of them, kept incrementally in the user's state dir;
* ``recall.sessions``: which transcript is the current session (hooks record it, the MCP server
  and the command line look it up);
* ``recall.mcp_server``: ``ctxpatch mcp``, the two tools the model calls (``recall.mcp_early``
  answers the MCP handshake while the SDK loads);
* ``recall.digest``: what a compaction's summary dropped, told back to the model (pure);
* ``recall.hook``: ``ctxpatch recall hook``, the command Claude Code runs for its hooks;
* ``recall.registered`` / ``recall.register`` / ``recall.jsonc``: the hooks and the MCP server in
  Claude Code's user settings, added by ``apply`` and removed byte for byte by ``revert``.
"""
