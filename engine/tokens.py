"""Claude Code's token estimators, mirrored from ``cli.js``.

* ``count_text`` mirrors ``function w2(A,q=4){return Math.round(A.length/q)}`` (2.1.39; the same
  body without the default parameter before 2.1.40): JavaScript ``length`` is in UTF-16 code
  units and ``Math.round`` rounds halves up.
* ``estimate_messages`` mirrors the message-level estimate used by micro-compaction, session
  memory and the post-compaction count (``SU1`` in 2.1.39, ``FhA`` in 2.1.7, ``yH0`` in 2.0.76):
  text, tool_result text, images 2000, any other block as its JSON, total ``ceil(x*4/3)`` in the
  eras that have the factor (2.0.60-2.1.104). From 2.1.47 (``MU6``; 2.1.45's ``Ep6`` not)
  ``document`` blocks count like images, in the message and inside tool_result content
  (``estimate_counts_documents``). From 2.1.75 (``wG6``; 2.1.74's ``uW6`` not) through 2.1.104
  ``thinking``, ``redacted_thinking`` and ``tool_use`` count by their text as in the
  newer-messages estimate (``estimate_counts_block_text``), not as their JSON (signature, id...).
  2.1.105 removed this estimator with session memory: what remains of its callers (the
  post-compaction count) uses the newer-messages estimate, so from 2.1.105
  ``estimate_messages`` is ``estimate_newer`` (``message_estimate_is_newer``).
* ``estimate_newer`` mirrors the estimate added to the last API usage for the auto-compact
  decision (``hOA`` in 2.1.39, ``TZ0`` in 2.1.7), no x4/3. Its blocks (``D99`` in 2.1.39,
  ``B4z`` in 2.1.74, ``w4z`` in 2.1.112): up to 2.1.73 text and tool_result text only, images
  1334 or 2000 by era, every other block (``tool_use``, ``thinking``, documents ...) 0; from
  2.1.74 also ``tool_use`` as name + JSON of its input, ``thinking`` and ``redacted_thinking`` as
  their text, documents as images, any other block as its JSON (``newer_counts_all_blocks``).
  Attachment records: as their JSON in 2.1.33-2.1.44, rendered to the messages they are sent as
  from 2.1.45 (``engine.claude_code.attachments``; ``zO8`` in 2.1.45, ``ZZY`` in 2.1.112).
* ``usage_total`` mirrors ``ix1``: input + cache creation + cache read + output tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from engine.api.previous_thinking import thinking_chars
from engine.claude_code.attachments import render_attachment
from engine.javascript import js_json_stringify, js_round_div, utf16_len
from engine.profiles import Profile

FACTOR_4_3 = 1.3333333333333333  # the literal in cli.js


def count_text(s: str, chars_per_token: int = 4) -> int:
    """``Math.round(s.length / 4)`` with a UTF-16 length (``w2``/``l7``/``iG`` in cli.js)."""
    return js_round_div(utf16_len(s), chars_per_token)


def usage_total(usage: Mapping[str, Any]) -> int:
    """``input + (cache_creation ?? 0) + (cache_read ?? 0) + output`` (``ix1`` in 2.1.39)."""
    return (
        int(usage.get("input_tokens") or 0)
        + int(usage.get("cache_creation_input_tokens") or 0)
        + int(usage.get("cache_read_input_tokens") or 0)
        + int(usage.get("output_tokens") or 0)
    )


def usage_prompt(usage: Mapping[str, Any]) -> int:
    """The prompt the API counted: input + cache creation + cache read (no output)."""
    return usage_total(usage) - int(usage.get("output_tokens") or 0)


# --- message-level estimate (x4/3 era) ---------------------------------------------------------


def tool_result_tokens(
    block: Mapping[str, Any], image_tokens: int = 2000, documents: bool = False
) -> int:
    """Tokens of a tool_result's content: string, or text/image blocks (``Bs4``/``js2``); with
    ``documents`` (2.1.47+, ``gt4``) document blocks count like images."""
    content = block.get("content")
    if not content:
        return 0
    if isinstance(content, str):
        return count_text(content)
    total = 0
    for b in content:
        if not isinstance(b, Mapping):
            continue
        if b.get("type") == "text":
            total += count_text(b.get("text") or "")
        elif b.get("type") == "image" or (documents and b.get("type") == "document"):
            total += image_tokens
    return total


def block_tokens(
    block: Any, image_tokens: int = 2000, documents: bool = False, block_text: bool = False
) -> int:
    """One content block as the message-level estimate counts it (before the x4/3 factor);
    ``documents``: document blocks count like images (2.1.47+); ``block_text``: thinking,
    redacted_thinking and tool_use by their text (2.1.75-2.1.104)."""
    if isinstance(block, str):
        return count_text(block)
    t = block.get("type")
    if t == "text":
        return count_text(block.get("text") or "")
    if t == "tool_result":
        return tool_result_tokens(block, image_tokens, documents)
    if t == "image" or (documents and t == "document"):
        return image_tokens
    if block_text and t in ("thinking", "redacted_thinking", "tool_use"):
        return _text_block_tokens(block)
    return count_text(js_json_stringify(block))


def _text_block_tokens(b: Mapping[str, Any]) -> int:
    """thinking text, redacted_thinking data, tool_use name + ``JSON.stringify(input ?? {})``."""
    t = b.get("type")
    if t == "tool_use":
        name = b.get("name")
        inp = b.get("input")
        return count_text(
            ("undefined" if name is None else str(name))
            + js_json_stringify({} if inp is None else inp)
        )
    if t == "thinking":
        return count_text(b.get("thinking") or "")
    return count_text(b.get("data") or "")


def raw_message_tokens(
    msg: Mapping[str, Any],
    image_tokens: int = 2000,
    documents: bool = False,
    block_text: bool = False,
) -> int:
    """Sum of ``block_tokens`` over a user/assistant message with array content, else 0."""
    if msg.get("type") not in ("user", "assistant"):
        return 0
    content = (msg.get("message") or {}).get("content")
    if not isinstance(content, list):
        return 0
    return sum(block_tokens(b, image_tokens, documents, block_text) for b in content)


def estimate_messages(messages: Iterable[Mapping[str, Any]], profile: Profile | None = None) -> int:
    """Message-level estimate: sum of blocks, ``ceil(x*4/3)`` when the era has the factor.

    String contents are skipped, exactly as in cli.js (``if(!Array.isArray(content))continue``).
    From 2.1.105 (no such estimator left in cli.js): the newer-messages estimate.
    """
    if profile is not None and profile.message_estimate_is_newer:
        return estimate_newer(messages, profile)
    image = profile.image_tokens if profile else 2000
    docs = bool(profile and profile.estimate_counts_documents)
    text = bool(profile and profile.estimate_counts_block_text)
    raw = sum(raw_message_tokens(m, image, docs, text) for m in messages)
    if profile is None or profile.estimate_factor_4_3:
        return math.ceil(raw * FACTOR_4_3)
    return raw


# --- newer-messages estimate (auto-compact count) -------------------------------------------


def _newer_content(content: Any, image_tokens: int, all_blocks: bool = False) -> int:
    """A message's (or a tool_result's) content in the newer-messages estimate."""
    if not content:
        return 0
    if isinstance(content, str):
        return count_text(content)
    return sum(_newer_block(b, image_tokens, all_blocks) for b in content)


def _newer_block(b: Any, image_tokens: int, all_blocks: bool) -> int:
    """One block: ``D99`` (2.1.39) up to 2.1.73, ``B4z`` (2.1.74) with ``all_blocks``."""
    if isinstance(b, str):
        return count_text(b)
    if not isinstance(b, Mapping):
        return 0
    t = b.get("type")
    if t == "text":
        return count_text(b.get("text") or "")
    if t == "image" or (all_blocks and t == "document"):
        return image_tokens
    if t == "tool_result":
        return _newer_content(b.get("content"), image_tokens, all_blocks)
    if not all_blocks:
        return 0
    if t in ("tool_use", "thinking", "redacted_thinking"):
        return _text_block_tokens(b)
    return count_text(js_json_stringify(b))


def newer_message_tokens(msg: Mapping[str, Any], profile: Profile) -> int:
    """One record as the newer-messages estimate counts it (``IOA`` in 2.1.39)."""
    t = msg.get("type")
    if t in ("user", "assistant"):
        return _newer_content(
            (msg.get("message") or {}).get("content"),
            profile.newer_image_tokens,
            profile.newer_counts_all_blocks,
        )
    if t == "attachment" and profile.newer_counts_attachments and msg.get("attachment"):
        if profile.attachments_count_rendered:
            return rendered_tokens(msg.get("rendered"))
        return attachment_tokens(msg["attachment"], profile)
    return 0


def rendered_tokens(rendered: Any) -> int:
    """An attachment record's ``rendered`` list (2.1.330 writes the contents it sends): each
    content at chars/4 rounded (a block list: its text blocks); nothing when absent."""
    if not isinstance(rendered, list):
        return 0
    total = 0
    for r in rendered:
        c = r.get("content") if isinstance(r, Mapping) else None
        if isinstance(c, str):
            total += count_text(c)
        elif isinstance(c, list):
            total += sum(
                count_text(b.get("text") or "")
                for b in c
                if isinstance(b, Mapping) and b.get("type") == "text"
            )
    return total


def attachment_tokens(att: Mapping[str, Any], profile: Profile) -> int:
    """An attachment in the newer-messages estimate: its JSON at chars/4 (2.1.33-2.1.44), or
    from 2.1.45 each message it is rendered to, at chars/4 rounded per message; types
    ``engine.claude_code.attachments`` does not model keep the JSON count."""
    if profile.newer_renders_attachments:
        texts = render_attachment(att)
        if texts is not None:
            return sum(count_text(x) for x in texts)
    return count_text(js_json_stringify(att))


def estimate_newer(messages: Iterable[Mapping[str, Any]], profile: Profile) -> int:
    """Sum of ``newer_message_tokens`` (``hOA`` in 2.1.39): no x4/3."""
    return sum(newer_message_tokens(m, profile) for m in messages)


def output_content_tokens(blocks: Iterable[Any]) -> int:
    """chars/4 of what a model wrote: text, thinking, tool_use name + JSON input.

    Not a cli.js function: used to recover an assistant reply's output tokens when the transcript
    recorded the streaming placeholder instead of the final count. ``ExitPlanMode``'s ``plan`` is
    left out: Claude Code fills it in from the plan file when it normalizes the tool input
    (``return{...input,plan}``, read in 2.0.76-2.1.33), the model did not write it (a real
    2.1.33 reply recording an 18,176-char plan counted 79 output tokens).
    """
    return output_estimates(blocks)[0]


def signed_output_tokens(blocks: Iterable[Any]) -> int:
    """``output_content_tokens`` with each thinking block at the length of the thinking the model
    really wrote (``thinking_chars``), not of the text the transcript shows."""
    return output_estimates(blocks)[1]


def output_estimates(blocks: Iterable[Any]) -> tuple[int, int]:
    """(``output_content_tokens``, ``signed_output_tokens``) of ``blocks``, in one pass."""
    shown, signed = _output_chars(blocks)
    return js_round_div(shown), js_round_div(signed)


def _output_chars(blocks: Iterable[Any]) -> tuple[int, int]:
    """The UTF-16 length of what the model wrote: as shown, and with thinking as signed."""
    shown = signed = 0
    for b in blocks:
        if not isinstance(b, Mapping):
            continue
        t = b.get("type")
        if t == "text":
            n = utf16_len(b.get("text") or "")
            shown += n
            signed += n
        elif t == "thinking":
            shown += utf16_len(b.get("thinking") or "")
            signed += thinking_chars(b)
        elif t == "redacted_thinking":
            signed += thinking_chars(b)
        elif t == "tool_use":
            inp = b.get("input")
            if b.get("name") == "ExitPlanMode" and isinstance(inp, Mapping) and "plan" in inp:
                inp = {k: v for k, v in inp.items() if k != "plan"}
            n = utf16_len(b.get("name") or "") + utf16_len(js_json_stringify(inp))
            shown += n
            signed += n
    return shown, signed
