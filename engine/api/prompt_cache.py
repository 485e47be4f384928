"""The prompt cache as the replays price it.

Cost of one request, in units of the base (uncached) input-token price::

    cost = 1.0 × uncached + 1.25 × cache_write + 0.1 × cache_read

(Anthropic's prompt-cache prices for the 5-minute cache; a session that caches for an hour
(``cache_control`` ``ttl: "1h"``, which Claude Code sends to many subscribers: half of the shared
sessions, their usage's ``ephemeral_1h_input_tokens``) pays 2.0 × for a write instead,
:data:`WRITE_PRICE_1H`, :func:`write_price`. The replies' output tokens are left
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

The cache's lifetime: an entry lives :data:`TTL_5M` seconds (an hour, :data:`TTL_1H`, in a
session that caches for an hour) after the request that last wrote or read it. A request that
comes later than that after the conversation's previous one (:class:`PromptCache` is told each
request's time, the timestamp of the transcript's record before the reply) finds nothing cached:
it reads nothing and writes its whole prompt, in every scenario, and a smaller prompt (cleared,
pruned) costs less to write again. On the shared sessions, 77 of the 91 requests that came more
than the lifetime after the previous one read less than half their prompt from the cache (their
recorded usage); the others were kept warm by requests the transcript does not show. Not
modelled: the cache evicting an entry before its time.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from engine.identity_memo import shared_prefix

READ_PRICE = 0.1
WRITE_PRICE = 1.25
WRITE_PRICE_1H = 2.0  # a write to the 1-hour cache
UNCACHED_PRICE = 1.0
# output tokens, in base input prices: 5 on every model of the built-in price table
# (usage.prices) but claude-3-haiku (its 5 too: 1.25 / 0.25)
OUTPUT_PRICE = 5.0
LOOKBACK_BLOCKS = 20
TTL_5M = 300.0  # seconds an entry of the 5-minute cache lives after its last use
TTL_1H = 3600.0  # the same for the 1-hour cache
FORMULA = (
    "cost = 1.0 × uncached + 1.25 × cache write (2.0 × in a session that caches for an hour)"
    " + 0.1 × cache read (base input price)"
)


def write_price(one_hour: bool) -> float:
    """What a cache write costs, in base input prices: the 1-hour cache's or the 5-minute one's."""
    return WRITE_PRICE_1H if one_hour else WRITE_PRICE


def lifetime(one_hour: bool) -> float:
    """How long a cache entry lives after its last use, in seconds: the 1-hour cache's or the
    5-minute one's."""
    return TTL_1H if one_hour else TTL_5M


def seconds(stamp: Any) -> float | None:
    """A transcript record's ``timestamp`` (ISO 8601) in seconds since the epoch; None where it
    has none or it does not parse."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _split(usage: Mapping[str, Any]) -> tuple[int, int]:
    """(tokens written to the 5-minute cache, to the 1-hour cache) of a reply's ``usage``, from
    its ``cache_creation`` split; (0, 0) where it has none (before the API reported it)."""
    split = usage.get("cache_creation")
    if not isinstance(split, Mapping):
        return 0, 0
    five, hour = split.get("ephemeral_5m_input_tokens"), split.get("ephemeral_1h_input_tokens")
    return (
        five if isinstance(five, int) and five > 0 else 0,
        hour if isinstance(hour, int) and hour > 0 else 0,
    )


def caches_for_an_hour(usages: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a session's replies wrote more to the 1-hour cache than to the 5-minute one: the
    session's requests mark their breakpoints ``ttl: "1h"``, and a replay prices its writes so."""
    five = hour = 0
    for u in usages:
        f, h = _split(u)
        five, hour = five + f, hour + h
    return hour > five


def recorded_write_price(usage: Mapping[str, Any], one_hour: bool) -> float:
    """The price of one recorded request's cache writes: its own split of the two caches, or
    the session's (``one_hour``) where the usage does not split them."""
    five, hour = _split(usage)
    if five + hour == 0:
        return write_price(one_hour)
    return (WRITE_PRICE * five + WRITE_PRICE_1H * hour) / (five + hour)


def price(uncached: float, write: float, read: float, write_at: float = WRITE_PRICE) -> float:
    """``write_at``: the price of a write (:func:`write_price`)."""
    return UNCACHED_PRICE * uncached + write_at * write + READ_PRICE * read


def block_count(record: Mapping[str, Any]) -> int:
    content = (record.get("message") or {}).get("content")
    return len(content) if isinstance(content, list) else 1


def _starts_with(sig: Sequence[Hashable], entry: Sequence[Hashable], n: int | None = None) -> bool:
    """``sig[:n] == entry[:n]`` (``n``: the entry's length when it was written, default
    ``len(entry)``), compared from the first item that is not the very object of ``entry``
    (:func:`engine.identity_memo.shared_prefix`, in C): a prompt after a cache break is compared
    with every entry still in the cache, each as long as the history, and the items before that
    point are equal anyway (a list compares the same object as equal)."""
    if n is None:
        n = len(entry)
    if n > len(sig):
        return False
    if sig is entry:  # a signature that only grew since (kept_prefix's contract)
        return True
    p = shared_prefix(sig, entry)
    if p >= n:
        return True
    equal = sig[p] == entry[p]  # as the list comparison compares two other objects
    if not equal:
        return False
    return list(sig[p:n]) == list(entry[p:n])


class PromptCache:
    """The cache entries of one replay: the signatures of the recent prompts (the only ones a
    later request can still reach within the lookback)."""

    def __init__(
        self, overhead: float, stable: float | None = None, ttl: float | None = None
    ) -> None:
        self.overhead = float(overhead)
        # what a request whose prompt changed before its last breakpoint still reads
        self.stable = self.overhead if stable is None else float(stable)
        # the signatures of the recent prompts, each with its length when written (a replay
        # may append to a signature it passed: engine.identity_memo.kept_prefix's contract)
        self._entries: list[tuple[Sequence[Hashable], int]] = []
        self.ttl = ttl  # seconds an entry lives after its last use (:func:`lifetime`; None: ever)
        self._at: float | None = None  # the time of the last request
        self.expired = False  # whether the last request came after every entry had expired

    def read(
        self,
        sig: list[Hashable],
        costs: Sequence[float],
        blocks: Sequence[int],
        overhead: float | None = None,
        sums: Sequence[float] | None = None,
        extends: bool | None = None,
        at: float | None = None,
    ) -> float:
        """Tokens this prompt reads from the cache; then its own entry is written.

        ``sig``/``costs``/``blocks``: per sent message, its signature (equal signatures = equal
        bytes), token cost and number of content blocks. ``overhead``: this prompt's fixed
        prefix when it is not the cache's own (history before the file's first message, which
        precedes every message and is read like the system prompt until a compaction drops it).
        A prompt no entry reaches reads only ``stable`` (at most ``fixed``). ``sums``: the prefix
        sums of ``costs`` when the caller keeps them (``sums[k] == sum(costs[:k])``,
        ``engine.replay.prefix_sums``), so that a read does not sum the whole prompt again.
        ``extends``: whether ``sig`` starts with the last signature read, when the caller
        compared them already (``sig[:len(last)] == last``), so that they are not compared again.
        ``at``: the request's time in seconds (None: unknown): more than ``ttl`` after the last
        request, every entry has expired and the prompt reads nothing.
        """
        self.expired = (
            at is not None
            and self._at is not None
            and self.ttl is not None
            and at - self._at > self.ttl
        )
        if self.expired:
            self._entries = []
        if at is not None:
            self._at = at
        fixed = self.overhead if overhead is None else float(overhead)
        found: float | None = None
        if self._entries:
            found = min(self.stable, fixed)
            last = self._entries[-1]
            for written in reversed(self._entries):
                entry, n = written
                if written is last and extends is not None:
                    if not extends:
                        continue
                elif not _starts_with(sig, entry, n):
                    continue
                # the newest matching entry is the longest; older ones end further back
                if sum(blocks[n:]) <= LOOKBACK_BLOCKS:
                    found = fixed + (sum(costs[:n]) if sums is None else sums[n])
                break
        self._entries = [*self._entries[-(LOOKBACK_BLOCKS - 1) :], (sig, len(sig))]
        return 0.0 if found is None else found
