"""engine.replay.prefix_sums: the prefix sums a replay carries from request to request are the
sums ``sum`` gives, bit for bit, whatever the lists kept, changed and appended; and the prompt
cache reads the same with them (and with the caller's comparison with the last prompt) as
without."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.api.prompt_cache import PromptCache
from engine.replay import prefix_sums as module
from engine.replay.prefix_sums import PLAIN_SUM, PrefixSums, summed

floats = st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.1, 0.2, 1e-9, 3.3, -0.0])


@pytest.mark.skipif(not PLAIN_SUM, reason="sum compensates its rounding here: no table")
@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 60), st.lists(floats, max_size=12)), min_size=1, max_size=20
    )
)
def test_the_table_is_sum_of_every_prefix_bit_for_bit(steps) -> None:
    """Each step keeps a prefix of the previous list (its length modulo the list's, the kept
    count the caller passes) and appends new values, as a replay's stages do."""
    sums = PrefixSums()
    values: list[float] = []
    for keep, more in steps:
        kept = keep % (len(values) + 1)
        values = values[:kept] + more
        sums.update(values, kept)
        table = sums.table()
        assert table is not None and len(table) == len(values) + 1
        for k in range(len(values) + 1):
            assert table[k] == sum(values[:k])
            assert repr(table[k]) == repr(float(sum(values[:k])))
        assert summed(values, table) == sum(values)


def test_without_a_plain_sum_there_is_no_table(monkeypatch) -> None:
    monkeypatch.setattr(module, "PLAIN_SUM", False)
    sums = PrefixSums()
    sums.update([0.1, 0.2], 0)
    assert sums.table() is None
    assert summed([0.1, 0.2], None) == 0.1 + 0.2


@settings(max_examples=200, deadline=None)
@given(
    prompts=st.lists(
        st.tuples(st.integers(0, 8), st.lists(floats, min_size=1, max_size=6)),
        min_size=1,
        max_size=12,
    )
)
def test_the_cache_reads_the_same_with_the_sums(prompts) -> None:
    """Prompts that extend (or cut) the previous one: the read with the prefix sums is the
    read that sums the costs."""
    plain, with_sums, compared = (PromptCache(100.0, 40.0) for _ in range(3))
    last: list[int] | None = None
    sig: list[int] = []
    costs: list[float] = []
    for cut, more in prompts:
        kept = min(cut, len(costs))
        sig = sig[:kept] + list(range(len(sig) * 7 + 1, len(sig) * 7 + 1 + len(more)))
        costs = costs[:kept] + more
        blocks = [1] * len(costs)
        sums = [0.0]
        for c in costs:
            sums.append(sums[-1] + c)
        want = plain.read(list(sig), costs, blocks, 120.0)
        assert with_sums.read(list(sig), costs, blocks, 120.0, sums) == want
        # and with the comparison with the last prompt made by the caller (the replay's break)
        now = list(sig)
        extends = last is not None and now[: len(last)] == last
        assert compared.read(now, costs, blocks, 120.0, sums, extends) == want
        last = now


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(0, 30),
    cut=st.integers(0, 40),
    edits=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["copy", "other", "nan"]))),
)
def test_an_entry_is_compared_as_the_slice_comparison(size, cut, edits) -> None:
    """The cache's comparison of a prompt with an older entry (from the first item that is not
    the entry's very object) answers as ``sig[:len(entry)] == entry`` whatever was rebuilt:
    equal copies, other values, a NaN (equal to itself only as the same object)."""
    from engine.api.prompt_cache import _starts_with

    nan = float("nan")
    entry = [(i, -1, (), 1.0) for i in range(size)]
    sig = list(entry[: cut % (size + 1)]) + [(100 + i, -1, (), 1.0) for i in range(cut % 3)]
    for at, kind in edits:
        if not sig:
            break
        i = at % len(sig)
        sig[i] = (
            tuple(list(sig[i]))
            if kind == "copy"
            else (sig[i][0], 7, (), nan if kind == "nan" else 2.0)
        )
    for a, b in ((sig, entry), (entry, sig), (entry, entry), (sig, list(sig))):
        assert _starts_with(a, b) == (len(b) <= len(a) and a[: len(b)] == b)


@pytest.mark.skipif(not PLAIN_SUM, reason="sum compensates its rounding here: the fit sums")
def test_the_fit_counts_thinking_with_a_running_sum_as_sum_does(monkeypatch) -> None:
    """engine.replay.calibration adds each request's thinking terms to a running sum where the
    model keeps every turn's thinking: the calibration is the one that sums the list again on
    every request, float for float (the embedded session, and three times over: one segment of
    thrice the requests)."""
    from pathlib import Path

    from bench.bench_simulate import repeated
    from engine.profiles import profile_for
    from engine.replay import calibration
    from engine.transcript import build_transcript, load_transcript

    example = Path(__file__).resolve().parents[2] / "examples" / "spotter-session.jsonl"
    tr = load_transcript(example)
    for t in (tr, build_transcript(repeated(list(tr.records), 3), "x3")):
        profile = profile_for(t.version or "2.1.39")
        running = calibration.calibrate(t, profile)
        assert not running.strips_thinking  # the running sum is the one in use
        with monkeypatch.context() as m:
            m.setattr(calibration, "PLAIN_SUM", False)
            assert calibration.calibrate(t, profile) == running
