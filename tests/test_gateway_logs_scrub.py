"""gateway.logs.scrub skips a pattern's search when an ASCII text cannot match it: the result
is always that of every pattern applied in turn."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import logs
from gateway.redact import REDACTED


def every_pattern(text: str) -> str:
    for pattern, repl, _ in logs._SECRETS:
        text = pattern.sub(repl, text)
    return text


PIECES = [
    "POST /v1/messages -> 200, clearing added",
    "x-api-key: sk-ant-api03-abc_DEF-123",
    "Authorization: Bearer abc.def~ghi",
    "PROXY-AUTHORIZATION=Basic Zm9vOmJhcg==",
    "https://user:pass@proxy.example:8080/x",
    "Cookie: a=b; session=xyz",
    "X-Claude-Code-Session-Id abc-1234",
    "signature\tdeadbeef",
    "\u212aey: value",  # KELVIN SIGN: (?i) reads it as k
    "S\u0131gnature: x",  # dotless i
    "co\u017fkie",  # long s
    " ",
    "\n",
    ",",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=30), max_size=6))
def test_scrub_is_every_pattern_applied(parts: list[str]) -> None:
    text = "".join(parts)
    assert logs.scrub(text) == every_pattern(text)


def test_the_request_line_untouched_and_credentials_gone() -> None:
    line = "POST /v1/messages -> 200, clearing added"
    assert logs.scrub(line) == line
    for secret in PIECES[1:8]:
        assert REDACTED in logs.scrub(secret), secret
    assert logs.scrub("\u212aey: value") == every_pattern("\u212aey: value") != "\u212aey: value"
