"""Differential test: the ``keep`` the injected clearing JavaScript sends under the ``paid``
policy (CLAUDE_CTX_CLEAR_POLICY, CEILING, PATIENCE; the default) against its Python twin
``engine.policy.paid_edit``, under node, over generated conversations whose results and inputs
differ in size, so that the break-even rule and the ceiling both decide."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import injected_clearing_js, need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_conversations import conversations

from engine.api.context_management import ClearToolUses
from engine.twins.context_clear import (
    ENV_NAMES,
    ENV_WINDOW_GUARD,
    edit_for_request,
    knobs_from_env,
    near_window,
    step_from_env,
)
from engine.twins.policy import (
    CEILING_SHARE,
    ceiling_from_env,
    paid_edit,
    patience_from_env,
    policy_from_env,
    thinking_size,
    uncached_system,
    write_extra,
)
from engine.twins.policy_scan import system_facts

DRIVER = r"""
import { readFileSync } from "node:fs";
const CASES = JSON.parse(readFileSync(0, "utf8"));
const fn = SNIPPET;
const names = NAMES;
const out = [];
for (const [env, messages, system] of CASES) {
  delete fn.memory; // each case on its own: no conversation remembered (the free move)
  for (const n of [...names, "CLAUDE_CTX_CLEAR_WINDOW_GUARD"]) delete process.env[n];
  Object.assign(process.env, env);
  const req = {model: "claude-sonnet-4-5", messages, betas: [], max_tokens: 1, system, tools: __TOOLS__};
  const frozen = JSON.stringify(req);
  const sent = fn(req);
  if (JSON.stringify(req) !== frozen) throw new Error("the input was mutated");
  out.push(sent === req ? null : sent.context_management.edits[0].keep.value);
}
process.stdout.write(JSON.stringify(out));
"""

MARK = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}  # the 1-hour cache: a write costs 2.0x (write_extra)
SYSTEM = [{"type": "text", "text": "You are Claude Code. " * 400, "cache_control": MARK}]
# what a move writes again of the system prompt (uncached_system): nothing (the last block is
# marked), a tail after the last mark (Claude Code 2.1.33-2.1.38's shape), unicode counted in
# UTF-16 units, nothing marked, a string, a null mark, blocks of other kinds, no system at all;
# marked for the 1-hour cache (Claude Code's billing-header shape, a tail after it), a ttl that
# is not "1h", a ttl on a block that is not an object
SYSTEMS = [
    SYSTEM,
    [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.37"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": MARK},
        {"type": "text", "text": "Instructions. " * 4_000},
    ],
    [
        {"type": "text", "text": "a", "cache_control": MARK},
        {"type": "text", "text": "b", "cache_control": MARK},
        {"type": "text", "text": "tail \u00e9\U0001f600 " * 3_000},
    ],
    [{"type": "text", "text": "Unmarked. " * 6_000}, {"type": "text", "text": "x" * 10}],
    "A string system prompt. " * 2_500,
    [{"type": "text", "text": "Null mark. " * 5_000, "cache_control": None}],
    [{"type": "text", "text": "s", "cache_control": MARK}, "text", {"type": "image"}, {"k": [1]}],
    None,
    [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.112"},
        {"type": "text", "text": "You are Claude Code. " * 400, "cache_control": HOUR},
    ],
    [
        {"type": "text", "text": "You are Claude Code.", "cache_control": HOUR},
        {"type": "text", "text": "Instructions. " * 4_000},
    ],
    [{"type": "text", "text": "t", "cache_control": {"type": "ephemeral", "ttl": "5m"}}],
    [{"type": "text", "text": "t", "cache_control": [HOUR]}, {"ttl": "1h"}],
]
TOOLS = [
    {
        "name": "Read",
        "description": "Reads a file. " * 50,
        "input_schema": {
            "type": "object",
            "properties": {"p": {"type": "string"}},
            "required": ["p"],
        },
    }
]
_ENV = st.fixed_dictionaries(
    {},
    optional={
        "CLAUDE_CTX_CLEAR_POLICY": st.sampled_from(["paid", "PAID ", "fixed", "other", ""]),
        "CLAUDE_CTX_CLEAR_CEILING": st.sampled_from(["1", "3000", "20_000", "90000", "0", "x"]),
        "CLAUDE_CTX_CLEAR_PATIENCE": st.sampled_from(["0", "30", "100", "400", "-1"]),
        "CLAUDE_CTX_CLEAR_KEEP": st.sampled_from(["0", "1", "3"]),
        "CLAUDE_CTX_CLEAR_STEP": st.sampled_from(["1", "20"]),
        "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS": st.sampled_from(["", "Bash", "Read,Edit"]),
        "CLAUDE_CTX_CLEAR_TOOL_INPUTS": st.sampled_from(["1", "0", "Edit"]),
        "CLAUDE_CTX_CLEAR_WINDOW_GUARD": st.sampled_from(["1", "0"]),
    },
)


def twin_keep(env: dict[str, str], messages: list[dict], system: object) -> int | None:
    edit = knobs_from_env(env)
    if edit is None:
        return None
    request = {"model": "claude-sonnet-4-5", "messages": messages, "betas": [], "system": system}
    if env.get(ENV_WINDOW_GUARD) == "1" and near_window({**request, "tools": TOOLS}):
        return None
    if policy_from_env(env) == "fixed":
        return edit_for_request(edit, messages, step_from_env(env)).keep
    # of the system prompt and tools, only the system blocks after the last cache_control count
    rest, extra = system_facts(system)
    ceiling = ceiling_from_env(env, request["model"], request["betas"])
    knobs = (ceiling, patience_from_env(env), 0, rest, extra)
    return paid_edit(edit, messages, *knobs).keep


@pytest.mark.node
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases=st.lists(
        st.tuples(_ENV, conversations(), st.sampled_from(SYSTEMS)), min_size=1, max_size=20
    )
)
def test_the_javascript_policy_keeps_what_the_twin_keeps(cases) -> None:
    node = need("node", "node is the ground truth for JavaScript")
    driver = DRIVER.replace("__SYSTEM__", json.dumps(SYSTEM)).replace(
        "__TOOLS__", json.dumps(TOOLS)
    )
    assert _node_run(node, driver, cases) == [twin_keep(e, m, s) for e, m, s in cases]


def _rounds(prompt: int, rounds: int, result: int) -> tuple[list[dict], ClearToolUses]:
    """A prompt of ``prompt`` characters, then ``rounds`` rounds of one Read whose result holds
    ``result`` characters; the edit at KEEP 1."""
    msgs: list[dict] = [{"role": "user", "content": "p" * prompt}]
    for k in range(rounds):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * result}
        msgs += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [res]}]
    edit = knobs_from_env({"CLAUDE_CTX_CLEAR_KEEP": "1"})
    assert edit is not None
    return msgs, edit


def test_the_policy_moves_when_the_rent_pays_and_at_the_ceiling() -> None:
    """Hand-checked: ten rounds of 4,000-token results after a 40,000-token prompt."""
    msgs, edit = _rounds(160_000, 10, 16_000)
    # the rent of the clearable results never reaches 1.15 x the 40K+ kept: no move
    assert paid_edit(edit, msgs, ceiling=10**9, patience=100).keep == 10
    # with no patience the first clearable result moves at once, and every later one
    assert paid_edit(edit, msgs, ceiling=10**9, patience=0).keep == 1
    # past the ceiling (at the 3rd result: 40K + 3 x 4K) it moves whatever it costs, and again
    # each time the kept part reaches it (every other round here): 2 uses kept at the end
    assert paid_edit(edit, msgs, ceiling=50_000, patience=100).keep == 2


def test_a_system_prompt_after_its_breakpoint_makes_a_move_dearer() -> None:
    """Twelve rounds of 40,000-character results after a 4,000-character prompt, KEEP 1: a move
    pays when 2 x rent x 100 >= 23 x 100 x (kept - free + rest), ``rest`` the system prompt's
    characters after its last cache_control (what a break writes again)."""
    msgs, edit = _rounds(4_000, 12, 40_000)
    marked = [{"type": "text", "text": "s" * 50_000, "cache_control": MARK}]
    tail = [*marked, {"type": "text", "text": "t" * 100_000}]
    assert uncached_system(marked) == 0 and uncached_system(tail) == 100_000
    assert uncached_system("s" * 7) == 7 and uncached_system(None) == 0

    def keep(rest: int) -> int:
        return paid_edit(edit, msgs, 10**9, 100, 0, rest).keep

    # the marked system prompt costs nothing more: the rent pays for moves (2 uses kept)
    assert keep(uncached_system(marked)) == 2
    # a 100,000-character tail makes every move dearer: later moves, 3 kept
    assert keep(uncached_system(tail)) == 3
    # 400,000 characters: no rent of these results ever reaches the price, nothing moves
    assert keep(400_000) == 12


_CACHE: list[str] = []


def _snippet_cached() -> str:
    if not _CACHE:
        _CACHE.append(injected_clearing_js())
    return _CACHE[0]


def _node_run(node: str, driver: str, payload: object) -> object:
    """``driver`` (its ``SNIPPET`` the injected function, ``NAMES`` the knobs' names) run by
    node on ``payload`` (JSON on its stdin) without the ``CLAUDE_*`` variables of this process:
    the JSON it prints."""
    script = driver.replace("NAMES", json.dumps(ENV_NAMES)).replace("SNIPPET", _snippet_cached())
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_")}
    res = subprocess.run(
        [node, "--input-type=module", "-e", script],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)


def test_near_window_is_the_auto_compact_threshold_at_3_chars_a_token() -> None:
    """(200000 - 33000) * 3 characters of JSON leave the edit out; a [1m] model waits for 1M."""
    limit = (200_000 - 33_000) * 3
    base = {"model": "claude-sonnet-4-5", "betas": [], "messages": []}
    overhead = len('[{"role":"user","content":""}]')
    at = {**base, "messages": [{"role": "user", "content": "x" * (limit - overhead)}]}
    below = {**base, "messages": [{"role": "user", "content": "x" * (limit - overhead - 1)}]}
    assert near_window(at) and not near_window(below)
    assert not near_window({**at, "model": "claude-sonnet-4-5[1m]"})
    assert not near_window({**at, "betas": ["context-1m-2025-08-07"]})
    # JavaScript counts UTF-16 units: an emoji is 2
    emoji = {**base, "messages": [{"role": "user", "content": "\U0001f600" * (limit // 2)}]}
    assert near_window(emoji)


def test_the_one_hour_cache_makes_every_move_dearer() -> None:
    """A request whose system prompt asks for the 1-hour cache (``ttl: "1h"``, as Claude Code
    marks it for many subscribers) pays 2.0x for the rewrite a move causes, not 1.25x: the rule
    weighs 38 instead of 23 (20 x the extra price of a write over a read). The same twelve
    rounds of 40,000-character results after a 4,000-character prompt, KEEP 1."""
    msgs, edit = _rounds(4_000, 12, 40_000)
    five = [{"type": "text", "text": "s", "cache_control": MARK}]
    hour = [{"type": "text", "text": "s", "cache_control": HOUR}]
    assert write_extra(five) == 23 and write_extra(hour) == 38
    assert write_extra("s") == write_extra(None) == write_extra([{"ttl": "1h"}]) == 23

    def keeps(system: list[dict]) -> list[int]:
        extra = write_extra(system)
        return [paid_edit(edit, msgs[:n], 10**9, 100, 0, 0, extra).keep for n in (13, 15, 25)]

    # 5-minute cache: the first move comes with the 6th result (13 messages), the list ends
    # with 2 kept; 1-hour: the rent must reach 38/23 of the price, so the first move waits a
    # round (15 messages) and the whole list ends with 6 kept
    assert keeps(five) == [1, 2, 2]
    assert keeps(hour) == [6, 1, 6]


# each case [env, model, betas, messages] on its own (no conversation remembered): the keep of
# the clearing edit the injected function sends
KEEP_DRIVER = r"""
import { readFileSync } from "node:fs";
const CASES = JSON.parse(readFileSync(0, "utf8"));
const fn = SNIPPET;
const out = [];
for (const [env, model, betas, messages] of CASES) {
  delete fn.memory;
  for (const n of NAMES) delete process.env[n];
  Object.assign(process.env, env);
  const req = {model, messages, betas, max_tokens: 1, system: "s"};
  const edits = fn(req).context_management.edits;  // a clear_thinking edit, if any, comes first
  out.push(edits.find((e) => e.type === "clear_tool_uses_20250919").keep.value);
}
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.node
def test_the_default_ceiling_scales_to_the_window_the_request_shows() -> None:
    """A ``[1m]`` model or a ``context-1m`` beta: the default ceiling is 90,000 scaled to the
    1M window's threshold (967,000 tokens: 521,138), in the JavaScript as in the twin. Forty
    rounds of 10,000-token results (440K tokens of 4 characters), the rent never paid
    (PATIENCE 1,000,000): at 200K the ceiling makes the moves (a move whatever it costs from
    90,000, every few rounds: what made a native 1M session +249% dearer in the gateway before
    its ceiling was scaled); at 1M none is due; a CEILING set is taken as it is."""
    node = need("node", "node is the ground truth for JavaScript")
    msgs, _ = _rounds(160_000, 40, 40_000)
    slow = {"CLAUDE_CTX_CLEAR_PATIENCE": "1000000"}
    set_ = {**slow, "CLAUDE_CTX_CLEAR_CEILING": "90000"}
    cases = [
        (slow, "claude-sonnet-4-5", []),
        (slow, "claude-sonnet-4-5[1m]", []),
        (slow, "claude-sonnet-4-5", ["context-1m-2025-08-07"]),
        (set_, "claude-sonnet-4-5[1m]", []),
    ]
    got = _node_run(node, KEEP_DRIVER, [[e, m, b, msgs] for e, m, b in cases])
    assert ceiling_from_env({}, "claude-sonnet-4-5") == 90_000
    assert ceiling_from_env({}, "claude-sonnet-4-5[1m]") == 521_138
    assert ceiling_from_env({}, "x", ["context-1m-2025-08-07"]) == 521_138
    assert ceiling_from_env({"CLAUDE_CTX_CLEAR_CEILING": "90000"}, "x[1m]") == 90_000
    want = []
    for e, m, b in cases:
        edit = knobs_from_env(e)
        assert edit is not None
        want.append(paid_edit(edit, msgs, ceiling_from_env(e, m, b), 1_000_000, 0, 1).keep)
    assert got == want
    assert got[1] == got[2] == 40  # nothing moved at 1M
    assert got[0] == got[3] < 40  # the ceiling's moves at 200K, and with CEILING set


@pytest.mark.node
def test_an_omitted_thinking_block_weighs_its_signature() -> None:
    """A reply whose thinking is omitted (display ``"omitted"``, the native builds' default)
    carries an empty text and the signature: the API counts the thinking behind it in every
    later prompt, so a move rewrites it too. Twelve rounds of 40,000-character results after a
    4,000-character prompt, KEEP 1, each reply with a thinking block of a 40,000-character
    signature: omitted, it weighs 30,000 characters (3 per 4 of the signature) and no move
    pays within the twelve rounds (the kept part grows by 30,000 a round and the price with it);
    shown (a 100-character summary), or absent, the first move comes with the 6th result, as
    before. The JavaScript and the twin agree on each."""
    node = need("node", "node is the ground truth for JavaScript")
    edit = knobs_from_env({"CLAUDE_CTX_CLEAR_KEEP": "1"})
    assert edit is not None
    omitted = {"type": "thinking", "thinking": "", "signature": "S" * 40_000}
    shown = {**omitted, "thinking": "t" * 100}
    assert thinking_size(omitted) == 30_000 and thinking_size(shown) == 100
    assert thinking_size({"type": "thinking", "thinking": ""}) == 0  # no signature: nothing
    # a text that is not a string counts 0, as in JavaScript, and never raises
    assert thinking_size({"type": "thinking", "thinking": 7, "signature": "S" * 8}) == 6
    # lengths in UTF-16 units, as JavaScript's (a real signature is base64, ASCII)
    assert thinking_size({"type": "thinking", "thinking": "", "signature": "\U0001f600" * 4}) == 6

    def rounds(thinking: dict | None) -> list[dict]:
        msgs, _ = _rounds(4_000, 12, 40_000)
        if thinking:
            for m in msgs[1::2]:
                m["content"] = [thinking, *m["content"]]
        return msgs

    lists = [rounds(t)[:n] for t in (None, shown, omitted) for n in (13, 25)]
    twin = [paid_edit(edit, m, 999_999_999, 100, 0, 0, 23).keep for m in lists]
    assert twin == [1, 2, 1, 2, 6, 12]
    env = {"CLAUDE_CTX_CLEAR_KEEP": "1", "CLAUDE_CTX_CLEAR_CEILING": "999999999"}  # rent decides
    assert _node_run(node, KEEP_DRIVER, [[env, "claude-sonnet-4-5", [], m] for m in lists]) == twin


@pytest.mark.node
def test_a_move_the_ceiling_forces_frees_a_tenth_of_it() -> None:
    """Past the ceiling a move is made whatever it costs, but only once it frees a tenth of the
    ceiling (``CEILING_SHARE``): a 400,000-character prompt nothing clears (100,000 tokens of 4,
    past the 90,000 ceiling from the start), then rounds of one 4,000-character result, KEEP 1,
    the rent never paid (PATIENCE 1,000,000). A move waits for 9 results (36,000 characters: a
    tenth of 360,000) and then clears them all; before the share every request past the ceiling
    moved, each a rewrite of the whole prompt for one result (a never-seen 2.1.14 session that
    starts at 149,000 tokens: 20 rewrites in a row, +210% against unpatched). The JavaScript and
    the twin agree on each list."""
    node = need("node", "node is the ground truth for JavaScript")
    assert CEILING_SHARE == 10
    msgs, edit = _rounds(400_000, 20, 4_000)
    counts = (1, 9, 10, 11, 18, 19, 20)
    lists = [msgs[: 1 + 2 * n] for n in counts]
    twin = [paid_edit(edit, m, 90_000, 1_000_000, 0, 0, 23).keep for m in lists]
    # 9 results kept until the 10th comes (then all but KEEP cleared), again with the 19th
    assert twin == [1, 9, 1, 2, 9, 1, 2]
    # a ceiling a tenth as high lets each result move on its own (4,000 >= 3,600)
    assert [paid_edit(edit, m, 9_000, 1_000_000, 0, 0, 23).keep for m in lists] == [1] * 7
    env = {"CLAUDE_CTX_CLEAR_KEEP": "1", "CLAUDE_CTX_CLEAR_PATIENCE": "1000000"}
    env["CLAUDE_CTX_CLEAR_CEILING"] = "90000"
    assert _node_run(node, KEEP_DRIVER, [[env, "claude-sonnet-4-5", [], m] for m in lists]) == twin
