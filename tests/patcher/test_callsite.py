"""Locating the query loop's micro-compaction call by meaning (patcher.callsite / patcher.plan)."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from ctxpatch.errors import AmbiguousTarget, TargetNotFound, Unsupported
from patcher import callsite, plan

CASES = [
    # fixture, shape, messages variable, the exact expression that gets wrapped
    ("s0-1.0.60.js", "S0", "J", b"V.messages"),
    ("s1-2.0.76.js", "S1", "F", b"z.messages"),
    ("s1p-2.1.7.js", "S1'", "z", b"O.messages"),
    ("s1pp-2.1.30.js", "S1''", "G", b"V.messages"),
    ("s3-2.1.50.js", "S3", "V", b"v.messages"),
    ("s4-2.1.61.js", "S4", "N", b"v.messages"),
    ("s5-2.1.68.js", "S5", "I", b"h.messages"),
    ("s6-2.1.112.js", "S6", "U", b"(await H.microcompact(U,v,w)).messages"),
]


@pytest.mark.parametrize(("name", "shape", "var", "wrapped"), CASES, ids=[c[0] for c in CASES])
def test_each_shape_has_exactly_one_site(name: str, shape: str, var: str, wrapped: bytes) -> None:
    data = (FIXTURES / name).read_bytes()
    found = plan.locate(data, None)
    c = found.candidate
    assert (found.shape, c.messages_var) == (shape, var)
    assert data[c.wrap_start : c.wrap_end] == wrapped
    # the wrapped expression is assigned to the messages variable right there
    assert data[c.wrap_start - len(var) - 1 : c.wrap_start] == f"{var}=".encode()


def test_other_call_sites_are_rejected_with_reasons() -> None:
    data = (FIXTURES / "s1-2.0.76.js").read_bytes()
    found = callsite.search(data)
    assert len(found.candidates) == 1
    # the declaration, /compact and the context breakdown are all seen and explained
    assert len(found.rejected) >= 3
    assert all("(" in r and ")" in r for r in found.rejected)


def test_name_in_regex_literal_and_class_method_is_not_a_call() -> None:
    data = (FIXTURES / "s1p-2.1.7.js").read_bytes()
    assert data.count(b"lc(") > 3  # a naive regex would over-match
    found = callsite.search(data)
    assert [c.callee for c in found.candidates] == ["lc"]


def test_offsets_are_bytes_not_characters() -> None:
    data = (FIXTURES / "s1-2.0.76.js").read_bytes()
    assert len(data) != len(data.decode("utf-8"))  # non-ASCII text sits before the site
    c = plan.locate(data, None).candidate
    assert data[c.wrap_start : c.wrap_end] == b"z.messages"


def test_stub_microcompact_is_found_through_the_deps_slot() -> None:
    data = (FIXTURES / "s6-2.1.112.js").read_bytes()
    assert b"DISABLE_MICROCOMPACT" not in data and b'"tengu_microcompact"' not in data
    found = callsite.search(data)
    assert found.mc_functions == ()
    assert found.deps_calls >= 2  # the loop call and a decoy
    assert len(found.candidates) == 1


def test_two_loop_sites_are_refused_and_listed() -> None:
    data = (FIXTURES / "ambiguous-two-sites.js").read_bytes()
    with pytest.raises(AmbiguousTarget) as e:
        plan.locate(data, "2.0.76")
    text = e.value.render()
    assert text.count("byte ") == 2
    assert "z=await Vd(F,void 0,Y)" in text and "x=await Vd(q,void 0,Z)" in text


def test_build_without_microcompaction_is_unsupported() -> None:
    data = (FIXTURES / "none-1.0.50.js").read_bytes()
    with pytest.raises(Unsupported, match=r"1\.0\.50 has no micro-compaction"):
        plan.locate(data, "1.0.50")


def test_unknown_build_without_site_is_target_not_found() -> None:
    data = b"#!/usr/bin/env node\n// Version: 2.1.50\nasync function*q(){yield 1}\n"
    with pytest.raises(TargetNotFound):
        plan.locate(data, "2.1.50")


def test_mention_in_a_string_does_not_make_a_microcompact_function() -> None:
    data = (
        b'async function Zz(A){return "set DISABLE_MICROCOMPACT=1 or see tengu_microcompact_x"}'
        b"async function*L(A){let r=await Zz(A);if(A=r.messages,1)yield A}"
    )
    assert callsite.search(data).mc_functions == ()


def test_call_in_nested_arrow_of_the_generator_is_not_the_loop_call() -> None:
    data = (
        b"async function M(A){if(process.env.DISABLE_MICROCOMPACT)return{messages:A};"
        b'x("tengu_microcompact");return{messages:A}}'
        b"async function*L(A){let f=async()=>{let r=await M(A);A=r.messages};yield f}"
    )
    found = callsite.search(data)
    assert found.mc_functions == ("M",)
    assert found.candidates == ()
    assert any("nested function" in r for r in found.rejected)


def test_result_messages_going_elsewhere_is_not_a_site() -> None:
    data = (
        b"async function M(A){if(process.env.DISABLE_MICROCOMPACT)return{messages:A};return{messages:A}}"
        b"async function*L(A,B){let r=await M(A);B=r.messages;yield B}"
    )
    found = callsite.search(data)
    assert found.candidates == ()
    assert any(".messages is not assigned" in r for r in found.rejected)
