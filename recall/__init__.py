"""Recall: what clearing and compaction removed from the model's context, found again in Claude
Code's own session transcript.

* ``recall.extract``: the tool uses and results of transcript lines (pure);
* ``recall.index``: an SQLite FTS5 index of them, kept incrementally in the user's state dir;
* ``recall.sessions``: which transcript is the current session (hooks record it, the MCP server
  and the command line look it up);
* ``recall.mcp_server``: ``ctxpatch mcp``, the two tools the model calls.
"""
