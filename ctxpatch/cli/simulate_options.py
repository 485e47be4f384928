"""The options of ``ctxpatch simulate``, as one signature typer reads: the session and model
options, then one option per knob of ``engine.replay.knobs.OPTIONS`` (the knob table), then the
replay and output options."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxpatch.cli.modelargs import COMPARED, MicroCompactChoice, ScenarioChoice, TokenizerChoice
from ctxpatch.cli.options import EnvOpt, JsonOpt, StrictOpt
from engine.replay.knobs import OPTIONS, Knob

Row = tuple[str, Any, Any]  # (parameter name, annotation, default)
_TRANSCRIPT_HELP = (
    "A Claude Code session transcript: ~/.claude/projects/<project>/<id>.jsonl, "
    "or the same compressed with xz (.jsonl.xz, read as is)."
)
_SCENARIO_HELP = (
    "recorded: explain what happened; unpatched, text_prune (the text prune), "
    "server_clearing (server-side tool-result clearing), patched (both, as "
    "`ctxpatch apply` installs): replay under the knobs; oracle: the cheapest clearing "
    "schedule in hindsight (docs/oracle.md)."
)
_COMPARE_HELP = (
    "Run unpatched, text_prune, server_clearing, patched and oracle side by side, with "
    "cost = 1.0 x uncached + 1.25 x cache write + 0.1 x cache read input tokens."
)


def _opt(name: str, kind: Any, default: Any, *decls: str, **kw: Any) -> Row:
    return (name, Annotated[kind, typer.Option(*decls, **kw)], default)


_HEAD: list[Row] = [
    (
        "transcript",
        Annotated[Path, typer.Argument(help=_TRANSCRIPT_HELP, readable=False)],
        inspect.Parameter.empty,
    ),
    _opt("scenario", ScenarioChoice, ScenarioChoice.recorded, help=_SCENARIO_HELP),
    _opt("compare", bool, False, "--compare", help=_COMPARE_HELP),
    _opt(
        "profile",
        str | None,
        None,
        "--profile",
        "-p",
        help="Claude Code version to model (default: the transcript's).",
    ),
    _opt("model", str | None, None, help="Model id (default: the transcript's)."),
    _opt(
        "pct_override",
        float | None,
        None,
        "--pct-override",
        help="CLAUDE_AUTOCOMPACT_PCT_OVERRIDE for the replay.",
    ),
]
_TAIL: list[Row] = [
    _opt(
        "no_recall",
        bool,
        False,
        "--no-recall",
        help="Replay apply --no-recall: the clearing replays without recall's two tool "
        "definitions on every request.",
    ),
    _opt(
        "microcompact",
        MicroCompactChoice,
        MicroCompactChoice.auto,
        help="Micro-compaction in replays; auto = as the recorded usage shows.",
    ),
    ("env", EnvOpt, None),
    _opt(
        "tokenizer",
        TokenizerChoice,
        TokenizerChoice.chars4,
        help="tiktoken: add offline BPE counts next to chars/4.",
    ),
    _opt(
        "all_requests",
        bool,
        False,
        "--all-requests",
        help="List every request, not only those with events.",
    ),
    _opt(
        "plot",
        Path | None,
        None,
        "--plot",
        help="Write tokens per request with threshold lines to FILE.png.",
    ),
    _opt(
        "prices",
        Path | None,
        None,
        "--prices",
        help="A price file (TOML/JSON) over the built-in table (CTXPATCH_PRICES).",
    ),
    ("as_json", JsonOpt, False),
    ("strict", StrictOpt, False),
]


def knob_option(k: Knob) -> Row:
    """A knob's option: an integer or text, unset by default; a flag for a bool knob."""
    assert k.name is not None and k.option is not None
    if k.kind is bool:
        return _opt(k.name, bool, False, k.option, help=k.help)
    return _opt(k.name, k.kind | None, None, k.option, help=k.help)


def signature() -> inspect.Signature:
    """Every parameter, in the order ``--help`` lists them."""
    rows = [*_HEAD, *map(knob_option, OPTIONS), *_TAIL]
    kw = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature(
        [inspect.Parameter(n, kw, annotation=a, default=d) for n, a, d in rows]
    )


@dataclass(frozen=True)
class SimulateArgs:
    """The options other than the knobs, as typer parsed them."""

    transcript: Path
    scenario: ScenarioChoice
    compare: bool
    profile: str | None
    model: str | None
    pct_override: float | None
    no_recall: bool
    microcompact: MicroCompactChoice
    env: list[str] | None
    tokenizer: TokenizerChoice
    all_requests: bool
    plot: Path | None
    prices: Path | None
    as_json: bool
    strict: bool

    def scenarios(self) -> list[str]:
        """The scenarios to replay: ``recorded`` alone, the one asked for, or every compared one."""
        if self.compare:
            return list(COMPARED)
        return [self.scenario.value]

    def microcompact_forced(self) -> bool | None:
        """--microcompact: None (auto: the transcript says), True (on) or False (off)."""
        return {"auto": None, "on": True, "off": False}[self.microcompact.value]

    @classmethod
    def split(cls, options: dict[str, Any]) -> tuple[SimulateArgs, dict[str, object]]:
        """These options, and the knobs' values by parameter name (the rest)."""
        names = {f.name for f in fields(cls)}
        knobs = {k: v for k, v in options.items() if k not in names}
        return cls(**{k: v for k, v in options.items() if k in names}), knobs
