"""The text prune kept across requests (engine.twins.textprune_incremental) against its
specification (engine.twins.textprune.prune_detailed over the whole list on every request):
every request of generated request sequences (lists that grow, are cut, have a message replaced,
start again, or come back pruned) gives an equal outcome, with the input's own messages shared
as the specification shares them; the replays of real sessions give the specification's outcome
on every request and identical Simulations."""

from __future__ import annotations

import copy
import operator
from collections import Counter
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from msgs import MAX_EXAMPLES, assistant, properties, text, user

import engine.twins.textprune_incremental as incremental_mod
from engine.profiles import profile_for
from engine.replay.session import simulate
from engine.transcript import load_transcript
from engine.twins.textprune import PruneOutcome, prune_detailed
from engine.twins.textprune_incremental import IncrementalPrune

from .conftest import PUBLIC, need_shared

LONG = "0123456789abcdefghij" * 2
EAGER = {
    "CLAUDE_TEXT_PRUNE_KEEP": "1",
    "CLAUDE_TEXT_PRUNE_STEP": "1",
    "CLAUDE_TEXT_PRUNE_THRESHOLD": "0",
    "CLAUDE_TEXT_PRUNE_MAX_CHARS": "10",
}


def assert_same(got: PruneOutcome, want: PruneOutcome, messages: list[Any]) -> None:
    """Equal outcomes (every field; the messages by value), the input itself returned alike,
    and every message of the input handed on as the same object."""
    assert got == want
    assert (got.messages is messages) == (want.messages is messages)
    inputs = {id(m) for m in messages}
    for a, b in zip(got.messages, want.messages, strict=True):
        if id(a) in inputs or id(b) in inputs:
            assert a is b


# --------------------------------------------------------------------------- generated requests

bodies = st.sampled_from([LONG, "short", LONG * 3 + "\n" + LONG, "😀" * 30])
odd_messages = st.sampled_from(
    [
        None,
        "loose",
        {"type": "user"},
        {"type": "assistant", "message": "text"},
        {"type": "system", "message": {"content": LONG}},
        {"type": "user", "message": {"content": []}},
    ]
)


@st.composite
def histories(draw: st.DrawFn) -> list[Any]:
    """A Claude Code history: typed prompts (some meta, some compact summaries), replies stored
    one record per block sharing ``message.id`` (some without one, some reusing an earlier
    reply's), thinking in some replies, tool rounds, a few malformed records."""
    out: list[Any] = []
    serial = 0

    def reply(blocks: list[dict[str, Any]]) -> None:
        nonlocal serial
        serial += 1
        mid = draw(st.sampled_from([f"msg_{serial}"] * 6 + [None, f"msg_{max(1, serial - 2)}"]))
        for block in blocks:
            out.append(assistant([block]))
            if mid is not None:
                out[-1]["message"]["id"] = mid

    def thinking() -> list[dict[str, Any]]:
        kind = draw(st.sampled_from([None, None, "thinking", "thinking", "redacted_thinking"]))
        if kind is None:
            return []
        return [{"type": kind, "thinking": "hmm", "signature": "sig"}]

    for _ in range(draw(st.integers(1, 14))):
        body = draw(bodies)
        out.append(user(draw(st.sampled_from([body, [text(body)]]))))
        extra = draw(st.sampled_from([None] * 5 + ["meta", "summary", "odd"]))
        if extra == "meta":
            out.append(user(LONG, isMeta=True))
        elif extra == "summary":
            out.append(user(LONG, isCompactSummary=True))
        elif extra == "odd":
            out.append(draw(odd_messages))
        for r in range(draw(st.integers(0, 3))):
            tid = f"toolu_{serial}_{r}"
            use = {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": LONG}}
            reply([*thinking(), text(draw(bodies)), use])
            result: list[Any] = [{"type": "tool_result", "tool_use_id": tid, "content": LONG}]
            if draw(st.integers(0, 9)) == 0:
                result.append(text("and also " + LONG))  # a typed line joins a tool result
            out.append(user(result))
        reply([*thinking(), text(draw(bodies))])
    return out


operations = st.lists(
    st.one_of(
        st.tuples(st.just("grow"), st.integers(1, 8)),
        st.tuples(st.just("grow"), st.integers(1, 3)),
        st.tuples(st.just("same"), st.just(0)),
        st.tuples(st.just("cut"), st.integers(0, 60)),
        st.tuples(st.just("copy"), st.integers(0, 60)),
        st.tuples(st.just("edit"), st.integers(0, 60)),
        st.tuples(st.just("restart"), st.integers(0, 60)),
        st.tuples(st.just("feed"), st.integers(1, 4)),
    ),
    min_size=1,
    max_size=30,
)
knobs = st.fixed_dictionaries(
    {
        "CLAUDE_TEXT_PRUNE_KEEP": st.sampled_from(["1", "1", "2", "3"]),
        "CLAUDE_TEXT_PRUNE_STEP": st.sampled_from(["1", "1", "2", "3"]),
        "CLAUDE_TEXT_PRUNE_THRESHOLD": st.sampled_from(["0", "0", "50", "150", "400"]),
        "CLAUDE_TEXT_PRUNE_MAX_CHARS": st.sampled_from(["5", "10", "80"]),
        "CLAUDE_TEXT_PRUNE_THINKING": st.sampled_from(["drop"] * 5 + ["ignore"]),
        "CLAUDE_TEXT_PRUNE_DISABLE": st.sampled_from(["0"] * 19 + ["1"]),
    }
)


def requests(pool: list[Any], ops: list[tuple[str, int]], feedback: list[list[Any]]) -> Any:
    """The lists sent, one per operation: ``pool`` taken in order ("grow"), sent again, cut,
    one message replaced by an equal copy or by an edited one (a micro-compaction), a list
    starting again further on (a compaction), the previous result plus new messages (what the
    query loop feeds back; ``feedback[-1]`` is the previous result)."""
    sent: list[Any] = []
    taken = 0
    for op, arg in ops:
        if op in ("grow", "feed"):
            base = feedback[-1] if op == "feed" and feedback else sent
            sent = [*base, *pool[taken : taken + arg]]
            taken = min(len(pool), taken + arg)
        elif op == "cut":
            sent = sent[: min(arg, len(sent))]
        elif op in ("copy", "edit") and sent:
            i = arg % len(sent)
            new = copy.deepcopy(sent[i])
            if op == "edit" and isinstance(new, dict) and isinstance(new.get("message"), dict):
                new["message"]["content"] = "[cleared]"
            sent = [*sent[:i], new, *sent[i + 1 :]]
        elif op == "restart":
            taken = min(len(pool), arg)
            sent = [user("summary " + LONG, isCompactSummary=True), *pool[taken : taken + 20]]
            taken = min(len(pool), taken + 20)
        else:
            sent = list(sent)
        yield sent


def test_property_every_request_as_the_specification() -> None:
    seen: Counter[str] = Counter()

    @properties(health=(HealthCheck.too_slow, HealthCheck.data_too_large))
    @given(histories(), st.integers(0, 60), operations, knobs)
    def run(pool: list[Any], start: int, ops: list[tuple[str, int]], env: dict[str, str]) -> None:
        pruner = IncrementalPrune(env)
        feedback: list[list[Any]] = []
        previous = None
        # every list handed out with its entries then: later requests only append to it
        handed: list[tuple[list[Any], list[Any]]] = []
        for sent in requests(pool, [("grow", start), *ops], feedback):
            got = pruner.prune_detailed(sent)
            want = prune_detailed(sent, env)
            assert_same(got, want, sent)
            for out, then in handed:
                assert len(out) >= len(then)
                assert all(map(operator.is_, out, then))
            handed.append((got.messages, list(got.messages)))
            feedback.append(list(got.messages))
            seen[got.reason] += 1
            seen["dropped"] += got.thinking_dropped > 0
            seen["removed"] += got.messages_removed > 0
            if previous is not None and previous.changed and got.changed:
                seen["pruned twice"] += 1
            previous = got

    run()
    # the cases that matter were generated
    for reason in ("pruned", "few-turns", "nothing-to-prune", "below-threshold", "disabled"):
        assert seen[reason] > 0, seen
    assert seen["dropped"] > 0.5 * MAX_EXAMPLES and seen["removed"] > 0.5 * MAX_EXAMPLES, seen
    assert seen["pruned twice"] > 0.5 * MAX_EXAMPLES, seen


def test_a_list_that_only_grows_continues_the_previous_result() -> None:
    pool = []
    for i in range(12):
        pool += [user(f"{i} {LONG}"), assistant([{"type": "thinking", "thinking": "t"}])]
        pool[-1]["message"]["id"] = f"msg_{i}"
        pool.append(assistant([text(LONG)]))
        pool[-1]["message"]["id"] = f"msg_{i}"
    pruner = IncrementalPrune(EAGER)
    before = None
    before_messages: list[Any] = []  # the previous result's entries when it was handed out
    grown = 0
    for k in range(1, len(pool) + 1):
        got = pruner.prune_detailed(pool[:k])
        assert_same(got, prune_detailed(pool[:k], EAGER), pool[:k])
        if before is not None and before.edit_end == got.edit_end and got.changed:
            # nothing before the new message changed: the previous result, then the new one,
            # in the list handed out last time (grown, not copied)
            assert got.messages[:-1] == before_messages
            assert got.messages is before.messages
            grown += 1
        before, before_messages = got, list(got.messages)
    assert before is not None and before.thinking_dropped > 0
    assert grown > 0


@pytest.mark.parametrize("turns", [2, 8])
def test_an_exception_answers_as_the_specification(turns: int) -> None:
    """The estimate of the odd block raises (a key that is not a string): the specification computes it only when some
    message would be shortened (then "error"); the state is emptied and the answer is the
    specification's either way."""
    messages: list[Any] = []
    for i in range(turns):
        messages += [user(f"{i} {LONG}"), assistant([text(LONG)])]
    messages.append(assistant([{"type": "mystery", 1: "a key JSON cannot hold"}]))
    env = {**EAGER, "CLAUDE_TEXT_PRUNE_KEEP": "4", "CLAUDE_TEXT_PRUNE_THRESHOLD": "1"}
    pruner = IncrementalPrune(env)
    for _ in range(2):
        got, want = pruner.prune_detailed(messages), prune_detailed(messages, env)
        assert_same(got, want, messages)
    assert want.reason == ("few-turns" if turns == 2 else "error")


# --------------------------------------------------------------------------- real sessions


class Checked(IncrementalPrune):
    """The incremental prune, compared with the specification on every request."""

    outcomes: ClassVar[Counter[str]] = Counter()

    def __init__(self, env: dict[str, str] | None = None) -> None:
        super().__init__(env)
        self.env = env

    def prune_detailed(self, messages: list[Any]) -> PruneOutcome:
        got = super().prune_detailed(messages)
        assert_same(got, prune_detailed(messages, self.env), messages)
        Checked.outcomes[got.reason] += 1
        return got


# public sessions whose replays prune and leave thinking out on hundreds of requests (the third
# below the threshold on 78 of them)
PRUNING = ("JanDeDobbeleer__oh-my-posh__", "Safecast__safecast-map-MCP__", "FSM1__cipher-box__fcdd")


def _sessions() -> list[Any]:
    public = sorted(PUBLIC.glob("*.jsonl.xz"))
    chosen = [next((p for p in public if p.name.startswith(s)), PUBLIC / s) for s in PRUNING]
    return chosen


@pytest.mark.parametrize("scenario", ["text_prune", "patched"])
@pytest.mark.parametrize("path", _sessions(), ids=lambda p: p.name[:40])
def test_real_sessions_replay_as_the_specification(path, scenario, monkeypatch) -> None:
    tr = load_transcript(need_shared(path))
    prof = profile_for(tr.version or "2.1.39")
    Checked.outcomes = Counter()
    for prune_env in ({}, EAGER):
        with monkeypatch.context() as m:
            m.setattr(incremental_mod, "IncrementalPrune", Checked)
            checked = simulate(tr, prof, scenario, prune_env=prune_env)
        assert checked == simulate(tr, prof, scenario, prune_env=prune_env)
    assert Checked.outcomes["pruned"] > 0, Checked.outcomes  # under EAGER at least
