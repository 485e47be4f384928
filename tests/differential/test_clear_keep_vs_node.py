"""Differential test: the ``keep`` the injected clearing JavaScript sends with a request's
messages (CLAUDE_CTX_CLEAR_STEP, and the round in progress always kept) against its Python twin
``engine.twins.context_clear.edit_for_request``, under node, over generated conversations."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import injected_clearing_js, need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.twins.context_clear import ENV_NAMES, edit_for_request, knobs_from_env, step_from_env

ROOT = Path(__file__).resolve().parents[2]

DRIVER = r"""
import { readFileSync } from "node:fs";
const CASES = JSON.parse(readFileSync(0, "utf8"));
const fn = SNIPPET;
const names = NAMES;
const out = [];
for (const [env, messages] of CASES) {
  delete fn.memory; // each case on its own: no conversation remembered (the free move)
  for (const n of names) delete process.env[n];
  Object.assign(process.env, env);
  const req = {model: "claude-sonnet-4-5", messages, betas: [], max_tokens: 1};
  const sent = fn(req);
  out.push(sent === req ? null : sent.context_management.edits[0].keep.value);
}
process.stdout.write(JSON.stringify(out));
"""


def _use(k: int) -> dict:
    return {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {}}


def _result(k: int) -> dict:
    return {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r"}


@st.composite
def conversations(draw) -> list[dict]:
    """A human prompt, then tool rounds of 1-4 parallel uses, a typed prompt now and then; the
    last round's results may or may not be there yet."""
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    k = 0
    for width, typed in draw(st.lists(st.tuples(st.integers(1, 4), st.booleans()), max_size=30)):
        msgs.append({"role": "assistant", "content": [_use(k + i) for i in range(width)]})
        msgs.append({"role": "user", "content": [_result(k + i) for i in range(width)]})
        k += width
        if typed:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
            msgs.append({"role": "user", "content": [{"type": "text", "text": "next"}]})
    return msgs


_ENV = st.fixed_dictionaries(
    {"CLAUDE_CTX_CLEAR_POLICY": st.just("fixed")},  # the STEP rule (paid: test_clear_policy_*)
    optional={
        "CLAUDE_CTX_CLEAR_KEEP": st.sampled_from(["0", "1", "3", "5", "x"]),
        "CLAUDE_CTX_CLEAR_STEP": st.sampled_from(["1", "2", "7", "20", "0", "bad"]),
    },
)


@pytest.mark.node
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases=st.lists(st.tuples(_ENV, conversations()), min_size=1, max_size=25))
def test_the_javascript_keeps_what_the_twin_keeps(cases) -> None:
    node = need("node", "node is the ground truth for JavaScript")
    script = DRIVER.replace("SNIPPET", _snippet_cached()).replace("NAMES", json.dumps(ENV_NAMES))
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("CLAUDE_")}
    res = subprocess.run(
        [node, "--input-type=module", "-e", script],
        input=json.dumps(cases).encode(),  # on stdin: an argument holds 128 KiB at most
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr.decode()
    got = json.loads(res.stdout)
    want = []
    for case_env, messages in cases:
        edit = knobs_from_env(case_env)
        want.append(
            None if edit is None else edit_for_request(edit, messages, step_from_env(case_env)).keep
        )
    assert got == want


_CACHE: list[str] = []


def _snippet_cached() -> str:
    if not _CACHE:
        _CACHE.append(injected_clearing_js())
    return _CACHE[0]
