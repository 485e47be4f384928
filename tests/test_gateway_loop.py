"""The gateway's event loop: uvloop's when the ``fast`` extra is installed (CI installs it),
asyncio's own with ``CTXPATCH_GATEWAY_UVLOOP=0`` or without uvloop; the gateway serves on both."""

from __future__ import annotations

import http.client
import importlib.util
import os

import pytest
from gateway_bodies import EDIT, body_of, compact

from gateway.server import UVLOOP_ENV, ThreadedGateway, new_event_loop
from lab.mock import MockConfig, MockServer

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None


def _require_uvloop() -> None:
    if not HAVE_UVLOOP:
        if os.environ.get("CI") == "true":
            pytest.fail("uvloop (the fast extra) is not installed: .ci/run installs it")
        pytest.skip("uvloop is not installed (pip install -e '.[fast]')")


def test_uvloop_when_installed() -> None:
    _require_uvloop()
    import uvloop

    loop = new_event_loop({})
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_asyncio_loop_when_turned_off() -> None:
    loop = new_event_loop({UVLOOP_ENV: "0"})
    try:
        assert type(loop).__module__.startswith("asyncio")
    finally:
        loop.close()


@pytest.mark.parametrize("uvloop_env", ["", "0"])
def test_the_gateway_serves_on_either_loop(monkeypatch, uvloop_env: str) -> None:
    if uvloop_env == "":
        _require_uvloop()
    monkeypatch.setenv(UVLOOP_ENV, uvloop_env)
    raw = compact(body_of())
    with MockServer(MockConfig()) as mock, ThreadedGateway(upstream=mock.base_url, edit=EDIT) as gw:
        kind = type(gw._loop).__module__.split(".")[0]
        assert kind == ("asyncio" if uvloop_env == "0" else "uvloop")
        host, port = gw.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request(
                "POST", "/v1/messages", body=raw, headers={"content-type": "application/json"}
            )
            r = conn.getresponse()
            assert r.status == 200 and r.read()
        finally:
            conn.close()
        (req,) = mock.requests()
        assert req.body["context_management"]["edits"][-1]["type"] == "clear_tool_uses_20250919"
