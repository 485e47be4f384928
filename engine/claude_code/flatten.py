"""Flattening Claude Code messages to API messages (what ``messages`` of the request holds).

Mirrors the normalisation before ``POST /v1/messages`` (2.1.7 spec §7): progress, system and
file-history records are dropped; attachments are not API messages; consecutive messages of the
same role are merged (a user message's string content becomes one text block when merged);
assistant lines sharing one ``message.id`` become one assistant message; only ``role`` and
``content`` are kept. Tool pairs are kept as they are: ``validate_tool_pairs`` reports any
``tool_result`` without its ``tool_use`` (or the reverse).

User string content: checked against the real program (``tests/e2e``, requests captured from
the published ``cli.js``), 1.0.128, 2.0.30, 2.0.76, 2.1.7, 2.1.9 and 2.1.29 send *every* user
message's string content as one text block (``"hi"`` → ``[{"type": "text", "text": "hi"}]``),
while 2.1.30, 2.1.50, 2.1.68 and 2.1.112 send it as the string (unless merged). ``flatten(..., user_string_blocks=True)`` models
the former; :func:`user_strings_as_blocks` says which a version does.

Merging consecutive user messages: in 2.1.90, 2.1.105 and 2.1.112 (``Zn8``/``MNY``/``nCK`` in
2.1.112) a text block followed by a text block across the seam gets ``"\n"`` appended, and the
merged content lists every ``tool_result`` block first. Seen in a captured 2.1.112 summarisation
request (``"continue"`` became ``"continue\n"`` before the summary prompt); 2.0.76-2.1.68 join
the blocks as they are (checked on real requests of 2.0.76, 2.1.7, 2.1.30, 2.1.50, 2.1.68).
``flatten(..., merge_seam_newline=True)`` models it; :func:`api_style` gives every switch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _as_blocks(content: Any) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def user_strings_as_blocks(version: str) -> bool:
    """Whether ``version`` sends a user message's string content as ``[text block]``
    (:attr:`engine.profiles.Profile.user_string_blocks`: up to 2.1.29)."""
    from engine.profiles import profile_for

    return profile_for(version).user_string_blocks


def api_style(version: str) -> dict[str, bool]:
    """The ``flatten`` keyword arguments that reproduce ``version``'s request (module docstring),
    from its :class:`engine.profiles.Profile`."""
    from engine.profiles import profile_for

    p = profile_for(version)
    return {
        "user_string_blocks": p.user_string_blocks,
        "merge_seam_newline": p.merge_seam_newline,
    }


def _merge_user(prev: list, new: list, seam_newline: bool) -> list:
    if not seam_newline:
        return prev + new
    if (
        prev
        and new
        and isinstance(prev[-1], Mapping)
        and isinstance(new[0], Mapping)
        and prev[-1].get("type") == "text"
        and new[0].get("type") == "text"
    ):
        prev = [*prev[:-1], {**prev[-1], "text": (prev[-1].get("text") or "") + "\n"}]
    joined = prev + new
    results = [b for b in joined if isinstance(b, Mapping) and b.get("type") == "tool_result"]
    return results + [
        b for b in joined if not (isinstance(b, Mapping) and b.get("type") == "tool_result")
    ]


def flatten(
    messages: Sequence[Mapping[str, Any]],
    *,
    user_string_blocks: bool = False,
    merge_seam_newline: bool = False,
) -> list[dict]:
    """API messages of ``messages``.

    ``user_string_blocks``: up to 2.1.29; ``merge_seam_newline``: the 2.1.90+ user merge (see the
    module docstring; :func:`api_style` picks both for a version).
    """
    out: list[dict] = []
    for m in messages:
        t = m.get("type")
        if t not in ("user", "assistant"):
            continue
        inner = m.get("message") or {}
        role = inner.get("role") or t
        content = inner.get("content")
        if out and out[-1]["role"] == role:
            prev = out[-1]
            if role == "user":
                prev["content"] = _merge_user(
                    _as_blocks(prev["content"]), _as_blocks(content), merge_seam_newline
                )
            else:
                prev["content"] = _as_blocks(prev["content"]) + _as_blocks(content)
        else:
            out.append(
                {
                    "role": role,
                    "content": content if isinstance(content, str) else list(content or []),
                }
            )
    if user_string_blocks:
        for m in out:
            if m["role"] == "user" and isinstance(m["content"], str):
                m["content"] = _as_blocks(m["content"])
    return out


def validate_tool_pairs(api_messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Problems: results without a preceding use, uses never answered."""
    problems: list[str] = []
    open_uses: dict[str, int] = {}
    for i, m in enumerate(api_messages):
        for b in _as_blocks(m.get("content")):
            if not isinstance(b, Mapping):
                continue
            if b.get("type") == "tool_use":
                open_uses[str(b.get("id"))] = i
            elif b.get("type") == "tool_result":
                if str(b.get("tool_use_id")) not in open_uses:
                    problems.append(
                        f"message {i}: tool_result {b.get('tool_use_id')} has no tool_use"
                    )
                else:
                    open_uses.pop(str(b.get("tool_use_id")))
    problems += [f"message {i}: tool_use {u} has no tool_result" for u, i in open_uses.items()]
    return problems
