"""The free move's twin (engine.twins.free_moves) on small sequences whose keeps are computed by
hand: no move while the list only grows (cache marks moving included), a prune-like change moves
the cleared part to all it may clear, held on the next requests, reset by a compaction or a
rewind below it; the knob off gives the stateless paid rule's keep. The near move: a reply whose
prompt reached the level makes the next request of the conversation clear all it may, where that
frees at least the margin. The expiry move: a request more than the cache's lifetime (and the slack) after the conversation's
last one does too."""

from __future__ import annotations

from engine.twins.context_clear import knob_errors, knobs_from_env
from engine.twins.conversation_policy import PaidPolicy, clear_policy_from_env
from engine.twins.free_moves import (
    BROKE,
    DEFAULT_MARGIN,
    EXPIRY_1H_MS,
    EXPIRY_5M_MS,
    EXPIRY_SLACK_MS,
    GREW,
    NEW,
    Conversation,
    change,
    fingerprint,
    free_edit,
    free_from_env,
    free_step,
    is_expired,
    is_near,
    lifetime_ms,
    margin_from_env,
    message_size,
    near_level,
    near_need,
    stable_block_size,
)
from engine.twins.policy import (
    WRITE_EXTRA_X20,
    WRITE_EXTRA_X20_1H,
    block_size,
    paid_boundary,
    paid_edit,
)

MARK = {"type": "ephemeral"}
EDIT = knobs_from_env({"CLAUDE_CTX_CLEAR_KEEP": "1"})
NEVER = {"ceiling": 10**9, "patience": 10**6}  # the paid rule never moves on its own


def rounds(n: int, first: int = 0, prompt: str = "p" * 100) -> list[dict]:
    """A prompt, then ``n`` rounds of one Read (ids from ``first``) with 1,000-character
    results; the list ends with the last round's result (1 result in progress)."""
    msgs: list[dict] = [{"role": "user", "content": prompt}]
    for k in range(first, first + n):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * 1000}
        msgs += [
            {"role": "assistant", "content": [{"type": "text", "text": "look"}, use]},
            {"role": "user", "content": [res]},
        ]
    return msgs


def marked(msgs: list[dict], last: int) -> list[dict]:
    """``cache_control`` on the last block of the ``last`` newest messages, as Claude Code
    sends them."""
    out = list(msgs)
    for i in range(len(out) - last, len(out)):
        blocks = out[i]["content"]
        if isinstance(blocks, list):
            out[i] = {**out[i], "content": [*blocks[:-1], {**blocks[-1], "cache_control": MARK}]}
    return out


def pruned(msgs: list[dict]) -> list[dict]:
    """The first answer's text shortened, as the text prune's step rewrites an old message."""
    first = msgs[1]
    return [msgs[0], {**first, "content": [{"type": "text", "text": "lo"}, first["content"][1]]}]


def keep(conv: Conversation, msgs: list[dict]) -> int:
    assert EDIT is not None
    return free_edit(conv, EDIT, msgs, **NEVER).keep


def test_a_marked_tool_use_has_the_size_of_an_unmarked_one() -> None:
    use = {"type": "tool_use", "id": "t0", "name": "Read", "input": {"p": "x"}}
    text = {"type": "text", "text": "hello"}
    marked_use = {**use, "cache_control": MARK}
    # the policy's size counts the mark's key and values: "cache_control" + "type" + "ephemeral"
    assert block_size(marked_use) == block_size(use) + 13 + 4 + 9
    assert stable_block_size(marked_use) == stable_block_size(use) == block_size(use)
    assert stable_block_size({**text, "cache_control": MARK}) == block_size(text) == 5
    assert message_size({"role": "user", "content": [marked_use, text]}) == block_size(use) + 5
    assert message_size({"role": "user", "content": "héllo"}) == 5
    assert message_size({"role": "user", "content": None}) == 0


def test_change_tells_new_grew_and_broke() -> None:
    a = fingerprint(rounds(3))
    assert change(None, a) == NEW and change([], a) == NEW and change(a, []) == NEW
    assert change(a, fingerprint(rounds(3, prompt="other"))) == NEW  # another first message
    assert change(a, fingerprint(rounds(4))) == GREW
    assert change(a, a) == GREW
    assert change(a, fingerprint(rounds(2))) == BROKE  # shorter: a rewind
    # the previous last message may change (Claude Code re-marks it), no other one may
    last_changed = [*rounds(3)[:-1], {"role": "user", "content": "typed"}]
    assert change(a, fingerprint(last_changed)) == GREW
    assert change(a, fingerprint([*pruned(rounds(3)), *rounds(3)[2:]])) == BROKE


def test_a_free_move_where_the_cache_breaks_is_held_until_a_compaction() -> None:
    conv = Conversation()
    # growing, with the marks moving to the newest two messages (a marked tool_use among them):
    # the paid rule never moves here, every tool use is kept
    assert [keep(conv, marked(rounds(n), 2)) for n in (3, 4, 5)] == [3, 4, 5]
    assert conv.moves == 0 and conv.forced == 0
    # the first answer's text shortened: the cache breaks anyway; of 5 uses the edit may clear
    # all but KEEP 1 and the result in progress (the same one): 4 cleared, 1 kept
    assert keep(conv, marked([*pruned(rounds(5)), *rounds(5)[2:]], 2)) == 1
    assert conv.moves == 1 and conv.forced == 4
    # the next rounds grow the list: the 4 stay cleared, the new uses are kept
    assert keep(conv, marked([*pruned(rounds(6)), *rounds(6)[2:]], 1)) == 2
    assert keep(conv, marked([*pruned(rounds(7)), *rounds(7)[2:]], 2)) == 3
    assert conv.moves == 1
    # a compaction: a summary, then 4 new rounds; a new conversation, nothing held: all 4 kept
    # (held, 3 of them would have been cleared)
    summary = rounds(4, first=7, prompt="The summary of the conversation so far.")
    assert keep(conv, marked(summary, 2)) == 4
    assert conv.forced == 0 and conv.moves == 1


def test_a_rewind_below_the_held_boundary_moves_again() -> None:
    conv = Conversation()
    assert keep(conv, rounds(6)) == 6
    assert keep(conv, [*pruned(rounds(6)), *rounds(6)[2:]]) == 1  # 5 cleared
    assert conv.forced == 5
    # rewound to 3 uses (fewer than the 5 held): the old boundary goes; the shorter list broke
    # the cache, so the edit clears all it may again: 2 of 3
    assert keep(conv, [*pruned(rounds(3)), *rounds(3)[2:]]) == 1
    assert conv.forced == 2 and conv.moves == 2


def test_the_knob_off_is_the_paid_rule() -> None:
    assert EDIT is not None
    for off in ("0", "false", " OFF ", "No"):
        assert not free_from_env({"CLAUDE_CTX_CLEAR_FREE": off})
    for on in ("", "1", "on", "yes", "anything"):
        assert free_from_env({"CLAUDE_CTX_CLEAR_FREE": on})
    assert free_from_env({})
    off = clear_policy_from_env({"CLAUDE_CTX_CLEAR_FREE": "off"})
    on = clear_policy_from_env({})
    assert isinstance(off, PaidPolicy) and off.conversation is None
    assert isinstance(on, PaidPolicy) and on.conversation is not None
    grown, broke = rounds(5), [*pruned(rounds(5)), *rounds(5)[2:]]
    assert paid_edit(EDIT, broke, **NEVER).keep == 5
    conv = Conversation()
    assert [keep(conv, grown), keep(conv, broke)] == [5, 1]
    # the replay's policy at the same knobs: off, the stateless keep on the broken list too
    knobs = {"CLAUDE_CTX_CLEAR_CEILING": "999999999", "CLAUDE_CTX_CLEAR_PATIENCE": "1000000"}
    for free, want in (("off", [5, 5]), ("on", [5, 1])):
        policy = clear_policy_from_env({**knobs, "CLAUDE_CTX_CLEAR_FREE": free})
        assert policy is not None
        assert [policy(EDIT, msgs, [], 0.0).keep for msgs in (grown, broke)] == want


def near_keep(conv: Conversation, msgs: list[dict], level: int) -> int:
    assert EDIT is not None
    return free_edit(conv, EDIT, msgs, **NEVER, level=level).keep


def test_near_level_is_the_window_less_the_reserve_and_the_margin() -> None:
    assert margin_from_env({}) == DEFAULT_MARGIN == 10_000
    assert margin_from_env({"CLAUDE_CTX_CLEAR_MARGIN": " 12_000 "}) == 12_000
    assert margin_from_env({"CLAUDE_CTX_CLEAR_MARGIN": "0"}) == 0
    assert margin_from_env({"CLAUDE_CTX_CLEAR_MARGIN": "-5"}) == DEFAULT_MARGIN
    assert knob_errors({"CLAUDE_CTX_CLEAR_MARGIN": "-5"}) != []
    assert knob_errors({"CLAUDE_CTX_CLEAR_MARGIN": "0"}) == []
    assert near_level("claude-opus-4-6", (), 7_000) == 200_000 - 33_000 - 7_000
    assert near_level("claude-opus-4-6[1m]", (), 7_000) == 1_000_000 - 40_000
    assert near_level("claude-sonnet-4-5", ("a", "context-1m-2025-08-07"), 0) == 0
    assert near_level("claude-sonnet-4-5", ("a", "context-1m-2025-08-07"), 1) == 966_999
    assert not is_near(None, 160_000) and not is_near(10**6, 0)
    assert is_near(160_000, 160_000) and not is_near(159_999, 160_000)


def test_a_reply_near_the_threshold_makes_the_next_request_clear_all_it_may() -> None:
    level = near_level("claude-opus-4-6", (), 7_000)  # 160,000
    conv = Conversation()
    assert [near_keep(conv, rounds(n), level) for n in (3, 4)] == [3, 4]
    conv.observe(level - 1)  # under the level: nothing moves
    assert near_keep(conv, rounds(5), level) == 5 and conv.moves == 0
    conv.observe(level)  # at the level: the next request clears all but KEEP and the round
    assert near_keep(conv, rounds(6), level) == 1
    assert conv.moves == 1 and conv.forced == 5 and conv.prompt is None
    # the prompt is read once: the next request (no reply seen) holds the boundary, no move
    assert near_keep(conv, rounds(7), level) == 2 and conv.moves == 1
    # a reply near the level again: the uses aged since are cleared too
    conv.observe(level + 5_000)
    assert near_keep(conv, rounds(8), level) == 1 and conv.moves == 2 and conv.forced == 7


def test_a_near_move_frees_at_least_the_margin() -> None:
    """The near move weighs what it would clear beyond the boundary the edit keeps without it
    (the larger of the paid rule's and the one held): at least ``near_need`` characters, the
    margin in tokens of 4, or no move. A break and an expired cache move whatever they free
    (they rewrite the prompt anyway)."""
    assert near_need(DEFAULT_MARGIN) == 40_000 and near_need(7_000) == 28_000
    assert near_need(0) == 0
    gains = [0, 10_000, 20_000, 30_000, 45_000, 50_000]  # prefix sums of 5 uses
    # may clear 5, the paid rule clears 1: 40,000 beyond it
    assert free_step(GREW, 0, 5, 5, 1, near=True, gains=gains, need=40_000) == (5, 5, True)
    assert free_step(GREW, 0, 5, 5, 1, near=True, gains=gains, need=40_001) == (1, 0, False)
    # the boundary held (2) is the base when above the paid rule's: 30,000 beyond it
    assert free_step(GREW, 2, 5, 5, 1, near=True, gains=gains, need=40_000) == (2, 2, False)
    assert free_step(GREW, 2, 5, 5, 1, near=True, gains=gains, need=30_000) == (5, 5, True)
    # no sizes told (the JavaScript: no prints.gains): no near move; none needed: the old rule
    assert free_step(GREW, 0, 5, 5, 1, near=True, need=1) == (1, 0, False)
    assert free_step(GREW, 0, 5, 5, 1, near=True) == (5, 5, True)
    # a break, an expired cache: no need to meet
    assert free_step(BROKE, 2, 5, 5, 1, gains=gains, need=10**9) == (5, 5, True)
    assert free_step(GREW, 2, 5, 5, 1, expired=True, gains=gains, need=10**9) == (5, 5, True)
    assert free_step(GREW, 2, 5, 5, 1, near=True, expired=True, gains=gains, need=10**9)[2]
    # through the conversation, every reply at the level, each use freeing 1,002 characters (its
    # result and its input): the request of 5 rounds clears 4 (4,008 >= 4,000); the next three
    # gather 1, 2, 3 more: no move. Without the need, a move on every request.
    level = near_level("claude-opus-4-6", (), 1_000)
    assert EDIT is not None
    for need, want, moves in ((4_000, [3, 4, 1, 2, 3, 4], 1), (0, [3, 1, 1, 1, 1, 1], 5)):
        conv = Conversation()
        keeps = []
        for n in range(3, 9):
            keeps.append(free_edit(conv, EDIT, rounds(n), **NEVER, level=level, need=need).keep)
            conv.observe(level)
        assert keeps == want and conv.moves == moves


def test_no_near_move_for_another_conversation_or_with_the_level_off() -> None:
    level = near_level("claude-opus-4-6", (), 7_000)
    conv = Conversation()
    assert near_keep(conv, rounds(4), level) == 4
    conv.observe(level + 1)
    # a new first message (another conversation, or after a compaction): its prompt said
    # nothing about this one
    assert near_keep(conv, rounds(5, prompt="The summary."), level) == 5 and conv.moves == 0
    conv.observe(10**6)
    assert near_keep(conv, rounds(6, prompt="The summary."), 0) == 6 and conv.moves == 0
    # the replay's policy: the level from the knob and the model; off with the free move
    on = clear_policy_from_env({}, model="claude-opus-4-6")
    assert isinstance(on, PaidPolicy) and on.level == 157_000
    off = clear_policy_from_env({"CLAUDE_CTX_CLEAR_MARGIN": "0"}, model="claude-opus-4-6")
    assert isinstance(off, PaidPolicy) and off.level == 0
    native = clear_policy_from_env({}, model="claude-opus-5", threshold=1_000_001)
    assert isinstance(native, PaidPolicy) and native.level == 1_000_001 - 10_000
    free_off = clear_policy_from_env({"CLAUDE_CTX_CLEAR_FREE": "0"}, model="x")
    assert isinstance(free_off, PaidPolicy) and free_off.level == 0
    free_off.observe(10**6)  # no memory: nothing to tell
    assert free_off.conversation is None


def test_the_paid_walk_takes_the_memorys_move_as_its_own() -> None:
    """Three rounds (prompt 100 characters, each answer 33, each result 1,000, KEEP 1), PATIENCE
    10: at the second round's request the rule may clear 1 use (rent 1,000; it moves when
    2 × rent × 100 ≥ 23 × 10 × (kept − free): 200,000 < 230 × 1,166); at the third it may clear 2
    (rent 2,000: 400,000 ≥ 230 × 1,199) and moves. Told that the memory moved to 1 at the second
    (the message at index 4), the walk restarts its rent there: 200,000 < 230 × 1,199, so it
    holds 1 instead of paying for a second move one request after the first."""
    assert EDIT is not None
    msgs = rounds(3)
    assert paid_boundary(msgs, EDIT, 10**9, 10)[0] == 2
    assert paid_boundary(msgs, EDIT, 10**9, 10, moved=(4, 1))[0] == 1
    # a move the walk had made itself, or a lower one, changes nothing
    assert paid_boundary(msgs, EDIT, 10**9, 10, moved=(4, 0))[0] == 2
    assert paid_boundary(msgs, EDIT, 10**9, 10, moved=(6, 2))[0] == 2
    # the conversation hands its last move to the walk only while it holds it
    conv = Conversation()
    conv.forced, conv.moved = 1, (4, 1)
    assert conv.paid_move(GREW, 3) == (4, 1)
    assert conv.paid_move(NEW, 3) is None and conv.paid_move(BROKE, 0) is None


def timed_keep(conv: Conversation, msgs: list[dict], now: int | None, hour: bool = False) -> int:
    assert EDIT is not None
    extra = WRITE_EXTRA_X20_1H if hour else WRITE_EXTRA_X20
    return free_edit(conv, EDIT, msgs, **NEVER, extra=extra, now=now).keep


def test_the_cache_lifetime_is_the_requests_and_a_gap_must_pass_it_and_the_slack() -> None:
    assert lifetime_ms(WRITE_EXTRA_X20) == EXPIRY_5M_MS == 300_000
    assert lifetime_ms(WRITE_EXTRA_X20_1H) == EXPIRY_1H_MS == 3_600_000
    edge = EXPIRY_5M_MS + EXPIRY_SLACK_MS
    assert not is_expired(0, edge, EXPIRY_5M_MS) and is_expired(0, edge + 1, EXPIRY_5M_MS)
    assert not is_expired(None, 10**9, EXPIRY_5M_MS) and not is_expired(0, None, EXPIRY_5M_MS)


def test_a_request_after_the_cache_expired_clears_all_it_may() -> None:
    conv = Conversation()
    gap = EXPIRY_5M_MS + EXPIRY_SLACK_MS
    t = 1_000_000
    assert timed_keep(conv, rounds(3), t) == 3
    assert timed_keep(conv, rounds(4), t + gap) == 4 and conv.moves == 0  # not past it
    # past it (counted from the last request, not the first): all but KEEP and the round
    t += gap
    assert timed_keep(conv, rounds(5), t + gap + 1) == 1
    assert conv.moves == 1 and conv.forced == 4 and conv.moved == (10, 4)
    t += gap + 1
    # held on the next requests; no time known: no expiry move, the boundary still held
    assert timed_keep(conv, rounds(6), t + 1_000) == 2 and conv.moves == 1
    assert timed_keep(conv, rounds(7), None) == 3 and conv.moves == 1
    # the time of the request before the unknown one still counts
    assert timed_keep(conv, rounds(8), t + 1_000 + gap + 1) == 1 and conv.moves == 2


def test_the_hour_cache_waits_an_hour_and_a_new_conversation_never_moves() -> None:
    conv = Conversation()
    assert timed_keep(conv, rounds(3), 0, hour=True) == 3
    assert timed_keep(conv, rounds(4), EXPIRY_1H_MS, hour=True) == 4 and conv.moves == 0
    later = EXPIRY_1H_MS + 2 * (EXPIRY_1H_MS + EXPIRY_SLACK_MS)
    # another first message (after a compaction): nothing held, nothing moves, its time kept
    assert timed_keep(conv, rounds(5, prompt="The summary."), later, hour=True) == 5
    assert conv.moves == 0 and conv.at == later
    assert timed_keep(conv, rounds(6, prompt="The summary."), later + 1, hour=True) == 6
    # the replay's policy hands its clock to the memory with the session's lifetime
    pol = clear_policy_from_env({}, one_hour=True, model="claude-opus-4-6")
    assert isinstance(pol, PaidPolicy) and pol.conversation is not None
    pol.asked(123)
    assert (pol.conversation.now, pol.conversation.lifetime) == (123, EXPIRY_1H_MS)
    off = clear_policy_from_env({"CLAUDE_CTX_CLEAR_FREE": "0"})
    assert isinstance(off, PaidPolicy) and off.conversation is None
    off.asked(123)  # no memory: nothing to tell


def test_a_native_build_has_its_own_threshold_a_cli_js_build_the_javascripts_rule() -> None:
    """The replay's near level (engine.claude_code.thresholds.near_threshold): a native build's
    auto-compact threshold, as the gateway reads it off the User-Agent; None for every cli.js
    build (<= 2.1.112), where the twin takes the injected JavaScript's rule (the window less its
    reserve: context_clear.js nearLevel) and the two agree."""
    from engine.claude_code.thresholds import compute_thresholds, near_threshold
    from engine.profiles import PROFILES, profile_for
    from engine.versions import FIRST_NATIVE, parse_version

    cli_js = [p for p in PROFILES if parse_version(p.first) < parse_version(FIRST_NATIVE)]
    assert cli_js
    for p in cli_js:
        for model in ("claude-opus-4-6", "claude-opus-5", "claude-sonnet-4-5[1m]"):
            th = compute_thresholds(p, model)
            assert near_threshold(th, p.last) is None, (p.range, model)
            assert not th.reactive  # what the window's rule assumes: a threshold under it
    for version, model, want in (
        ("2.1.217", "claude-opus-5", 1_000_001),
        ("2.1.217", "claude-opus-4-6", 200_001),
        ("2.1.150", "claude-opus-4-6", 167_000),
        ("2.1.113", "claude-opus-4-6", 167_000),
    ):
        assert near_threshold(compute_thresholds(profile_for(version), model), version) == want
    off = compute_thresholds(profile_for("2.1.217"), "claude-opus-5", {"DISABLE_AUTO_COMPACT": "1"})
    assert near_threshold(off, "2.1.217") is None
