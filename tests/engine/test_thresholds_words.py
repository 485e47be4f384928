"""What ``thresholds`` prints says what Claude Code does: no "auto-compact at 200,001" next to its
own "180000 - 13000 = 167000" on a build that compacts reactively, and the micro-compaction a
build really has (native builds clear tool results after idle: ``inspect`` finds it)."""

from __future__ import annotations

from engine.claude_code.thresholds import compute_thresholds
from engine.profiles import profile_for
from engine.replay.report import render_thresholds

OPUS = "claude-opus-4-6"


def table(version: str, env: dict[str, str] | None = None) -> dict[str, str]:
    text = render_thresholds([(version, compute_thresholds(profile_for(version), OPUS, env))])
    rows = text.split("\n\n")[0].splitlines()[1:]
    return {r[:18].strip(): r[18:].strip() for r in rows}


def test_a_reactive_build_says_reactive_not_window_plus_one() -> None:
    t = compute_thresholds(profile_for("2.1.330"), OPUS)
    assert t.reactive and t.auto_compact == 200_001  # the engine's number: past the window
    row = table("2.1.330")["auto-compact at"]
    assert row == "over 200,000 (reactive)" and "200,001" not in row
    why = "\n".join(t.explain)
    assert "180000 - 13000 = 167000 (proactive: only with a configured auto-compact window" in why


def test_a_configured_window_gives_the_proactive_threshold_back() -> None:
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000"}
    t = compute_thresholds(profile_for("2.1.330"), OPUS, env)
    assert not t.reactive
    assert table("2.1.330", env)["auto-compact at"] == f"{t.auto_compact:,}" == "167,000"


def test_micro_compaction_is_the_one_the_build_has() -> None:
    assert table("2.1.39")["micro-compaction"] == "legacy"
    off = {"DISABLE_MICROCOMPACT": "1"}
    assert table("2.1.39", off)["micro-compaction"] == "legacy, off"
    assert table("2.1.90")["micro-compaction"] == "time-based"  # 2.1.81-2.1.104, modelled
    assert table("2.1.112")["micro-compaction"] == "none"  # the stub
    native = compute_thresholds(profile_for("2.1.330"), OPUS)
    assert table("2.1.330")["micro-compaction"] == "time-based"
    assert native.microcompact.endswith("remote flag; not modelled)")
    assert not native.microcompact_enabled  # the replay still models none
