"""What ``simulate`` and ``thresholds`` share: the choices, the version profile, model and
environment options, read once and checked (a bad one is a usage error)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from ctxpatch.errors import StrictFailure, TranscriptError, UsageError

if TYPE_CHECKING:
    from engine.profiles import Profile
    from engine.transcript import Transcript

DEFAULT_PROFILE = "2.1.39"
DEFAULT_MODEL = "claude-opus-4-6"


class ScenarioChoice(StrEnum):
    recorded = "recorded"
    unpatched = "unpatched"
    text_prune = "text_prune"
    server_clearing = "server_clearing"
    patched = "patched"
    oracle = "oracle"


COMPARED = ("unpatched", "text_prune", "server_clearing", "patched", "oracle")


class MicroCompactChoice(StrEnum):
    auto = "auto"
    on = "on"
    off = "off"


class TokenizerChoice(StrEnum):
    chars4 = "chars4"
    tiktoken = "tiktoken"


def parse_profile(version: str) -> Profile:
    from engine.profiles import PROFILES, profile_for

    try:
        return profile_for(version)
    except ValueError as e:
        raise UsageError(
            f"--profile {version}",
            why=str(e),
            hint=f"give a Claude Code version from 1.0.80 to {PROFILES[-1].last}, "
            "e.g. --profile 2.1.39",
        ) from None


def check_model(model: str) -> None:
    from engine.profiles import model_problem

    problem = model_problem(model)
    if problem is not None:
        raise UsageError(
            f"--model {model}",
            why=problem,
            hint="give a Claude model id or alias, e.g. --model claude-opus-4-6, "
            "--model claude-sonnet-4-5[1m] or --model sonnet",
        )


def beyond_warnings(versions: list[str], strict: bool) -> list[str]:
    """Warnings for versions newer than every profile; with ``strict`` they end the command."""
    from engine.profiles import beyond_profiles

    warnings = [
        f"Claude Code {v} is newer than every engine profile (the newest ends at "
        f"{beyond_profiles(v)}): its numbers are extrapolated"
        for v in versions
        if beyond_profiles(v)
    ]
    if warnings and strict:
        raise StrictFailure(
            "--strict: a version is newer than every engine profile",
            why="; ".join(warnings),
            hint="leave out --strict to model it with the newest profile's rules",
        )
    return warnings


def default_version() -> tuple[str, str]:
    """The version ``thresholds`` models without --profile, and why."""
    from engine.profiles import PROFILES
    from patcher.native.inspect import installed_version

    try:
        installed = installed_version()
    except Exception as e:  # finding the install is a convenience: never a failure
        installed, why = None, f"could not read the installed version ({type(e).__name__})"
    else:
        why = "none installed here"
    if installed:
        return installed, "the version installed here"
    return PROFILES[-1].last, f"the newest profile ({why})"


def parse_env(pairs: list[str] | None, pct: float | None) -> dict[str, str]:
    """``--env NAME=VALUE`` pairs, and ``--pct-override`` as its variable."""
    env: dict[str, str] = {}
    for p in pairs or []:
        if "=" not in p:
            raise UsageError(
                f"--env {p}", why="expected NAME=VALUE", hint="e.g. --env DISABLE_MICROCOMPACT=1"
            )
        k, v = p.split("=", 1)
        env[k] = v
    if pct is not None:
        env["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] = f"{pct:g}"
    return env


def replayable(transcript: Path) -> Transcript:
    """The transcript, loaded; one without an assistant reply with usage is refused."""
    from engine.transcript import load_transcript

    tr = load_transcript(transcript)
    if not tr.replies:
        raise TranscriptError(
            f"transcript {transcript}",
            "it has no assistant reply with usage"
            + (f" ({'; '.join(tr.warnings[:3])})" if tr.warnings else ""),
            "simulate needs a session in which Claude answered at least once",
        )
    return tr
