"""One entry point for replaying a session: the recorded one, a counterfactual scenario or the
hindsight oracle."""

from __future__ import annotations

from engine.profiles import Profile
from engine.replay.counterfactual import simulate_counterfactual
from engine.replay.model import Simulation
from engine.replay.oracle import simulate_oracle
from engine.replay.recorded import simulate_recorded
from engine.transcript import Transcript


def simulate(tr: Transcript, profile: Profile, scenario: str = "recorded", **kw) -> Simulation:
    """Dispatch to ``simulate_recorded`` or ``engine.replay.counterfactual.simulate_counterfactual``."""
    if scenario == "recorded":
        return simulate_recorded(tr, profile, kw.get("model"), kw.get("env"))
    if scenario == "oracle":
        return simulate_oracle(tr, profile, **kw)
    return simulate_counterfactual(tr, profile, scenario, **kw)
