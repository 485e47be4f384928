"""``engine.javascript`` against node, the ground truth for JavaScript (#10 defect 12).

One node process evaluates a deterministic batch: edge cases and seeded random JSON values
(floats such as ``1.0`` and ``1e21``, integers past 2**53, integer-like keys, lone surrogates,
controls, astral characters) through ``JSON.stringify`` and ``.length``, and random numeric
strings through ``parseInt``/``parseFloat``. Every answer must be the same as the Python twin's.
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
from typing import Any

from engine.javascript import (
    js_json_stringify,
    js_parse_float,
    js_parse_int,
    js_truthy,
    utf16_len,
)
from engine.tokens import count_text

SCRIPT = r"""
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean);
const out = lines.map((line) => {
  const [kind, v] = JSON.parse(line);
  if (kind === "value") {
    return [JSON.stringify(v), typeof v === "string" ? v.length : null, Boolean(v)];
  }
  const i = parseInt(v, 10), f = parseFloat(v);
  return [Number.isNaN(i) ? null : String(i), Number.isNaN(f) ? null : String(f)];
});
process.stdout.write(JSON.stringify(out));
"""

EDGES: list[Any] = [
    {"a": 1.0},  # the example: node writes {"a":1}
    [1.0, -0.0, 0.1, 1e20, 1e21, 1.5e-7, 1e-6, 123456789.125, 2**53, 2**53 + 1, 2**64, -(2**70)],
    {"b": 1, "2": [], "a": {}, "10": None, "01": 0, "4294967294": 1, "4294967295": 2},
    "\ud800x\udfff",
    '😀\ud83d\ude00 é \x00\x1f\x7f\u2028\u2029 "\\',
    "",
    [],
    {},
    0,
    [True, False, None],
]
NUMERIC_STRINGS = [
    "",
    " 42px",
    "+7",
    "-0",
    "1e3",
    ".5",
    "5.",
    "0x10",
    "\t12\n",
    "1_000",
    "-.5e-3x",
    "e5",
    "+-1",
]


def _float(rng: random.Random) -> float:
    while True:
        if rng.random() < 0.5:
            v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        else:
            v = rng.choice([1.0, 0.5, 100.0, 1e-7]) * rng.randint(-(10**6), 10**6)
        if v == v and v not in (float("inf"), float("-inf")):
            return v


def _string(rng: random.Random) -> str:
    pool = [
        lambda: chr(rng.randint(0x20, 0x7E)),
        lambda: chr(rng.randint(0, 0x1F)),
        lambda: chr(rng.randint(0xA0, 0xD7FF)),
        lambda: chr(rng.randint(0xD800, 0xDFFF)),  # lone surrogates
        lambda: chr(rng.randint(0x10000, 0x10FFFF)),
        lambda: rng.choice('"\\/\u2028\u2029'),
    ]
    return "".join(rng.choice(pool)() for _ in range(rng.randint(0, 12)))


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randint(0, 8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([rng.randint(-1000, 1000), rng.randint(-(2**70), 2**70)])
    if kind in (2, 3):
        return _float(rng)
    if kind in (4, 5):
        return _string(rng)
    if kind in (6, 7):
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = [rng.choice([_string(rng), str(rng.randint(0, 20)), "0" + str(rng.randint(0, 9))])]
    keys += [_string(rng) for _ in range(rng.randint(0, 3))]
    return {k: _value(rng, depth + 1) for k in keys}


def _numeric(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789+-.eE x\t") for _ in range(rng.randint(0, 8)))


def test_javascript_semantics_match_node(node: str) -> None:
    rng = random.Random(20261122)
    values = EDGES + [_value(rng) for _ in range(400)]
    strings = NUMERIC_STRINGS + [_numeric(rng) for _ in range(300)]
    batch = [["value", v] for v in values] + [["number", s] for s in strings]
    # ensure_ascii: lone surrogates travel as \udXXX escapes and JSON.parse restores them
    stdin = "\n".join(json.dumps(item, ensure_ascii=True) for item in batch) + "\n"
    proc = subprocess.run(
        [node, "-e", SCRIPT], input=stdin, capture_output=True, text=True, timeout=60, check=True
    )
    answers = json.loads(proc.stdout)
    assert len(answers) == len(batch)
    for value, (text, length, truthy) in zip(values, answers[: len(values)], strict=True):
        assert js_json_stringify(value) == text, value
        assert js_truthy(value) is truthy, value
        if isinstance(value, str):
            assert utf16_len(value) == length, value
    for s, (i, f) in zip(strings, answers[len(values) :], strict=True):
        got_i = js_parse_int(s)
        assert (None if got_i is None else str(got_i)) == i, s
        got_f = js_parse_float(s)  # node sends String(f): "Infinity", "1e+21", ...
        assert got_f == (None if f is None else float(f)), s


def test_counts_use_javascript_json() -> None:
    """``{"a": 1.0}`` is 7 characters to node (``{"a":1}``), not 9 (``json.dumps``)."""
    assert js_json_stringify({"a": 1.0}) == '{"a":1}'
    from engine.profiles import profile_for
    from engine.tokens import attachment_tokens

    att = {"type": "x", "n": 1.0}
    assert attachment_tokens(att, profile_for("2.1.39")) == count_text('{"type":"x","n":1}')
