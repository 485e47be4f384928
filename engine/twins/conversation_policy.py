"""The ``paid`` policy as a replay runs it: one conversation's requests, in order.

:class:`PaidPolicy` is the :data:`engine.api.server_clearing.ClearPolicy` the replays call on
every request: :func:`engine.twins.policy.paid_edit` (the stateless rule) with, unless the knob
turns it off, the free move of :mod:`engine.twins.free_moves`, which remembers the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.api.context_management import ClearToolUses
from engine.twins.context_clear import window_threshold
from engine.twins.free_moves import (
    Conversation,
    free_edit,
    free_from_env,
    lifetime_ms,
    margin_from_env,
    near_level,
    near_need,
)
from engine.twins.policy import (
    DEFAULT_CEILING,
    DEFAULT_PATIENCE,
    WRITE_EXTRA_X20,
    WRITE_EXTRA_X20_1H,
    ceiling_for,
    paid_edit,
    patience_from_env,
    policy_from_env,
)

__all__ = ["PaidPolicy", "clear_policy_from_env"]


class PaidPolicy:
    """:data:`engine.api.server_clearing.ClearPolicy` of the ``paid`` policy at given knobs.

    ``fixed``: the replay's system prompt and tools; what its prompts hold beyond them before
    the messages is history the file does not hold (``Calibration.carried``), counted as the
    messages a real client would send. ``uncached``: tokens of ``fixed`` a cache break writes
    again (``Calibration.overhead - Calibration.break_prefix``: the system prompt after its
    breakpoint and the context Claude Code prepends, which a real request shows as its system
    blocks after the last ``cache_control`` and its first messages), at 4 characters a token.
    ``one_hour``: the session caches for an hour (``Calibration.one_hour``: its requests mark
    their breakpoints ``ttl: "1h"``, which :func:`write_extra` reads from a real request).
    ``free``: the free move where the cache breaks anyway (:mod:`engine.twins.free_moves`):
    the policy then remembers the conversation, so an instance serves one replay, and with it
    the near move from ``level`` (:func:`engine.twins.free_moves.near_level`; 0: never), told
    each reply's prompt by :meth:`observe`, when it frees ``need`` characters
    (:func:`engine.twins.free_moves.near_need`)."""

    def __init__(
        self,
        ceiling: int = DEFAULT_CEILING,
        patience: int = DEFAULT_PATIENCE,
        fixed: float = 0.0,
        uncached: float = 0.0,
        one_hour: bool = False,
        free: bool = True,
        level: int = 0,
        need: int = 0,
    ) -> None:
        self.ceiling = ceiling
        self.patience = patience
        self.fixed = fixed
        self.rest = 4 * max(0, round(uncached))
        self.extra = WRITE_EXTRA_X20_1H if one_hour else WRITE_EXTRA_X20
        self.conversation = Conversation() if free else None
        self.level = level if free else 0
        self.need = need  # what a near move must free (near_need)

    def asked(self, now: int | None) -> None:
        """The coming request is sent at ``now`` (ms since the epoch; ``None``: unknown): the
        expiry move's clock (:meth:`engine.twins.free_moves.Conversation.asked`)."""
        if self.conversation is not None:
            self.conversation.asked(now, lifetime_ms(self.extra))

    def observe(self, prompt: int) -> None:
        """The reply to the last request reported ``prompt`` tokens of prompt."""
        if self.conversation is not None:
            self.conversation.observe(prompt)

    def __call__(
        self,
        edit: ClearToolUses,
        api: Sequence[Mapping[str, Any]],
        costs: Sequence[float],
        overhead: float,
    ) -> ClearToolUses:
        preceding = max(0, round(overhead - self.fixed)) if self.fixed else 0
        if self.conversation is None:
            return paid_edit(
                edit, api, self.ceiling, self.patience, preceding, self.rest, self.extra
            )
        return free_edit(
            self.conversation,
            edit,
            api,
            self.ceiling,
            self.patience,
            preceding,
            self.rest,
            self.extra,
            self.level,
            need=self.need,
        )


def clear_policy_from_env(
    env: Mapping[str, str],
    fixed: float = 0.0,
    uncached: float = 0.0,
    one_hour: bool = False,
    model: str = "",
    threshold: int | None = None,
) -> PaidPolicy | None:
    """The policy the knobs ask for (a new one: it remembers the conversation it serves);
    ``None`` for ``fixed`` (``edit_for_request``'s STEP). ``model``: the requests' model (its
    window sets the near move's level and scales the default ceiling, as the injected
    JavaScript does: :func:`engine.twins.policy.ceiling_from_env`); ``threshold``: a native
    build's auto-compact threshold, which sets both instead
    (:func:`engine.claude_code.thresholds.near_threshold`,
    :func:`engine.twins.policy.ceiling_for`)."""
    if policy_from_env(env) == "fixed":
        return None
    return PaidPolicy(
        ceiling_for(env, window_threshold(model) if threshold is None else threshold),
        patience_from_env(env),
        fixed,
        uncached,
        one_hour,
        free_from_env(env),
        near_level(model, (), margin_from_env(env), threshold),
        near_need(margin_from_env(env)),
    )
