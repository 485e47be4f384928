"""The prompt cache as the replays price it.

Cost of one request, in units of the base (uncached) input-token price::

    cost = 1.0 × uncached + 1.25 × cache_write + 0.1 × cache_read

(Anthropic's prompt-cache prices for the 5-minute cache; the replies' output tokens are left
out: the scenarios share them. A compaction's summary request is priced on its own, its output
included at :data:`OUTPUT_PRICE`: ``engine.replay.compaction_cost``.) A recorded request takes the three numbers from its usage
(``input_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens``). A replayed
request is cached as Claude Code caches it: a breakpoint on the system prompt (and tools) and one
on the last message, so each request writes a cache entry ending where its prompt ends. The API
reads an entry only when the new prompt starts with that entry's exact bytes and the entry ends
within :data:`LOOKBACK_BLOCKS` content blocks of the new breakpoint (it checks that far back).
So a request reads the longest earlier prompt that is a prefix of its own and ends within the
lookback, else only what the system prompt's breakpoint caches (the tools and the system prompt
up to its ``cache_control``: ``stable``, ``Calibration.break_prefix``), and writes the rest. A
change anywhere before the last earlier breakpoint (compaction, micro-compaction, a text prune,
or a server-side clearing, whose cache is of the prompt *after* its edits) therefore costs a
rewrite of everything after that breakpoint: the messages, and the part of the fixed overhead
after it (the rest of the system prompt, the context Claude Code prepends to the messages),
as the real sessions' first requests after a compaction show.

Not modelled: the cache's 5-minute lifetime (idle gaps cost every scenario alike).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

READ_PRICE = 0.1
WRITE_PRICE = 1.25
UNCACHED_PRICE = 1.0
# output tokens, in base input prices: 5 on every model of the built-in price table
# (usage.prices) but claude-3-haiku (its 5 too: 1.25 / 0.25)
OUTPUT_PRICE = 5.0
LOOKBACK_BLOCKS = 20
FORMULA = "cost = 1.0 × uncached + 1.25 × cache write + 0.1 × cache read (base input price)"


def price(uncached: float, write: float, read: float) -> float:
    return UNCACHED_PRICE * uncached + WRITE_PRICE * write + READ_PRICE * read


def block_count(record: Mapping[str, Any]) -> int:
    content = (record.get("message") or {}).get("content")
    return len(content) if isinstance(content, list) else 1


class PromptCache:
    """The cache entries of one replay: the signatures of the recent prompts (the only ones a
    later request can still reach within the lookback)."""

    def __init__(self, overhead: float, stable: float | None = None) -> None:
        self.overhead = float(overhead)
        # what a request whose prompt changed before its last breakpoint still reads
        self.stable = self.overhead if stable is None else float(stable)
        self._entries: list[list[Hashable]] = []

    def read(
        self,
        sig: list[Hashable],
        costs: Sequence[float],
        blocks: Sequence[int],
        overhead: float | None = None,
    ) -> float:
        """Tokens this prompt reads from the cache; then its own entry is written.

        ``sig``/``costs``/``blocks``: per sent message, its signature (equal signatures = equal
        bytes), token cost and number of content blocks. ``overhead``: this prompt's fixed
        prefix when it is not the cache's own (history before the file's first message, which
        precedes every message and is read like the system prompt until a compaction drops it).
        A prompt no entry reaches reads only ``stable`` (at most ``fixed``).
        """
        fixed = self.overhead if overhead is None else float(overhead)
        found: float | None = None
        if self._entries:
            found = min(self.stable, fixed)
            for entry in reversed(self._entries):
                n = len(entry)
                if n > len(sig) or sig[:n] != entry:
                    continue
                # the newest matching entry is the longest; older ones end further back
                if sum(blocks[n:]) <= LOOKBACK_BLOCKS:
                    found = fixed + sum(costs[:n])
                break
        self._entries = [*self._entries[-(LOOKBACK_BLOCKS - 1) :], sig]
        return 0.0 if found is None else found
