"""Read a real Claude Code session transcript (``~/.claude/projects/<dir>/<session>.jsonl``).

What the format holds (checked on the spotter sessions, Claude Code 2.1.38-2.1.39):

* one JSON object per line; ``type`` is user / assistant / system / progress /
  file-history-snapshot / queue-operation / summary / attachment (others are counted, not fatal);
* an assistant reply is stored one line per content block, all sharing ``message.id``; tool
  results of a streamed reply can sit between its blocks; every line carries the reply's
  ``usage`` as it was when the block was written, so the last line may still hold the streaming
  placeholder (``output_tokens`` 1-2) while ``cli.js`` had already replaced it in memory with the
  final count (``L1.message={...L1.message,usage:a}`` on ``message_delta``, 2.1.39);
* typed prompts may be plain strings; tool results are user lines whose content is a list of
  ``tool_result`` blocks; ``isMeta`` marks system reminders; ``isSidechain`` marks sub-agent lines;
* a compaction writes a ``system`` line with ``subtype: "compact_boundary"`` and
  ``compactMetadata: {trigger: "auto"|"manual", preTokens}``, then a user line with
  ``isCompactSummary: true``.
"""

from __future__ import annotations

import json
import lzma
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson

from ctxpatch.errors import TranscriptError  # the one error module (README "Layout")
from engine.tokens import output_estimates, raw_message_tokens, usage_prompt

KNOWN_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "summary",
        "attachment",
    }
)
SYNTHETIC_MODEL = "<synthetic>"  # cli.js Dj1: replies made up by the client carry no real usage


@dataclass(frozen=True)
class Reply:
    """One API response: the assistant lines sharing one ``message.id``."""

    message_id: str
    lines: tuple[int, ...]  # 1-based transcript lines, in order
    usage: dict  # usage of the last line, with ``output_tokens`` made final
    recorded_output: int
    output_tokens: int
    output_estimated: bool  # True when the transcript held the streaming placeholder
    model: str
    sidechain: bool
    # ``output_tokens`` of ``message_start`` (the first line's usage): what cli.js 2.1.8-2.1.29
    # keeps in memory, as it never applies the final usage (``Profile.usage_final_in_memory``)
    start_output: int = 0
    content_estimate: int = 0  # chars/4 of what the model wrote (``output_content_tokens``)
    # the same with thinking at the length the signature says (``signed_output_tokens``), and
    # whether the reply holds a thinking block: what ``_scale_estimates`` scales
    signed_estimate: int = 0
    thinks: bool = False
    # for an estimated output: at most what the next main-chain request's prompt grew by, less
    # the user lines between (``_bound_by_next``); what the count takes (``count_output``)
    output_bound: int | None = None

    @property
    def count_output(self) -> int:
        """The final ``output_tokens`` as the count takes it: the estimate, or the bound the
        next request's prompt puts on it when that is lower (never below chars/4)."""
        if self.output_bound is None or self.output_bound >= self.output_tokens:
            return self.output_tokens
        return max(self.content_estimate, self.output_bound)

    @property
    def count_usage(self) -> dict:
        """``usage`` with :attr:`count_output`: what cli.js keeps in memory and counts."""
        n = self.count_output
        return self.usage if n == self.output_tokens else {**self.usage, "output_tokens": n}

    @property
    def line(self) -> int:
        return self.lines[0]

    @property
    def prompt_tokens(self) -> int:
        return usage_prompt(self.usage)


@dataclass(frozen=True)
class CompactBoundary:
    line: int
    trigger: str
    pre_tokens: int | None


@dataclass(frozen=True)
class Transcript:
    path: str
    records: tuple[dict, ...]  # every parsed line, index i ↔ line i+1
    type_counts: dict[str, int]
    unknown_types: dict[str, int]
    versions: tuple[str, ...]
    models: tuple[str, ...]
    replies: tuple[Reply, ...]  # main chain only (no sidechains, no synthetic)
    boundaries: tuple[CompactBoundary, ...]
    sidechain_lines: int
    reply_of_line: dict[int, int] = field(default_factory=dict)  # line → index in replies
    warnings: tuple[str, ...] = ()  # malformed lines skipped, each named by its line

    @property
    def version(self) -> str | None:
        return self.versions[-1] if self.versions else None

    @property
    def model(self) -> str | None:
        return self.models[-1] if self.models else None


def is_sidechain(rec: dict) -> bool:
    return bool(rec.get("isSidechain"))


def is_message(rec: dict) -> bool:
    return rec.get("type") in ("user", "assistant") and isinstance(rec.get("message"), dict)


def is_compact_boundary(rec: dict) -> bool:
    return rec.get("type") == "system" and rec.get("subtype") == "compact_boundary"


def _read_bytes(path: Path) -> bytes:
    """The file's bytes (decompressed when ``.xz``)."""
    if not path.exists():
        raise TranscriptError(
            f"cannot read {path}", "no such file", "pass the path of a .jsonl session transcript"
        )
    if path.is_dir():
        raise TranscriptError(
            f"cannot read {path}",
            "it is a directory",
            "pass one .jsonl file, e.g. ~/.claude/projects/<dir>/<id>.jsonl",
        )
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TranscriptError(
            f"cannot read {path}", e.strerror or str(e), "check the file's permissions"
        ) from e
    if path.suffix == ".xz":
        try:
            data = lzma.decompress(data)
        except lzma.LZMAError as e:
            raise TranscriptError(
                f"cannot read {path}", f"not a valid .xz file ({e})", "decompress it with xz -d"
            ) from e
    return data


def _lines(data: bytes, path: Path) -> list[str]:
    if b"\x00" in data[:4096]:
        raise TranscriptError(
            f"cannot read {path}", "it is a binary file", "pass a Claude Code JSONL transcript"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise TranscriptError(
            f"cannot read {path}", "invalid UTF-8", "transcripts are UTF-8 JSON lines", line
        ) from e
    return text.splitlines()


_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))  # each digit 0, the rest space


def orjson_reads_exactly(data: bytes) -> bool:
    """Whether orjson parses every line of ``data`` as ``json`` does, or refuses it: it reads an
    integer beyond 64 bits (19+ digits) as a float where ``json`` keeps the integer, so no run
    of 19 digits may occur (in a string it is harmless; then ``json`` parses all, as before)."""
    return b"0" * 19 not in data.translate(_DIGITS)


def _loads(fast: bool) -> Callable[[str], Any]:
    if not fast:
        return json.loads

    def loads(raw: str) -> Any:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            # NaN, Infinity, a lone surrogate, a number past the double range: json's reading
            # (or json's error, with its message)
            return json.loads(raw)

    return loads


def parse_records(
    lines: list[str],
    source: str = "<transcript>",
    skipped: list[str] | None = None,
    fast: bool = False,
) -> list[dict]:
    """Parse JSON lines; blank lines become empty records.

    ``fast``: orjson parses the lines (json where orjson refuses one), the caller having checked
    with :func:`orjson_reads_exactly` that the records come out the same.

    A malformed line (not JSON, or JSON that is not an object) raises with its line number, or,
    when ``skipped`` is a list, becomes an empty record and a warning naming the line is appended
    to it: Claude Code itself skips such lines when it reads a session back (a write cut short,
    a file damaged by hand or by a redaction tool), so a replay goes on without them.
    """
    records: list[dict] = []
    loads = _loads(fast)
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            records.append({})
            continue
        why: str | None = None
        hint, err = "", None  # err: the JSON error that caused a refusal, if any
        try:
            rec = loads(raw)
        except json.JSONDecodeError as e:
            why, hint = f"invalid JSON: {e.msg}", "was the file cut mid-write?"
            err = e
        else:
            if not isinstance(rec, dict):
                why = f"a line holds a JSON {type(rec).__name__}, not an object"
                hint = "each line must be one JSON object"
        if why is None:
            records.append(rec)
            continue
        if skipped is None:
            raise TranscriptError(
                f"malformed transcript {source}",
                why,
                f"each line must be one JSON object ({hint})",
                i,
            ) from err
        skipped.append(f"line {i} skipped: {why} (as Claude Code skips it)")
        records.append({})
    return records


def _make_reply(mid: str, lines: list[int], records: list[dict]) -> Reply:
    """One reply. Each line was written when its content block stopped, with the usage of
    ``message_start`` (``output_tokens`` a streaming placeholder, 1 to ~30); the final usage of
    ``message_delta`` reaches the file only when the write of the last block happened after it.
    So the largest recorded ``output_tokens`` is final only when it is not below the chars/4 of
    what the model wrote (a real final count was >= 1.15x that on 95% of the 1,277 replies of
    the public and spotter sessions whose last line holds a final count, median 1.59x); below
    it, it is the placeholder, and the chars/4 estimate replaces it (a lower bound).
    """
    last = records[lines[-1] - 1]["message"]
    usage = dict(last.get("usage") or {})
    recorded = int(usage.get("output_tokens") or 0)
    start = int((records[lines[0] - 1]["message"].get("usage") or {}).get("output_tokens") or 0)
    out = max(
        int((records[i - 1]["message"].get("usage") or {}).get("output_tokens") or 0) for i in lines
    )
    estimated = False
    blocks = [
        b
        for i in lines
        if isinstance(records[i - 1]["message"].get("content"), list)
        for b in records[i - 1]["message"]["content"]
    ]
    guess, signed = output_estimates(blocks)  # output_content_tokens, signed_output_tokens
    thinks = any(
        isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking") for b in blocks
    )
    if guess > out:
        out, estimated = guess, True
    usage["output_tokens"] = out
    return Reply(
        message_id=mid,
        lines=tuple(lines),
        usage=usage,
        recorded_output=recorded,
        output_tokens=out,
        output_estimated=estimated,
        model=str(last.get("model") or ""),
        sidechain=is_sidechain(records[lines[0] - 1]),
        start_output=start,
        content_estimate=guess,
        signed_estimate=signed,
        thinks=thinks,
    )


OUTPUT_RATIO_MIN_REPLIES = 5  # replies with a final count needed to measure the session's ratio


def output_ratio(replies: list[Reply], thinks: bool | None = None) -> float:
    """Real output tokens per ``signed_estimate`` (chars/4 of what the model wrote, thinking at
    the length its signature says), measured on this session's replies whose file holds the
    final count: the median, 1.0 with fewer than 5 such replies of >= 20 estimated tokens.
    ``thinks`` keeps only the replies with (True) or without (False) a thinking block.

    Model output tokenizes denser than chars/4 (code, JSON-escaped tool input) at a density
    only Claude's tokenizer knows, so one session's own replies say more about its last reply
    than a constant. Leave-one-out over the 1,799 final replies of the 31 public and 5 spotter
    sessions (``scripts/output_estimate_error.py``), median error 20.4% -> 10.6% against one
    ratio over the shown text (thinking replies 18.8% -> 8.2%, token-weighted 20.7% -> 8.4%;
    the others 26.9% -> 26.9%, token-weighted 31.2% -> 26.1%).
    """
    ratios = sorted(
        r.output_tokens / r.signed_estimate
        for r in replies
        if not r.output_estimated
        and r.signed_estimate >= 20
        and (thinks is None or r.thinks == thinks)
    )
    if len(ratios) < OUTPUT_RATIO_MIN_REPLIES:
        return 1.0
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2


def thinking_ratio(replies: list[Reply]) -> float:
    """The ratio a reply with thinking is scaled by: that of the session's replies with thinking
    (mostly prose, whose length the signature gives), or of all when it has fewer than 5.

    Replies without thinking take the ratio of all: theirs alone is the median of many small
    tool calls whose fixed framing cost inflates it (2-5x on opus 4.6), which overshoots the
    large replies that weigh in the count (token-weighted error 33.6% with their own ratio,
    26.1% with all)."""
    own = [r for r in replies if r.thinks and not r.output_estimated and r.signed_estimate >= 20]
    if len(own) >= OUTPUT_RATIO_MIN_REPLIES:
        return output_ratio(replies, thinks=True)
    return output_ratio(replies)


def _scale_estimates(replies: list[Reply]) -> tuple[Reply, ...]:
    """Estimated outputs (placeholders replaced) at the session's measured ratio
    (``thinking_ratio`` for a reply with thinking, ``output_ratio`` otherwise), never below the
    chars/4 lower bound."""
    ratios = {False: max(1.0, output_ratio(replies)), True: max(1.0, thinking_ratio(replies))}
    out = []
    for r in replies:
        if r.output_estimated:
            n = max(r.output_tokens, round(r.signed_estimate * ratios[r.thinks]))
            r = replace(r, output_tokens=n, usage={**r.usage, "output_tokens": n})
        out.append(r)
    return tuple(out)


def _bound_by_next(replies: tuple[Reply, ...], records: list[dict]) -> tuple[Reply, ...]:
    """Bound each estimated output (a streaming placeholder in the transcript) by the next
    main-chain request: its prompt holds this reply's content as input, so the reply's output
    is at most the growth of the prompt, less the user lines between (their block estimate,
    chars/4, low for code and logs: the bound errs high). Not bounded: a reply with thinking
    followed by a new turn (the API may leave earlier turns' thinking out of the prompt; in the
    tool loop of one turn it keeps it), another model next, or anything but user lines between
    (a compaction boundary, another reply). The session ratio (``_scale_estimates``) misses
    most on large tool inputs (a Write of 10K characters of code: 4,660 estimated, at most
    3,380 by the next prompt in ``entireio/cli ca8cc13b``), enough to cross the threshold a
    request early."""
    out = list(replies)
    main = [k for k, r in enumerate(replies) if not r.sidechain]
    for a, b in pairwise(main):
        r, n = replies[a], replies[b]
        if not r.output_estimated or r.model != n.model:
            continue
        between = records[r.lines[-1] : n.lines[0] - 1]
        if any(rec and rec.get("type") not in _BETWEEN_TYPES for rec in between):
            continue
        users = [
            rec for rec in between if rec and rec.get("type") == "user" and not is_sidechain(rec)
        ]
        if r.thinks and not all(map(_tool_results_only, users)):
            continue  # a new turn: the API may leave the reply's thinking out of the next prompt
        grew = usage_prompt(n.usage) - usage_prompt(r.usage)
        out[a] = replace(r, output_bound=grew - sum(map(raw_message_tokens, users)))
    return tuple(out)


_BETWEEN_TYPES = frozenset({"user", "progress", "file-history-snapshot", "attachment"})


def _tool_results_only(rec: dict) -> bool:
    """A user line that only answers tool uses (the tool loop of the same turn goes on)."""
    content = (rec.get("message") or {}).get("content")
    return isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def build_transcript(
    records: list[dict], path: str = "<transcript>", warnings: tuple[str, ...] = ()
) -> Transcript:
    """Index parsed records: replies by ``message.id``, compact boundaries, counts."""
    type_counts: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    versions: list[str] = []
    models: list[str] = []
    groups: dict[str, list[int]] = {}
    order: list[str] = []
    boundaries: list[CompactBoundary] = []
    side = 0
    for i, rec in enumerate(records, 1):
        if not rec:
            continue
        t = rec.get("type")
        if not isinstance(t, str):
            unknown["<no type>"] += 1
            continue
        type_counts[t] += 1
        if t not in KNOWN_TYPES:
            unknown[t] += 1
        v = rec.get("version")
        if isinstance(v, str) and (not versions or versions[-1] != v):
            versions.append(v)
        if is_sidechain(rec):
            side += 1
            continue
        if is_compact_boundary(rec):
            meta = rec.get("compactMetadata") or {}
            pre = meta.get("preTokens")
            boundaries.append(
                CompactBoundary(
                    line=i,
                    trigger=str(meta.get("trigger") or "?"),
                    pre_tokens=int(pre) if pre is not None else None,
                )
            )
        if t == "assistant" and isinstance(rec.get("message"), dict):
            msg = rec["message"]
            model = msg.get("model")
            if model == SYNTHETIC_MODEL or "usage" not in msg:
                continue
            if isinstance(model, str) and (not models or models[-1] != model):
                models.append(model)
            mid = str(msg.get("id") or rec.get("uuid") or f"line-{i}")
            if mid not in groups:
                groups[mid] = []
                order.append(mid)
            groups[mid].append(i)
    replies = _scale_estimates([_make_reply(mid, groups[mid], records) for mid in order])
    replies = _bound_by_next(replies, records)
    reply_of_line = {ln: k for k, r in enumerate(replies) for ln in r.lines}
    return Transcript(
        path=path,
        records=tuple(records),
        type_counts=dict(type_counts),
        unknown_types=dict(unknown),
        versions=tuple(dict.fromkeys(versions)),
        models=tuple(dict.fromkeys(models)),
        replies=replies,
        boundaries=tuple(boundaries),
        sidechain_lines=side,
        reply_of_line=reply_of_line,
        warnings=tuple(warnings),
    )


def load_transcript(path: str | Path) -> Transcript:
    """Read and index a transcript file (``.jsonl``, or ``.jsonl.xz``).

    Malformed lines are skipped with a warning naming each (``Transcript.warnings``); a file with
    no usable record raises ``TranscriptError``.
    """
    p = Path(path)
    data = _read_bytes(p)
    lines = _lines(data, p)
    skipped: list[str] = []
    records = parse_records(lines, str(p), skipped, fast=orjson_reads_exactly(data))
    if not any(records):
        why = (
            f"none of its {len(skipped)} non-blank line(s) is a JSON object ({skipped[0]})"
            if skipped
            else "it holds no records"
        )
        raise TranscriptError(
            f"empty transcript {p}",
            why,
            "pass a Claude Code session (~/.claude/projects/<dir>/<id>.jsonl) with at least one "
            "message",
        )
    return build_transcript(records, str(p), tuple(skipped))
