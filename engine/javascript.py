"""JavaScript semantics the Python twins need, exact to node: ``JSON.stringify``, ``s.length``,
truthiness, ``parseInt``/``parseFloat``, ``Math.round(n/d)``.

One module for the engine: :mod:`engine.tokens` (Claude Code's estimators) and
:mod:`engine.twins.textprune` (the injected function's twin) both count what node computes, so
``{"a": 1.0}`` is ``{"a":1}`` here as in node (``json.dumps`` writes ``1.0``).
``tests/differential/test_javascript_vs_node.py`` checks these against node.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "js_json_stringify",
    "js_parse_float",
    "js_parse_int",
    "js_round_div",
    "js_truthy",
    "utf16_len",
    "utf16_units",
]


def utf16_len(s: str) -> int:
    """JavaScript's ``s.length``: the number of UTF-16 code units.

    Code points above U+FFFF count twice; lone surrogates (possible in strings from
    ``json.loads``) count once.
    """
    if s.isascii():  # one unit per character, without encoding the string
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def utf16_units(s: str) -> bytes:
    return s.encode("utf-16-le", "surrogatepass")


def js_truthy(value: object) -> bool:
    """JavaScript truthiness of a JSON value (``[]`` and ``{}`` are truthy, NaN is not)."""
    if value is None or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return value != 0
    if isinstance(value, float):
        return not (value == 0 or math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


_quote = json.encoder.encode_basestring  # what json.dumps(s, ensure_ascii=False) calls
# Python's C encoder writes JSON data as JSON.stringify does when it holds no float (Python
# writes 1.0, 1e-07, 1e+16, NaN), no integer beyond 2**53 (JavaScript writes the double), no key
# that may be an array index (JavaScript puts those first) and no surrogate (see _js_quote)
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_MAX_SAFE = 2**53
_SURROGATES = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]{0,9}")
_MAX_ARRAY_INDEX = 2**32 - 2


def _escape_surrogate(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 2:  # a well-formed pair written as two code points: one character in JS
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    return f"\\u{ord(text):04x}"


def _js_quote(s: str) -> str:
    # Python's escaping with ensure_ascii=False equals JSON.stringify's (\" \\ \b \f \n \r \t,
    # other controls as lowercase \u00XX, everything else literal) except for surrogates.
    quoted = _quote(s)  # json.dumps(s, ensure_ascii=False), without building an encoder
    if s.isascii() or _SURROGATES.search(quoted) is None:
        return quoted
    return _SURROGATES.sub(_escape_surrogate, quoted)


def _js_number(value: float) -> str:
    """ECMAScript ``Number::toString`` for a finite double (NaN and infinities are JSON null)."""
    if math.isnan(value) or math.isinf(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    # position of the decimal point relative to the start of `digits` (ECMAScript's n)
    n = len(whole.lstrip("0")) if whole.strip("0") else -(len(frac) - len(frac.lstrip("0")))
    n += int(exp or 0)
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        esign = "+" if e >= 0 else "-"
        head = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{head}e{esign}{abs(e)}"
    return sign + text


def _js_key_order(keys: list[str]) -> list[str]:
    # OrdinaryOwnPropertyKeys: array indices ascending first, then the rest in insertion order.
    indices = [k for k in keys if _ARRAY_INDEX.fullmatch(k) and int(k) <= _MAX_ARRAY_INDEX]
    if not indices:
        return keys
    index_set = set(indices)
    return sorted(indices, key=int) + [k for k in keys if k not in index_set]


def js_json_stringify(obj: Any) -> str:
    """``JSON.stringify(obj)`` for JSON data, byte for byte as node produces it.

    Handles what ``json.loads`` can return (``dict``, ``list``, ``str``, ``int``, ``float``,
    ``bool``, ``None``; tuples are arrays): no spaces, JavaScript key order (integer-like keys
    first, ascending), JavaScript number formatting (integers beyond 2**53 as the double
    ``JSON.parse`` would make of them), and lone surrogates escaped as ``\\udXXX`` (well-formed
    ``JSON.stringify``). Raises ``TypeError`` for anything else.

    A dict or list of plain data (:func:`_plain`) is written by Python's C encoder when the
    result holds no surrogate; anything else by :func:`_js_stringify`, the specification.
    """
    if type(obj) in (dict, list) and _plain(obj):
        out = _encode(obj)
        if out.isascii() or _no_surrogate(out):
            return out
    return _js_stringify(obj)


def _plain(v: Any) -> bool:
    """JSON data that Python's C encoder writes as ``JSON.stringify`` does, surrogates aside:
    dicts, lists, strings, booleans, null and integers within 2**53 only; no key that starts
    with a digit (an array index, which JavaScript orders first)."""
    tv = type(v)
    if tv is dict:
        for k, x in v.items():
            if type(k) is not str or k[:1].isdigit():
                return False
            if type(x) is not str and not _plain(x):
                return False
        return True
    if tv is list:
        return all(type(x) is str or _plain(x) for x in v)
    if tv is str or v is None or tv is bool:
        return True
    return tv is int and -_MAX_SAFE <= v <= _MAX_SAFE


def _no_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")  # strict UTF-8 refuses surrogates
    except UnicodeEncodeError:
        return False
    return True


def _js_stringify(obj: Any) -> str:
    """``js_json_stringify`` value by value (every number, key order and surrogate rule)."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return _js_quote(obj)
    if isinstance(obj, int):
        if -(2**53) <= obj <= 2**53:
            return str(obj)
        try:
            return _js_number(float(obj))
        except OverflowError:
            return "null"
    if isinstance(obj, float):
        return _js_number(obj)
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_js_stringify(item) for item in obj) + "]"
    if isinstance(obj, dict):
        keys = list(obj)
        for key in keys:
            if not isinstance(key, str):
                raise TypeError(f"object key {key!r} is not a string")
        return (
            "{"
            + ",".join(_js_quote(k) + ":" + _js_stringify(obj[k]) for k in _js_key_order(keys))
            + "}"
        )
    raise TypeError(f"not JSON data: {type(obj).__name__}")


def js_round_div(n: int, d: int = 4) -> int:
    """``Math.round(n/d)`` for non-negative integers (halves round up)."""
    return (2 * n + d) // (2 * d)


_INT_RE = re.compile(r"^\s*([+-]?\d+)")
_FLOAT_RE = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")


def js_parse_int(value: str) -> int | None:
    """``parseInt(value, 10)``: leading digits only; ``None`` for ``NaN``."""
    m = _INT_RE.match(value)
    return int(m[1]) if m else None


def js_parse_float(value: str) -> float | None:
    """``parseFloat(value)``: the longest leading decimal; ``None`` for ``NaN``."""
    m = _FLOAT_RE.match(value)
    return float(m[1]) if m else None
