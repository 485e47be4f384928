"""End-to-end harness: the real ``cli.js`` against a loopback mock of the Messages API.

* :mod:`lab.mock`: the mock's HTTP server, ``POST /v1/messages`` on 127.0.0.1 (SSE and
  plain JSON); :mod:`lab.mock_api`: what it answers (scripted replies and usage, a
  request log, request classification: main loop / compaction / side, the 2026 server checks).
* :mod:`lab.sandbox`: a throwaway ``HOME``/``TMPDIR``/project folder, a copy of
  ``cli.js``, the environment that stops every other kind of traffic and a node preload that
  makes any non-loopback connection fail at once.
* :mod:`lab.thinking_binding`: the preserved-thinking check (signatures that bind
  the prefix, the modes ``error`` / ``drop_block`` / ``off``), pure.
* :mod:`lab.server_edits`: server-side context editing as the mock answers it (beta,
  400s, ``applied_edits``) around ``engine.api.context_editing``.
* :mod:`lab.session`: writes session transcripts that ``--resume`` loads.
* :mod:`lab.signing`: signs a written session's thinking blocks over what the CLI sends.
* :mod:`lab.chain`: thinking-on sessions: several turns in one process or several
  resumes, and what the preserved-thinking check saw.
* :mod:`lab.predict`: what the engine says the main-loop request must carry, and a
  byte-for-byte comparison that names the first differing message and block.
* :mod:`lab.verify`: ``ctxpatch verify`` (proof on the user's own install).

Nothing here touches the network beyond 127.0.0.1, nor the user's real ``~/.claude``.
"""
