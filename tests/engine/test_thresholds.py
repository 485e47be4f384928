"""Thresholds: why a 200K Opus session compacts at 167000 on 2.1.39 and 155000 on 2.0.76."""

from engine.claude_code.thresholds import compute_thresholds, js_parse_float, js_parse_int
from engine.profiles import profile_for

OPUS = "claude-opus-4-6"


def test_2_1_39_opus_compacts_at_167000():
    t = compute_thresholds(profile_for("2.1.39"), OPUS)
    assert (t.reserved_output, t.effective_window, t.auto_compact) == (20000, 180000, 167000)
    assert (t.warning, t.error, t.blocking) == (147000, 147000, 197000)


def test_2_0_76_opus_compacts_at_155000():
    t = compute_thresholds(profile_for("2.0.76"), OPUS)
    assert (t.reserved_output, t.effective_window, t.auto_compact) == (32000, 168000, 155000)
    assert t.blocking is None and t.warning == 135000


def test_2_1_7_blocking_is_effective_window_minus_3000():
    t = compute_thresholds(profile_for("2.1.7"), OPUS)
    assert t.auto_compact == 155000 and t.blocking == 165000


def test_1m_window():
    t = compute_thresholds(profile_for("2.1.39"), OPUS + "[1m]")
    assert t.auto_compact == 1_000_000 - 20000 - 13000


def test_pct_override_only_lowers():
    p = profile_for("2.1.39")
    assert (
        compute_thresholds(p, OPUS, {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}).auto_compact == 90000
    )
    assert (
        compute_thresholds(p, OPUS, {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "99"}).auto_compact
        == 167000
    )
    for bad in ("0", "101", "abc", "-5"):
        assert (
            compute_thresholds(p, OPUS, {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": bad}).auto_compact
            == 167000
        )


def test_pct_override_absent_before_2_0_30():
    t = compute_thresholds(profile_for("2.0.0"), OPUS, {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"})
    assert t.auto_compact == 155000 and t.pct_override is None


def test_max_output_env_lowers_reserve_below_cap():
    t = compute_thresholds(profile_for("2.1.39"), OPUS, {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"})
    assert t.reserved_output == 8000 and t.auto_compact == 200000 - 8000 - 13000


def test_disable_gates_per_era():
    p = profile_for("2.1.39")
    off = compute_thresholds(p, OPUS, {"DISABLE_AUTO_COMPACT": "1"})
    assert not off.auto_compact_enabled and off.warning == 180000 - 20000
    assert not compute_thresholds(p, OPUS, {"DISABLE_COMPACT": "true"}).auto_compact_enabled
    assert not compute_thresholds(p, OPUS, auto_compact_setting=False).auto_compact_enabled
    # DISABLE_AUTO_COMPACT appears in 2.0.77; 2.0.76 ignores it
    assert compute_thresholds(
        profile_for("2.0.76"), OPUS, {"DISABLE_AUTO_COMPACT": "1"}
    ).auto_compact_enabled
    assert not compute_thresholds(p, OPUS, {"DISABLE_MICROCOMPACT": "1"}).microcompact_enabled


def test_blocking_override():
    t = compute_thresholds(
        profile_for("2.1.39"), OPUS, {"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE": "190000"}
    )
    assert t.blocking == 190000


def test_js_parsers():
    assert js_parse_int("123abc") == 123 and js_parse_int("x") is None
    assert js_parse_float("50%") == 50.0 and js_parse_float(".5") == 0.5


def test_disable_compact_keeps_the_warning_base_where_only_the_dispatcher_reads_it() -> None:
    """2.0.30-2.0.64: DISABLE_COMPACT is read by the auto-compact dispatcher only, so the
    warning base stays the threshold; from 2.0.65 the enabled function reads it too."""
    from engine.claude_code.thresholds import compute_thresholds as _ct
    from engine.profiles import profile_for

    env = {"DISABLE_COMPACT": "1"}
    old = _ct(profile_for("2.0.50"), model="claude-sonnet-4-5", env=env)
    new = _ct(profile_for("2.0.76"), model="claude-sonnet-4-5", env=env)
    assert not old.auto_compact_enabled and not new.auto_compact_enabled
    assert old.warning == old.auto_compact - 20000
    assert new.warning == new.effective_window - 20000


def test_2_1_195_on_compacts_reactively_unless_the_window_is_configured():
    """From 2.1.195 (read out of the native builds) the eff - 13000 auto-compaction fires only
    with a configured auto-compact window; otherwise the precomputed summary is swapped in when
    the prompt passes the context window, and there is no blocking limit."""
    before = compute_thresholds(profile_for("2.1.193"), "claude-opus-4-6")
    assert (before.auto_compact, before.blocking) == (167_000, 177_000)
    t = compute_thresholds(profile_for("2.1.217"), "claude-opus-4-6")
    assert (t.auto_compact, t.blocking, t.warning) == (200_001, None, 147_000)
    assert any(
        "precomputed compaction armed at min(180000 - round(180000*0.2), 167000) = 144000" in w
        for w in t.explain
    )
    one_m = compute_thresholds(profile_for("2.1.330"), "claude-opus-4-6[1m]")
    assert one_m.auto_compact == 1_000_001
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "400000"}
    conf = compute_thresholds(profile_for("2.1.330"), "claude-opus-4-6[1m]", env)
    # the configured window moves the threshold; blocking stays at the model's window - reserve
    assert (conf.context_window, conf.auto_compact, conf.blocking) == (400_000, 367_000, 977_000)
    low = compute_thresholds(profile_for("2.1.330"), "x", {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "5"})
    assert low.context_window == 100_000  # clamped to [1e5, 1e6], then min with the window
    assert compute_thresholds(profile_for("2.1.193"), "x", env).context_window == 200_000


def test_natively_1m_models_from_2_1_195():
    """The capability table inside the native builds marks some models native_1m (2.1.217:
    sonnet-5, opus-4-7, opus-4-8, fable-5, mythos-5; 2.1.330 adds opus-5 and others)."""
    p = profile_for("2.1.217")
    assert compute_thresholds(p, "claude-opus-5").context_window == 1_000_000
    assert compute_thresholds(p, "claude-opus-4-7-20260101").context_window == 1_000_000
    assert compute_thresholds(p, "claude-opus-4-6").context_window == 200_000
    off = {"CLAUDE_CODE_DISABLE_1M_CONTEXT": "1"}
    assert compute_thresholds(p, "claude-opus-5", off).context_window == 200_000
    assert compute_thresholds(profile_for("2.1.112"), "claude-opus-5").context_window == 200_000
