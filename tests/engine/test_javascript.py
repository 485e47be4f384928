"""engine.javascript: the JavaScript semantics the Python twins need (UTF-16 length, truthiness,
JSON.stringify); node itself checks them in tests/differential/test_javascript_vs_node.py."""

from __future__ import annotations

from typing import Any

import pytest

from engine.javascript import js_json_stringify, js_truthy, utf16_len

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
