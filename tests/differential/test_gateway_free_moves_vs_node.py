"""Differential test: the free move in the gateway (gateway.policy, Knobs.free) against the
injected JavaScript's (patcher/snippets/context_clear.js, its conversations' memory) on the same
sequences of request bodies: conversations growing by rounds with prunes, emptied results,
rewinds, compactions, system prompt changes, two of them interleaved
(tests/test_gateway_free_moves.py's scenarios, where both are held to the twin), each request at
a time of one clock (tests/test_gateway_expiry_moves.py's gaps, under, at and over the cache's
lifetime plus the slack): ``Date.now`` stubbed in node, the same time handed to the gateway's
``decide``, so the expiry move is compared too."""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest
from conftest import IN_CI, injected_clearing_js, need
from test_gateway_expiry_moves import clock
from test_gateway_free_moves import SEEDS, _scenarios
from test_gateway_policy import EDIT, SERIALISE, claude_code

from engine.twins.context_clear import ENV_NAMES, knobs_from_env
from gateway.policy import Fitter, Knobs
from gateway.rewrite import decide

DRIVER = r"""
import { readFileSync } from "node:fs";
const CASES = JSON.parse(readFileSync(0, "utf8"));
const fn = SNIPPET;
let now = 0;
Date.now = () => now; // the requests' times (the snippet reads Date.now() once per request)
const out = [];
for (const [env, bodies, times] of CASES) {
  delete fn.memory; // each case its own process: nothing remembered from the cases before
  for (const n of NAMES) delete process.env[n];
  Object.assign(process.env, env);
  out.push(bodies.map((body, i) => {
    now = times[i];
    const req = JSON.parse(body);
    const sent = fn(req);
    return sent === req ? null : sent.context_management.edits.at(-1).keep.value;
  }));
}
process.stdout.write(JSON.stringify(out));
"""


def _env(ceiling: int, patience: int, free: bool) -> dict[str, str]:
    env = {
        "CLAUDE_CTX_CLEAR_KEEP": str(EDIT.keep),
        "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "1",
        "CLAUDE_CTX_CLEAR_CEILING": str(ceiling),
        "CLAUDE_CTX_CLEAR_PATIENCE": str(patience),
    }
    if not free:
        env["CLAUDE_CTX_CLEAR_FREE"] = "0"
    return env


@pytest.mark.node
def test_the_gateway_and_the_javascript_make_the_same_free_moves() -> None:
    node = need("node", "node is the ground truth for JavaScript")
    snippet = injected_clearing_js()
    if "conversationOf" not in snippet:  # a tree whose JavaScript predates its free move
        why = "the injected JavaScript of this tree has no free move to compare with"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    cases = []
    for seed in SEEDS:
        requests, _, ceiling, patience = _scenarios(seed)
        bodies = [
            SERIALISE["javascript"](claude_code(r.messages, system=r.system, betas=[]))
            for r in requests
        ]
        times = clock(random.Random(2_000 + seed), len(bodies))
        cases.append((_env(ceiling, patience, seed % 4 != 3), bodies, times))  # every 4th: off
    script = DRIVER.replace("NAMES", json.dumps(ENV_NAMES)).replace("SNIPPET", snippet)
    res = subprocess.run(
        [node, "--input-type=module", "-e", script],
        input=json.dumps(
            [[env, [b.decode() for b in bodies], times] for env, bodies, times in cases]
        ).encode(),
        capture_output=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_")},
        timeout=300,
    )
    assert res.returncode == 0, res.stderr.decode()
    moves = expiry = 0
    for (env, bodies, times), from_js in zip(cases, json.loads(res.stdout), strict=True):
        edit = knobs_from_env(env)
        assert edit is not None
        fitter = Fitter(Knobs.from_env(env))
        got = []
        for raw, now in zip(bodies, times, strict=True):
            d = decide("POST", "/v1/messages", [], raw, edit, (), fitter, now)
            got.append(
                json.loads(d.body)["context_management"]["edits"][-1]["keep"]["value"]
                if d.body
                else None
            )
        assert got == from_js, env
        moves, expiry = moves + fitter.free_moves, expiry + fitter.expiry_moves
    assert moves > expiry > 0
