"""Differential test: the edit the gateway adds to a request body (gateway.rewrite.decide with
its clearing policy, gateway.policy) against the injected JavaScript's on the same body (parsed
by node) and the Python twin's (engine.twins.policy.paid_edit, edit_for_request for ``fixed``),
over generated conversations sent request after request as Claude Code sends them (each list
the previous one and a round more, the last block marked for the cache), under generated knobs.
The gateway keeps its state between the requests of a case, so its resumed walk is what is
checked."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import injected_clearing_js, need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_conversations import conversations

from engine.twins.context_clear import ENV_NAMES, edit_for_request, knobs_from_env, step_from_env
from engine.twins.policy import (
    ceiling_from_env,
    paid_edit,
    patience_from_env,
    policy_from_env,
)
from engine.twins.policy_scan import system_facts
from gateway.policy import Fitter, Knobs
from gateway.rewrite import decide

DRIVER = r"""
import { readFileSync } from "node:fs";
const CASES = JSON.parse(readFileSync(0, "utf8"));
const fn = SNIPPET;
const names = NAMES;
const out = [];
for (const [env, bodies] of CASES) {
  delete fn.memory; // each case one conversation: none remembered from the cases before
  for (const n of [...names, "CLAUDE_CTX_CLEAR_WINDOW_GUARD"]) delete process.env[n];
  Object.assign(process.env, env);
  const keeps = [];
  for (const body of bodies) {
    const req = JSON.parse(body);
    const sent = fn(req);
    keeps.push(sent === req ? null : sent.context_management.edits.at(-1).keep.value);
  }
  out.push(keeps);
}
process.stdout.write(JSON.stringify(out));
"""

MARK = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
SYSTEM = [{"type": "text", "text": "You are Claude Code. " * 200}]
# the system prompts a case sends (what a move writes again of it: engine.twins.policy
# uncached_system): none marked (all of it), the last block marked (nothing), a tail after the
# mark (Claude Code 2.1.33-2.1.38's shape; in UTF-16 units), a string, none at all
SYSTEMS: list[object] = [
    SYSTEM,
    [{"type": "text", "text": "You are Claude Code. " * 200, "cache_control": MARK}],
    [
        {"type": "text", "text": "You are Claude Code.", "cache_control": MARK},
        {"type": "text", "text": "Instructions \u00e9\U0001f600 " * 1_500},
    ],
    'A string system prompt with "system": in it. ' * 300,
    None,
    # marked for the 1-hour cache: a write costs 2.0x (engine.twins.policy.write_extra)
    [{"type": "text", "text": "You are Claude Code. " * 200, "cache_control": HOUR}],
    [
        {"type": "text", "text": "You are Claude Code.", "cache_control": HOUR},
        {"type": "text", "text": "Instructions " * 1_500},
    ],
]
TOOLS = [
    {"name": f"T{i}", "description": "d" * 200, "input_schema": {"type": "object"}}
    for i in range(30)
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
    },
)


def _marked(msgs: list[dict]) -> list[dict]:
    if not msgs or not isinstance(msgs[-1].get("content"), list) or not msgs[-1]["content"]:
        return msgs
    last = {**msgs[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}
    return [*msgs[:-1], {**msgs[-1], "content": [*msgs[-1]["content"][:-1], last]}]


def bodies_of(msgs: list[dict], system: int = 0, change: bool = False) -> list[bytes]:
    """Claude Code's requests of one conversation: a body per request point, as JSON.stringify
    writes it, in Claude Code's key order, with ``SYSTEMS[system]`` (the next one from the
    second half on when ``change``; ``None``: no system member)."""
    points = [
        i
        for i in range(1, len(msgs) + 1)
        if i == len(msgs) or (msgs[i - 1]["role"] == "user" and msgs[i]["role"] == "assistant")
    ]
    out = []
    for n, i in enumerate(points):
        which = SYSTEMS[(system + (change and 2 * n >= len(points))) % len(SYSTEMS)]
        body = {"model": "claude-sonnet-4-5", "messages": _marked(msgs[:i])}
        if which is not None:
            body["system"] = which
        body.update({"tools": TOOLS, "betas": [], "max_tokens": 1, "stream": True})
        out.append(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    return out


def gateway_keeps(
    env: dict[str, str], bodies: list[bytes], odd: bool, changed: bool = False
) -> list[int | None]:
    edit = knobs_from_env(env)
    fitter = Fitter(Knobs.from_env(env))
    out: list[int | None] = []
    for raw in bodies:
        d = decide("POST", "/v1/messages", [], raw, edit, (), fitter)
        out.append(
            json.loads(d.body)["context_management"]["edits"][-1]["keep"]["value"]
            if d.body
            else None
        )
    # one walk from the start, then resumed (results that come late resume at earlier points;
    # another system prompt walks again once)
    assert fitter.walked <= 1 + changed or odd
    return out


def twin_keeps(env: dict[str, str], bodies: list[bytes]) -> list[int | None]:
    edit = knobs_from_env(env)
    assert edit is not None
    out: list[int | None] = []
    for raw in bodies:
        body = json.loads(raw)
        msgs = body["messages"]
        if policy_from_env(env) == "fixed":
            out.append(edit_for_request(edit, msgs, step_from_env(env)).keep)
        else:
            system = body.get("system")
            rest, extra = system_facts(system)
            knobs = (ceiling_from_env(env), patience_from_env(env), 0, rest, extra)
            out.append(paid_edit(edit, msgs, *knobs).keep)
    return out


_CACHE: list[str] = []


@pytest.mark.node
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases=st.lists(
        st.tuples(_ENV, st.booleans()).flatmap(
            lambda e: st.tuples(
                st.just(e[0]),
                st.just(e[1]),
                conversations(odd=e[1]),
                st.integers(0, len(SYSTEMS) - 1),
                st.booleans(),
            )
        ),
        min_size=1,
        max_size=5,
    )
)
def test_the_gateway_adds_the_edit_the_javascript_and_the_twin_send(cases) -> None:
    node = need("node", "node is the ground truth for JavaScript")
    if not _CACHE:
        _CACHE.append(injected_clearing_js())
    script = DRIVER.replace("NAMES", json.dumps(ENV_NAMES)).replace("SNIPPET", _CACHE[0])
    runs = [
        (env, odd, bodies_of(msgs, system, change), change)
        for env, odd, msgs, system, change in cases
    ]
    res = subprocess.run(
        [node, "--input-type=module", "-e", script],
        input=json.dumps(
            [[env, [b.decode() for b in bodies]] for env, _, bodies, _c in runs]
        ).encode(),
        capture_output=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_")},
        timeout=120,
    )
    assert res.returncode == 0, res.stderr.decode()
    js = json.loads(res.stdout)
    for (env, odd, bodies, change), from_js in zip(runs, js, strict=True):
        assert gateway_keeps(env, bodies, odd, change) == from_js == twin_keeps(env, bodies), env
