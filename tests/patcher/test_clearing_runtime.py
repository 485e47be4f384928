"""The server-side clearing injection at run time, in node: what a patched request-builder
fixture really sends (edit, beta, merged context_management), the refusal fallback, the
providers it never sends to, the knobs read on every request, and the snippet's guarantees
(never mutates, never throws, never blocks on its debug log)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from conftest import run_node

from patcher import markers, ops, snippet

pytestmark = pytest.mark.node

BETA = "context-management-2025-06-27"
THINKING_EDIT = {"type": "clear_thinking_20251015", "keep": "all"}
DEFAULT_EDIT = {
    "type": "clear_tool_uses_20250919",
    "trigger": {"type": "input_tokens", "value": 30000},
    "keep": {"type": "tool_uses", "value": 1},  # the paid policy's KEEP (no tool use here)
    "clear_tool_inputs": True,
}
MESSAGES = [
    {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "list the files"}},
    {
        "type": "assistant",
        "uuid": "a1",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "Sure."}]},
    },
    {"type": "user", "uuid": "u2", "message": {"role": "user", "content": "now the tests"}},
]


@pytest.fixture
def msgs(tmp_path: Path) -> Path:
    path = tmp_path / "msgs.json"
    path.write_text(json.dumps(MESSAGES))
    return path


def _patched(fixture_copy, name: str) -> Path:
    cli = fixture_copy(name)
    r = ops.apply_file(cli)
    assert r.action == "patched" and r.clearing not in (None, "none"), r
    return cli


def _requests(node: str, cli: Path, msgs: Path, *args: str, env: dict[str, str] | None = None):
    res = run_node(node, [str(cli), "--requests", str(msgs), *args], env=env)
    assert res.returncode == 0, res.stderr.decode()
    assert res.stderr == b""
    return json.loads(res.stdout)


def _edits(req: dict) -> list[dict] | None:
    cm = req["body"].get("context_management")
    return None if cm is None else cm["edits"]


@pytest.mark.parametrize("name", ["rq-1.0.60.js", "rq-2.0.76.js", "rq-2.1.112.js"])
def test_every_request_carries_the_edit_and_the_beta_and_nothing_else_changes(
    name: str, node: str, fixture_copy, msgs: Path, tmp_path: Path
) -> None:
    original = fixture_copy(name)
    before = _requests(node, original, msgs, "--times", "2")
    cli = _patched(lambda n: original, name)
    after = _requests(node, cli, msgs, "--times", "2")
    assert after["errors"] == before["errors"] == []
    assert len(after["requests"]) == len(before["requests"]) == 2
    for old, new in zip(before["requests"], after["requests"], strict=True):
        assert new["beta"] == old["beta"] + "," + BETA  # the header gains exactly the beta
        assert _edits(new) == [DEFAULT_EDIT]
        rest = {k: v for k, v in new["body"].items() if k != "context_management"}
        assert rest == old["body"]  # every other field is what Claude Code built


def test_claude_codes_own_edits_stay_first_and_the_beta_is_not_doubled(
    node: str, fixture_copy, msgs: Path
) -> None:
    original = fixture_copy("rq-2.1.112.js")
    before = _requests(node, original, msgs, "--thinking")
    assert _edits(before["requests"][0]) == [THINKING_EDIT]
    cli = _patched(lambda n: original, "rq-2.1.112.js")
    after = _requests(node, cli, msgs, "--thinking")
    for old, new in zip(before["requests"], after["requests"], strict=True):
        assert new["beta"] == old["beta"] and new["beta"].count(BETA) == 1
        assert _edits(new) == [THINKING_EDIT, DEFAULT_EDIT]  # clear_thinking must come first


def test_claude_codes_own_clear_tool_uses_edit_is_left_alone(
    node: str, fixture_copy, msgs: Path
) -> None:
    cli = _patched(fixture_copy, "rq-2.0.76.js")
    env = {"USE_API_CLEAR_TOOL_RESULTS": "1"}
    out = _requests(node, cli, msgs, env=env)
    for req in out["requests"]:
        edits = _edits(req)
        assert edits is not None and len(edits) == 1
        assert edits[0]["trigger"]["value"] == 180000  # Claude Code's, not ours


@pytest.mark.parametrize("name", ["rq-1.0.60.js", "rq-2.0.76.js", "rq-2.1.112.js"])
def test_a_refusal_makes_the_next_request_go_without_the_edit(
    name: str, node: str, fixture_copy, msgs: Path, tmp_path: Path
) -> None:
    cli = _patched(fixture_copy, name)
    log = tmp_path / "debug.jsonl"
    out = _requests(
        node, cli, msgs, "--refuse", "--times", "3", env={"CLAUDE_CTX_CLEAR_DEBUG": str(log)}
    )
    reqs = out["requests"]
    assert _edits(reqs[0]) == [DEFAULT_EDIT]
    assert all(
        not any(e["type"] == DEFAULT_EDIT["type"] for e in _edits(r) or []) for r in reqs[1:]
    )
    if name == "rq-1.0.60.js":
        # 1.0.x falls back to a non-streaming request after a stream error: that retry already
        # goes without the edit, so the user's turn is not even lost.
        assert out["errors"] == [] and len(reqs) == 4
    else:
        assert (
            len(out["errors"]) == 1 and "does not support the clear_tool_uses" in out["errors"][0]
        )
        assert len(reqs) == 3
    lines = [json.loads(x) for x in _wait_for_lines(log, 4)]
    actions = [x["action"] for x in lines]
    assert actions[:2] == ["added", "refused"] and set(actions[2:]) == {"skipped"}
    assert lines[1]["model"] == "claude-sonnet-4-5"
    assert "refused the edit for this model" in lines[2]["reason"]


@pytest.mark.parametrize(
    ("env", "args"),
    [
        ({"CLAUDE_CODE_USE_BEDROCK": "1"}, ()),
        ({"CLAUDE_CODE_USE_VERTEX": "true"}, ()),
        ({"CLAUDE_CODE_USE_FOUNDRY": "yes"}, ()),
        ({"CLAUDE_CTX_CLEAR_DISABLE": "1"}, ()),
        ({}, ("--no-betas",)),
        ({}, ("--model", "claude-3-7-sonnet-20250219")),
        ({}, ("--model", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")),
    ],
)
def test_never_sent_where_it_is_known_to_be_refused(
    env: dict[str, str], args: tuple[str, ...], node: str, fixture_copy, msgs: Path
) -> None:
    original = fixture_copy("rq-2.1.112.js")
    before = _requests(node, original, msgs, *args, env=env)
    cli = _patched(lambda n: original, "rq-2.1.112.js")
    assert _requests(node, cli, msgs, *args, env=env) == before


def test_the_knobs_shape_the_edit(node: str, fixture_copy, msgs: Path) -> None:
    cli = _patched(fixture_copy, "rq-2.1.112.js")
    env = {
        "CLAUDE_CTX_CLEAR_TRIGGER": "120_000",
        "CLAUDE_CTX_CLEAR_KEEP": " 5 ",
        "CLAUDE_CTX_CLEAR_AT_LEAST": "20000",
        "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS": "Read, ,TodoWrite",
        "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "Edit,Write",
    }
    (edit,) = _edits(_requests(node, cli, msgs, env=env)["requests"][0]) or []
    assert edit == {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 120000},
        "keep": {"type": "tool_uses", "value": 5},
        "clear_at_least": {"type": "input_tokens", "value": 20000},
        "exclude_tools": ["Read", "TodoWrite"],
        "clear_tool_inputs": ["Edit", "Write"],
    }
    bad = {"CLAUDE_CTX_CLEAR_TRIGGER": "lots", "CLAUDE_CTX_CLEAR_KEEP": "-1"}
    (edit,) = _edits(_requests(node, cli, msgs, env=bad)["requests"][0]) or []
    assert edit == DEFAULT_EDIT  # a typo falls back to the default, never a bad request


def test_the_debug_log_never_blocks_on_a_fifo_without_reader(
    node: str, fixture_copy, msgs: Path, tmp_path: Path
) -> None:
    cli = _patched(fixture_copy, "rq-2.1.112.js")
    fifo = tmp_path / "debug.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    out = _requests(node, cli, msgs, env={"CLAUDE_CTX_CLEAR_DEBUG": str(fifo)})
    assert time.monotonic() - started < 20
    assert [_edits(r) for r in out["requests"]] == [[DEFAULT_EDIT]] * 2
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def _wait_for_lines(path: Path, n: int) -> list[str]:
    """The debug log is written asynchronously: node exits after the writes complete, but be
    tolerant of a slow file system."""
    for _ in range(50):
        if path.exists() and len(path.read_text().splitlines()) >= n:
            break
        time.sleep(0.1)
    return path.read_text().splitlines()


# --- the snippet on its own ------------------------------------------------------------------

_DRIVER = r"""
const fn = SNIPPET;
const out = [];
const freeze = (o) => { if (o && typeof o === "object") { Object.values(o).forEach(freeze); Object.freeze(o); } return o; };
const req = freeze({model: "claude-opus-4-7", messages: [{role: "user", content: "hi"}],
  betas: ["claude-code-20250219", "context-management-2025-06-27"],
  context_management: {edits: [{type: "clear_thinking_20251015", keep: "all"}]}, max_tokens: 9});
const before = JSON.stringify(req);
process.env.CLAUDE_CTX_CLEAR_KEEP = "1";
const a = fn(req);
process.env.CLAUDE_CTX_CLEAR_KEEP = "7";
const b = fn(req);
out.push(JSON.stringify(req) === before, a !== req, a.messages === req.messages,
  a.context_management.edits[1].keep.value, b.context_management.edits[1].keep.value,
  a.context_management.edits[0] === req.context_management.edits[0]);
// never throws: garbage in, the same garbage out
const trap = {get model() { throw new Error("boom"); }, betas: []};
out.push(fn(null) === null, fn(42) === 42, fn(trap) === trap, fn(trap, "watch") === trap);
// watch returns exactly what it is given, and a rejection it sees stays the caller's
const pending = Promise.reject(Object.assign(new Error("400 x"), {status: 400}));
out.push(fn(pending, "watch") === pending);
pending.catch(() => {});
const list = [];
for (let i = 0; i < 200; i++) list.push({role: i % 2 ? "assistant" : "user", content: "x".repeat(400)});
const big = {model: "claude-opus-4-7", messages: list, betas: [], max_tokens: 9};
for (let i = 0; i < 200; i++) fn(big);
const t0 = process.hrtime.bigint();
for (let i = 0; i < 2000; i++) fn(big);
out.push(Number(process.hrtime.bigint() - t0) / 2000 / 1e6);
process.stdout.write(JSON.stringify(out));
"""


def test_the_snippet_never_mutates_reads_knobs_per_request_and_never_throws(node: str) -> None:
    js = _DRIVER.replace("SNIPPET", snippet.clear_source().decode().strip().rstrip(";"))
    res = run_node(node, ["--input-type=module", "-e", f"{js}"])
    assert res.returncode == 0 and res.stderr == b"", res.stderr.decode()
    *flags, ms_per_request = json.loads(res.stdout)
    assert flags == [True, True, True, 1, 7, True, True, True, True, True, True]
    assert ms_per_request < 1.0  # the brief's bound; bench/bench_clearing.mjs prints the number


def test_the_marked_snippet_is_the_shipped_file(fixture_copy) -> None:
    cli = _patched(fixture_copy, "rq-1.0.60.js")
    data = cli.read_bytes()
    assert markers._clear_snippet_bytes(data) == snippet.clear_source()
    assert markers.read(data, snippet.sha(), snippet.clear_sha()).state.value == "PATCHED"
