"""Replaying a session: the recorded replay (``recorded``), the counterfactual replays under
knobs (``counterfactual``), the hindsight oracle (``oracle``), their calibration, the one entry
point (``session``), what they produce (``model``, a leaf) and how it is reported (``report``,
``divergence``)."""
