"""Whether the API counts the thinking of earlier turns in the prompt, per model and version.

The API decides which ``thinking`` blocks sent back in ``messages`` stay in the model's context
(and so in ``usage.input_tokens``). Documented default (Anthropic's extended-thinking page,
"thinking block preservation"; ``../shared/research/api-2026.md``): Claude Opus 4.5 and later
Opus models, Sonnet 4.6 and later, and the models after them keep every earlier thinking block;
Opus 4.1 and earlier, Sonnet 4.5 and earlier and every Haiku through Haiku 4.5 keep only the
thinking of the assistant turn in progress: once a new human prompt follows, the thinking of
every turn before it is stripped from the prompt (the "turn in progress" includes its tool
rounds, whose thinking must come back with the tool results). A ``clear_thinking_20251015``
edit with ``keep: "all"`` in ``context_management`` keeps them on every model that takes it.

Measured on the shared real sessions (``tests/engine/test_previous_thinking.py`` holds it): at
each new human prompt whose new messages are small next to the thinking of the turn just
ended, the recorded prompt minus the previous one minus the new messages (at the session's
tokens per chars/4) is, relative to that thinking (at its signature length), a drop of median
0.71 (quartiles 0.64-0.76; about 1.3x the shown thinking at chars/4, i.e. the shown summary at
the session's ratio) on ``claude-sonnet-4-5`` (14 prompts, four sessions, 2.0.76-2.1.17), and
0.00-0.06 on ``claude-opus-4-5`` (53 prompts, 13 sessions), ``claude-opus-4-6`` (19) and
``claude-opus-5`` (6): the thinking stays.

What Claude Code sends (read in the cached npm ``cli.js`` files): the request carries
``context_management`` only when its beta list holds ``context-management-2025-06-27``; the
``clear_thinking_20251015`` ``keep: "all"`` edit is built when thinking is on, behind the remote
flag ``tengu_marble_anvil`` (default off) from 2.1.21 to 2.1.83, which also gates the beta; from
2.1.84 the beta is added for every first-party model but ``claude-3-*`` and the edit whenever
thinking is on (2.1.86-2.1.104: ``keep`` 1 thinking turn instead only after a long idle, not
modelled); 2.0.x-2.1.18 build it behind the remote experiment ``preserve_thinking`` (default
off), 2.1.19 and 2.1.20 not at all. So from 2.1.84 (and in the native builds, 2.1.330 seen
sending it) every model keeps its earlier thinking. The remote switches are modelled at their
default, off, which the sonnet sessions (2.0.76, 2.1.5, 2.1.17) agree with.

(A version rule kept here, beside the per-model table it completes, rather than as a
``Profile`` field: a field would split the 2.1.81 era at 2.1.84 and with it the published
support matrix, which only a full ``regress --all`` sweep regenerates.)
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from engine.javascript import utf16_len
from engine.versions import parse_version

# first version that sends clear_thinking_20251015 keep "all" whenever thinking is on
SENDS_KEEP_ALL_FROM = (2, 1, 84)

# model families that keep only the turn in progress's thinking by default, with the last
# version of each that does (docs: "Opus 4.1 and earlier", "Sonnet 4.5 and earlier",
# "all Haiku models through Haiku 4.5"); claude-3-* models strip too
_STRIPPING_UP_TO = {"opus": (4, 1), "sonnet": (4, 5), "haiku": (4, 5)}
_FAMILY_RE = re.compile(r"claude-(opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?!\d)")
_CLAUDE_3_RE = re.compile(r"claude-3(?:-\d)?-(?:opus|sonnet|haiku)")


def model_strips_by_default(model: str) -> bool:
    """True when the API, without a ``clear_thinking_20251015`` edit, keeps only the thinking
    of the assistant turn in progress for ``model`` (see the module docstring).

    ``claude-sonnet-4-5-20250929`` → True, ``claude-opus-4-5-20251101`` → False,
    ``claude-opus-4-1`` → True, ``claude-haiku-4-5`` → True, ``claude-3-7-sonnet`` → True,
    ``claude-opus-5`` / ``claude-sonnet-5`` → False. An unknown model keeps (the newer rule).
    """
    m = model.lower()
    if _CLAUDE_3_RE.search(m):
        return True
    f = _FAMILY_RE.search(m)
    if not f:
        return False
    major = int(f[2])
    minor = int(f[3]) if f[3] is not None else 0
    return (major, minor) <= _STRIPPING_UP_TO[f[1]]


def sends_keep_all(version: str | None) -> bool:
    """True when Claude Code ``version`` sends ``clear_thinking_20251015`` ``keep: "all"``
    whenever thinking is on (2.1.84 on; the flag era 2.1.21-2.1.83 at the flag's default)."""
    if not version:
        return False
    try:
        return parse_version(version) >= SENDS_KEEP_ALL_FROM
    except ValueError:
        return False


def strips_previous_thinking(model: str, version: str | None) -> bool:
    """Whether the prompt of a session (``model``, Claude Code ``version``) leaves out the
    thinking of the turns before the last human prompt."""
    return model_strips_by_default(model) and not sends_keep_all(version)


def main_model(models: Iterable[str]) -> str:
    """The model that answered most requests of a session (the last of those tied), by which a
    session's replay is ruled. Not per request: across models the rule is not established (in
    entireio/cli/4e836284, 152 opus-4-5 replies and one sonnet-4-5 reply, that sonnet request
    did not drop the 1,426 tokens of earlier opus thinking the per-model rule would leave out)."""
    counts: Counter[str] = Counter()
    last: dict[str, int] = {}
    for i, m in enumerate(models):
        counts[m] += 1
        last[m] = i
    return max(counts, key=lambda m: (counts[m], last[m]), default="")


# --- transcript records -------------------------------------------------------------------


def _blocks(rec: Mapping[str, Any]) -> list:
    content = (rec.get("message") or {}).get("content")
    return content if isinstance(content, list) else []


def starts_turn(rec: Mapping[str, Any]) -> bool:
    """A transcript record that begins a new assistant turn: a user record typed by the user
    (or a command's output, an interruption), not a tool result, not a meta reminder (those
    join the message next to them), not a compaction summary."""
    if rec.get("type") != "user" or rec.get("isMeta") or rec.get("isCompactSummary"):
        return False
    return not any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in _blocks(rec))


def thinking_share(rec: Mapping[str, Any]) -> float:
    """The part of an assistant record's chars/4 estimate that is thinking (0..1): Claude Code
    writes one content block per record, so a thinking record is 1 and the others 0."""
    if rec.get("type") != "assistant":
        return 0.0
    think = other = 0
    for b in _blocks(rec):
        if not isinstance(b, Mapping):
            continue
        size = len(json.dumps(b))
        if b.get("type") in ("thinking", "redacted_thinking"):
            think += size
        else:
            other += size
    total = think + other
    return think / total if total else 0.0


def thinking_chars(block: Mapping[str, Any]) -> int:
    """The length of the thinking behind a ``thinking`` / ``redacted_thinking`` block.

    The ``signature`` (a thinking block's) or ``data`` (a redacted block's) is the base64 of the
    encrypted thinking the model wrote, 3 bytes per 4 characters; Claude 4 models show a summary
    of it (opus 4.5/4.6, opus 5: the signature is 2-2.6x the shown text), so the shown text
    undercounts what the output tokens paid for. Measured on the 1,259 replies of the public and
    spotter sessions that carry a thinking block, a real signature and a final output count:
    output = 0.20-0.28 x signature length + the visible part (0.75/4 = 0.19 predicted), and with
    thinking at 3/4 of the signature the error of the session-ratio estimate of those replies
    fell from a median 18.8% to 8.2% (``engine.transcript.thinking_ratio``). A redacted signature
    (a tool that shortened it) is shorter than the shown text: the shown text is kept.
    """
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        return 3 * len(data) // 4 if isinstance(data, str) else 0
    text = block.get("thinking")
    shown = utf16_len(text) if isinstance(text, str) else 0
    sig = block.get("signature")
    return max(shown, 3 * utf16_len(sig) // 4) if isinstance(sig, str) else shown
