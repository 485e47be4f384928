"""The summary request of a compaction, priced like the prompts (``engine.api.prompt_cache``).

A compaction is an API call of its own that no request record of the transcript holds: Claude
Code sends the conversation with the summary instructions and the model answers with the
summary. Leaving it out priced every scenario that compacts too low, and so the saving of
avoiding a compaction too low. Its price, in base input-token units:

* **input**: the conversation, whose size is the count that triggered the compaction. Where the
  summary request shares the main prompt's cache prefix (``Profile.compact_reads_cache``: the
  same system prompt, tools and messages) it reads the previous request's prompt and writes the
  rest; before that (up to 2.1.28 always, 2.1.29-2.1.78 unless a remote flag turned it on) it
  sends its own system prompt and tool list, so nothing of the main prompt's cache is a prefix
  of it: it writes the messages, the count less the replay's fixed prefix (its own short system
  prompt and tools are left out).
* **output**: the summary, counted like a text (4 characters a token) at the output price,
  :data:`engine.api.prompt_cache.OUTPUT_PRICE` times the base input price. The summary stored in
  the transcript is what is left of the model's answer after Claude Code removes its
  ``<analysis>`` part, so the output is, if anything, counted low.

The recorded scenario prices the file's own compactions the same way (``preTokens`` and the
stored summary), so that it too is what the user paid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.api.prompt_cache import OUTPUT_PRICE, WRITE_PRICE, price
from engine.profiles import Profile
from engine.tokens import count_text


@dataclass(frozen=True)
class CompactionCall:
    """One summary request: where, what it sent and read, what it answered."""

    line: int
    input_tokens: int  # the conversation it sent (cache reads and writes)
    cache_read: int  # of it, read from the main prompt's cache
    output_tokens: int  # the summary
    write_price: float = WRITE_PRICE  # engine.api.prompt_cache.write_price of the session

    @property
    def cache_write(self) -> int:
        return self.input_tokens - self.cache_read

    @property
    def cost(self) -> float:
        """Its price in base input-token units (output included)."""
        written = price(0, self.cache_write, self.cache_read, self.write_price)
        return written + OUTPUT_PRICE * self.output_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "input_tokens": self.input_tokens,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "output_tokens": self.output_tokens,
            "cost": round(self.cost),
        }


def summary_text(messages: Iterable[Mapping[str, Any] | None]) -> str:
    """The text of the ``isCompactSummary`` message among ``messages`` ("" if none)."""
    for m in messages:
        if not isinstance(m, Mapping) or not m.get("isCompactSummary"):
            continue
        c = (m.get("message") or {}).get("content")
        if isinstance(c, str):
            return c
        if isinstance(c, list):
            return "\n".join(
                str(b.get("text") or "") for b in c if isinstance(b, Mapping) and "text" in b
            )
    return ""


def compaction_call(
    profile: Profile,
    line: int,
    count: float,
    previous_prompt: float,
    overhead: float,
    summary: str,
    write_at: float = WRITE_PRICE,
) -> CompactionCall:
    """The summary request of a compaction at ``line``.

    ``count``: the tokens that triggered it (the conversation it sends, fixed prefix included);
    ``previous_prompt``: the last request's prompt, the cache entry a request sharing the main
    prompt's prefix reads; ``overhead``: the fixed prefix (system prompt, tools) a request with
    its own system prompt and tools does not send; ``summary``: the summary text; ``write_at``:
    the price of a cache write (:func:`engine.api.prompt_cache.write_price`)."""
    total = max(0, round(count))
    out = count_text(summary)
    if profile.compact_reads_cache:
        read = min(total, max(0, round(previous_prompt)))
        return CompactionCall(line, total, read, out, write_at)
    return CompactionCall(line, max(0, round(count - overhead)), 0, out, write_at)
