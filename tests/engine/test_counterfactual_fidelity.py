"""The counterfactual (unpatched) replay against what sessions really sent (#8).

Synthetic sessions, each built the way the API and Claude Code behave, where the replay must
reproduce every recorded prompt and compact only where the session did (each fails without its
fix: the replay then overshoots and compacts where the session did not); then the per-model
rule of ``engine.api.previous_thinking``; then every shared real session (``../shared``, read in
place like the golden tests): the unpatched replay compacts at each real auto-compaction's line
with the count within 1% of ``preTokens``, and nowhere else.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

import pytest
from shared_data import PUBLIC

from engine.api.previous_thinking import (
    main_model,
    model_strips_by_default,
    sends_keep_all,
    starts_turn,
    strips_previous_thinking,
    thinking_share,
)
from engine.profiles import profile_for
from engine.replay.calibration import calibrate, full_estimate
from engine.replay.recorded import LINE_KEY, memory_records
from engine.replay.session import simulate
from engine.tokens import thinking_chars
from engine.transcript import build_transcript, is_compact_boundary, load_transcript

from .conftest import need_shared, spotter_sessions

SONNET = "claude-sonnet-4-5-20250929"
OPUS45 = "claude-opus-4-5-20251101"
OPUS46 = "claude-opus-4-6"
OVERHEAD = 20_000


class Session:
    """Records with the usage the API would report: each request's prompt is ``OVERHEAD`` (+
    ``carried``) plus the chars/4 of every record it counts, + ``unwritten`` tokens Claude Code
    held in memory but never wrote."""

    def __init__(self, model: str, version: str, strip: bool = False, carried: int = 0):
        self.model, self.version, self.strip = model, version, strip
        self.recs: list[dict] = []
        self.counted: list[tuple[int, bool]] = []  # (tokens, is thinking) since the boundary
        self.fixed = OVERHEAD + carried
        self.unwritten = 0
        self.replies = 0
        self.post_cache_read: int | None = None  # the first request after a compaction reads
        # only the system prompt and tools from the cache

    def _add(self, rec: dict) -> dict:
        rec = {"version": self.version, "sessionId": "s", "uuid": f"u{len(self.recs)}", **rec}
        self.recs.append(rec)
        return rec

    def prompt(self) -> int:
        return self.fixed + self.unwritten + sum(t for t, _ in self.counted)

    def human(self, text: str) -> None:
        rec = self._add({"type": "user", "message": {"role": "user", "content": text}})
        if self.strip:  # the API leaves out every earlier turn's thinking from here on
            self.counted = [(t, th) for t, th in self.counted if not th]
        self.counted.append((full_estimate(rec), False))

    def reply(self, blocks: list[dict], model: str | None = None) -> None:
        """One API response (a record per block) with the prompt the API counted."""
        self.replies += 1
        prompt = self.prompt()
        read = prompt - 1 if self.post_cache_read is None else self.post_cache_read
        self.post_cache_read = None
        usage = {
            "input_tokens": 1,
            "cache_creation_input_tokens": prompt - 1 - read,
            "cache_read_input_tokens": read,
            "output_tokens": 50,
        }
        for b in blocks:
            rec = self._add(
                {
                    "type": "assistant",
                    "message": {
                        "id": f"m{self.replies}",
                        "role": "assistant",
                        "model": model or self.model,
                        "content": [b],
                        "usage": usage,
                    },
                }
            )
            self.counted.append((full_estimate(rec), b["type"] == "thinking"))

    def tool_result(self, tid: str, chars: int) -> None:
        res = {"type": "tool_result", "tool_use_id": tid, "content": "r" * chars}
        rec = self._add({"type": "user", "message": {"role": "user", "content": [res]}})
        self.counted.append((full_estimate(rec), False))

    def compaction(self, trigger: str, summary: str, cache_read: int) -> None:
        pre = self.prompt()
        self._add(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "compactMetadata": {"trigger": trigger, "preTokens": pre},
            }
        )
        rec = self._add(
            {
                "type": "user",
                "isCompactSummary": True,
                "message": {"role": "user", "content": summary},
            }
        )
        self.fixed, self.unwritten = OVERHEAD, 0  # carried history and unwritten ones: gone
        self.counted = [(full_estimate(rec), False)]
        self.post_cache_read = cache_read

    def resume(self) -> None:
        """``/exit``, then ``claude --continue``: what was never written is not reloaded."""
        self.human("<command-name>/exit</command-name>\n<command-message>exit</command-message>")
        self.unwritten = 0
        text = {"type": "text", "text": "No response requested."}
        self.replies += 1
        self._add(
            {
                "type": "assistant",
                "message": {
                    "id": f"m{self.replies}",
                    "role": "assistant",
                    "model": "<synthetic>",
                    "content": [text],
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            }
        )

    def turn(self, n: int, think: int, result: int, rounds: int = 1, unwritten: int = 0) -> None:
        """A human prompt, ``rounds`` tool rounds (thinking + tool_use, then the result), and a
        closing reply (thinking + text); ``unwritten`` tokens join the prompt at each request."""
        self.human(f"prompt {n}: please go on with the next part of the work")
        for r in range(rounds):
            self.unwritten += unwritten
            tid = f"t{n}_{r}"
            use = {"type": "tool_use", "id": tid, "name": "Read", "input": {"path": f"/f{n}"}}
            self.reply([{"type": "thinking", "thinking": "h" * think, "signature": "s"}, use])
            self.tool_result(tid, result)
        self.unwritten += unwritten
        self.reply(
            [
                {"type": "thinking", "thinking": "h" * think, "signature": "s"},
                {"type": "text", "text": f"done with part {n}"},
            ]
        )

    def transcript(self):
        return build_transcript(self.recs)


def _replays(s: Session):
    tr = s.transcript()
    prof = profile_for(s.version)
    return tr, simulate(tr, prof, "recorded"), simulate(tr, prof, "unpatched")


def _auto(sim) -> list[int]:
    return [e.line for e in sim.events if e.kind == "auto_compact"]


def _prompts(sim) -> list[int]:
    return [r.prompt_tokens for r in sim.requests]


# --- previous-turn thinking -----------------------------------------------------------------


def _thinking_session(model: str, version: str, strip: bool, turns: int = 12) -> Session:
    s = Session(model, version, strip=strip)
    for n in range(turns):  # 8,000 tokens of thinking per reply, 4,000 per tool result
        s.turn(n, think=32_000, result=16_000)
    return s


def test_sonnet_4_5_replay_leaves_out_earlier_turns_thinking():
    """Without the rule the replay keeps every turn's thinking (16,000 tokens a turn): it
    reaches the threshold at the 8th turn, where the session stayed under 100,000."""
    s = _thinking_session(SONNET, "2.1.17", strip=True)
    tr, rec, rep = _replays(s)
    assert max(_prompts(rec)) < 100_000
    assert _auto(rep) == [] and _auto(rec) == []
    assert _prompts(rep) == _prompts(rec)
    assert calibrate(tr, profile_for("2.1.17")).strips_thinking


@pytest.mark.parametrize(
    ("model", "version"),
    [(OPUS45, "2.1.7"), (OPUS46, "2.1.39"), (SONNET, "2.1.84"), (SONNET, "2.1.112")],
)
def test_models_and_versions_that_keep_thinking_replay_it(model, version):
    """Opus 4.5+ keeps earlier thinking by default; from 2.1.84 Claude Code sends
    ``clear_thinking_20251015`` keep all, so a Sonnet 4.5 session keeps it too."""
    s = _thinking_session(model, version, strip=False, turns=6)
    tr, rec, rep = _replays(s)
    assert not calibrate(tr, profile_for(version)).strips_thinking
    assert 100_000 < max(_prompts(rec)) < 150_000
    assert _prompts(rep) == _prompts(rec)
    assert _auto(rep) == _auto(rec) == []


def test_a_session_is_ruled_by_the_model_of_most_of_its_replies():
    """An opus-4-5 session whose last reply came from sonnet-4-5 (entireio/cli/4e836284: 152
    and 1) keeps its thinking: the rule is the main model's, not the last one's."""
    s = _thinking_session(OPUS45, "2.1.4", strip=False, turns=6)
    s.human("one more question")
    s.reply([{"type": "text", "text": "answered by another model"}], model=SONNET)
    tr, rec, rep = _replays(s)
    assert tr.model == SONNET and main_model(r.model for r in tr.replies) == OPUS45
    assert not calibrate(tr, profile_for("2.1.4")).strips_thinking
    assert _prompts(rep) == _prompts(rec)
    assert main_model([]) == "" and main_model(["a", "b", "b", "a"]) == "a"


def test_the_per_model_rule():
    for model in (SONNET, "claude-sonnet-4-20250514", "claude-haiku-4-5-20251001"):
        assert model_strips_by_default(model), model
    for model in ("claude-opus-4-1-20250805", "claude-opus-4-20250514", "claude-3-7-sonnet"):
        assert model_strips_by_default(model), model
    for model in (OPUS45, OPUS46, "claude-sonnet-4-6", "claude-opus-5", "claude-sonnet-5"):
        assert not model_strips_by_default(model), model
    assert not model_strips_by_default("<synthetic>")
    assert not sends_keep_all("2.1.83") and sends_keep_all("2.1.84") and sends_keep_all("2.1.330")
    assert not sends_keep_all(None) and not sends_keep_all("nonsense")
    assert strips_previous_thinking(SONNET, "2.1.17")
    assert not strips_previous_thinking(SONNET, "2.1.112")
    assert not strips_previous_thinking(OPUS45, "2.1.7")


def test_record_helpers():
    think = {"type": "assistant", "message": {"content": [{"type": "thinking", "thinking": "x"}]}}
    text = {"type": "assistant", "message": {"content": [{"type": "text", "text": "x"}]}}
    assert thinking_share(think) == 1.0 and thinking_share(text) == 0.0
    result = {"type": "tool_result", "tool_use_id": "t", "content": "r"}
    assert starts_turn({"type": "user", "message": {"content": "hello"}})
    assert not starts_turn({"type": "user", "message": {"content": [result]}})
    assert not starts_turn({"type": "user", "isMeta": True, "message": {"content": "reminder"}})
    assert not starts_turn({"type": "user", "isCompactSummary": True, "message": {"content": "s"}})


# --- a resumed process ------------------------------------------------------------------------


def test_a_resumed_process_drops_what_it_never_wrote():
    """Claude Code held 3,000 unwritten tokens per request (attachments, up to 2.1.96) that a
    resumed process does not reload: the recorded prompt drops by all of them at the resume.
    Without modelling it the replay stays 81,000 tokens high and compacts where the session
    did not."""
    s = Session(OPUS45, "2.1.7")
    for n in range(9):
        s.turn(n, think=2_000, result=8_000, rounds=2, unwritten=3_000)
    before = s.prompt()
    s.resume()
    for n in range(9, 13):
        s.turn(n, think=2_000, result=8_000, rounds=2)
    tr, rec, rep = _replays(s)
    assert max(_prompts(rec)) < 155_000 < _prompts(rec)[-1] + 81_000 and before < 155_000
    assert _auto(rep) == _auto(rec) == []
    assert _prompts(rep) == _prompts(rec)
    cal = calibrate(tr, profile_for("2.1.7"))
    assert len(cal.resumes) == 1 and 0 < cal.resumes[0].factor < 1


# --- history the file does not hold, and compactions ------------------------------------------


def test_history_carried_into_the_file_goes_at_the_compaction():
    """The file starts mid-conversation: its first prompt holds 90,000 tokens of history it
    does not have. After the real compaction the replay drops them (before: it kept them as
    fixed overhead, 90,000 tokens high, and compacted again at once)."""
    s = Session(OPUS45, "2.1.7", carried=90_000)
    n = 0
    while s.prompt() < 130_000:
        s.turn(n, think=2_000, result=20_000, rounds=2)
        n += 1
    s.human("and now the tests")
    s.reply([{"type": "tool_use", "id": "big", "name": "Read", "input": {"path": "/big"}}])
    s.tool_result("big", 100_000)  # 25,000 tokens: the next count passes 155,000
    assert s.prompt() > 155_000
    s.compaction("auto", "Summary: " + "the work so far. " * 1_500, cache_read=OVERHEAD - 2_000)
    for k in range(n, n + 5):
        s.turn(k, think=2_000, result=20_000, rounds=2)
    tr, rec, rep = _replays(s)
    boundary = tr.boundaries[0].line
    assert _auto(rec) == [boundary] and _auto(rep) == [boundary]
    assert _prompts(rep) == _prompts(rec)
    cal = calibrate(tr, profile_for("2.1.7"))
    assert cal.overhead == OVERHEAD and cal.carried == 90_000
    # the carried history is a fixed prefix: read from the cache, not written on every request
    before = [r for r in rep.requests if r.line < boundary]
    assert all(r.cache_read >= OVERHEAD + 90_000 for r in before[1:])


def test_a_manual_compaction_is_replayed_where_the_user_typed_it():
    """/compact is the user's input: the replay compacts there with the real summary (before:
    it ignored the boundary, kept growing and auto-compacted where the session never did)."""
    s = Session(OPUS46, "2.1.39")
    for n in range(5):
        s.turn(n, think=2_000, result=20_000, rounds=2)
    before = s.prompt()
    s.compaction("manual", "Summary: " + "the work so far. " * 1_000, cache_read=OVERHEAD)
    after = s.prompt()
    for n in range(5, 14):
        s.turn(n, think=2_000, result=20_000, rounds=2)
    tr, rec, rep = _replays(s)
    # without the compaction the context would pass the 167,000 threshold (2.1.39, opus-4-6)
    assert max(_prompts(rec)) < 167_000 < before + s.prompt() - after
    boundary = tr.boundaries[0].line
    manual = [e for e in rep.events if e.kind == "manual_compact"]
    assert [e.line for e in manual] == [boundary] and manual[0].predicted
    assert _auto(rep) == [] and _auto(rec) == []
    assert _prompts(rep) == _prompts(rec)


# --- the real sessions ------------------------------------------------------------------------

UNRECOVERABLE = {
    # line 175: cli.js counted an attachment 2.1.33 never wrote (test_golden_public's
    # MISSING_ATTACHMENT); the replay, lacking its ~495 tokens, compacts 13 lines later
    "entireio__cli__1a289c77-a9da-491d-954a-2df7f0dd6a17.jsonl.xz": ([175], [188]),
}
# The newly shared sessions whose boundary the recorded check misses because cli.js counted a
# message it never wrote (test_golden_public's UNWRITTEN, UNWRITTEN_TOOL_RESULT): (real, replayed)
# as measured; strict, so a fix that moves one fails until it is removed here.
NOT_IN_THE_FILE = {
    "FSM1__cipher-box__f585e6e9-7dc1-4135-a4dc-9021adb21c96.jsonl.xz": ([753, 968], [764]),
    "FSM1__cipher-box__fcdd6c6f-e3f3-4f79-9cc3-98345b993339.jsonl.xz": ([340], [540]),
    "Safecast__safecast-map-MCP__0852daa6-239f-424e-bdd6-79521b1cbc88.jsonl.xz": ([1486], [1526]),
    "entireio__cli__4b3ddf27-d7f7-4773-b4f2-b94b999c661d.jsonl.xz": ([530], [548]),
    "entireio__cli__9d7a9d52-7eb4-427d-847d-ee5451884f3d.jsonl.xz": ([383, 817], [407, 840]),
    "entireio__cli__a0927dd5-61a3-4802-a716-4480286f16d4.jsonl.xz": ([631], [660]),
    # the placeholder output before the boundary (test_golden_public's PLACEHOLDER_AT_BOUNDARY):
    # the count at 366 is 10 under the threshold, so the replay compacts at the next request
    "entireio__cli__ca8cc13b-d3df-4615-8f3f-f48a96b1a6f9.jsonl.xz": ([366], [377]),
}
UNRECOVERABLE.update(NOT_IN_THE_FILE)


def _shared_paths() -> list[Path]:
    public = sorted(PUBLIC.glob("*.jsonl.xz")) if PUBLIC.is_dir() else []
    return spotter_sessions() + public


@pytest.mark.parametrize("path", _shared_paths(), ids=lambda p: p.name[:60])
def test_unpatched_replay_compacts_where_each_real_session_did(path):
    tr = load_transcript(need_shared(path))
    prof = profile_for(tr.version or "2.1.39")
    rep = simulate(tr, prof, "unpatched")
    real = {b.line: b.pre_tokens for b in tr.boundaries if b.trigger == "auto"}
    replayed = {e.line: e.tokens for e in rep.events if e.kind == "auto_compact"}
    if path.name in UNRECOVERABLE:
        assert (sorted(real), sorted(replayed)) == UNRECOVERABLE[path.name]
        return
    assert sorted(replayed) == sorted(real)
    for line, pre in real.items():
        assert pre and abs(replayed[line] - pre) <= pre / 100, (line, replayed[line], pre)
    manual = sorted(b.line for b in tr.boundaries if b.trigger != "auto")
    assert sorted(e.line for e in rep.events if e.kind == "manual_compact") == manual


def test_shared_sessions_are_there():
    """Guards the parametrisation above: 5 spotter and 39 public sessions."""
    need_shared(PUBLIC / "MANIFEST.json")
    assert len(_shared_paths()) == 44


def _drops_per_model() -> dict[str, list[float]]:
    """At each human prompt whose new messages (at the session's ratio) are under half the
    thinking of the turn just ended: (that thinking - what the prompt really grew by beyond the
    new messages) / that thinking, thinking at its signature length."""
    out: dict[str, list[float]] = defaultdict(list)
    for path in _shared_paths():
        tr = load_transcript(path)
        prof = profile_for(tr.version or "2.1.39")
        ratio = calibrate(tr, prof).ratio
        pending: list[dict] = []
        prev = None
        ended = current = 0
        for rec in memory_records(tr, prof):
            if is_compact_boundary(rec):
                pending, prev, ended, current = [], None, 0, 0
                continue
            k = tr.reply_of_line.get(rec[LINE_KEY])
            if k is not None and tr.replies[k].line == rec[LINE_KEY]:
                reply = tr.replies[k]
                new = ratio * sum(full_estimate(m) for m in pending)
                human = any(starts_turn(m) for m in pending)
                if prev is not None and human and ended > 300 and new < ended / 2:
                    out[reply.model].append((new - (reply.prompt_tokens - prev)) / ended)
                pending, prev = [], reply.prompt_tokens
            if starts_turn(rec):
                ended, current = current, 0
            if rec.get("type") == "assistant":
                c = (rec.get("message") or {}).get("content") or []
                current += sum(
                    thinking_chars(b) // 4 for b in c if isinstance(b, dict) and "thinking" in b
                )
            pending.append(rec)
    return out


def test_the_measured_drop_at_a_human_prompt_agrees_with_the_per_model_rule():
    """The evidence of ``engine.api.previous_thinking``, re-measured: on sonnet-4-5 the prompt
    drops by most of the thinking of the turn just ended, on the opus models by none of it."""
    need_shared(PUBLIC / "MANIFEST.json")
    drops = _drops_per_model()
    assert {m for m in drops if len(drops[m]) >= 5} >= {SONNET, OPUS45, OPUS46}
    for model, values in drops.items():
        if len(values) < 5:
            continue
        median = statistics.median(values)
        if model_strips_by_default(model):
            assert 0.5 < median < 1.0, (model, median, len(values))
        else:
            assert abs(median) < 0.15, (model, median, len(values))
