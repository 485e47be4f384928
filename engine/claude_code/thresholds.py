"""Compaction thresholds for a model, a version profile and an environment.

Mirrors, in 2.1.39 names: ``jSA`` (reserved output), ``a51`` (effective window), ``lg1``
(auto-compact threshold with ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``), ``qc`` (warning / error /
auto-compact / blocking states) and ``um`` (is auto-compact enabled). The same logic is ``kH0``,
``EHA``, ``zT2``, ``T9A``, ``Hd`` in 2.0.76 (no cap, no blocking) and ``dL0``, ``q3A``, ``xs2``,
``ic``, ``nc`` in 2.1.7.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from engine.javascript import js_parse_float, js_parse_int
from engine.profiles import Profile, model_max_output
from engine.versions import is_native

TRUE_VALUES = ("1", "true", "yes", "on")


def env_true(value: str | None) -> bool:
    """cli.js ``X6``/``a1``: ``"1"``, ``"true"``, ``"yes"``, ``"on"`` (any case) are true."""
    return value is not None and value.strip().lower() in TRUE_VALUES


def _env_max_output(env: Mapping[str, str], profile: Profile) -> tuple[int, str]:
    """``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` validated like ``Nn1.validate`` (2.1.39), and where
    the number comes from (for the explanation)."""
    name = "CLAUDE_CODE_MAX_OUTPUT_TOKENS"
    raw = env.get(name)
    default = profile.default_max_output
    if not raw:
        return default, f"default {default} ({name} unset)"
    n = js_parse_int(raw)
    if n is None or n <= 0:
        return default, f"default {default} ({name}={raw!r} ignored: not a positive integer)"
    if n > profile.max_output_env_ceiling:
        ceiling = profile.max_output_env_ceiling
        return ceiling, f"{name}={n} capped at {ceiling}"
    return n, f"{name}={n}"


def native_1m(model: str, profile: Profile, env: Mapping[str, str]) -> bool:
    """A model the build's capability table marks ``native_1m`` (2.1.195+ profiles): its
    window is 1,000,000 without ``[1m]`` in its id (``CLAUDE_CODE_DISABLE_1M_CONTEXT``: not)."""
    if not profile.native_1m_models or env_true(env.get("CLAUDE_CODE_DISABLE_1M_CONTEXT")):
        return False
    m = model.lower().split("[", 1)[0]
    return any(m == x or m.startswith(x + "-20") for x in profile.native_1m_models)


def _configured_window(env: Mapping[str, str], profile: Profile) -> int | None:
    """``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` in [1e5, 1e6] where the profile reads it (levels era)."""
    if not profile.proactive_needs_configured_window:
        return None
    raw = env.get("CLAUDE_CODE_AUTO_COMPACT_WINDOW")
    n = js_parse_int(raw) if raw else None
    if n is None or n <= 0:
        return None
    return max(100_000, min(n, 1_000_000))


@dataclass(frozen=True)
class Thresholds:
    """All numbers of one (profile, model, env); ``explain`` says where each comes from."""

    profile: str
    model: str
    context_window: int
    model_max_output: int
    reserved_output: int
    effective_window: int
    auto_compact: int
    auto_compact_enabled: bool
    compact_disabled: bool
    pct_override: float | None
    warning: int
    error: int
    blocking: int | None
    microcompact_enabled: bool
    explain: tuple[str, ...]
    # the eff - offset compaction needs a configured window (2.1.195+): else Claude Code compacts
    # only once the prompt passes the context window (auto_compact is then window + 1)
    reactive: bool = False
    microcompact: str = "none"  # what micro-compaction this build has, in words (thresholds)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "explain"} | {
            "explain": list(self.explain)
        }


def compute_thresholds(
    profile: Profile,
    model: str = "claude-opus-4-6",
    env: Mapping[str, str] | None = None,
    auto_compact_setting: bool = True,
) -> Thresholds:
    """Thresholds as ``cli.js`` of ``profile`` computes them for ``model`` under ``env``."""
    env = env or {}
    why: list[str] = []
    one_m = "[1m]" in model
    native = native_1m(model, profile, env)
    window = profile.context_window_1m if one_m or native else profile.context_window
    why.append(
        f"context window {window} ("
        + ("[1m] in the model id" if one_m else "natively 1M model" if native else "default")
        + ")"
    )
    model_window = window
    configured = _configured_window(env, profile)
    if configured is not None:
        window = min(window, configured)
        why.append(f"CLAUDE_CODE_AUTO_COMPACT_WINDOW={configured} → window {window}")
    mmax = model_max_output(model)
    env_max, source = _env_max_output(env, profile)
    reserve = min(env_max, mmax)
    why.append(f"max output min({source}, model {mmax}) = {reserve}")
    if profile.reserve_cap is not None:
        capped = min(reserve, profile.reserve_cap)
        why.append(f"reserve capped at {profile.reserve_cap} from 2.1.21 → {capped}")
        reserve = capped
    else:
        why.append("reserve not capped (before 2.1.21)")
    eff = window - reserve
    why.append(f"effective window {window} - {reserve} = {eff}")
    threshold = eff - profile.autocompact_offset
    reactive = profile.proactive_needs_configured_window and configured is None
    why.append(
        f"auto-compact {eff} - {profile.autocompact_offset} = {threshold}"
        + (
            " (proactive: only with a configured auto-compact window, see below)"
            if reactive
            else ""
        )
    )
    pct: float | None = None
    raw_pct = env.get("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE") if profile.has_pct_override else None
    if raw_pct:
        val = js_parse_float(raw_pct)
        if val is not None and 0 < val <= 100:
            pct = val
            lowered = math.floor(eff * (val / 100))
            new = min(lowered, threshold)
            why.append(
                f"PCT override {val:g}%: "
                f"min(floor({eff}*{val:g}/100)={lowered}, {threshold})"
                f" = {new} (the override can only lower it)"
            )
            threshold = new
        else:
            why.append(f"PCT override {raw_pct!r} ignored (must be in (0,100])")
    compact_off = profile.has_disable_compact and env_true(env.get("DISABLE_COMPACT"))
    auto_off = profile.has_disable_auto_compact and env_true(env.get("DISABLE_AUTO_COMPACT"))
    # "Auto-compact enabled" (the warning base) reads DISABLE_COMPACT only from 2.0.65; in
    # 2.0.30-2.0.64 only the dispatcher does, so compaction stops but the base stays the
    # threshold (profile.disable_compact_scope, found by the inspect sweep).
    enabled_fn = (
        auto_compact_setting
        and not auto_off
        and not (compact_off and profile.disable_compact_scope == "enabled")
    )
    enabled = enabled_fn and not compact_off
    if not enabled:
        why.append(
            "auto-compact disabled by "
            + (
                "DISABLE_COMPACT"
                if compact_off
                else "DISABLE_AUTO_COMPACT"
                if auto_off
                else "autoCompactEnabled=false"
            )
        )
    if reactive and enabled:
        # 2.1.2xx+: with the "auto" window the eff - offset compaction does not fire; a summary
        # precomputed in the background is swapped in when the API refuses the prompt as too
        # long, i.e. once the count passes the context window itself (no blocking limit then)
        if profile.precompute_buffer_fraction is not None:
            arm = min(eff - round(eff * profile.precompute_buffer_fraction), threshold)
            why.append(
                f"precomputed compaction armed at min({eff} - round({eff}*"
                f"{profile.precompute_buffer_fraction:g}), {threshold}) = {arm}"
            )
        why.append(
            f"proactive auto-compact off (window not configured): compaction when the prompt "
            f"exceeds the context window {window} (reactive)"
        )
    base = threshold if enabled_fn else eff
    warning = base - profile.warning_offset
    error = base - profile.error_offset
    why.append(f"warning = error = {base} - {profile.warning_offset} = {warning}")
    blocking: int | None = None
    if profile.blocking_offset is not None:
        b_base = eff if profile.blocking_base == "effective" else window
        if configured is not None:  # the level function blocks at the model's own window
            b_base = model_window - reserve
        blocking = b_base - profile.blocking_offset
        base_name = "effective window" if profile.blocking_base == "effective" else "window"
        why.append(f"blocking: {base_name} {b_base} - {profile.blocking_offset} = {blocking}")
        raw_blk = (
            env.get("CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE")
            if profile.has_blocking_override
            else None
        )
        if raw_blk:
            b = js_parse_int(raw_blk)
            if b is not None and b > 0:
                blocking = b
                why.append(f"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE → {b}")
    if reactive and enabled:
        blocking = None
        why.append("no blocking limit in reactive mode (the query loop skips the check)")
        threshold = window + 1
    mc_on = profile.microcompact == "legacy" and not (
        profile.mc_has_env_gate and env_true(env.get("DISABLE_MICROCOMPACT"))
    )
    mc_words = _microcompact_words(profile, mc_on)
    why.append(f"micro-compaction: {mc_words}")
    return Thresholds(
        profile=profile.name,
        model=model,
        context_window=window,
        model_max_output=mmax,
        reserved_output=reserve,
        effective_window=eff,
        auto_compact=threshold,
        auto_compact_enabled=enabled,
        compact_disabled=compact_off,
        pct_override=pct,
        warning=warning,
        error=error,
        blocking=blocking,
        microcompact_enabled=mc_on,
        explain=tuple(why),
        reactive=reactive and enabled,
        microcompact=mc_words,
    )


def _microcompact_words(profile: Profile, on: bool) -> str:
    kind = profile.microcompact
    if kind == "legacy":
        return (
            "legacy (clears old tool results near the warning threshold)"
            if on
            else ("legacy, off (DISABLE_MICROCOMPACT)")
        )
    # native builds (2.1.113 on) keep the stub of 2.1.105 in the query loop, but clear tool
    # results after an idle gap (tengu_time_based_microcompact, a remote flag): ``inspect``
    # reads it, the engine does not model it (profiles: _NATIVE_NOTES)
    if kind == "time-based" or is_native(profile.first):
        modelled = "" if kind == "time-based" else "; not modelled"
        return f"time-based (clears old tool results after an idle gap, remote flag{modelled})"
    return "none (the query loop's call is a stub)" if kind == "stub" else "none"


def near_threshold(th: Thresholds, version: str) -> int | None:
    """The threshold the clearing policy's near move is of
    (:func:`engine.twins.free_moves.near_level`) for Claude Code ``version`` with thresholds
    ``th``: ``th``'s auto-compact threshold for a native build (``engine.versions.is_native``:
    the gateway serves it, and reads the same from the request's ``User-Agent``); None for a
    ``cli.js`` build (the injected JavaScript's rule: the window less its reserve) or with
    auto-compaction off."""
    return th.auto_compact if is_native(version) and th.auto_compact_enabled else None
