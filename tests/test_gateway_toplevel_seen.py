"""gateway.toplevel keeps its last fast walks with the bytes they read: a body that starts (ends)
with those bytes gets the kept front (back) members instead of a walk. The result must be the
walk's own, whatever else the body holds."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import toplevel
from gateway.toplevel import TAIL_WINDOW, VALUE_BUDGET, TopLevel, scan


def fresh(body: bytes) -> TopLevel | None:
    """The walk of ``body`` with nothing kept."""
    toplevel._FRONTS.clear()
    toplevel._BACKS.clear()
    return scan(body)


@pytest.fixture(autouse=True)
def _nothing_kept() -> None:
    toplevel._FRONTS.clear()
    toplevel._BACKS.clear()


def conversation(rounds: int, model: str = "claude-opus-4-6", **tail: object) -> bytes:
    """A Claude Code request: model, messages (``rounds`` tool rounds), system, tools, then the
    small members."""
    messages: list[dict] = [{"role": "user", "content": "Fix the failing tests."}]
    for i in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ü ✓ x " * 300}
                ],
            }
        )
    body = {
        "model": model,
        "messages": messages,
        "system": [{"type": "text", "text": "You are Claude Code. " * 100}],
        "tools": [{"name": f"T{t}", "description": "does " * 60} for t in range(12)],
        "metadata": {"user_id": "u"},
        "max_tokens": 32000,
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "stream": True,
        **tail,
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def test_a_growing_conversation_walked_once_each_end() -> None:
    bodies = [conversation(r) for r in range(8, 20)]
    assert len(bodies[0]) > TAIL_WINDOW
    walks = [fresh(b) for b in bodies]
    toplevel._FRONTS.clear()
    toplevel._BACKS.clear()
    seen = [scan(b) for b in bodies]
    assert seen == walks
    assert walks[0] is not None and walks[0].gap is not None  # the fast walk, with its gap
    assert len(toplevel._FRONTS) == 1 and len(toplevel._BACKS) == 1  # walked once, then kept


def test_different_bytes_where_the_walk_read_are_walked() -> None:
    base = conversation(10)
    scan(base)
    others = [
        conversation(10, model="claude-sonnet-4-6"),  # the front differs
        conversation(10, stream=False),  # a member changed at the end (a key spelt again)
        conversation(10, temperature=1),  # one more member at the end
        base.replace(b'"stream":true', b'"stream" : true'),  # whitespace where the walk read
    ]
    for other in others:
        assert other != base
        got = scan(other)
        assert got == fresh(other)
        scan(base)  # kept again for the next one


def test_same_ends_other_middle_and_length() -> None:
    short, long = conversation(9), conversation(30)
    assert scan(short) == fresh(short)
    toplevel._FRONTS.clear()
    toplevel._BACKS.clear()
    scan(short)
    got = scan(long)  # both ends reused, at the long body's offsets
    assert got == fresh(long)
    assert got is not None and got.gap is not None and got.gap[1] > len(short)


def test_a_body_shorter_than_the_window_is_walked() -> None:
    small = conversation(1)
    assert len(small) <= TAIL_WINDOW
    scan(conversation(12))
    assert scan(small) == fresh(small)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=0, max_value=2 * VALUE_BUDGET),
    st.sampled_from([b"x", b'"', b"\\", b"]", b"}", b"{", b"[", b",", b" ", b"\xc3\xbc"]),
)
def test_one_byte_changed_anywhere_near_the_ends(at: int, byte: bytes) -> None:
    base = conversation(12)
    for pos in (at, len(base) - 1 - at):
        changed = base[:pos] + byte + base[pos + 1 :]
        toplevel._FRONTS.clear()
        toplevel._BACKS.clear()
        scan(base)
        assert scan(changed) == fresh(changed)


def test_gateways_on_several_threads_share_the_kept_walks() -> None:
    """Several gateways in one process (threads) walk and keep at once: no walk fails because
    another thread kept one meanwhile, and every result is the walk's own."""
    import sys
    import threading

    bodies = [conversation(10, model=f"claude-{k}") for k in range(24)]
    expected = [fresh(b) for b in bodies]
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(1500):  # enough to hit a switch inside a lookup (measured)
                k = (i * 7 + offset) % len(bodies)
                assert scan(bodies[k]) == expected[k]
        except BaseException as exc:
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_a_walk_kept_under_another_budget_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk depends on the budget and window it read under: one kept under a small budget
    (which stopped at the model's value) is not the walk of the same bytes under the real one.
    (Tests that shrink the budget ran before others in one process and left such walks kept.)"""
    body = conversation(3)
    want = fresh(body)
    assert want is not None and want.gap_key == "messages"
    with monkeypatch.context() as m:
        m.setattr(toplevel, "VALUE_BUDGET", 16)
        m.setattr(toplevel, "TAIL_WINDOW", 64)
        small = scan(body)
        assert small is not None and small.gap_key != "messages"  # it stopped earlier
        assert toplevel._FRONTS and toplevel._BACKS
    assert scan(body) == want
