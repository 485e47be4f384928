"""Differential test: the knob parsing of the injected clearing JavaScript against its Python
twin ``engine.twins.context_clear.knobs_from_env``, under node.

Every generated environment (valid values, blanks, ``_`` separators, Unicode digits and
whitespace, words, comma lists, garbage) goes through ``_ctxpatchContextClearing`` (taken out of
a fixture patched by ctxpatch) on a plain request, and through ``to_json(knobs_from_env(env))``:
the edit the JavaScript adds must be exactly the twin's (no edit where the twin says disabled),
and the JavaScript must never throw (a bad value is the default, never a bad request).
One node process serves the whole run (one JSON document per line).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import injected_clearing_js, need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.api.context_management import to_json
from engine.twins.context_clear import ENV_NAMES, knobs_from_env

ROOT = Path(__file__).resolve().parents[2]

SERVER = r"""
const fn = SNIPPET;
const names = NAMES;
const readline = await import("node:readline");
const rl = readline.createInterface({input: process.stdin});
for await (const line of rl) {
  const out = [];
  for (const env of JSON.parse(line)) {
    delete fn.memory; // each case on its own: no conversation remembered (the free move)
    for (const n of names) delete process.env[n];
    Object.assign(process.env, env);
    const req = {model: "claude-sonnet-4-5", messages: [], betas: [], max_tokens: 1};
    let sent;
    try { sent = fn(req); } catch (e) { sent = {threw: String(e)}; }
    if (sent.threw) out.push(sent);
    else if (sent === req) out.push(null);
    else out.push(sent.context_management.edits[0]);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
"""


@pytest.fixture(scope="module")
def server():
    node = need("node", "node is the ground truth for JavaScript")
    script = SERVER.replace("SNIPPET", injected_clearing_js()).replace(
        "NAMES", json.dumps(ENV_NAMES)
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("CLAUDE_")}
    proc = subprocess.Popen(
        [node, "--input-type=module", "-e", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        encoding="utf-8",
    )
    yield proc
    proc.stdin.close()  # type: ignore[union-attr]
    proc.wait(timeout=30)


def _ask(proc: subprocess.Popen, envs: list[dict[str, str]]) -> list:
    proc.stdin.write(json.dumps(envs) + "\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    return json.loads(proc.stdout.readline())  # type: ignore[union-attr]


# Environment strings: no NUL, no lone surrogate (an environment cannot hold them).
_CHARS = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
_BLANKS = st.sampled_from(
    [
        " ",
        "\t",
        "\n",
        "\x0b",
        "\x1c",
        "\x1f",
        "\x85",
        "\xa0",
        "\u2003",
        "\u3000",
        "\ufeff",
        "\u200b",
    ]
)
_DIGITS = st.sampled_from([*"0123456789", "\u00b2", "\u0663", "\uff15", "_"])
_WORDS = st.sampled_from(
    ["1", "0", "true", "TRUE", "false", "False", "yes", "on", "off", "Read", "Edit", "Bash", ","]
)


def _value() -> st.SearchStrategy[str]:
    piece = st.one_of(_DIGITS, _BLANKS, _WORDS, st.text(_CHARS, max_size=3))
    numeric = st.integers(0, 10**12).map(str)
    return st.one_of(
        numeric,
        st.lists(piece, max_size=8).map("".join),
        st.lists(st.one_of(_WORDS, _BLANKS, st.text(_CHARS, max_size=4)), max_size=6).map(",".join),
    )


_ENV = st.dictionaries(st.sampled_from(ENV_NAMES), _value(), max_size=len(ENV_NAMES))


@pytest.mark.node
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(envs=st.lists(_ENV, min_size=1, max_size=40))
def test_the_javascript_sends_the_edit_the_twin_parses(server, envs) -> None:
    got = _ask(server, envs)
    want = [None if (e := knobs_from_env(env)) is None else to_json(e) for env in envs]
    for env, g, w in zip(envs, got, want, strict=True):
        assert g == w, env


@pytest.mark.node
def test_the_cases_that_differ_between_the_languages(server) -> None:
    envs = [
        {"CLAUDE_CTX_CLEAR_TRIGGER": " 120_000\x85"},  # Python strips \x85, JS trim() does not
        {"CLAUDE_CTX_CLEAR_KEEP": "\ufeff5"},  # JS trim() strips U+FEFF, Python does not
        {"CLAUDE_CTX_CLEAR_TRIGGER": "\u00b2"},  # str.isdigit() says yes, int() raises
        {"CLAUDE_CTX_CLEAR_TRIGGER": "99999999999999999999"},  # JS would round it
        {"CLAUDE_CTX_CLEAR_DISABLE": " On "},
        {"CLAUDE_CTX_CLEAR_TOOL_INPUTS": " TRUE "},
        {"CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS": "\u3000Read ,, Edit\x1c"},
        {"CLAUDE_CTX_CLEAR_POLICY": " Fixed "},  # the fixed rule's defaults: 50000 and 3
        {"CLAUDE_CTX_CLEAR_POLICY": "fixed", "CLAUDE_CTX_CLEAR_TRIGGER": "x"},
        {"CLAUDE_CTX_CLEAR_POLICY": "paid", "CLAUDE_CTX_CLEAR_TRIGGER": "0"},  # >= 1: default
    ]
    got = _ask(server, envs)
    assert got == [None if (e := knobs_from_env(env)) is None else to_json(e) for env in envs]
    # "\ufeff5" is no integer in either language: the paid policy's default KEEP, 1
    assert got[0]["trigger"]["value"] == 120000 and got[1]["keep"]["value"] == 1
    assert got[4] is None and got[5]["clear_tool_inputs"] is True
    assert got[6]["exclude_tools"] == ["Read", "Edit"]
    # the paid policy's TRIGGER is 30000, the fixed rule's 50000 (set or not, an invalid one
    # is the policy's default)
    assert got[1]["trigger"]["value"] == got[9]["trigger"]["value"] == 30000
    assert got[7]["trigger"]["value"] == got[8]["trigger"]["value"] == 50000
    assert got[7]["keep"]["value"] == 3
