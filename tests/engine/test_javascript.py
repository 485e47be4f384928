"""engine.javascript: the JavaScript semantics the Python twins need (UTF-16 length, truthiness,
JSON.stringify); node itself checks them in tests/differential/test_javascript_vs_node.py."""

from __future__ import annotations

import json
import lzma
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.javascript import _js_stringify, js_json_stringify, js_truthy, utf16_len

from .conftest import PUBLIC, SPOTTER, need_shared

# --------------------------------------------------------------------------- JS helpers


@pytest.mark.parametrize(
    ("s", "units"),
    [("", 0), ("abc", 3), ("é", 1), ("😀", 2), ("\ud83d", 1), ("\ud83d\ude00", 2), ("a😀b", 4)],
)
def test_utf16_len(s: str, units: int) -> None:
    assert utf16_len(s) == units


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "true"),
        (1, "1"),
        (1.0, "1"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (float("nan"), "null"),
        (2**64, "18446744073709552000"),
        ('a"\\\n\r\t\b\f\x00\x1f\x7f\u2028', '"a\\"\\\\\\n\\r\\t\\b\\f\\u0000\\u001f\x7f\u2028"'),
        ("\ud800x\udfff", '"\\ud800x\\udfff"'),
        ("😀\ud83d\ude00", '"😀😀"'),
        ({"b": 1, "2": [], "a": {}, "10": None, "01": 0}, '{"2":[],"10":null,"b":1,"a":{},"01":0}'),
        ([1, "x", [None]], '[1,"x",[null]]'),
    ],
)
def test_js_json_stringify(value: Any, expected: str) -> None:
    assert js_json_stringify(value) == expected


def test_js_json_stringify_rejects_non_json() -> None:
    with pytest.raises(TypeError):
        js_json_stringify({1: 2})
    with pytest.raises(TypeError):
        js_json_stringify(object())
    for bad in ({True: 1}, {None: 1}, {1.5: 1}, {"a": [{(1, 2): 3}]}, {"a": {1}}):
        with pytest.raises(TypeError):
            js_json_stringify(bad)


# what takes the C encoder's path and what must not: floats, integers past 2**53, keys that are
# (or look like) array indices, surrogates (lone and pairs written as two code points)
_KEYS = st.sampled_from(
    ["a", "b", "", "0", "1", "01", "10", "-1", "1.5", "true", "null", "4294967294", "4294967295"]
)
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.sampled_from([2**53, 2**53 + 1, -(2**53) - 1, 10**15, 10**16])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["\ud83d", "\ud83d\ude00", "\udfff", "a\x00\x7f\u2028", '{"1":2}', ',"3":'])
)
_JSON = st.recursive(
    _LEAVES,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(
            _KEYS | st.sampled_from(['x"', "\ud800", "😀", "²"]) | st.text(max_size=4), kids
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_js_json_stringify_equals_its_specification(value: Any) -> None:
    """The C encoder's path (plain dicts and lists) writes what the value-by-value
    specification writes, for every JSON value (floats, big integers, index keys and
    surrogates go the specification's way)."""
    assert js_json_stringify(value) == _js_stringify(value)


def test_js_json_stringify_equals_its_specification_on_real_sessions() -> None:
    """Every line of the shared sessions and every content block of their messages."""
    files = sorted(need_shared(SPOTTER).glob("*.jsonl")) + sorted(PUBLIC.glob("*.jsonl.xz"))[:8]
    seen = 0
    for f in files:
        data = f.read_bytes()
        text = (lzma.decompress(data) if f.suffix == ".xz" else data).decode()
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a damaged line (the replay skips it too)
            content = (rec.get("message") or {}).get("content") if isinstance(rec, dict) else None
            for v in [rec, *(content if isinstance(content, list) else [])]:
                assert js_json_stringify(v) == _js_stringify(v)
                seen += 1
    assert seen > 10_000


@pytest.mark.parametrize(
    ("value", "truthy"),
    [
        (None, False),
        (False, False),
        (0, False),
        (0.0, False),
        ("", False),
        (float("nan"), False),
        (True, True),
        (1, True),
        (-1, True),
        ("0", True),
        ("false", True),
        ([], True),
        ({}, True),
    ],
)
def test_js_truthy(value: object, truthy: bool) -> None:
    assert js_truthy(value) is truthy
