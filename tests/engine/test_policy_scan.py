"""The clearing policies' resumable walk (engine.twins.policy_scan) gives the keep of the twins
it stands for (engine.twins.policy.paid_edit, engine.twins.context_clear.edit_for_request) on
every list, and a walk resumed at any point it calls resumable gives the same as a walk from
the start."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_conversations import conversations

from engine.api.context_management import ClearToolUses
from engine.twins.context_clear import edit_for_request
from engine.twins.policy import paid_edit
from engine.twins.policy_scan import PolicyScan, scan_of, unmarked

EDITS = st.builds(
    ClearToolUses,
    trigger_value=st.just(50_000),
    keep=st.integers(0, 3),
    exclude_tools=st.sampled_from([(), ("Bash",), ("Read", "Edit")]),
    clear_tool_inputs=st.sampled_from([True, False, ("Edit",)]),
)
CEILINGS = st.sampled_from([1, 3_000, 20_000, 90_000])
PATIENCES = st.sampled_from([0, 30, 100, 400])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=conversations(odd=True),
    edit=EDITS,
    ceiling=CEILINGS,
    patience=PATIENCES,
    step=st.sampled_from([1, 3, 20]),
)
def test_the_walk_keeps_what_the_twins_keep(msgs, edit, ceiling, patience, step) -> None:
    scan = scan_of(msgs, edit, ceiling, patience)
    assert scan.fitted("paid") == paid_edit(edit, msgs, ceiling, patience)
    assert scan.fitted("fixed", step) == edit_for_request(edit, msgs, step)


def _marked(msgs: list[dict]) -> list[dict]:
    """The list as Claude Code sends it: the last message's last block carries cache_control."""
    if not msgs or not isinstance(msgs[-1].get("content"), list) or not msgs[-1]["content"]:
        return msgs
    last = {**msgs[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}
    return [*msgs[:-1], {**msgs[-1], "content": [*msgs[-1]["content"][:-1], last]}]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=conversations(odd=True),
    edit=EDITS,
    ceiling=CEILINGS,
    patience=PATIENCES,
    cuts=st.lists(st.integers(0, 200), min_size=2, max_size=4),
    mark=st.booleans(),
)
def test_a_walk_resumed_where_resumable_is_the_walk_from_the_start(
    msgs, edit, ceiling, patience, cuts, mark
) -> None:
    """Two lists of one conversation (the second may be shorter: a retry, a fork), the last
    block marked for the cache as Claude Code does; every point called resumable resumes to
    the walk of the whole second list; and the point a growing list resumes at is usually
    there (the walk does not give up on the common case)."""
    lists = [msgs[: c % (len(msgs) + 1)] for c in cuts]
    if mark:
        lists = [_marked(m) for m in lists]
    resumed = 0
    for old, new in itertools.pairwise(lists):
        shared = 0
        while shared < min(len(old), len(new)) and old[shared] == new[shared]:
            shared += 1
        fresh = scan_of(new, edit, ceiling, patience)
        for j in range(-1, shared):
            scan = scan_of(old, edit, ceiling, patience)
            if not scan.resumable(j, new[j + 1 :]):
                continue
            scan.truncate(j)
            scan.extend(new[j + 1 :])
            resumed += j >= 0
            assert scan.points == fresh.points, j
            assert scan.gains == fresh.gains
            assert scan.use_at == fresh.use_at and scan.result_at == fresh.result_at
            assert scan.fitted("paid") == fresh.fitted("paid")
    assert resumed or all(len(m) < 3 for m in lists) or not _plain_growth(lists, msgs)


def _plain_growth(lists: list[list[dict]], msgs: list[dict]) -> bool:
    """Whether consecutive lists grow by whole rounds of a conversation without odd messages
    (there a resumable point must exist)."""
    plain = all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in msgs)
    return plain and any(len(b) > len(a) >= 3 for a, b in itertools.pairwise(lists))


def test_a_growing_conversation_resumes_after_its_last_shared_round() -> None:
    """Hand-made: three rounds, then two more; the point after the third round's results is
    resumable, the round whose results come in the new messages is not."""

    def use(k: int) -> dict:
        return {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {}}

    def res(k: int) -> dict:
        return {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * 4000}

    msgs: list[dict] = [{"role": "user", "content": "go"}]
    for k in range(5):
        msgs += [{"role": "assistant", "content": [use(k)]}, {"role": "user", "content": [res(k)]}]
    edit = ClearToolUses(keep=1)
    scan = PolicyScan(edit)
    scan.extend(msgs[:7])  # three rounds
    assert scan.resumable(6, msgs[7:])  # the third round's results: followed by an assistant
    assert not scan.resumable(5, [*msgs[6:7], {"role": "user", "content": "late"}])
    # the results of t2 come after: the point between its use and its result does not resume
    scan2 = PolicyScan(edit)
    scan2.extend(msgs[:6])
    assert not scan2.resumable(5, [{"role": "user", "content": [res(2)]}])
    scan.truncate(6)
    scan.extend(msgs[7:])
    assert scan.fitted() == paid_edit(edit, msgs)
    assert scan.points == scan_of(msgs, edit).points


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=conversations(odd=True),
    edit=EDITS,
    ceiling=CEILINGS,
    patience=PATIENCES,
    at=st.integers(0, 200),
    boundary=st.integers(0, 40),
    cut=st.integers(0, 200),
)
def test_a_walk_told_a_move_keeps_what_the_twin_told_it_keeps(
    msgs, edit, ceiling, patience, at, boundary, cut
) -> None:
    """The conversation's last move (paid_boundary's ``moved``) told before the walk, or after
    it on its last message (as the replay and the gateway tell it when they make the move), then
    a longer list resumed: the same points as the walk told it from the start, and the twin's
    keep. A move at a message past the list is never passed."""
    if not msgs:
        return
    moved = (at % (len(msgs) + 2), boundary)
    told = PolicyScan(edit, ceiling, patience)
    told.move(moved)
    told.extend(msgs)
    assert told.fitted("paid") == paid_edit(edit, msgs, ceiling, patience, moved=moved)
    # told after: the walk of the first part, the move on its last message, then the rest
    first = cut % len(msgs) + 1
    late = PolicyScan(edit, ceiling, patience)
    late.extend(msgs[:first])
    on_last = (first - 1, boundary)
    late.move(on_last)
    early = PolicyScan(edit, ceiling, patience)
    early.move(on_last)
    early.extend(msgs[:first])
    assert late.points == early.points
    assert late.fitted("paid") == paid_edit(edit, msgs[:first], ceiling, patience, moved=on_last)
    if late.resumable(first - 1, msgs[first:]):
        late.extend(msgs[first:])
        early = PolicyScan(edit, ceiling, patience)
        early.move(on_last)
        early.extend(msgs)
        assert late.points == early.points
        assert late.fitted("paid") == paid_edit(edit, msgs, ceiling, patience, moved=on_last)


NEVER = (10**9, 10**6)  # ceiling and patience: the rule never moves on its own


def _six_rounds_walked_to(end: int) -> tuple[ClearToolUses, list[dict], PolicyScan]:
    """A prompt and six rounds of one Read (1,000-character results), and a scan of the paid
    rule that never moves on its own, walked over the first ``end`` messages."""
    edit = ClearToolUses(trigger_value=50_000, keep=1)
    msgs: list[dict] = [{"role": "user", "content": "p"}]
    for k in range(6):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * 1000}
        msgs += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [res]}]
    scan = PolicyScan(edit, *NEVER)
    scan.extend(msgs[:end])
    return edit, msgs, scan


def test_a_walk_that_took_an_earlier_move_says_so() -> None:
    """paid_boundary takes the conversation's last move only: a kept walk that took an earlier
    one (its point still in the list kept after a truncation) is not the twin's walk, and says
    so (takes_only), so that the replay and the gateway walk the list again from the start."""
    edit, msgs, scan = _six_rounds_walked_to(5)
    scan.move((4, 1))  # a move on the request that ended at message 4
    assert scan.points[4].cleared == 1 and scan.takes_only((4, 1))
    scan.extend(msgs[5:9])
    scan.move((8, 3))  # the next move, at message 8
    assert not scan.takes_only((8, 3))  # the move at 4 is still in its points
    scan.truncate(6)  # a rewind between the two: the twin walks without either
    assert not scan.takes_only(None) and not scan.takes_only((8, 3))
    fresh = PolicyScan(edit, *NEVER)
    fresh.move((8, 3))
    fresh.extend(msgs[:7])
    assert fresh.takes_only((8, 3))
    assert fresh.fitted("paid") == paid_edit(edit, msgs[:7], *NEVER, moved=(8, 3))
    assert scan.points[4].cleared == 1 and fresh.points[4].cleared == 0
    scan.truncate(3)  # below the first move: nothing taken is left
    assert scan.takes_only(None)


MARKS = st.sampled_from([{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}, {}])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=conversations(odd=True),
    edit=EDITS,
    at=st.integers(0, 200),
    marks=st.lists(st.tuples(st.integers(0, 5), MARKS), max_size=3),
    odd=st.sampled_from(["tool_use", "text", "image", "server_tool_use", None]),
)
def test_a_message_without_its_marks_is_walked_as_the_message(msgs, edit, at, marks, odd) -> None:
    """unmarked takes off the cache marks a walk never counts (the gateway resumes after a
    message proven to be it): the walk's point after it (its fingerprint entry too) is the
    same, and a mark on a block whose size counts it (or none at all) is left alone."""
    i = at % len(msgs)
    m = msgs[i]
    content = (
        m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
    )
    if odd is not None:  # a block of another type, marked or not
        content = [*content, {"type": odd, "id": "x", "name": "Read", "input": {"a": 1}}]
    content = list(content)
    for k, mark in marks:
        j = k % len(content)
        content[j] = {**content[j], "cache_control": mark}
    with_marks = {**m, "content": content}
    plain = unmarked(with_marks)
    counted = [
        b for b in content
        if "cache_control" in b
        and b.get("type") not in ("text", "thinking", "image", "document", "tool_result")
    ]  # fmt: skip
    if not any("cache_control" in b for b in content) or all(
        b in counted for b in content if "cache_control" in b
    ):
        assert plain is None
        return
    assert plain is not None and with_marks["content"] == content  # not mutated
    left = [b for b in plain["content"] if "cache_control" in b]
    assert left == counted and list(plain) == list(with_marks)
    one = PolicyScan(edit, prints=True)
    one.extend([*msgs[:i], with_marks, *msgs[i + 1 :]])
    two = PolicyScan(edit, prints=True)
    two.extend([*msgs[:i], plain, *msgs[i + 1 :]])
    assert one.points == two.points and one.gains == two.gains


def _resumed_before(scan: PolicyScan, msgs: list, before: int) -> int | None:
    """Truncate ``scan`` at the newest point before ``before`` a walk of ``msgs`` may resume at
    (as the replay's clearing does); that point, or ``None``."""
    for j in range(before - 1, -2, -1):
        if scan.resumable(j, msgs[j + 1 :]):
            scan.truncate(j)
            return j
    return None


def test_a_walk_resumed_before_an_earlier_move_is_the_twins_walk() -> None:
    """The point :meth:`PolicyScan.other_move` names is the first that took a move the twin
    does not take: resumed before it with the last move told, the walk is the twin's walk of the
    whole list (the replay then walks the messages after that point, not the whole list)."""
    edit, msgs, scan = _six_rounds_walked_to(5)
    scan.move((4, 1))
    scan.extend(msgs[5:11])
    scan.move((10, 4))
    assert scan.other_move((10, 4)) == 4 and scan.other_move(None) == 4
    assert _resumed_before(scan, msgs[:11], 4) == 2  # 3 waits for its result at 4
    assert scan.takes_only((10, 4)) and len(scan.points) == 3
    scan.move((10, 4))
    scan.extend(msgs[3:11])
    fresh = PolicyScan(edit, *NEVER)
    fresh.move((10, 4))
    fresh.extend(msgs[:11])
    assert scan.points == fresh.points and scan.points[4].cleared == 0
    assert scan.fitted("paid") == paid_edit(edit, msgs[:11], *NEVER, moved=(10, 4))
    assert scan.fitted("paid").keep == 1  # 5 uses less the boundary's 4


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=conversations(odd=True),
    edit=EDITS,
    ceiling=CEILINGS,
    patience=PATIENCES,
    cuts=st.tuples(st.integers(0, 200), st.integers(0, 200)),
    boundaries=st.tuples(st.integers(0, 40), st.integers(0, 40)),
)
def test_two_moves_then_a_walk_resumed_before_the_first_is_the_twins_walk(
    msgs, edit, ceiling, patience, cuts, boundaries
) -> None:
    """A conversation walked as its requests come, a move on two of them: resumed before the
    point other_move names (or kept whole when it names none), with the last move told, the
    walk has the points of the twin's walk told that move only, and its keep."""
    first, second = sorted(c % len(msgs) + 1 for c in cuts) if msgs else (0, 0)
    if first == second:  # two moves on one message: takes_only cannot tell them apart
        return
    scan = PolicyScan(edit, ceiling, patience)
    scan.extend(msgs[:first])
    scan.move((first - 1, boundaries[0]))  # a move on the request that ended there
    # the next request, as the replay resumes it: at a point before its new messages
    j = _resumed_before(scan, msgs[:second], first)
    if j is None:
        return
    scan.move((first - 1, boundaries[0]))  # still the conversation's last move
    scan.extend(msgs[j + 1 : second])
    last = (second - 1, boundaries[1])
    scan.move(last)  # a move on it
    other = scan.other_move(last)
    if other is not None:
        j = _resumed_before(scan, msgs[:second], other)
        if j is None:  # no point to resume at: the walk from the start
            scan = PolicyScan(edit, ceiling, patience)
            j = -1
        scan.move(last)
        scan.extend(msgs[j + 1 : second])
    assert scan.takes_only(last)
    fresh = PolicyScan(edit, ceiling, patience)
    fresh.move(last)
    fresh.extend(msgs[:second])
    assert scan.points == fresh.points
    assert scan.fitted("paid") == paid_edit(edit, msgs[:second], ceiling, patience, moved=last)
