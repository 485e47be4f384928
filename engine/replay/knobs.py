"""The replay knobs, one table: each ``CLAUDE_TEXT_PRUNE_*`` / ``CLAUDE_CTX_CLEAR_*`` variable the
injected JavaScript reads, with its ``simulate`` option (if it has one), type, lower bound and help.
The ``simulate`` options, their checks and the environments a replay gets (``simulate`` and
``report``) are all made from :data:`KNOBS`; :class:`Knobs` is the typed value parsed once at the
edge (:func:`parse_knobs`).

Adding a clearing knob: one row here, the JavaScript snippet that reads it
(``patcher/snippets/context_clear.js``), its twin (``engine.twins.context_clear``: the variable in
``ENV_NAMES``, so in ``REPLAY_ENV_NAMES``, read where the snippet reads it) and a test (the node
differential test of the twin).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ctxpatch.errors import UsageError
from engine.twins import context_clear as cc
from engine.twins import textprune as tp


@dataclass(frozen=True)
class Knob:
    env: str  # the variable the injected JavaScript reads
    kind: type  # int, str, or bool (a flag that sets the variable to 1)
    low: int | None  # the smallest value the option takes (ints)
    help: str
    name: str | None = None  # the simulate option as a parameter name (clear_keep: --clear-keep)

    @property
    def option(self) -> str | None:
        """The ``simulate`` option; None for a knob read from the environment only."""
        return None if self.name is None else "--" + self.name.replace("_", "-")

    @property
    def prunes(self) -> bool:
        """A knob of the text prune (else of the server-side clearing)."""
        return self.env.startswith("CLAUDE_TEXT_PRUNE_")


KNOBS: tuple[Knob, ...] = (
    Knob("CLAUDE_TEXT_PRUNE_KEEP", int, 1, "CLAUDE_TEXT_PRUNE_KEEP (patched).", "keep"),
    Knob(
        "CLAUDE_TEXT_PRUNE_THRESHOLD",
        int,
        0,
        "CLAUDE_TEXT_PRUNE_THRESHOLD (patched).",
        "threshold",
    ),
    Knob(
        "CLAUDE_TEXT_PRUNE_MAX_CHARS", int, 1, "CLAUDE_TEXT_PRUNE_MAX_CHARS (patched).", "max_chars"
    ),
    Knob("CLAUDE_TEXT_PRUNE_STEP", int, 1, "CLAUDE_TEXT_PRUNE_STEP (patched).", "step"),
    Knob(
        cc.ENV_TRIGGER,
        int,
        1,
        "CLAUDE_CTX_CLEAR_TRIGGER: input tokens before the server clears.",
        "clear_trigger",
    ),
    Knob(cc.ENV_KEEP, int, 0, "CLAUDE_CTX_CLEAR_KEEP: most recent tool uses kept.", "clear_keep"),
    Knob(
        cc.ENV_AT_LEAST,
        int,
        0,
        "CLAUDE_CTX_CLEAR_AT_LEAST: clear only when this many tokens go (0: any).",
        "clear_at_least",
    ),
    Knob(
        cc.ENV_EXCLUDE,
        str,
        None,
        "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS: comma list of tools never cleared.",
        "clear_exclude_tools",
    ),
    Knob(
        cc.ENV_INPUTS,
        str,
        None,
        "CLAUDE_CTX_CLEAR_TOOL_INPUTS: 1, 0, or a comma list of tools.",
        "clear_tool_inputs",
    ),
    Knob(
        cc.ENV_STEP,
        int,
        1,
        "CLAUDE_CTX_CLEAR_STEP: tool uses between two moves of the cleared part.",
        "clear_step",
    ),
    Knob(cc.ENV_DISABLE, bool, None, "CLAUDE_CTX_CLEAR_DISABLE=1: no clearing.", "clear_disable"),
    # the online policy's (engine.twins.policy): from the environment or --env only
    Knob(cc.ENV_POLICY, str, None, "CLAUDE_CTX_CLEAR_POLICY: paid (default) or fixed."),
    Knob(cc.ENV_CEILING, int, 1, "CLAUDE_CTX_CLEAR_CEILING: message tokens kept at most."),
    Knob(cc.ENV_PATIENCE, int, 0, "CLAUDE_CTX_CLEAR_PATIENCE: percent of the break-even rent."),
    Knob(cc.ENV_FREE, str, None, "CLAUDE_CTX_CLEAR_FREE=0: no free move where the cache breaks."),
    Knob(
        cc.ENV_MARGIN,
        int,
        0,
        "CLAUDE_CTX_CLEAR_MARGIN: tokens under the compact threshold for a near move (0: none).",
    ),
    # the window guard (engine.twins.context_clear.near_window; off unless 1): environment only
    Knob(
        cc.ENV_WINDOW_GUARD, bool, None, "CLAUDE_CTX_CLEAR_WINDOW_GUARD=1: no edit near the window."
    ),
)
OPTIONS: tuple[Knob, ...] = tuple(k for k in KNOBS if k.name is not None)
"""The knobs ``simulate`` has an option for, in the order ``--help`` lists them."""
PRUNE_ENV_NAMES = tp.ENV_NAMES
"""The text prune's variables, options or not (:data:`engine.twins.textprune.ENV_NAMES`)."""


@dataclass(frozen=True)
class Knobs:
    """What a counterfactual replay runs under: the text prune's and the clearing's variables
    (strings, as the injected JavaScript reads them), and micro-compaction (None: as the recorded
    usage shows)."""

    prune_env: Mapping[str, str] = field(default_factory=dict)
    clear_env: Mapping[str, str] = field(default_factory=dict)
    microcompact: bool | None = None

    def cache_key(self) -> str:
        """The variables as one string (a replay cache's key)."""
        return json.dumps([sorted(self.clear_env.items()), sorted(self.prune_env.items())])

    def problems(self) -> list[str]:
        """A clearing knob the patched Claude Code would ignore (and replace by its default)."""
        return cc.knob_errors(self.clear_env)


def below_bound(values: Mapping[str, object]) -> tuple[Knob, int] | None:
    """The first option given below its knob's lower bound, with its value; None when all are in
    range (``values``: the options by parameter name)."""
    for knob in OPTIONS:
        value = values.get(knob.name or "")
        if knob.low is not None and isinstance(value, int) and value < knob.low:
            return knob, value
    return None


def check_bounds(values: Mapping[str, object]) -> None:
    """A usage error naming the first option given below its knob's lower bound."""
    if (low := below_bound(values)) is not None:
        knob, value = low
        raise UsageError(
            f"{knob.option} {value}",
            why=f"must be at least {knob.low}",
            hint="see ctxpatch simulate --help",
        )


def _option_env(values: Mapping[str, object], knobs: Iterable[Knob]) -> dict[str, str]:
    """The variables the given options set (an unset option sets none; a flag sets 1)."""
    env: dict[str, str] = {}
    for knob in knobs:
        value = values.get(knob.name or "")
        if knob.kind is bool:
            if value:
                env[knob.env] = "1"
        elif value is not None:
            env[knob.env] = str(value)
    return env


def parse_knobs(
    values: Mapping[str, object] | None = None,
    process_env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    microcompact: bool | None = None,
) -> Knobs:
    """:class:`Knobs` from the options (``values``, by parameter name). Each side's variables
    (the clearing's, and the text prune's :data:`PRUNE_ENV_NAMES`) come from the process's
    environment, then ``extra_env`` (``--env``), then the options, each overriding the one
    before: what the patched Claude Code started from that environment would read."""
    values = values or {}
    clear = [k for k in KNOBS if not k.prunes]
    prune = [k for k in KNOBS if k.prunes]

    def layered(names: set[str], knobs: list[Knob]) -> dict[str, str]:
        env = {k: v for k, v in (process_env or {}).items() if k in names}
        env |= {k: v for k, v in (extra_env or {}).items() if k in names}
        return env | _option_env(values, knobs)

    return Knobs(
        layered(set(PRUNE_ENV_NAMES), prune),
        layered({k.env for k in clear}, clear),
        microcompact,
    )
