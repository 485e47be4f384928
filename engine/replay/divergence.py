"""Why a replay and the recorded session disagree: ``tokens_sent`` and cache breaks, request by
request, each difference with its reason (what ``simulate`` prints as ``vs recorded:``).

An unpatched replay with the recorded settings reproduces the recorded prompt sizes up to the
first compaction (its per-message costs are calibrated on the recorded usage). The differences
it cannot avoid:

* after a compaction where the session did not compact, the replay rebuilds the context
  (summary, re-read files, attachments) from chars/4 estimates: its prompt sizes there are
  estimates, not the recorded usage (where the session compacted, the replay holds the file's
  own boundary and summary with their fitted costs, and matches);
* the recorded cache read can fall although no earlier message changed (something the
  transcript does not hold changed the prompt prefix, or the server dropped the cache): a replay
  cannot see that;
* the recorded count of cache breaks restarts at a ``compact_boundary`` (the first request after
  it has nothing to compare with), while the replay counts that request as a break (its prefix
  changed);
* the replay may compact, micro-compact or prune elsewhere (other knobs, or micro-compaction
  inferred off).
"""

from __future__ import annotations

from engine.replay.model import Request, Simulation

_COMPACTIONS = ("auto_compact", "manual_compact")


def vs_recorded(recorded: Simulation, replay: Simulation) -> tuple[str, ...]:
    """Every difference between ``replay`` and ``recorded``, with its reason (empty: none)."""
    rec = {r.line: r for r in recorded.requests}
    pairs = [(rec[r.line], r) for r in replay.requests if r.line in rec]
    boundaries = sorted(e.line for e in recorded.events if e.kind in _COMPACTIONS and e.recorded)
    notes: list[str] = []
    rec_compacted = {e.line for e in recorded.events if e.kind == "auto_compact" and e.recorded}
    rep_compacted = {e.line for e in replay.events if e.kind == "auto_compact"}
    if rec_compacted != rep_compacted:
        notes.append(
            "auto-compaction: recorded at line(s) "
            f"{_lines(rec_compacted)}, the replay at {_lines(rep_compacted)}"
            " (the replay's knobs or its token count differ from the session's)"
        )
    same_compactions = rec_compacted == rep_compacted
    total = sum(b.prompt_tokens - a.prompt_tokens for a, b in pairs)
    if total:
        notes.append(
            f"tokens_sent {total:+,} vs recorded "
            f"({sum(b.prompt_tokens for _, b in pairs):,} vs {sum(a.prompt_tokens for a, _ in pairs):,}):"
        )
        notes += ["  " + n for n in _token_segments(pairs, boundaries, same_compactions)]
    notes += _cache_breaks(pairs, boundaries)
    return tuple(notes)


def _lines(lines: set[int]) -> str:
    return ", ".join(str(x) for x in sorted(lines)) or "none"


def _segment(line: int, boundaries: list[int]) -> int | None:
    """The last recorded compaction before ``line`` (None: before any)."""
    before = [b for b in boundaries if b < line]
    return before[-1] if before else None


def _token_segments(
    pairs: list[tuple[Request, Request]], boundaries: list[int], same_compactions: bool
) -> list[str]:
    by_segment: dict[int | None, list[int]] = {}
    for a, b in pairs:
        by_segment.setdefault(_segment(a.line, boundaries), []).append(
            b.prompt_tokens - a.prompt_tokens
        )
    out = []
    for seg, deltas in by_segment.items():
        d = sum(deltas)
        if not d:
            continue
        each = f", {deltas[0]:+,} each" if len(set(deltas)) == 1 and len(deltas) > 1 else ""
        changed = sum(1 for x in deltas if x)
        if seg is None:
            out.append(
                f"{d:+,} over {changed} of the {len(deltas)} requests before any compaction"
                f"{each}: the replay micro-compacted, pruned or compacted differently there"
            )
        elif same_compactions:
            out.append(
                f"{d:+,} over the {len(deltas)} requests after the compaction at line {seg}"
                f"{each}: the replay rebuilds the context after a compaction (summary, re-read"
                " files, attachments) from chars/4 estimates, not from the recorded usage"
            )
        else:
            out.append(
                f"{d:+,} over the {len(deltas)} requests after the recorded compaction at line "
                f"{seg}: the replay compacted elsewhere (above), so its context differs there"
            )
    return out


def _cache_breaks(pairs: list[tuple[Request, Request]], boundaries: list[int]) -> list[str]:
    rec_n = sum(a.cache_break for a, _ in pairs)
    rep_n = sum(b.cache_break for _, b in pairs)
    out = []
    firsts = {
        next((a.line for a, _ in pairs if a.line > bl), None) for bl in boundaries
    }  # the first request after each recorded compaction
    for a, b in pairs:
        if a.cache_break == b.cache_break:
            continue
        where = f"line {a.line} (request {a.index})"
        if a.cache_break:
            out.append(
                f"  {where}: recorded break, not in the replay: the recorded cache read fell "
                "although no earlier message changed (a prefix change the transcript does not "
                "hold, or the server dropped the cache); a replay cannot model it"
            )
        elif a.line in firsts:
            out.append(
                f"  {where}: replay break, not recorded: the first request after a compaction;"
                " the recorded count restarts at the compact_boundary (nothing to compare its"
                " cache read with), the replay counts the changed prefix"
            )
        else:
            what = ",".join(b.events) or "an earlier message changed"
            out.append(
                f"  {where}: replay break, not recorded: the replay changed the prefix here "
                f"({what}) where the recorded cache read shows it kept"
            )
    if out:
        out.insert(0, f"cache_breaks {rep_n} vs recorded {rec_n}:")
    return out
