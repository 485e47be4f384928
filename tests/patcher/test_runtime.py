"""The patched fixtures run in node, and what their query loop sends is what the twin predicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SHAPE_FIXTURES, run_node

from engine.twins import textprune
from patcher import ops

SHAPES = SHAPE_FIXTURES
ENV = {
    "CLAUDE_TEXT_PRUNE_THRESHOLD": "0",
    "CLAUDE_TEXT_PRUNE_KEEP": "2",
    "CLAUDE_TEXT_PRUNE_STEP": "1",
    "CLAUDE_TEXT_PRUNE_MAX_CHARS": "20",
    # every turn of conversation() ends inside a tool round, where the thinking-safe rule never
    # moves the cutoff: these tests run the 0.1.0 rule; test_patched_loop_keeps_thinking_safe
    # runs the other one
    "CLAUDE_TEXT_PRUNE_THINKING": "ignore",
}


def conversation(turns: int) -> list[dict]:
    msgs: list[dict] = [
        {
            "type": "user",
            "isMeta": True,
            "uuid": "meta",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "<system-reminder>" + "x" * 200}],
            },
        }
    ]
    for t in range(turns):
        msgs += [
            {
                "type": "user",
                "uuid": f"u{t}",
                "message": {
                    "role": "user",
                    "content": f"question {t}: " + "please look at this 🧹 " * 10,
                },
            },
            {
                "type": "assistant",
                "uuid": f"a{t}",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm " * 50, "signature": "sig"},
                        {"type": "text", "text": f"answer {t}\r\n" + "long explanation " * 20},
                        {
                            "type": "tool_use",
                            "id": f"t{t}",
                            "name": "Read",
                            "input": {"file": "a.py"},
                        },
                    ],
                },
            },
            {
                "type": "user",
                "uuid": f"r{t}",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{t}", "content": "data " * 100}
                    ],
                },
            },
        ]
    return msgs


def sent(node: str, cli: Path, messages: list[dict], env: dict[str, str]) -> list[dict]:
    msgs = cli.parent / "messages.json"
    msgs.write_text(json.dumps(messages))
    proc = run_node(node, [str(cli), "--run", str(msgs)], env=env)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stderr == b""  # the prune never prints into the terminal
    return json.loads(proc.stdout)


@pytest.mark.parametrize("name", SHAPES)
def test_patched_loop_sends_the_pruned_messages(name: str, fixture_copy, node: str) -> None:
    cli = fixture_copy(name)
    messages = conversation(6)
    assert sent(node, cli, messages, ENV) == messages  # unpatched: sent as is
    ops.apply_file(cli)
    out = sent(node, cli, messages, ENV)
    expected = textprune.prune(messages, ENV)
    assert expected != messages  # the knobs make it fire
    assert out == expected
    # the kept turns and every non-text block are untouched
    assert out[-6:] == messages[-6:]
    assert sum("[earlier context pruned]" in json.dumps(m) for m in out) >= 4


def test_disable_and_threshold_leave_messages_alone(fixture_copy, node: str) -> None:
    cli = fixture_copy("s6-2.1.112.js")
    ops.apply_file(cli)
    messages = conversation(6)
    assert sent(node, cli, messages, {**ENV, "CLAUDE_TEXT_PRUNE_DISABLE": "1"}) == messages
    assert sent(node, cli, messages, {**ENV, "CLAUDE_TEXT_PRUNE_THRESHOLD": "999999"}) == messages
    assert sent(node, cli, messages, {}) == messages  # default threshold 20000 not reached


@pytest.mark.parametrize("name", SHAPES)
def test_patched_loop_keeps_thinking_safe(name: str, fixture_copy, node: str) -> None:
    """The thinking-safe rule in the patched loop: each turn ends with an answer, so the last
    typed prompt is a free request point; old thinking is left out, as the twin says."""
    cli = fixture_copy(name)
    messages = conversation(6)
    for t in range(6):  # an answer after each tool round
        at = messages.index(next(m for m in messages if m.get("uuid") == f"r{t}")) + 1
        answer = {"type": "text", "text": f"done {t}: " + "summary " * 20}
        messages.insert(
            at,
            {
                "type": "assistant",
                "uuid": f"d{t}",
                "message": {"role": "assistant", "content": [answer]},
            },
        )
    messages.append(
        {"type": "user", "uuid": "last", "message": {"role": "user", "content": "next"}}
    )
    env = {k: v for k, v in ENV.items() if k != "CLAUDE_TEXT_PRUNE_THINKING"}
    ops.apply_file(cli)
    out = sent(node, cli, messages, env)
    outcome = textprune.prune_detailed(messages, env)
    assert outcome.thinking_dropped > 0 and outcome.blocks_pruned > 0
    assert out == outcome.messages
