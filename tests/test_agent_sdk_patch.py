"""``ctxpatch.agent_sdk`` without the real SDK: the upstream chosen, the wrap and its undo, the
errors (the real SDK and binary, offline: tests/e2e/test_agent_sdk.py)."""

from __future__ import annotations

import asyncio
import sys
import types
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import ctxpatch.agent_sdk as agent_sdk
from ctxpatch.errors import MissingExtra, UsageError
from gateway import sdk
from lab.mock import MockServer

MODULE = "claude_agent_sdk._internal.transport.subprocess_cli"


@dataclass
class Options:
    env: dict[str, str] = field(default_factory=dict)


class FakeTransport:
    """The shape of the SDK's SubprocessCLITransport: connect() reads self._options."""

    def __init__(self, options: Options) -> None:
        self._options = options
        self._process = None
        self.started_with: dict[str, str] | None = None

    async def connect(self) -> None:
        self.started_with = dict(self._options.env)


@pytest.fixture
def fake_sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeTransport]]:
    mod = types.ModuleType(MODULE)
    mod.SubprocessCLITransport = FakeTransport  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, MODULE, mod)
    original = FakeTransport.connect
    yield FakeTransport
    sdk.disable()
    FakeTransport.connect = original  # type: ignore[method-assign]


def test_upstream_order() -> None:
    env_opt = {"ANTHROPIC_BASE_URL": "http://opt.example/"}
    outer = {
        "CTXPATCH_UPSTREAM": "https://outer.example",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:1",
    }
    assert sdk.session_upstream(env_opt, outer) == "http://opt.example"  # the option wins
    assert sdk.session_upstream({}, outer) == "https://outer.example"  # under ctxpatch run
    assert sdk.session_upstream({}, {"ANTHROPIC_BASE_URL": "http://u:1"}) == "http://u:1"
    assert sdk.session_upstream({}, {}) == "https://api.anthropic.com"
    with pytest.raises(UsageError, match="not an upstream URL"):
        sdk.session_upstream({"ANTHROPIC_BASE_URL": "nope"}, {})


def test_session_env_keeps_the_callers_and_tool_search() -> None:
    got = sdk.session_env({"A": "1"}, "http://127.0.0.1:5", "https://api.anthropic.com", {})
    assert got == {
        "A": "1",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:5",
        "CTXPATCH_UPSTREAM": "https://api.anthropic.com",
        "ENABLE_TOOL_SEARCH": "true",
    }
    mine = sdk.session_env({}, "http://g", "https://api.anthropic.com", {"ENABLE_TOOL_SEARCH": "0"})
    assert "ENABLE_TOOL_SEARCH" not in mine  # the user's choice stands
    assert "ENABLE_TOOL_SEARCH" not in sdk.session_env({}, "http://g", "http://other:1", {})


def test_enable_routes_through_a_gateway_and_disable_undoes_it(
    fake_sdk: type[FakeTransport], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = fake_sdk.connect
    with MockServer() as mock:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        agent_sdk.enable()
        agent_sdk.enable()  # idempotent: one wrap
        assert fake_sdk.connect.__wrapped__ is original  # type: ignore[attr-defined]
        options = Options(env={"ANTHROPIC_BASE_URL": mock.base_url, "MINE": "x"})
        t = fake_sdk(options)
        asyncio.run(t.connect())
        assert t.started_with is not None
        gw = t.started_with["ANTHROPIC_BASE_URL"]
        assert gw.startswith("http://127.0.0.1:") and gw != mock.base_url
        assert t.started_with["CTXPATCH_UPSTREAM"] == mock.base_url
        assert t.started_with["MINE"] == "x"
        assert options.env == {"ANTHROPIC_BASE_URL": mock.base_url, "MINE": "x"}  # not mutated
        assert agent_sdk.gateway_urls() == {mock.base_url: gw}
        # the gateway forwards to the session's upstream, with the edit
        req = urllib.request.Request(
            gw + "/v1/messages",
            data=b'{"model":"claude-opus-4-6","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}',
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200
        (seen,) = [q for q in mock.requests() if q.path.startswith("/v1/messages")]
        assert seen.body["context_management"]["edits"][0]["type"] == "clear_tool_uses_20250919"

        agent_sdk.disable()
        assert fake_sdk.connect is original and not agent_sdk.enabled()
        assert agent_sdk.gateway_urls() == {}
        t2 = fake_sdk(Options())
        asyncio.run(t2.connect())
        assert t2.started_with == {}  # untouched: the plain SDK again


def test_missing_sdk_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, MODULE, None)  # import fails as if not installed
    with pytest.raises(MissingExtra) as e:
        agent_sdk.enable()
    assert "pip install claude-agent-sdk" in e.value.hint
    assert not agent_sdk.enabled()


def test_an_sdk_that_changed_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Other:
        async def connect(self) -> None:
            pass

    mod = types.ModuleType(MODULE)
    mod.SubprocessCLITransport = Other  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, MODULE, mod)
    with pytest.raises(sdk.SdkUnsupported) as e:
        agent_sdk.enable()
    assert "ANTHROPIC_BASE_URL" in e.value.hint
