"""Signing a written session's thinking blocks for what Claude Code really sends.

A block's binding covers what Claude Code *sends*, not what the transcript holds: the system
prompt and the tool list (never in the transcript), the ``<system-reminder>`` blocks the CLI
puts into the first user message, assistant lines merged back into one message, string contents
turned into blocks, ``cache_control``. So :func:`sign_session` asks the real program: it resumes
the session once against a mock that checks nothing, with every client-side edit off
(:data:`lab.chain.NO_CLIENT_EDITS`), takes the first main-loop request, signs every
thinking block in it over its prefix there (``thinking_binding.sign``: exactly what the mock
would have signed had it produced that block in that conversation), and writes the signatures
back into the session's records, found by thinking text. The runs themselves are
:mod:`lab.chain`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lab.chain import (
    ARGS,
    NO_CLIENT_EDITS,
    _resume,
    _thinking_blocks,
    run_turns,
    write_fresh,
)
from lab.harness import MODEL
from lab.mock import MockConfig, MockServer
from lab.sandbox import RunResult, Sandbox
from lab.session import SessionWriter
from lab.thinking_binding import DEFAULT_SECRET, sign


class SigningError(RuntimeError):
    """The signer could not find a session's thinking block in what the CLI sent."""


@dataclass
class Signed:
    signed: int
    body: dict  # the request the signatures were computed on
    run: RunResult


def sign_session(
    sb: Sandbox,
    mock: MockServer,
    session: SessionWriter,
    *,
    model: str = MODEL,
    args: Sequence[str] = ARGS,
    env: Mapping[str, str] | None = None,
    prompt: str = "continue",
    secret: bytes = DEFAULT_SECRET,
    timeout: float = 120,
    live: bool = False,
) -> Signed:
    """Sign every thinking block of ``session`` over the prefix the CLI sends (see the module
    docstring); changes ``session.records`` in place and rewrites the file.

    ``env`` must be the environment of the runs that follow (it decides ``thinking``, the tools
    and the system prompt); the client-side edits are switched off for this one run only.
    Raises :class:`SigningError` when a block of the session is not in the request.

    ``live``: sign what a :func:`run_turns` process sends (``--input-format stream-json``)
    instead of a ``-p PROMPT --resume`` run. The two differ on the native 2.1.330 (the Bash
    tool's description, ``thinking.display``), so a session for :func:`run_turns` must be
    signed live there.
    """
    write_fresh(sb, session)
    if live:
        t = run_turns(
            sb,
            mock,
            session,
            [prompt],
            MockConfig(),
            model=model,
            args=args,
            env={**(env or {}), **NO_CLIENT_EDITS},
            timeout=timeout,
        )
        run, reqs = t.run, t.requests
    else:
        run, reqs = _resume(
            sb,
            mock,
            session,
            prompt,
            MockConfig(),
            model,
            args,
            {**(env or {}), **NO_CLIENT_EDITS},
            timeout,
        )
    mains = [r for r in reqs if r.kind == "main" and isinstance(r.body, dict)]
    if not mains:
        raise SigningError(f"no main-loop request captured\n{run.describe()}")
    body = mains[0].body
    sigs: dict[str, str] = {}
    for i, m in enumerate(body.get("messages") or []):
        content = m.get("content") if isinstance(m, dict) else None
        for j, b in enumerate(content if isinstance(content, list) else []):
            if isinstance(b, dict) and b.get("type") == "thinking":
                sigs[b.get("thinking") or ""] = sign(body, i, j, b.get("thinking") or "", secret)
    blocks = _thinking_blocks(session.records)
    missing = [b["thinking"] for b in blocks if b.get("thinking") not in sigs]
    if missing:
        raise SigningError(
            f"{len(missing)} of {len(blocks)} thinking blocks were not sent by the CLI "
            f"(first: {missing[0]!r}); request thinking param {body.get('thinking')!r}"
        )
    for b in blocks:
        b["signature"] = sigs[b["thinking"]]
    write_fresh(sb, session)
    return Signed(len(blocks), body, run)
