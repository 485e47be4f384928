"""End-to-end harness: the real ``cli.js`` against a loopback mock of the Messages API.

* :mod:`patcher.e2e.mock`: the mock's HTTP server, ``POST /v1/messages`` on 127.0.0.1 (SSE and
  plain JSON); :mod:`patcher.e2e.mock_api`: what it answers (scripted replies and usage, a
  request log, request classification: main loop / compaction / side, the 2026 server checks).
* :mod:`patcher.e2e.sandbox`: a throwaway ``HOME``/``TMPDIR``/project folder, a copy of
  ``cli.js``, the environment that stops every other kind of traffic and a node preload that
  makes any non-loopback connection fail at once.
* :mod:`patcher.e2e.thinking_binding`: the preserved-thinking check (signatures that bind
  the prefix, the modes ``error`` / ``drop_block`` / ``off``), pure.
* :mod:`patcher.e2e.server_edits`: server-side context editing as the mock answers it (beta,
  400s, ``applied_edits``) around ``engine.context_editing``.
* :mod:`patcher.e2e.session`: writes session transcripts that ``--resume`` loads.
* :mod:`patcher.e2e.signing`: signs a written session's thinking blocks over what the CLI sends.
* :mod:`patcher.e2e.chain`: thinking-on sessions: several turns in one process or several
  resumes, and what the preserved-thinking check saw.
* :mod:`patcher.e2e.predict`: what the engine says the main-loop request must carry, and a
  byte-for-byte comparison that names the first differing message and block.
* :mod:`patcher.e2e.verify`: ``ctxpatch verify`` (proof on the user's own install).

Nothing here touches the network beyond 127.0.0.1, nor the user's real ``~/.claude``.
"""
