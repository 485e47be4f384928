"""The gateway's free move (gateway.policy with ``Knobs.free``) against its twin
(engine.twins.free_moves.free_edit, one Conversation per conversation): sequences of request
bodies as Claude Code sends them (each list the previous one and a round more, the cache marks
moved to the newest one or two messages) with, now and then, what breaks the prompt cache anyway
(an older text shortened as the text prune does, an old tool result emptied as a
micro-compaction does, a rewind), a compaction (a new first message), another system prompt, two
conversations interleaved: the same keep request by request, and free moves made. With the knob
off, the stateless twin's keep (engine.twins.policy.paid_edit)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_conversations import conversations
from test_gateway_policy import EDIT, SERIALISE, SYSTEM, claude_code, fit

from engine.twins.free_moves import Conversation, free_edit, message_size
from engine.twins.policy import paid_edit
from engine.twins.policy_scan import system_facts
from gateway.policy import Fitter, Knobs

MARK = {"type": "ephemeral"}
# the system prompts a conversation may switch between: none marked (all of it a move writes
# again), the last block marked for the 1-hour cache (nothing, at the 1-hour price)
SYSTEMS: list[Any] = [
    SYSTEM,
    [
        {
            "type": "text",
            "text": "You are Claude Code. " * 100,
            "cache_control": {**MARK, "ttl": "1h"},
        }
    ],
]
CLEARED = "[Old tool result content cleared]"  # what a micro-compaction leaves of a result


def marked(msgs: list[dict], last: int) -> list[dict]:
    """Claude Code's cache marks: the last block of each of the ``last`` newest messages (a
    tool_use block too: its size counts the mark, which the free move's fingerprint leaves out)."""
    out = list(msgs)
    for i in range(max(0, len(out) - last), len(out)):
        content = out[i].get("content") if isinstance(out[i], dict) else None
        if isinstance(content, list) and content and isinstance(content[-1], dict):
            out[i] = {**out[i], "content": [*content[:-1], {**content[-1], "cache_control": MARK}]}
    return out


def points_of(msgs: list[dict]) -> list[int]:
    """The request points: the list's end, and every user message followed by an assistant one."""
    return [
        i
        for i in range(1, len(msgs) + 1)
        if i == len(msgs)
        or (msgs[i - 1].get("role") == "user" and msgs[i].get("role") == "assistant")
    ]


def _shorter(message: dict) -> dict | None:
    """The message with its longest text (a text block, a tool result's string content) cut to
    a tenth, as the text prune rewrites an older message; None when it has no text to cut."""
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": content[: len(content) // 10]} if len(content) > 9 else None
    if not isinstance(content, list):
        return None
    best, size = -1, 9
    for k, b in enumerate(content):
        text = b.get("text") if isinstance(b, dict) and b.get("type") == "text" else None
        if b.get("type") == "tool_result" and isinstance(b.get("content"), str):
            text = b["content"]
        if isinstance(text, str) and len(text) > size:
            best, size = k, len(text)
    if best < 0:
        return None
    b = content[best]
    cut = (
        {**b, "text": b["text"][: size // 10]}
        if "text" in b
        else {**b, "content": b["content"][: size // 10]}
    )
    return {**message, "content": [*content[:best], cut, *content[best + 1 :]]}


def _emptied(message: dict, rng: random.Random) -> dict | None:
    """The message with its first non-empty tool result emptied (micro-compaction); None when
    it has none."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return None
    for k, b in enumerate(content):
        if (
            isinstance(b, dict)
            and b.get("type") == "tool_result"
            and b.get("content") not in ("", CLEARED)
        ):
            cut = {**b, "content": rng.choice(["", CLEARED])}
            return {**message, "content": [*content[:k], cut, *content[k + 1 :]]}
    return None


@dataclass
class Request:
    who: int  # the conversation
    messages: list[dict]
    system: Any


@dataclass
class Scenario:
    """One conversation's requests: its messages grow point by point; now and then an event."""

    who: int
    msgs: list[dict]
    edits: dict[int, dict] = field(default_factory=dict)  # message index -> rewritten message
    start: int = 0  # the first message kept after a compaction (0: none yet)
    summary: dict | None = None
    system: int = 0
    events: list[str] = field(default_factory=list)

    def sent(self, end: int, last: int) -> list[dict]:
        msgs = [self.edits.get(i, m) for i, m in enumerate(self.msgs[:end])]
        if self.summary is not None:
            msgs = [self.summary, *msgs[self.start :]]
        return marked(msgs, last)

    def requests(self, rng: random.Random) -> list[Request]:
        points = points_of(self.msgs)
        out: list[Request] = []
        k = 0
        while k < len(points) and len(out) < 3 * len(points):
            end = points[k]
            event = rng.choice(["grow"] * 6 + ["prune", "empty", "rewind", "compact", "system"])
            older = range(self.start, max(self.start, end - 2))
            if event == "prune" and older:
                i = rng.choice(older)
                cut = _shorter(self.edits.get(i, self.msgs[i]))
                if cut is not None:
                    self.edits[i] = cut
                    self.events.append(event)
            elif event == "empty" and older:
                i = rng.choice(older)
                cut = _emptied(self.edits.get(i, self.msgs[i]), rng)
                if cut is not None:
                    self.edits[i] = cut
                    self.events.append(event)
            elif event == "rewind" and out:
                back = [p for p in points[:k] if p > self.start + 1]
                if back:
                    end = rng.choice(back)
                    k = points.index(end)
                    self.events.append(event)
            elif event == "compact":
                # the summary replaces the messages before a round (an assistant message)
                rounds = [
                    i for i in range(self.start + 1, end) if self.msgs[i].get("role") == "assistant"
                ]
                if rounds:
                    # a first message of another size than the one it replaces (the twin tells
                    # a compaction by the first message's size, the gateway by its bytes)
                    first = message_size(out[-1].messages[0] if out else self.msgs[0])
                    self.start = rng.choice(rounds)
                    text = f"Summary of conversation {self.who}: " + "s" * rng.randint(0, 3_000)
                    if len(text) == first:
                        text += "."
                    self.summary = {"role": "user", "content": text}
                    self.events.append(event)
            elif event == "system":
                self.system = 1 - self.system
                self.events.append(event)
            out.append(Request(self.who, self.sent(end, rng.choice([1, 2])), SYSTEMS[self.system]))
            k += 1
        return out


def _own(msgs: list[dict], who: int) -> list[dict]:
    """The conversation with a first message of its own (the gateway tells conversations apart by
    their first message)."""
    first = msgs[0]
    return [{**first, "content": f"conversation {who}: {first.get('content')}"}, *msgs[1:]]


def interleaved(rng: random.Random, *scenarios: Scenario) -> list[Request]:
    """The conversations' requests in one random order, each conversation's in its own."""
    queues = [s.requests(rng) for s in scenarios]
    out: list[Request] = []
    while any(queues):
        q = rng.choice([q for q in queues if q])
        out.append(q.pop(0))
    return out


REMARKED: list[int] = []  # per check: requests resumed after the message that lost its mark


def check(
    requests: list[Request], ceiling: int, patience: int, free: bool = True
) -> tuple[int, int]:
    """Send the requests through one Fitter and each to its conversation's twin: the same keep
    each time. Returns (the gateway's free moves, requests whose keep the move changed)."""
    fitter = Fitter(Knobs("paid", 1, ceiling, patience, free))
    twins: dict[int, Conversation] = {}
    changed = 0
    for n, r in enumerate(requests):
        raw = SERIALISE["javascript"](claude_code(r.messages, system=r.system))
        got = fit(fitter, raw)
        rest, extra = system_facts(r.system)
        stateless = paid_edit(EDIT, r.messages, ceiling, patience, 0, rest, extra)
        if free:
            twin = twins.setdefault(r.who, Conversation())
            want = free_edit(twin, EDIT, r.messages, ceiling, patience, 0, rest, extra)
        else:
            want = stateless
        assert got == want, (n, r.who, got.keep, want.keep)
        changed += want.keep != stateless.keep
    if free:
        assert fitter.free_moves == sum(t.moves for t in twins.values())
    else:
        assert fitter.free_moves == 0
    REMARKED.append(fitter.remarked)
    return fitter.free_moves, changed


def _rounds(rng: random.Random) -> list[dict]:
    """A plain generated conversation: a prompt, tool rounds of 1-3 uses with results of 0-30K
    characters, a typed prompt now and then."""
    msgs: list[dict] = [{"role": "user", "content": "go " + "x" * rng.randint(0, 200)}]
    k = 0
    for _ in range(rng.randint(4, 25)):
        width = rng.randint(1, 3)
        uses = [
            {
                "type": "tool_use",
                "id": f"t{k + i}",
                "name": rng.choice(["Read", "Bash"]),
                "input": {"p": "y" * rng.randint(0, 300)},
            }
            for i in range(width)
        ]
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": "on it"}, *uses]})
        msgs.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{k + i}",
                        "content": "r" * rng.randint(0, 30_000),
                    }
                    for i in range(width)
                ],
            }
        )
        k += width
        if rng.random() < 0.2:
            msgs.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "done " * rng.randint(1, 200)}],
                }
            )
            msgs.append(
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "next " * rng.randint(1, 400)}],
                }
            )
    return msgs


def _scenarios(seed: int) -> tuple[list[Request], list[str], int, int]:
    rng = random.Random(seed)
    a = Scenario(0, _own(_rounds(rng), 0))
    b = Scenario(1, _own(_rounds(rng), 1))
    requests = interleaved(rng, a, b) if rng.random() < 0.7 else a.requests(rng)
    ceiling = rng.choice([3_000, 20_000, 90_000])
    patience = rng.choice([0, 100, 400])
    return requests, a.events + b.events, ceiling, patience


SEEDS = range(24)


def test_generated_sequences_get_the_twins_keep_with_free_moves() -> None:
    """Two conversations interleaved (or one), with prunes, emptied results, rewinds,
    compactions and system prompt changes: the twin's keep on every request, and the free move
    made and changing keeps (so this test would see a gateway without it)."""
    moves = changed = 0
    seen: set[str] = set()
    REMARKED.clear()
    for seed in SEEDS:
        requests, events, ceiling, patience = _scenarios(seed)
        m, c = check(requests, ceiling, patience)
        moves, changed, seen = moves + m, changed + c, seen | set(events)
    assert seen == {"prune", "empty", "rewind", "compact", "system"}
    assert moves >= len(SEEDS) // 2 and changed >= moves
    # and the requests resumed after the message Claude Code took the mark off were many
    assert sum(REMARKED) >= len(SEEDS) * 5


def test_with_the_knob_off_the_keep_is_the_stateless_one() -> None:
    for seed in SEEDS[:8]:
        requests, _, ceiling, patience = _scenarios(seed)
        assert check(requests, ceiling, patience, free=False) == (0, 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=conversations(odd=True),
    second=conversations(),
    rng=st.randoms(use_true_random=False),
    ceiling=st.sampled_from([3_000, 20_000, 90_000]),
    patience=st.sampled_from([0, 100]),
)
def test_generated_odd_conversations_get_the_twins_keep(
    first, second, rng, ceiling, patience
) -> None:
    """The shared generator's conversations (odd ones too: late and repeated results, messages of
    another role), interleaved, with the same events."""
    requests = interleaved(rng, Scenario(0, _own(first, 0)), Scenario(1, _own(second, 1)))
    check(requests, ceiling, patience)


def _plain(n: int, result: int = 3_000) -> list[dict]:
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    for k in range(n):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"p": k}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * result}
        msgs += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [res]}]
    return msgs


def spelt_twice(messages: list[dict]) -> bytes:
    """A body whose ``messages`` is spelt twice (JSON.parse reads the last): the gateway parses
    it whole, and such a body is not kept (it has no memory)."""
    return b"".join(
        [
            b'{"model":"m","messages":[],"system":',
            SERIALISE["javascript"](SYSTEM),
            b',"messages":',
            SERIALISE["javascript"](messages),
            b',"max_tokens":1}',
        ]
    )


def _pruned_sequence(result: int = 3_000) -> list[list[dict]]:
    """Seven growing requests (4 to 10 tool rounds, each result of ``result`` characters), then
    two more (11 and 12 rounds) in which an older result is shortened (the cache breaks at it on
    the first of them)."""
    msgs = _plain(12, result)
    lists = [marked(msgs[: 2 * k + 1], 1) for k in range(4, 11)]
    cut = [*msgs[:5], {**msgs[5], "content": [{**msgs[5]["content"][0], "content": "r"}]}]
    lists += [marked([*cut, *msgs[6:n]], 1) for n in (23, 25)]
    return lists


def test_a_break_moves_the_cleared_part_for_free_and_holds_it() -> None:
    fitter = Fitter(Knobs())
    twin = Conversation()
    stateless, free = [], []
    lists = _pruned_sequence()
    for m in lists:
        got = fit(fitter, SERIALISE["javascript"](claude_code(m)))
        rest = system_facts(SYSTEM)[0]
        assert got == free_edit(twin, EDIT, m, rest=rest)
        free.append(got.keep)
        stateless.append(paid_edit(EDIT, m, rest=rest).keep)
    assert fitter.free_moves == twin.moves == 1
    # the break (8th request) clears all but KEEP; the next requests hold the boundary
    assert free[:7] == stateless[:7]
    assert free[7:] == [EDIT.keep, EDIT.keep + 1]
    assert all(f < s for f, s in zip(free[7:], stateless[7:], strict=True))
    # a body parsed whole (here: messages spelt twice, which JSON.parse reads as the last) is
    # not kept and has no memory: the stateless keep (the free one would be 4)
    m = lists[-1]
    raw = spelt_twice(m)
    walked = fitter.walked
    assert fit(fitter, raw) == paid_edit(EDIT, m, rest=system_facts(SYSTEM)[0])
    assert (
        fitter.walked == walked + 1
        and free[-1] < stateless[-1] == paid_edit(EDIT, m, rest=system_facts(SYSTEM)[0]).keep
    )


def test_the_knob_is_read_from_the_environment() -> None:
    assert Knobs.from_env({}).free
    assert not Knobs.from_env({"CLAUDE_CTX_CLEAR_FREE": " Off "}).free
    assert Knobs.from_env({"CLAUDE_CTX_CLEAR_FREE": "1"}).free


def test_the_scans_fingerprint_is_the_twins() -> None:
    """The walk's per-message size leaves cache_control marks out as the twin's message_size
    does (marked text, tool_use, tool_result and unknown blocks; other roles; not objects)."""
    from engine.twins.free_moves import fingerprint
    from engine.twins.policy_scan import fingerprint_of, scan_of

    rng = random.Random(7)
    msgs: list[Any] = marked(_rounds(rng), 2)
    msgs += [
        {
            "role": "system",
            "content": [{"type": "odd", "x": [1, 2], "cache_control": {**MARK, "ttl": "1h"}}],
        },
        {"role": 3, "content": "s"},
        "not an object",
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "z", "name": "R", "input": {}, "cache_control": MARK}
            ],
        },
    ]
    scan = scan_of(msgs, EDIT)
    with_prints = type(scan)(EDIT, prints=True)
    with_prints.extend(msgs)
    assert fingerprint_of(with_prints.points) == fingerprint(msgs)
    assert [p.size for p in scan.points] == [0] * len(msgs)  # not asked for: nothing computed
    assert with_prints.keep() == scan.keep()


def test_the_gateway_server_sends_the_free_keep() -> None:
    """Through HTTP and the mock: the sequence with a break gets the twin's keeps from the
    gateway's environment (the free move on by default; off: the stateless ones)."""
    from test_gateway_http import HEADERS, post

    from engine.twins.context_clear import knobs_from_env
    from gateway.server import ThreadedGateway
    from lab.mock import MockConfig, MockServer

    lists = _pruned_sequence()
    for env in ({}, {"CLAUDE_CTX_CLEAR_FREE": "0"}):
        edit = knobs_from_env(env)
        assert edit is not None
        twin = Conversation()
        rest, extra = system_facts(SYSTEM)
        want = [
            (
                free_edit(twin, edit, m, rest=rest, extra=extra)
                if not env
                else paid_edit(edit, m, rest=rest, extra=extra)
            ).keep
            for m in lists
        ]
        with (
            MockServer(MockConfig()) as mock,
            ThreadedGateway(upstream=mock.base_url, env=env) as gw,
        ):
            for m in lists:
                status, _, reply = post(
                    gw.url, "/v1/messages", SERIALISE["javascript"](claude_code(m)), HEADERS
                )
                assert status == 200, reply
            sent = [
                r.body["context_management"]["edits"][-1]["keep"]["value"] for r in mock.requests()
            ]
            fitter = gw.gateway.state.fitter
            assert fitter is not None
        assert sent == want
        assert fitter.free_moves == (0 if env else 1) and twin.moves == (0 if env else 1)
