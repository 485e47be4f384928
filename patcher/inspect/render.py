"""The text ``ctxpatch inspect`` prints for a cli.js (``--json``: the inspection's JSON)."""

from __future__ import annotations

from patcher.inspect.report import Comparison, Report

_BLOCKING_BASE = {
    "window": " from the raw context window",
    "effective": " from the effective window",
}
_NEWER_BLOCKS: dict[bool | None, str] = {
    True: ", every block",
    False: ", text/tool_result/images only",
}


def render(rep: Report, comparison: Comparison) -> str:
    """A human-readable report: the findings, then their comparison with the engine."""
    constants = rep.constants

    def c(key: str) -> str:
        k = constants.get(key)
        if k is None:
            return "?"
        if k.value is None:
            return f"none ({k.via})"
        return f"{k.value} ({k.via})" if k.via != "literal" else str(k.value)

    def first(*keys: str) -> str:
        return c(next((k for k in keys if k in constants), keys[0]))

    lines = [
        (
            f"Claude Code {rep.version or '(unknown version)'}   sha256 {rep.sha256[:16]}…   "
            f"{rep.size:,} bytes"
        ),
        f"call site:   {rep.shape or '-'}"
        + (
            f"  ({rep.call_site['callee']} in {rep.call_site['generator']}, byte "
            f"{rep.call_site['byte']})"
            if rep.call_site
            else f"  ({rep.locate_problem})"
        ),
        f"thresholds:  {rep.era} era",
    ]
    if rep.era == "ratio":
        lines.append(
            f"  auto-compact ratio {c('autocompact_ratio')}, warning {c('warning_ratio')},"
            f" error {c('error_ratio')}"
        )
    else:
        lines += [
            f"  auto-compact offset   {c('autocompact_offset')}",
            f"  warning / error       {c('warning_offset')} / {c('error_offset')}",
            "  blocking offset       "
            + (c("blocking_offset") if "blocking_offset" in constants else "none")
            + _BLOCKING_BASE.get(rep.thresholds.blocking_base or "", ""),
            f"  output-reserve cap    {c('reserve_cap')}",
        ]
    est, counter, micro = rep.estimator, rep.counter, rep.micro
    functions = rep.functions
    lines += [
        "token estimate:",
        f"  x4/3 factor           {'yes' if est.factor_4_3 else 'no'}"
        + (f" ({functions['estimator']})" if functions.get("estimator") else ""),
        "  chars per token       "
        + first("chars_per_token", "mc_chars_per_token", "newer_chars_per_token"),
        f"  image tokens          {first('image_tokens', 'mc_image_tokens')}",
        f"  auto-compact count    {counter.mode or '?'}"
        + (
            f" (newer messages: images {c('newer_image_tokens')}, chars/"
            f"{c('newer_chars_per_token')}" + _NEWER_BLOCKS.get(counter.counts_all_blocks, "") + ")"
            if counter.mode == "usage+newer"
            else ""
        ),
        f"micro-compaction: {micro.kind or 'none'}"
        + (f" ({functions['microcompact']})" if functions.get("microcompact") else ""),
    ]
    if micro.kind == "legacy":
        tools = rep.value("mc_tools")
        lines += [
            f"  target / keep / min saving  {c('mc_target')} / {c('mc_keep')} / {c('mc_min_saving')}",
            f"  tools                 {', '.join(tools) if tools else '?'}",
            f"  replacement           {micro.replacement}"
            + ("; remote kill-switch tengu_cache_plum_violet" if micro.remote_kill_switch else ""),
        ]
    elif micro.kind == "time-based":
        lines.append(
            f"  keep recent {c('mc_keep')}, gap {c('mc_gap_minutes')} min "
            f"(default enabled: {micro.time_based_default_enabled})"
        )
    lines.append(
        f"session memory: {'yes' if rep.session_memory.present else 'no'}"
        + (
            f" (min {c('sm_min_tokens')}, min text messages {c('sm_min_text_messages')}, "
            f"max {c('sm_max_tokens')})"
            if "sm_min_tokens" in constants
            else ""
        )
    )
    present = [k for k, v in rep.env_vars.items() if v]
    lines.append("env vars: " + (", ".join(present) if present else "none"))
    cmp = comparison
    if cmp.profile:
        lines.append(
            f"engine profile {cmp.profile} ({cmp.profile_range}): "
            f"{len(cmp.compared)} fields compared, "
            + ("no drift" if not cmp.drift else f"{len(cmp.drift)} DRIFT")
        )
        lines += [f"  drift {d}" for d in cmp.drift]
    else:
        lines.append(f"engine profile: none ({cmp.profile_problem})")
    if rep.unresolved:
        lines.append("unresolved:")
        lines += [f"  {u}" for u in rep.unresolved]
    return "\n".join(lines)
