"""Version profiles: each number checked against the cli.js version it was read from."""

import dataclasses
import itertools

import pytest

from engine.profiles import (
    CLEARED_TEXT,
    ERAS,
    PROFILES,
    Profile,
    beyond_profiles,
    model_max_output,
    parse_version,
    profile_for,
)
from engine.versions import FIRST_TOOL_SEARCH


def test_profiles_cover_1_0_80_to_2_1_112_without_gaps():
    prev = None
    for p in PROFILES:
        assert parse_version(p.first) <= parse_version(p.last)
        if prev is not None:
            assert parse_version(p.first) > parse_version(prev.last)
        prev = p
    for v in [
        "1.0.80",
        "1.0.128",
        "2.0.0",
        "2.0.30",
        "2.0.76",
        "2.0.77",
        "2.1.0",
        "2.1.7",
        "2.1.21",
        "2.1.39",
        "2.1.64",
        "2.1.68",
        "2.1.90",
        "2.1.112",
    ]:
        assert (
            parse_version(profile_for(v).first)
            <= parse_version(v)
            <= parse_version(profile_for(v).last)
        )


def test_ratio_era_and_bad_versions_are_refused():
    with pytest.raises(ValueError, match=r"1\.0\.80"):
        profile_for("1.0.60")
    with pytest.raises(ValueError):
        profile_for("latest")


def test_newer_than_every_profile_extrapolates_with_a_note():
    newest = PROFILES[-1]
    p = profile_for("2.1.400")
    assert p.name == newest.name and any("2.1.400" in n for n in p.notes)
    assert beyond_profiles("2.1.400") == newest.last == "2.1.330"
    assert beyond_profiles("2.1.330") is None and beyond_profiles("2.0.76") is None


def test_native_profiles_through_2_1_330():
    """Read out of the native linux-x64 builds (patcher.native, `ctxpatch inspect`) and
    bisected over the published ones (34 inspected): the level function from 2.1.122 (2.1.121 still has the
    isAboveAutoCompactThreshold function), precompute from 2.1.142 (2.1.141: none), the
    proactive threshold only for a configured window from 2.1.195 (2.1.193: always), the count
    adding back server-cleared tokens from 2.1.284 (2.1.283: not)."""
    assert [profile_for(v).name for v in ("2.1.113", "2.1.121")] == ["2.1.113"] * 2
    assert profile_for("2.1.122").precompute_buffer_fraction is None
    for v in ("2.1.142", "2.1.193", "2.1.195", "2.1.330"):
        assert profile_for(v).precompute_buffer_fraction == 0.2, v
    assert not profile_for("2.1.193").proactive_needs_configured_window
    assert profile_for("2.1.195").proactive_needs_configured_window
    assert not profile_for("2.1.283").count_adds_server_cleared
    assert profile_for("2.1.284").count_adds_server_cleared
    for v in ("2.1.113", "2.1.217", "2.1.330"):  # the numbers that did not change
        p = profile_for(v)
        assert (p.autocompact_offset, p.warning_offset, p.blocking_offset, p.reserve_cap) == (
            13000,
            20000,
            3000,
            20000,
        )
        assert p.blocking_base == "effective" and v in p.verified_in


def test_2_1_39_constants_read_from_its_cli_js():
    """2.1.39: EFY=20000 (reserve cap), XSA=13000, kFY=LFY=20000, DSA=3000 off the raw window,
    MC DFY=20000 / jFY=40000 / MFY=3, usage + newer-message estimate (vv), images 2000."""
    p = profile_for("2.1.39")
    assert (p.reserve_cap, p.autocompact_offset, p.warning_offset, p.error_offset) == (
        20000,
        13000,
        20000,
        20000,
    )
    assert (p.blocking_offset, p.blocking_base) == (3000, "window")
    assert (p.mc_min_saving, p.mc_target, p.mc_keep) == (20000, 40000, 3)
    assert p.count_mode == "usage+newer" and p.newer_image_tokens == 2000
    assert p.mc_remote_kill_switch and p.mc_replacement == "persisted"


def test_2_0_76_has_no_cap_no_blocking_and_counts_usage_only():
    """2.0.76: kH0 reserves the whole max output, T9A has no isAtBlockingLimit, gK = usage."""
    p = profile_for("2.0.76")
    assert p.reserve_cap is None and p.blocking_offset is None and p.count_mode == "usage"
    assert p.estimate_factor_4_3 and not p.has_disable_auto_compact


def test_cap_starts_in_2_1_21_and_newer_estimate_in_2_1_2():
    assert profile_for("2.1.20").reserve_cap is None
    assert profile_for("2.1.21").reserve_cap == 20000
    assert profile_for("2.1.0").count_mode == "usage"
    assert profile_for("2.1.2").count_mode == "usage+newer"


def test_blocking_base_effective_in_2_1_7_and_2_1_112():
    assert profile_for("2.1.7").blocking_base == "effective"
    assert profile_for("2.1.112").blocking_base == "effective"
    assert profile_for("2.0.77").blocking_base == "window"


def test_x4_3_factor_era_2_0_60_to_2_1_104():
    assert not profile_for("2.0.30").estimate_factor_4_3
    assert profile_for("2.0.60").estimate_factor_4_3
    assert profile_for("2.1.104").estimate_factor_4_3
    assert not profile_for("2.1.105").estimate_factor_4_3


def test_microcompact_kind_is_non_monotonic_2_1_64_to_2_1_69():
    assert profile_for("2.1.63").microcompact == "legacy"
    assert profile_for("2.1.64").microcompact == "stub"
    assert profile_for("2.1.67").microcompact == "legacy"
    assert profile_for("2.1.69").microcompact == "stub"


def test_model_max_output_table_2_1_39():
    assert model_max_output("claude-opus-4-6") == 32000
    assert model_max_output("claude-opus-4-5-20251101") == 64000
    assert model_max_output("claude-sonnet-4-5") == 64000
    assert model_max_output("claude-3-5-haiku") == 8192


def test_cleared_text_literal():
    assert CLEARED_TEXT == "[Old tool result content cleared]"


# Boundaries pinned by `ctxpatch inspect` over every published cli.js (docs/support-matrix.md).
# Each pair: the last version without the change and the first with it, both read from the file.


def test_sweep_mc_tools_boundaries():
    """1.0.90: 9 tools with LS; 1.0.91-1.0.96: + MultiEdit; 1.0.98-1.0.127 and 1.0.128: no LS."""
    assert "MultiEdit" not in profile_for("1.0.90").mc_tools
    assert {"LS", "MultiEdit"} <= set(profile_for("1.0.91").mc_tools)
    assert {"LS", "MultiEdit"} <= set(profile_for("1.0.96").mc_tools)
    assert "LS" not in profile_for("1.0.98").mc_tools
    assert profile_for("1.0.127").mc_tools == profile_for("1.0.128").mc_tools


def test_sweep_env_var_boundaries():
    """PCT override read from 2.0.20 (not 2.0.19); DISABLE_COMPACT from 2.0.30, only in the
    auto-compact dispatcher until 2.0.64, also in the enabled function from 2.0.65."""
    assert not profile_for("2.0.19").has_pct_override and profile_for("2.0.20").has_pct_override
    assert not profile_for("2.0.29").has_disable_compact
    for v in ("2.0.30", "2.0.46", "2.0.47", "2.0.64"):
        p = profile_for(v)
        assert p.has_disable_compact and p.disable_compact_scope == "dispatcher", v
    assert profile_for("2.0.65").disable_compact_scope == "enabled"
    assert profile_for("2.1.112").disable_compact_scope == "enabled"


def test_sweep_estimate_and_session_memory_from_2_0_47():
    """Both the x4/3 factor and session-memory compaction appear in 2.0.47 (2.0.46: neither)."""
    assert (
        not profile_for("2.0.46").estimate_factor_4_3 and not profile_for("2.0.46").session_memory
    )
    assert profile_for("2.0.47").estimate_factor_4_3 and profile_for("2.0.47").session_memory


def test_sweep_kill_switch_and_blocking_base():
    """tengu_cache_plum_violet in MC from 2.1.19 (2.1.18: not); blocking off the effective
    window in 2.1.7-2.1.13 and again from 2.1.75 (2.1.74: raw window)."""
    assert not profile_for("2.1.18").mc_remote_kill_switch
    assert (
        profile_for("2.1.19").mc_remote_kill_switch and profile_for("2.1.21").mc_remote_kill_switch
    )
    assert profile_for("2.1.74").blocking_base == "window"
    for v in ("2.1.75", "2.1.80", "2.1.90", "2.1.104", "2.1.112"):
        assert profile_for(v).blocking_base == "effective", v


def test_sweep_newer_estimate_boundaries():
    """Attachments counted in the newer-messages estimate from 2.1.33 (2.1.32: not); its images
    2000 and MC clearing answered images from 2.1.38 (2.1.37: 1334, no)."""
    assert not profile_for("2.1.32").newer_counts_attachments
    assert profile_for("2.1.33").newer_counts_attachments
    assert profile_for("2.1.37").newer_image_tokens == 1334
    assert not profile_for("2.1.37").mc_clears_images
    p = profile_for("2.1.38")
    assert p.newer_image_tokens == 2000 and p.mc_clears_images and p.newer_counts_attachments


def test_attachments_rendered_in_the_newer_estimate_from_2_1_45():
    """2.1.44 counts an attachment as its JSON; 2.1.45 (2.1.43 unpublished) renders it to the
    messages it is sent as, and every later profile does (read in each cli.js 2.1.45-2.1.112;
    real runs of 2.1.39/2.1.44 vs 2.1.45/2.1.47/2.1.50/2.1.68 with a skill listing agree)."""
    for v in ("2.1.33", "2.1.39", "2.1.44"):
        p = profile_for(v)
        assert p.newer_counts_attachments and not p.newer_renders_attachments, v
    assert profile_for("2.1.44").name == "2.1.39"
    for v in ("2.1.45", "2.1.50", "2.1.63", "2.1.64", "2.1.68", "2.1.74", "2.1.90", "2.1.112"):
        p = profile_for(v)
        assert p.newer_counts_attachments and p.newer_renders_attachments, v
    assert profile_for("2.1.45").name == "2.1.45"
    assert not any(p.newer_renders_attachments and not p.newer_counts_attachments for p in PROFILES)


def test_newer_estimate_counts_every_block_from_2_1_74():
    """The newer-messages estimate's block function counts tool_use, thinking, redacted_thinking,
    documents and other blocks from 2.1.74 (2.1.73: 0); read in every published cli.js 2.1.2-
    2.1.112 and seen in real runs of 2.1.73 and 2.1.74 (tests/e2e). The 2.1.69 profile ends at
    2.1.73; 2.1.74 is a profile of its own (the blocking base changes again at 2.1.75)."""
    for v in ("2.1.2", "2.1.39", "2.1.45", "2.1.64", "2.1.68", "2.1.69", "2.1.73"):
        assert not profile_for(v).newer_counts_all_blocks, v
    for v in ("2.1.74", "2.1.75", "2.1.80", "2.1.81", "2.1.104", "2.1.105", "2.1.112", "2.1.200"):
        assert profile_for(v).newer_counts_all_blocks, v
    assert profile_for("2.1.73").name == "2.1.69" and profile_for("2.1.74").name == "2.1.74"
    assert profile_for("2.1.74").blocking_base == "window"
    assert profile_for("2.1.75").blocking_base == "effective"


def test_message_estimate_counts_documents_from_2_1_47():
    """2.1.45's x4/3 estimator (Ep6) counts a document as JSON, 2.1.47's (MU6) as an image; the
    2.1.45 profile ends at 2.1.46 (never published). Read in every cli.js 2.0.47-2.1.104."""
    for v in ("2.0.76", "2.1.39", "2.1.44", "2.1.45", "2.1.46"):
        assert not profile_for(v).estimate_counts_documents, v
    for v in (
        "2.1.47",
        "2.1.50",
        "2.1.63",
        "2.1.64",
        "2.1.68",
        "2.1.69",
        "2.1.74",
        "2.1.75",
        "2.1.104",
    ):
        assert profile_for(v).estimate_counts_documents, v
    assert profile_for("2.1.46").name == "2.1.45" and profile_for("2.1.47").name == "2.1.47"
    assert profile_for("2.1.45").range == "2.1.45..2.1.46"


def test_message_estimate_block_text_from_2_1_75_and_newer_estimate_from_2_1_105():
    """The x4/3 estimator counts thinking/redacted_thinking/tool_use by text from 2.1.75 (2.1.74:
    JSON; read in every cached cli.js 2.1.47-2.1.104) and is gone from 2.1.105 (2.1.105,
    2.1.107-2.1.112 read): estimate_messages is then the newer estimate."""
    for v in ("2.1.39", "2.1.64", "2.1.73", "2.1.74"):
        assert not profile_for(v).estimate_counts_block_text, v
    for v in ("2.1.75", "2.1.80", "2.1.81", "2.1.104", "2.1.105", "2.1.112", "2.1.200"):
        assert profile_for(v).estimate_counts_block_text, v
    for v in ("2.1.39", "2.1.75", "2.1.104"):
        assert not profile_for(v).message_estimate_is_newer, v
    for v in ("2.1.105", "2.1.112", "2.1.200"):
        p = profile_for(v)
        assert p.message_estimate_is_newer and not p.session_memory, v
    assert not any(p.message_estimate_is_newer and p.estimate_factor_4_3 for p in PROFILES)


def test_request_format_switches_are_profile_fields_at_their_first_version():
    """User strings as blocks up to 2.1.29, the merge seam from 2.1.78, the summary through the
    query loop from 2.1.86: read off the profile, at the versions seen in real requests."""
    from engine.claude_code.flatten import api_style
    from lab.predict import compaction_runs_the_loop

    assert profile_for("2.1.29").user_string_blocks and not profile_for("2.1.30").user_string_blocks
    assert not profile_for("2.1.77").merge_seam_newline and profile_for("2.1.78").merge_seam_newline
    assert not compaction_runs_the_loop("2.1.85") and compaction_runs_the_loop("2.1.86")
    assert api_style("2.1.29") == {"user_string_blocks": True, "merge_seam_newline": False}
    assert api_style("2.1.112") == {"user_string_blocks": False, "merge_seam_newline": True}
    # a later build (native helper's profiles, or the extrapolation) keeps the newest behaviour
    late = profile_for("2.1.200")
    assert (late.user_string_blocks, late.merge_seam_newline, late.compaction_through_loop) == (
        False,
        True,
        True,
    )


@pytest.mark.parametrize(
    "switch", ["user_string_blocks", "merge_seam_newline", "compaction_through_loop"]
)
def test_request_format_switches_change_once(switch):
    """Each switch flips once over the profiles in version order (a profile added with the
    wrong default would flip it back)."""
    values = [getattr(p, switch) for p in PROFILES]
    flips = sum(a != b for a, b in itertools.pairwise(values))
    assert flips == 1, list(zip([p.name for p in PROFILES], values, strict=True))


def test_one_version_parser():
    """``parse_version`` is the parser (pre-release tags ignored; junk refused) and the version
    rules outside the profiles go through it."""
    from patcher.versions import is_supported_version

    assert parse_version("v2.1.39") == parse_version("2.1.39-beta.1") == (2, 1, 39)
    assert parse_version("2.1.112") > parse_version("2.1.99")
    with pytest.raises(ValueError):
        parse_version("2.1")
    assert is_supported_version("1.0.60") is True and is_supported_version("1.0.59") is False
    assert is_supported_version("junk") is None and is_supported_version(None) is None


def test_usage_final_in_memory_boundaries():
    """2.1.7 streams through the SDK's MessageStream (the final usage mutates the message_start
    usage every block shares); 2.1.8-2.1.29 read the raw stream and keep the placeholder; 2.1.30
    replaces the last block's usage on message_delta. Read in the cli.js of 2.1.0, 2.1.2, 2.1.6,
    2.1.7 (MessageStream), 2.1.8-2.1.12, 2.1.14, 2.1.17, 2.1.20, 2.1.21, 2.1.29 (raw stream) and
    2.1.30, 2.1.37, 2.1.45, 2.1.50 (replacement); seen in real sessions of 2.1.17 and 2.1.29 (preTokens = prompt +
    the recorded placeholder + the newer estimate, to the token)."""
    assert profile_for("2.1.7").usage_final_in_memory
    for v in ("2.1.8", "2.1.13", "2.1.14", "2.1.20", "2.1.21", "2.1.29"):
        assert not profile_for(v).usage_final_in_memory, v
    for v in ("2.0.76", "2.1.0", "2.1.30", "2.1.39", "2.1.112", "2.1.330"):
        assert profile_for(v).usage_final_in_memory, v


_OWN = {"name", "first", "last", "verified_in", "notes"}  # each era's own, never inherited


def _numbers(p: Profile) -> dict[str, object]:
    return {k: v for k, v in dataclasses.asdict(p).items() if k not in _OWN}


def test_each_era_names_exactly_what_changed_in_it():
    """A profile differs from the one it derives from (the previous era, or the ``like`` era
    where Claude Code went back) in exactly the fields its entry names: a change restating the
    inherited value (which would hide the version it really started in) fails here, and so does
    a ``like`` that a plain "previous + changes" entry would have said as well."""
    assert len(ERAS) == len(PROFILES)
    default = _numbers(Profile(name="", first="", last="", verified_in=()))
    by_first: dict[str, Profile] = {}
    prev = None
    for era, p in zip(ERAS, PROFILES, strict=True):
        assert era.range == p.range and p.name == p.first and p.verified_in == era.verified_in
        base = _numbers(by_first[era.like]) if era.like else default if prev is None else prev
        now = _numbers(p)
        changed = {k for k in now if now[k] != base[k]}
        assert changed == set(era.changes), era.range
        if era.like:
            assert parse_version(era.like) < parse_version(p.first)
            assert now != prev, f"{era.range}: like={era.like} but the previous era is the same"
        by_first[p.first] = p
        prev = now


def test_only_2_1_65_and_2_1_69_go_back():
    """The one non-monotonic stretch (legacy MC in 2.1.64 gone, back in 2.1.67/2.1.68, gone
    from 2.1.69): 2.1.65-2.1.68 are 2.1.47's numbers and 2.1.69-2.1.73 are 2.1.64's, with
    tool search deferring MCP tools from 2.1.69."""
    assert {e.range: e.like for e in ERAS if e.like} == {
        "2.1.65..2.1.68": "2.1.47",
        "2.1.69..2.1.73": "2.1.64",
    }
    assert _numbers(profile_for("2.1.65")) == _numbers(profile_for("2.1.47"))
    later = {**_numbers(profile_for("2.1.69")), "tool_search_defers_mcp": False}
    assert later == _numbers(profile_for("2.1.64"))


def test_tool_search_defers_mcp_tools_from_2_1_69():
    """Talking to Anthropic's API, MCP tools are deferred (their names only) from 2.1.69 on, the
    native builds included (tests/e2e/test_recall_first_party.py, test_recall_real.py)."""
    for v in ("1.0.80", "2.0.76", "2.1.7", "2.1.39", "2.1.64", "2.1.68"):
        assert not profile_for(v).tool_search_defers_mcp, v
    for v in ("2.1.69", "2.1.80", "2.1.105", "2.1.112", "2.1.113", "2.1.217", "2.1.330"):
        assert profile_for(v).tool_search_defers_mcp, v
    # the version recall's server reads from a client's initialize is the same boundary
    for e in PROFILES:
        for v in (e.first, e.last):
            from_it = parse_version(v) >= parse_version(FIRST_TOOL_SEARCH)
            assert profile_for(v).tool_search_defers_mcp == from_it, v
