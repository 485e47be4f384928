"""Drift: every difference between what a build does and the engine's profile for its version.

One table, :data:`TABLE`, keyed by the kind of findings (``"cli.js"``: a :class:`Report` of the
``cli.js`` inspector, for npm builds and the first native ones; ``"levels"``: the
:class:`patcher.native.levels.Levels` of later native builds). Each kind's rows are in the order
fields are reported: each row names the profile field, reads the file's value from the findings
(or :data:`SKIP` when the file says nothing about it, or when the field does not apply), and
reads the expected value from the profile. A field is only compared when the file's side was
really read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.profiles import Profile, profile_for  # engine never imports patcher; patcher may
from patcher.inspect.report import Comparison, Drift, Report

if TYPE_CHECKING:
    from patcher.native.levels import Levels

    Findings = Report | Levels  # what a reader returns: a cli.js Report, or a native build's Levels

SKIP = object()  # the file's side of a row that is not compared


File = Callable[
    [Any, Profile], Any
]  # the file's side of a row (findings, profile): a value, or SKIP
When = Callable[[Report, Profile], bool]


@dataclass(frozen=True)
class Check:
    field: str
    file: File
    profile: Callable[[Profile], Any]


def _row(field: str, file: File, profile: Callable[[Profile], Any] | None = None) -> Check:
    """Compare ``file`` with the profile's ``field`` (or with ``profile(p)``)."""
    return Check(field, file, profile or (lambda p: getattr(p, field)))


def _const(key: str) -> File:
    """The constant ``key``, when it was read (its value may be None: "none", e.g. no cap)."""
    return lambda rep, p: rep.constants[key].value if key in rep.constants else SKIP


def _opt(get: Callable[[Report], Any]) -> File:
    """``get(rep)``, when it was read (not None)."""
    return lambda rep, p: SKIP if (v := get(rep)) is None else v


def _flag(get: Callable[[Report], Any]) -> File:
    """``get(rep)`` as a boolean (not read counts as False)."""
    return lambda rep, p: bool(get(rep))


def _only(when: When, file: File) -> File:
    return lambda rep, p: file(rep, p) if when(rep, p) else SKIP


def _has(role: str) -> When:
    """The function of ``role`` was found."""
    return lambda rep, p: role in rep.functions


def _both(*kinds: str) -> When:
    """The file's and the profile's micro-compaction are the same one of ``kinds``."""
    return lambda rep, p: rep.micro.kind in kinds and p.microcompact == rep.micro.kind


def _blocking_offset(rep: Report, p: Profile) -> Any:
    if "blocking_offset" in rep.constants:
        return rep.constants["blocking_offset"].value
    if rep.thresholds.blocking_base is None and "warning_state" in rep.functions:
        return None  # no isAtBlockingLimit at all (or its base unread)
    return SKIP


def _disable_compact_scope(rep: Report) -> str | None:
    t = rep.thresholds
    if t.disable_compact_in_enabled:
        return "enabled"
    return "dispatcher" if t.disable_compact_in_dispatcher else None


def _sorted_tools(rep: Report, p: Profile) -> Any:
    return sorted(rep.constants["mc_tools"].value) if "mc_tools" in rep.constants else SKIP


_LEGACY = _both("legacy")
_NEWER: When = lambda rep, p: rep.counter.mode == "usage+newer"  # noqa: E731
_NEITHER_LEGACY: When = lambda rep, p: "legacy" not in (rep.micro.kind, p.microcompact)  # noqa: E731
_ENABLED = _has("autocompact_enabled")


def _four(p: Profile) -> int:
    return 4  # the engine counts chars/4 everywhere (engine/tokens.py)


CHECKS: tuple[Check, ...] = (
    # thresholds
    _row("autocompact_offset", _const("autocompact_offset")),
    _row("warning_offset", _const("warning_offset")),
    _row("error_offset", _const("error_offset")),
    _row("blocking_offset", _blocking_offset),
    _row("reserve_cap", _const("reserve_cap")),
    _row("image_tokens", _const("image_tokens")),
    _row(
        "blocking_base",
        _only(
            lambda rep, p: rep.value("blocking_offset") is not None,
            _opt(lambda r: r.thresholds.blocking_base),
        ),
    ),
    _row("has_pct_override", _only(_has("threshold"), _flag(lambda r: r.thresholds.pct_override))),
    _row(
        "has_disable_compact",
        _only(
            _ENABLED,
            _flag(
                lambda r: (
                    r.thresholds.disable_compact_in_enabled
                    or r.thresholds.disable_compact_in_dispatcher
                )
            ),
        ),
    ),
    _row("disable_compact_scope", _only(_ENABLED, _opt(_disable_compact_scope))),
    _row(
        "has_disable_auto_compact",
        _only(_ENABLED, _flag(lambda r: r.thresholds.disable_auto_compact_in_enabled)),
    ),
    _row(
        "has_blocking_override",
        _only(_has("warning_state"), _flag(lambda r: r.thresholds.blocking_override)),
    ),
    # the x4/3 message estimate
    _row("estimate_factor_4_3", _flag(lambda r: r.estimator.factor_4_3)),
    _row("estimate_counts_documents", _opt(lambda r: r.estimator.counts_documents)),
    _row("estimate_counts_block_text", _opt(lambda r: r.estimator.counts_block_text)),
    # session memory
    _row("session_memory", _flag(lambda r: r.session_memory.present)),
    _row("sm_min_tokens", _const("sm_min_tokens")),
    _row("sm_min_text_messages", _const("sm_min_text_messages")),
    _row("sm_max_tokens", _const("sm_max_tokens")),
    # the auto-compact count
    _row("count_mode", _opt(lambda r: r.counter.mode)),
    _row("newer_image_tokens", _only(_NEWER, _const("newer_image_tokens"))),
    _row("newer_counts_attachments", _only(_NEWER, _opt(lambda r: r.counter.counts_attachments))),
    _row("newer_renders_attachments", _only(_NEWER, _opt(lambda r: r.counter.renders_attachments))),
    _row("newer_from_message_start", _only(_NEWER, _opt(lambda r: r.counter.from_message_start))),
    _row("newer_counts_all_blocks", _only(_NEWER, _opt(lambda r: r.counter.counts_all_blocks))),
    # micro-compaction
    _row("microcompact", lambda rep, p: rep.micro.kind),
    _row("chars_per_token", _const("chars_per_token"), _four),
    _row("mc_chars_per_token", _const("mc_chars_per_token"), _four),
    _row("newer_chars_per_token", _const("newer_chars_per_token"), _four),
    _row("mc_has_env_gate", _only(_LEGACY, _flag(lambda r: r.micro.env_gate))),
    _row("mc_remote_kill_switch", _only(_LEGACY, _flag(lambda r: r.micro.remote_kill_switch))),
    _row("mc_replacement", _only(_LEGACY, lambda rep, p: rep.micro.replacement)),
    _row("mc_clears_images", _only(_LEGACY, _flag(lambda r: r.micro.clears_images))),
    _row("mc_target", _only(_LEGACY, _const("mc_target"))),
    _row("mc_keep", _only(_both("legacy", "time-based"), _const("mc_keep"))),
    _row("mc_min_saving", _only(_LEGACY, _const("mc_min_saving"))),
    _row("mc_tools", _only(_LEGACY, _sorted_tools), lambda p: sorted(p.mc_tools)),
    _row("mc_image_tokens", _only(_LEGACY, _const("mc_image_tokens")), lambda p: p.image_tokens),
    _row("mc_has_env_gate", _only(_NEITHER_LEGACY, _flag(lambda r: r.micro.env_gate))),
)


def _level(key: str) -> File:
    """The levels constant ``key``, when it was read."""
    return lambda lv, p: lv.value(key) if key in lv.constants else SKIP


def _feature(key: str) -> File:
    """The levels feature ``key``, when it was looked for."""
    return lambda lv, p: lv.features.get(key, SKIP)


LEVEL_CHECKS: tuple[Check, ...] = (
    _row("autocompact_offset", _level("autocompact_offset")),
    _row("warning_offset", _level("warning_offset")),
    _row("blocking_offset", _level("blocking_offset")),
    _row("reserve_cap", _level("reserve_cap")),
    _row("precompute_buffer_fraction", _level("precompute_buffer_fraction")),
    _row("has_pct_override", _feature("pct_override")),
    _row("has_blocking_override", _feature("blocking_override")),
    _row("proactive_needs_configured_window", _feature("proactive_needs_configured_window")),
    _row("count_adds_server_cleared", _feature("count_adds_server_cleared")),
)

TABLE: dict[str, tuple[Check, ...]] = {"cli.js": CHECKS, "levels": LEVEL_CHECKS}

_UNKNOWN_VERSION = "unknown version: no profile to compare with"


def _problem(findings: Findings, version: str | None) -> str:
    """Why ``findings`` are compared with no profile ("" when they are)."""
    if not isinstance(findings, Report):  # the levels of a native build
        if not findings.found:
            return "; ".join(findings.unresolved) or "no compaction code found"
        return _UNKNOWN_VERSION if version is None else ""
    if version is None:
        return _UNKNOWN_VERSION
    if findings.era == "ratio":
        return "ratio-era auto-compaction (before 1.0.80): the engine does not model it"
    return ""


def compare(findings: Findings, version: str | None) -> Comparison:
    """``findings`` against the engine's profile for ``version``, by their kind's rows."""
    problem = _problem(findings, version)
    if problem or version is None:
        return Comparison(profile_problem=problem)
    try:
        p = profile_for(version)
    except ValueError as e:
        return Comparison(profile_problem=str(e))
    drift: list[Drift] = []
    compared: list[str] = []
    for check in TABLE[findings.kind]:
        found = check.file(findings, p)
        if found is SKIP:
            continue
        compared.append(check.field)
        expected = check.profile(p)
        if found != expected:
            drift.append(Drift(check.field, found, expected))
    return Comparison(p.name, p.range, "", tuple(drift), tuple(compared))
