"""``lab.firstparty``'s pure half: a run's requests reduced to what a base URL changes."""

from __future__ import annotations

import pytest

from lab.firstparty import API_HOST, billing_fields, difference, traits
from lab.mock import Logged

GW_BILLING = "x-anthropic-billing-header: cc_version=9.9.9.abc; cc_entrypoint=sdk-cli;"
FP_BILLING = GW_BILLING + " cch=0f3a9; cc_prev_req=req_1;"


def logged(seq, path, host, kind="main", beta="", body=None, method="POST", **headers):
    h = {"host": host, "anthropic-beta": beta, **headers} if beta else {"host": host, **headers}
    return Logged(seq, 0.0, method, path, h, body, kind)


def body(billing: str, scope: str | None = None, tools=("Bash", "Read"), **extra) -> dict:
    cc = {"type": "ephemeral", **({"scope": scope} if scope else {})}
    return {
        "model": "m",
        "system": [
            {"type": "text", "text": billing},
            {"type": "text", "text": "p", "cache_control": cc},
        ],
        "tools": [{"name": t, "input_schema": {}} for t in tools],
        "messages": [],
        **extra,
    }


def test_billing_fields_in_order_and_nothing_from_other_texts() -> None:
    assert billing_fields(FP_BILLING) == [
        ("cc_version", "9.9.9.abc"),
        ("cc_entrypoint", "sdk-cli"),
        ("cch", "0f3a9"),
        ("cc_prev_req", "req_1"),
    ]
    assert billing_fields("You are Claude Code. cch=12345;") == []


def test_traits_and_difference_of_a_gateway_and_a_first_party_run() -> None:
    gw = traits(
        [
            logged(1, "/v1/messages?beta=true", "127.0.0.1:9", beta="a,b", body=body(GW_BILLING)),
            logged(2, "/api/x?y=1", API_HOST, kind="other", method="GET"),
        ]
    )
    fp = traits(
        [
            logged(1, "/api/claude_code/settings", API_HOST, kind="other", method="GET"),
            logged(2, "/v1/messages/count_tokens", API_HOST, kind="count_tokens"),
            logged(
                3,
                "/v1/messages?beta=true",
                API_HOST,
                beta="a,c,b",
                body=body(FP_BILLING, "global", ("Bash", "ToolSearch"), diagnostics={}),
                **{"x-client-request-id": "r"},
            ),
        ]
    )
    assert gw.host == "127.0.0.1:9" and fp.host == API_HOST
    assert gw.billing == ("cc_version", "cc_entrypoint") and gw.cch is None
    assert fp.cch == "0f3a9" and not gw.global_cache_scope and fp.global_cache_scope
    assert not gw.tool_search and fp.tool_search and gw.tools_bytes > 0
    assert gw.side_calls == (("GET", API_HOST, "/api/x"),)  # query dropped, bypass named
    assert fp.side_calls == (("GET", API_HOST, "/api/claude_code/settings"),)  # not count_tokens
    d = difference(gw, fp)
    assert d.betas_fp_only == ("c",) and d.betas_gw_only == ()
    assert d.headers_fp_only == ("x-client-request-id",) and d.headers_gw_only == ()
    assert d.body_keys_fp_only == ("diagnostics",)
    assert d.billing_fp_only == ("cch", "cc_prev_req") and d.billing_gw_only == ()
    assert difference(fp, fp) == difference(gw, gw)  # nothing, both ways


def test_a_run_without_a_main_request_is_an_error_that_names_the_paths() -> None:
    with pytest.raises(ValueError, match="/api/claude_code/settings"):
        traits([logged(1, "/api/claude_code/settings", API_HOST, kind="other", method="GET")])
