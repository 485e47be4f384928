"""One entry point for replaying a session: the recorded one, counterfactual scenarios or the
hindsight oracle.

:func:`replay_session` runs the scenarios a command asks for under typed :class:`Knobs`
(calibrating once, inferring micro-compaction from the recorded usage once when asked to) and says
where an unpatched replay differs from the recorded session; :func:`simulate` is one scenario.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.profiles import Profile
from engine.replay.counterfactual import simulate_counterfactual
from engine.replay.heap import frozen_heap
from engine.replay.knobs import Knobs
from engine.replay.model import Simulation
from engine.replay.oracle import simulate_oracle
from engine.replay.recorded import simulate_recorded
from engine.transcript import Transcript


def simulate(tr: Transcript, profile: Profile, scenario: str = "recorded", **kw) -> Simulation:
    """Dispatch to ``simulate_recorded`` or ``engine.replay.counterfactual.simulate_counterfactual``
    (the transcript and what else exists before out of the cycle collector meanwhile:
    :func:`engine.replay.heap.frozen_heap`)."""
    with frozen_heap():
        return _simulate(tr, profile, scenario, **kw)


def _simulate(tr: Transcript, profile: Profile, scenario: str, **kw) -> Simulation:
    if scenario == "recorded":
        overhead = 0.0
        if tr.boundaries and not profile.compact_reads_cache:
            # what a summary request with its own system prompt leaves out of its input
            cal = kw.get("calibration")
            if cal is None:
                from engine.replay.calibration import calibrate

                cal = calibrate(tr, profile)
            overhead = cal.overhead
        return simulate_recorded(tr, profile, kw.get("model"), kw.get("env"), overhead)
    if scenario == "oracle":
        return simulate_oracle(tr, profile, **kw)
    return simulate_counterfactual(tr, profile, scenario, **kw)


@dataclass(frozen=True)
class SessionReport:
    """The replays of one session, in the order asked for."""

    simulations: tuple[Simulation, ...]
    recorded: Simulation | None  # the recorded session, when a replay needed it
    vs_recorded: tuple[str, ...] | None  # where an unpatched replay differs from the recorded one
    tokenizer: Mapping[str, Any] | None  # chars/4 against offline BPE counts, when asked

    def of(self, scenario: str) -> Simulation | None:
        """The replay of ``scenario``, if it was asked for."""
        return next((s for s in self.simulations if s.scenario == scenario), None)


def replay_session(
    tr: Transcript,
    profile: Profile,
    scenarios: Sequence[str],
    knobs: Knobs,
    *,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
    tokenizer: bool = False,
    recall_tools: int | None = None,
) -> SessionReport:
    """Each of ``scenarios`` (``recorded`` alone, or counterfactual ones and ``oracle``) replayed
    over ``tr`` under ``profile`` and ``knobs``; ``model`` and ``env`` as Claude Code's (default:
    the transcript's model, no environment); ``tokenizer``: count the memory with offline BPE too;
    ``recall_tools``: the tokens recall's tool definitions add to every request of the replays
    with ctxpatch (``None``: the engine's default, ``engine.replay.recall_tools``; 0: none, as
    after ``apply --no-recall``).
    """
    kw: dict[str, Any] = {"model": model, "env": dict(env or {})}
    recorded: Simulation | None = None
    cal = None  # the calibration, once computed (the recorded replay's summary requests use it)
    if list(scenarios) == ["recorded"]:
        recorded = simulate(tr, profile, "recorded", **kw)
        sims = [recorded]
    else:
        from engine.replay.calibration import calibrate

        cal = calibrate(tr, profile)
        mc = knobs.microcompact
        if mc is None:
            recorded = simulate(tr, profile, "recorded", calibration=cal, **kw)
            mc = not any(e.kind == "micro_compact" and e.recorded is False for e in recorded.events)
        replay = dict(
            kw,
            prune_env=dict(knobs.prune_env),
            clear_env=dict(knobs.clear_env),
            microcompact_on=mc,
            calibration=cal,
        )
        if recall_tools is not None:
            replay["recall_tools"] = recall_tools
        sims = [simulate(tr, profile, name, **replay) for name in scenarios]
    counts = None
    if tokenizer:
        from engine.replay.recorded import memory_records
        from engine.tokenizers import compare_counts

        counts = compare_counts(memory_records(tr, profile))
    vs_recorded: tuple[str, ...] | None = None
    unpatched = next((s for s in sims if s.scenario == "unpatched"), None)
    if unpatched is not None:
        from engine.replay.divergence import vs_recorded as explain

        if recorded is None:
            recorded = simulate(tr, profile, "recorded", calibration=cal, **kw)
        vs_recorded = explain(recorded, unpatched)
    return SessionReport(tuple(sims), recorded, vs_recorded, counts)
