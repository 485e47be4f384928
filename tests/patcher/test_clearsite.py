"""Finding the query loop's request builder by meaning (patcher/clearsite.py), on the synthetic
request-builder fixtures and on small hand-written bundles for each refusal."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, SHAPE_FIXTURES

from patcher import clearsite

RQ = {  # fixture -> (shape, request calls watched, builder's local name)
    "rq-1.0.60.js": ("stream+create", ("stream", "create"), "H"),
    "rq-2.0.76.js": ("stream/cm", ("stream",), "P"),
    "rq-2.1.112.js": ("create/cm", ("create",), "k6"),
}


@pytest.mark.parametrize("name", sorted(RQ))
def test_the_builder_of_each_era_is_found(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    found = clearsite.locate(data)
    shape, methods, local = RQ[name]
    assert found.builder is not None, found.reason
    b = found.builder
    assert (b.shape, tuple(w.method for w in b.watches), b.name) == (shape, methods, local)
    obj = data[b.object_start : b.object_end]
    assert obj.startswith(b"{model:") and obj.endswith(b"}") and b"max_tokens:" in obj
    for w in b.watches:
        call = data[w.start : w.end]
        assert call.endswith(b")") and f".beta.messages.{w.method}(".encode() in call
    # the side query (inline object) and the fallback generator (no builder) are not candidates
    assert len(found.search.candidates) == 1
    assert "i85" in found.search.generators


@pytest.mark.parametrize("name", SHAPE_FIXTURES)
def test_bundles_without_request_code_get_no_clearing_and_say_why(name: str) -> None:
    found = clearsite.locate((FIXTURES / name).read_bytes())
    assert found.builder is None and found.shape == "none"
    assert "no .beta.messages.create/stream call inside an async generator" in found.reason


_BUILDER = (
    b"let B=(y)=>{return{model:y.m,messages:M,system:S,tools:[],...W?{betas:I}:{},"
    b"max_tokens:8}};let r=B(u);"
)


def _gen(name: bytes, body: bytes) -> bytes:
    return b"async function*" + name + b"(M,S,W,I,u,c){" + body + b"}\n"


def test_two_builders_are_refused_with_both_listed() -> None:
    send = b"yield c.beta.messages.create({...r,stream:!0});"
    data = _gen(b"qa", _BUILDER + send) + _gen(b"qb", _BUILDER + send)
    found = clearsite.locate(data)
    assert found.builder is None and len(found.search.candidates) == 2
    assert "2 request builders found" in found.reason and "refuses to guess" in found.reason
    assert "in qa" in found.reason and "in qb" in found.reason


def test_an_inline_request_object_is_rejected_with_the_reason() -> None:
    data = _gen(
        b"qa",
        b"let r={model:1,messages:M,system:S,betas:I,max_tokens:8};"
        b"yield c.beta.messages.create({...r});",
    )
    found = clearsite.locate(data)
    assert found.builder is None
    assert "not returned by a builder function" in found.reason


def test_a_builder_whose_result_is_never_sent_is_rejected() -> None:
    data = _gen(b"qa", _BUILDER + b"let q={...u};yield c.beta.messages.create({...q});")
    found = clearsite.locate(data)
    assert found.builder is None
    assert "the result of B(...) is never sent by a request call" in found.reason


def test_without_betas_there_is_no_candidate() -> None:
    body = _BUILDER.replace(b"...W?{betas:I}:{},", b"") + b"yield c.beta.messages.stream(r);"
    found = clearsite.locate(_gen(b"qa", body))
    assert found.builder is None and not found.search.candidates


@pytest.mark.parametrize(
    ("ret", "betas"),
    [
        (b"return{model:1,messages:M,system:S,betas:I,max_tokens:8}", b"direct"),
        (b"return G=I,{model:1,messages:M,system:S,...W&&{betas:I},max_tokens:8}", b"seq"),
    ],
)
def test_return_forms_and_betas_forms(ret: bytes, betas: bytes) -> None:
    body = b"let B=(y)=>{" + ret + b"};let r=B(u);yield c.beta.messages.stream(r,{signal:u});"
    found = clearsite.locate(_gen(b"qa", body))
    assert found.builder is not None, (betas, found.reason)
    assert found.builder.shape == "stream"


def test_an_arrow_with_an_expression_body_is_a_builder() -> None:
    body = (
        b"let B=(y)=>({model:1,messages:M,system:S,betas:I,max_tokens:8,context_management:u});"
        b"let r=B(u);yield c.beta.messages.create({...r,stream:!0});"
    )
    found = clearsite.locate(_gen(b"qa", body))
    assert found.builder is not None and found.builder.shape == "create/cm"
