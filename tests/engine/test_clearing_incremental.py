"""The incremental clearing replay (engine.replay.clearing_incremental) against its specification
(engine.server_clearing.clear_on_server, the whole edit recomputed on every request): the same
Simulation, request for request and event for event, on the shared real sessions, a long
synthetic one, and under the knobs that move the edit (step, keep, clear_at_least, inputs,
excluded tools, a tool_uses trigger), under the fixed STEP rule and the paid policy (its
ceiling and patience; history the file does not hold, the policy's ``preceding``)."""

from __future__ import annotations

import json
import operator
import struct
from functools import reduce
from itertools import accumulate
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_data import PUBLIC

from engine.api.server_clearing import clear_on_server
from engine.profiles import profile_for
from engine.replay import counterfactual as replay_mod
from engine.replay.calibration import calibrate
from engine.replay.clearing_incremental import left_sum, rounded_left_sum
from engine.replay.session import simulate
from engine.transcript import build_transcript, load_transcript

from .conftest import need_shared, spotter_sessions


class SpecClearing:
    """The specification behind the incremental class's interface."""

    def __init__(self, edit, estimate, step=1, policy=None):
        self.edit, self.estimate, self.step, self.policy = edit, estimate, step, policy
        self.views = 0

    def view(self, sent, costs, overhead, sums=None):
        # the specification sums the costs itself: the prefix sums the replay passes are not read
        self.views += 1
        return clear_on_server(
            sent, costs, overhead, self.edit, self.estimate, self.step, self.policy
        )

    def sums(self, costs):
        return None  # no prefix sums: the replay sums the view's costs (the specification)


POLICIES = ("fixed", "paid")


def both(tr, scenario, clear_env, monkeypatch, policy="fixed"):
    clear_env = {"CLAUDE_CTX_CLEAR_POLICY": policy, **clear_env}
    prof = profile_for(tr.version or "2.1.39")
    made = []

    def spec(*args, **kwargs):
        made.append(SpecClearing(*args, **kwargs))
        return made[-1]

    with monkeypatch.context() as m:
        m.setattr(replay_mod, "IncrementalClearing", spec)
        old = simulate(tr, prof, scenario, clear_env=clear_env)
    # the replay went through the class (the specification behind it), for either policy
    assert made and made[0].views and (made[0].policy is not None) == (policy == "paid")
    new = simulate(tr, prof, scenario, clear_env=clear_env)
    return old, new


def assert_same(old, new):
    assert new.requests == old.requests
    assert new.events == old.events
    assert any(e.kind == "server_clear" for e in new.events)  # the clearing did run


def _shared():
    public = sorted(PUBLIC.glob("*.jsonl.xz")) if PUBLIC.is_dir() else []
    spotter = [p for p in spotter_sessions() if p.stat().st_size > 500_000]
    # two in the fast suite, every one in the slow one (the specification is quadratic)
    return [
        pytest.param(p, marks=() if k < 2 else pytest.mark.slow)
        for k, p in enumerate(spotter[:1] + public[:1] + spotter[1:] + public[1:])
    ]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("path", _shared(), ids=lambda p: p.name[:40])
def test_shared_sessions_replay_the_same(path, policy, monkeypatch):
    tr = load_transcript(need_shared(path))
    old, new = both(
        tr, "server_clearing", {"CLAUDE_CTX_CLEAR_TRIGGER": "30000"}, monkeypatch, policy
    )
    if not any(e.kind == "server_clear" for e in old.events):
        pytest.skip(f"{path.name}: never reaches the clearing trigger (nothing to compare)")
    assert_same(old, new)


KNOBS = [
    {"CLAUDE_CTX_CLEAR_TRIGGER": "20000", "CLAUDE_CTX_CLEAR_STEP": "5"},
    {"CLAUDE_CTX_CLEAR_TRIGGER": "20000", "CLAUDE_CTX_CLEAR_KEEP": "0"},
    {"CLAUDE_CTX_CLEAR_TRIGGER": "20000", "CLAUDE_CTX_CLEAR_AT_LEAST": "15000"},
    {"CLAUDE_CTX_CLEAR_TRIGGER": "20000", "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "1"},
    {"CLAUDE_CTX_CLEAR_TRIGGER": "20000", "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS": "Read"},
]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spotter-session.jsonl"


PAID_KNOBS = [
    {"CLAUDE_CTX_CLEAR_TRIGGER": "20000", "CLAUDE_CTX_CLEAR_CEILING": "20000"},
    {"CLAUDE_CTX_CLEAR_TRIGGER": "20000", "CLAUDE_CTX_CLEAR_PATIENCE": "0"},
    {"CLAUDE_CTX_CLEAR_TRIGGER": "20000", "CLAUDE_CTX_CLEAR_PATIENCE": "400"},
]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(
    "knobs", KNOBS, ids=lambda k: ",".join(f"{a[15:]}={b}" for a, b in k.items())
)
def test_knobs_replay_the_same(knobs, policy, monkeypatch):
    old, new = both(load_transcript(EXAMPLE), "server_clearing", knobs, monkeypatch, policy)
    assert_same(old, new)


@pytest.mark.parametrize(
    "knobs", PAID_KNOBS, ids=lambda k: ",".join(f"{a[15:]}={b}" for a, b in k.items())
)
def test_paid_knobs_replay_the_same(knobs, monkeypatch):
    old, new = both(load_transcript(EXAMPLE), "server_clearing", knobs, monkeypatch, "paid")
    assert_same(old, new)


def test_history_the_file_does_not_hold_replays_the_same(monkeypatch):
    """A file that starts mid-conversation (Calibration.carried > 0): the paid policy counts
    that history before the messages (``preceding``) until the first compaction drops it."""
    path = PUBLIC / "entireio__cli__43b2bd6e-ccc5-4d83-bbe5-9cd1cd19cc82.jsonl.xz"
    tr = load_transcript(need_shared(path))
    prof = profile_for(tr.version or "2.1.39")
    assert calibrate(tr, prof).carried > 0
    old, new = both(tr, "patched", {"CLAUDE_CTX_CLEAR_TRIGGER": "20000"}, monkeypatch, "paid")
    assert_same(old, new)


@pytest.mark.parametrize("policy", POLICIES)
def test_compactions_and_the_prune_replay_the_same(policy, monkeypatch):
    """The example session twice over, patched at the default knobs: clearing, the text
    prune rewriting records, compactions (the sent list restarts, the prefix is rebuilt)."""
    from bench.bench_simulate import repeated

    tr = build_transcript(repeated(list(load_transcript(EXAMPLE).records), 2), "x2")
    old, new = both(tr, "patched", {}, monkeypatch, policy)
    assert_same(old, new)


def test_a_prune_rewrite_keeps_the_folds_of_the_records_before_it(monkeypatch):
    """The example session three times over, patched: where the prune rewrites a record in the
    middle of the history, the uses whose fold read only records before it stay folded (the
    rest is taken back and folded again), and the replay is the specification's."""
    from bench.bench_simulate import repeated
    from engine.replay import clearing_incremental as module

    kept: list[int] = []
    unfold = module.IncrementalClearing._unfold

    def spy(self, k):
        unfold(self, k)
        kept.append(self._done if k else -1)

    monkeypatch.setattr(module.IncrementalClearing, "_unfold", spy)
    tr = build_transcript(repeated(list(load_transcript(EXAMPLE).records), 3), "x3")
    old, new = both(tr, "patched", {}, monkeypatch, "paid")
    assert_same(old, new)
    assert any(n > 0 for n in kept), kept  # a truncation kept folds


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(allow_nan=False),
            st.floats(-1e6, 1e6),
            st.sampled_from([0.0, -0.0, 1e100, -1e100, 1.0, 0.1]),
        ),
        max_size=60,
    ),
    start=st.one_of(st.floats(-1e9, 1e9), st.integers(-5, 5)),
)
def test_left_sum_adds_as_reduce_does_bit_for_bit(values, start):
    """The view's total in C (``sum`` where it adds left to right) is ``reduce(add)``'s float."""
    expected = reduce(operator.add, values, start)
    got = left_sum(iter(values), start)
    assert struct.pack("<d", got) == struct.pack("<d", expected) or (
        got != got and expected != expected
    )


def test_left_sum_without_a_plain_sum_is_reduce(monkeypatch):
    """Where ``sum`` compensates its rounding (3.12 on), the view adds with ``reduce``."""
    from engine.replay import clearing_incremental as module

    values = [1e100, 1.0, -1e100, 0.1, 0.2]
    monkeypatch.setattr(module, "_PLAIN_SUM", False)
    # 0.5 is lost in 1e100, the 1.0 too: a compensated sum would keep them
    assert left_sum(iter(values), 0.5) == reduce(operator.add, values, 0.5) == 0.1 + 0.2


def _prefix_sums(values):
    """The prefix sums ``rounded_left_sum`` reads: of the values, of their magnitudes."""
    sums = list(accumulate(values, operator.add, initial=0.0))
    sizes = list(accumulate(map(abs, values), operator.add, initial=0.0))
    return sums, sizes


@settings(max_examples=500, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(-1e6, 1e6),
            st.floats(-1.0, 1.0),
            # halves and near-halves, where the two ways of adding may round apart
            st.integers(-2000, 2000).map(lambda k: k + 0.5),
            st.integers(-2000, 2000).map(lambda k: k + 0.5 + 2.0**-40),
            st.sampled_from([0.0, -0.0, 0.1, 0.2, 0.3, 1e15, -1e15, 2.0**52]),
        ),
        max_size=80,
    ),
    start=st.one_of(
        st.floats(-1e9, 1e9),
        st.integers(-5, 5).map(float),
        st.integers(-(10**6), 10**6).map(lambda k: k + 0.5),
    ),
)
def test_rounded_left_sum_is_the_rounded_left_sum(values, start):
    """The view's count from the prefix sums of the differences is ``round`` of their sum
    added left to right from the base, on values near halves too."""
    sums, sizes = _prefix_sums(values)
    assert rounded_left_sum(start, values, sums, sizes) == round(left_sum(values, start))


def test_rounded_left_sum_adds_again_near_a_half(monkeypatch):
    """Where the prefix sums land within the error bound of a half, the values are added again
    left to right. From 0.5, adding 2**-54 twice stays at 0.5 (each is half a unit of its last
    place, a tie rounded to even), which rounds to 0; the prefix sum of the two is 2**-53, and
    0.5 + 2**-53 rounds to 1: only adding again gives the left-to-right count."""
    from engine.replay import clearing_incremental as module

    added = []

    def spy(values, start):
        added.append(len(values))
        return left_sum(values, start)

    monkeypatch.setattr(module, "left_sum", spy)
    values = [2.0**-54, 2.0**-54]
    sums, sizes = _prefix_sums(values)
    assert round(0.5 + sums[-1]) == 1 and round(left_sum(values, 0.5)) == 0
    assert rounded_left_sum(0.5, values, sums, sizes) == 0 and added == [2]
    # far from a half: no second addition
    values = [0.25, 3.0, -1.0]
    sums, sizes = _prefix_sums(values)
    assert rounded_left_sum(10.0, values, sums, sizes) == 12 and added == [2]


@pytest.mark.parametrize(
    "policy",
    [pytest.param("fixed", marks=pytest.mark.slow), "paid"],  # paid: the default
)
def test_the_largest_shared_session_three_times_patched_replays_the_same(policy, monkeypatch):
    """What bench/bench_simulate.py replays (there ten times over): the prune rewrites early
    records again and again (the view's carried costs and the walk's memoised sizes across
    those rewrites), the edit moves, the session compacts."""
    from bench.bench_simulate import repeated

    path = max(spotter_sessions() or [], key=lambda p: p.stat().st_size, default=None)
    if path is None:
        pytest.skip("no shared spotter session (CTXPATCH_SHARED)")
    tr = build_transcript(repeated(list(load_transcript(path).records), 3), "x3")
    old, new = both(tr, "patched", {}, monkeypatch, policy)
    assert_same(old, new)
    assert any(e.kind == "text_prune" for e in new.events)


def _record(role, content):
    return {"type": role, "message": {"role": role, "content": content}}


def _round(k, result="r" * 900):
    use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"path": "x" * 40}}
    res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": result}
    return [_record("assistant", [use]), _record("user", [res])]


@settings(max_examples=120, deadline=None)
@given(
    rounds=st.integers(4, 14),
    cut=st.integers(1, 30),
    kind=st.sampled_from(["result", "drop", "late", "same"]),
    inputs=st.booleans(),
)
def test_a_list_rewritten_in_the_middle_is_cleared_as_the_specification(rounds, cut, kind, inputs):
    """Requests whose list grows, then one whose list differs from a record in the middle on
    (a tool result rewritten, a record dropped so that every later one shifts, a result that
    arrives later than its round, or the same messages as copies): the view of every request is
    clear_on_server's, so the folds the truncation keeps are exact."""
    from engine.api.context_management import ClearToolUses
    from engine.api.server_clearing import BlockEstimates
    from engine.replay.clearing_incremental import IncrementalClearing

    edit = ClearToolUses(trigger_value=100, keep=1, clear_tool_inputs=inputs)
    msgs = [_record("user", "start")]
    for k in range(rounds):
        msgs += _round(k)
    at = 1 + cut % (len(msgs) - 1)
    later = list(msgs)
    if kind == "result":  # the same round, another result text (an assistant record: as it is)
        if msgs[at]["type"] == "user":
            block = msgs[at]["message"]["content"][0]
            later[at] = _record("user", [{**block, "content": "short"}])
    elif kind == "drop":
        del later[at]
    elif kind == "late":  # the result moves to the end
        later.append(later.pop(at))
    else:
        later[at:] = [json.loads(json.dumps(m)) for m in later[at:]]
    later += _round(rounds)
    incremental = IncrementalClearing(edit, BlockEstimates())
    spec_estimate = BlockEstimates()
    for sent in (msgs[: len(msgs) // 2], msgs, later, [*later, *_round(rounds + 1)]):
        costs = [float(10 + len(json.dumps(m))) for m in sent]
        got = incremental.view(sent, costs, 50.0)
        want = clear_on_server(sent, costs, 50.0, edit, spec_estimate)
        assert (got.costs, got.changed, got.cleared_tool_uses, got.cleared_tokens) == (
            want.costs,
            want.changed,
            want.cleared_tool_uses,
            want.cleared_tokens,
        )
