"""The twin's output through the e2e mock's own preserved-thinking check
(lab/thinking_binding.py): signatures made by the mock over what was really sent, then every
later request checked by it. Sessions are driven the way Claude Code drives them: a typed prompt
starts from the full history, a tool round continues from what the previous request sent."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from msgs import MAX_EXAMPLES, assistant, properties, text, user

from engine.api.thinking_check import in_tool_round
from engine.twins.textprune import prune
from lab import thinking_binding as binding

LONG = "0123456789abcdefghij" * 2


def api_messages(sent: list[Any]) -> list[dict[str, Any]]:
    """Claude Code's normalisation, as far as the check can see it: records of one reply
    (same message.id) form one assistant message, consecutive user records one user message."""
    out: list[dict[str, Any]] = []
    last_id: object = None
    for rec in sent:
        if not isinstance(rec, dict) or rec.get("type") not in ("user", "assistant"):
            continue
        content = rec["message"]["content"]
        blocks = [text(content)] if isinstance(content, str) else list(content)
        role = rec["type"]
        mid = rec["message"].get("id")
        if out and out[-1]["role"] == role and (role == "user" or mid == last_id):
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
        last_id = mid
    return out


def drive(script: list[str], env: dict[str, str]) -> tuple[int, int]:
    """Run a script of "prompt" / "round" / "answer" steps; returns (requests, rejected)."""
    history: list[dict[str, Any]] = []
    previous: tuple[int, list[Any]] | None = None
    requests = rejected = 0
    for serial, step in enumerate(script):
        if step == "prompt":
            history.append(user(f"Task {serial}: " + LONG))
            continue
        start = len(history)
        if previous is not None and in_tool_round(history, start):
            given = previous[1] + history[previous[0] : start]
        else:
            given = list(history)
        sent = prune(given, env)
        body = {"system": "s", "tools": [], "messages": api_messages(sent)}
        requests += 1
        rejected += bool(binding.check(body))
        thinking = f"thinking {serial}"
        signature = binding.sign(body, len(body["messages"]), 0, thinking)
        blocks = [{"type": "thinking", "thinking": thinking, "signature": signature}, text(LONG)]
        if step == "round":
            blocks.append({"type": "tool_use", "id": f"t{serial}", "name": "Bash", "input": {}})
        for block in blocks:
            history.append(assistant([block]))
            history[-1]["message"]["id"] = f"msg{serial}"
        if step == "round":
            result = {"type": "tool_result", "tool_use_id": f"t{serial}", "content": LONG}
            history.append(user([result]))
        previous = (start, sent)
    return requests, rejected


EAGER = {
    "CLAUDE_TEXT_PRUNE_KEEP": "1",
    "CLAUDE_TEXT_PRUNE_STEP": "1",
    "CLAUDE_TEXT_PRUNE_THRESHOLD": "0",
    "CLAUDE_TEXT_PRUNE_MAX_CHARS": "10",
}


def test_the_mock_rejects_0_1_0_and_accepts_the_thinking_safe_rule() -> None:
    script = ["prompt", "round", "round", "answer"] * 6
    requests, rejected = drive(script, {**EAGER, "CLAUDE_TEXT_PRUNE_THINKING": "ignore"})
    assert rejected > requests // 2
    assert drive(script, EAGER) == (requests, 0)


turns = st.lists(
    st.tuples(st.integers(0, 3), st.booleans()).map(
        lambda t: ["prompt"] + ["round"] * t[0] + (["answer"] if t[1] or not t[0] else [])
    ),
    min_size=2,
    max_size=9,
).map(lambda ts: [s for t in ts for s in t])
knobs = st.fixed_dictionaries(
    {
        "CLAUDE_TEXT_PRUNE_KEEP": st.sampled_from(["1", "2", "3"]),
        "CLAUDE_TEXT_PRUNE_STEP": st.sampled_from(["1", "2"]),
        "CLAUDE_TEXT_PRUNE_THRESHOLD": st.sampled_from(["0", "100", "300"]),
        "CLAUDE_TEXT_PRUNE_MAX_CHARS": st.sampled_from(["10", "80"]),
    }
)


def test_property_the_mock_never_rejects_a_request() -> None:
    seen: Counter[str] = Counter()

    @properties()
    @given(turns, knobs)
    def run(script: list[str], env: dict[str, str]) -> None:
        assert drive(script, env)[1] == 0, (script, env)
        old = drive(script, {**env, "CLAUDE_TEXT_PRUNE_THINKING": "ignore"})[1]
        seen["0.1.0 rejected"] += old > 0

    run()
    assert seen["0.1.0 rejected"] > 0.2 * MAX_EXAMPLES, seen
