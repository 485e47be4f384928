"""``CTXPATCH_GATEWAY_PHASES=1``: the gateway times each phase of a request (gateway.phases);
off by default, and then nothing is kept."""

from __future__ import annotations

import http.client
import time

from gateway_bodies import EDIT, body_of, compact

from gateway import phases
from gateway.server import ThreadedGateway
from lab.mock import MockConfig, MockServer

HEADERS = {"content-type": "application/json", "anthropic-version": "2023-06-01"}


def post(url: str, body: bytes, headers: dict[str, str] = HEADERS) -> int:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/v1/messages", body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def test_off_by_default_nothing_recorded() -> None:
    with MockServer(MockConfig()) as mock, ThreadedGateway(upstream=mock.base_url, env={}) as gw:
        assert post(gw.url, compact(body_of())) == 200
        assert gw.gateway.phases is None


def test_on_every_phase_of_each_request_timed() -> None:
    env = {phases.ENV: "1"}
    raw = compact(body_of())
    with (
        MockServer(MockConfig()) as mock,
        ThreadedGateway(upstream=mock.base_url, edit=EDIT, env=env) as gw,
    ):
        ph = gw.gateway.phases
        assert ph is not None
        for _ in range(3):
            assert post(gw.url, raw) == 200
        # a browser's request is refused at the guard: it has one phase, not counted
        assert post(gw.url, raw, {**HEADERS, "Origin": "https://evil.example"}) == 403
        deadline = time.monotonic() + 5
        while len(ph.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)  # the last lap is taken just before the reply is sent
        summary = ph.summary()
    assert summary["requests"] == {"count": 3.0}
    assert set(summary) == {*phases.NAMES, "total", "requests"}
    for name in phases.NAMES:
        assert summary[name]["wall_us"] >= 0 and summary[name]["cpu_us"] >= 0
        assert summary[name]["wall_us"] <= summary["total"]["wall_us"]
    # the mock answers after the request is read and parsed: the upstream phase is not empty
    assert summary["upstream"]["wall_us"] > 0


def test_laps_bounded_and_cleared() -> None:
    ph = phases.Phases()
    for _ in range(phases.KEEP + 5):
        laps = ph.start()
        for name in phases.NAMES:
            laps.lap(name)
    assert len(ph.requests) == phases.KEEP
    assert ph.summary()["requests"] == {"count": float(phases.KEEP)}
    ph.clear()
    assert ph.summary() == {"requests": {"count": 0.0}}
    unfinished = ph.start()
    unfinished.lap("guard")
    assert len(ph.requests) == 0  # recorded at its last phase only


def test_enabled_reads_only_one() -> None:
    assert phases.enabled({phases.ENV: "1"})
    assert not phases.enabled({})
    assert not phases.enabled({phases.ENV: "0"})
    assert not phases.enabled({phases.ENV: "yes"})
