"""Where the gateway's time goes, request by request: opt-in, off by default.

With ``CTXPATCH_GATEWAY_PHASES=1`` in the gateway's environment, each request handled is cut
into phases, and for each phase both the wall time and the event loop thread's CPU time
(``time.thread_time``) are kept:

``guard``     the browser and loop checks
``body``      reading the client's body (wall: includes waiting for its bytes)
``decide``    :func:`gateway.rewrite.decide` (the top-level walk, the clearing policy) and the
              window guard
``prepare``   the forwarded headers, the ledger's record, the upstream URL
``upstream``  sending the request and waiting for the reply's status and headers
``reply``     relaying the reply to the client (for a stream: until its last byte)

The CPU time of a phase that awaits includes whatever else the loop ran meanwhile (other
requests); with one request at a time (``bench/bench_gateway.py``) it is this request's.
:meth:`Phases.summary` gives the median of each (microseconds) over the requests recorded;
``bench/bench_gateway.py --phases`` prints it. Nothing about a request but these times is
kept, and at most :data:`KEEP` requests (the oldest dropped).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Mapping

ENV = "CTXPATCH_GATEWAY_PHASES"
KEEP = 10_000
NAMES = ("guard", "body", "decide", "prepare", "upstream", "reply")


def enabled(env: Mapping[str, str]) -> bool:
    return env.get(ENV, "").strip() == "1"


class Phases:
    """The phases of the requests recorded (see the module docstring)."""

    def __init__(self) -> None:
        self.requests: deque[dict[str, tuple[float, float]]] = deque(maxlen=KEEP)

    def start(self) -> Laps:
        return Laps(self)

    def summary(self) -> dict[str, dict[str, float]]:
        """``{phase: {"wall_us": median, "cpu_us": median}}``, plus ``total``, over the requests
        recorded that went through every phase (the ones refused or failed have fewer)."""
        whole = [r for r in self.requests if len(r) == len(NAMES)]
        out: dict[str, dict[str, float]] = {}
        for name in (*NAMES, "total"):
            if name == "total":
                walls = [sum(w for w, _ in r.values()) for r in whole]
                cpus = [sum(c for _, c in r.values()) for r in whole]
            else:
                walls = [r[name][0] for r in whole]
                cpus = [r[name][1] for r in whole]
            if walls:
                out[name] = {
                    "wall_us": statistics.median(walls) * 1e6,
                    "cpu_us": statistics.median(cpus) * 1e6,
                }
        out["requests"] = {"count": float(len(whole))}
        return out

    def clear(self) -> None:
        self.requests.clear()


class Laps:
    """One request's phases: ``lap(name)`` ends the phase ``name`` (begun at the previous lap)."""

    __slots__ = ("_cpu", "_phases", "_times", "_wall")

    def __init__(self, phases: Phases) -> None:
        self._phases = phases
        self._times: dict[str, tuple[float, float]] = {}
        self._wall = time.perf_counter()
        self._cpu = time.thread_time()

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        self._times[name] = (wall - self._wall, cpu - self._cpu)
        self._wall, self._cpu = wall, cpu
        if name == NAMES[-1]:
            self._phases.requests.append(self._times)
