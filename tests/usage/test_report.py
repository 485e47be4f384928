"""ctxpatch report: every session of a projects folder, its replays equal to simulate --compare,
dollars from the price table, the ledger beside it, corrupt files listed and skipped, the cache,
the picture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli
from shared_data import PUBLIC, need_shared

from usage import ledger as L
from usage.money import fmt_usd
from usage.prices import Usage, builtin_table, cost_usd

SESSION = ROOT / "examples" / "spotter-session.jsonl"
pytestmark = pytest.mark.usefixtures("isolated_cli")


@pytest.fixture
def projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for k in ("CTXPATCH_PRICES", "CTXPATCH_LEDGER"):
        monkeypatch.delenv(k, raising=False)
    d = tmp_path / "projects"
    (d / "-home-me-app").mkdir(parents=True)
    shutil.copy(SESSION, d / "-home-me-app" / "s1.jsonl")
    (d / "-home-me-app" / "broken.jsonl").write_text("not json at all\n")
    (d / "-home-me-other").mkdir()
    (d / "-home-me-other" / "noreply.jsonl").write_text(
        json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n"
    )
    return d


def report_json(*args: str) -> dict:
    code, out, err = run_cli("report", *args, "--json", "--jobs", "1")
    assert code == 0, err
    return json.loads(out)


def _equals_simulate_compare(doc: dict, path: Path, with_: str) -> dict:
    """The report's one session equals ``simulate --compare`` of its file, for ``unpatched`` and
    the "with ctxpatch" replay ``with_``, which it names; the other "with" replay is absent."""
    (s,) = doc["results"]
    code, out, _ = run_cli("simulate", str(path), "--compare", "--json")
    assert code == 0
    results = json.loads(out)["results"]
    sim = {r["scenario"]: r["summary"] for r in results}
    # the compactions' summary requests are billed too (engine.replay.compaction_cost)
    calls = {r["scenario"]: sum(c["input_tokens"] for c in r["compaction_calls"]) for r in results}
    assert s["with_scenario"] == with_ and set(s["replay"]) == {"unpatched", with_}
    for name in ("unpatched", with_):
        for key in ("auto_compactions", "tokens_sent", "cache_breaks", "cost"):
            assert s["replay"][name][key] == sim[name][key], (name, key)
    assert s["recorded"]["auto_compactions"] == sim["unpatched"]["recorded_auto_compactions"]
    assert (
        s["compactions_avoided"]
        == sim["unpatched"]["auto_compactions"] - sim[with_]["auto_compactions"]
    )
    table = builtin_table()
    for name in ("unpatched", with_):
        want = cost_usd(Usage(**s["replay"][name]["usage"]), s["model"], table)
        assert s["replay"][name]["usd"] == pytest.approx(want, abs=1e-4)
        u = s["replay"][name]["usage"]
        assert (
            u["input_tokens"] + u["cache_write_5m"] + u["cache_write_1h"] + u["cache_read"]
            == sim[name]["tokens_sent"] + calls[name]
        )
    assert s["usd_saved"] == pytest.approx(
        s["replay"]["unpatched"]["usd"] - s["replay"][with_]["usd"], abs=1e-3
    )
    assert s["version"] and s["model"].startswith("claude-") and s["requests"] > 100
    t = doc["totals"]
    assert t["sessions"] == 1 and t["usd_saved"] == s["usd_saved"]
    assert t["with_scenarios"] == {with_: 1} and "patched_usd" not in t
    for key in ("auto_compactions", "tokens_sent", "usd"):
        assert t[f"with_{key}"] == s["replay"][with_][key]
        assert t[f"unpatched_{key}"] == s["replay"]["unpatched"][key]
    assert doc["prices"]["date"] == table.date
    return s


def test_report_equals_simulate_compare_and_prices_it(projects: Path) -> None:
    """A cli.js session (2.1.39): with ctxpatch is the patched replay (ctxpatch apply)."""
    doc = report_json("--projects", str(projects))
    _equals_simulate_compare(doc, projects / "-home-me-app" / "s1.jsonl", "patched")


def test_report_replays_under_the_prune_knobs_of_the_environment(
    projects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The text prune's variables of the user's environment are what the patched Claude Code
    reads, so the "with ctxpatch" replay runs under them (the clearing's were already) and the
    envelope says which: CLAUDE_TEXT_PRUNE_KEEP=1 prunes more of this session (as simulate's
    --keep 1 does), CLAUDE_TEXT_PRUNE_DISABLE=1 beside it turns the prune off (the replay is
    server_clearing's)."""
    path = projects / "-home-me-app" / "s1.jsonl"

    def sent(*args: str) -> int:
        code, out, _ = run_cli("simulate", str(path), *args, "--json")
        assert code == 0
        (only,) = json.loads(out)["results"]
        return int(only["summary"]["tokens_sent"])

    default = report_json("--projects", str(projects))
    assert default["prune_env"] == {}
    (d,) = default["results"]
    assert d["replay"]["patched"]["tokens_sent"] == sent("--scenario", "patched")

    monkeypatch.setenv("CLAUDE_TEXT_PRUNE_KEEP", "1")
    doc = report_json("--projects", str(projects))
    assert doc["prune_env"] == {"CLAUDE_TEXT_PRUNE_KEEP": "1"}
    assert doc["replays"]["cached"] == 0  # another knob set: not the default's cached replay
    s = _equals_simulate_compare(doc, path, "patched")
    assert s["replay"]["unpatched"] == d["replay"]["unpatched"]
    assert s["replay"]["patched"]["tokens_sent"] < d["replay"]["patched"]["tokens_sent"]
    monkeypatch.delenv("CLAUDE_TEXT_PRUNE_KEEP")
    assert s["replay"]["patched"]["tokens_sent"] == sent("--scenario", "patched", "--keep", "1")

    monkeypatch.setenv("CLAUDE_TEXT_PRUNE_KEEP", "1")
    monkeypatch.setenv("CLAUDE_TEXT_PRUNE_DISABLE", "1")
    off = report_json("--projects", str(projects))
    assert off["prune_env"] == {"CLAUDE_TEXT_PRUNE_KEEP": "1", "CLAUDE_TEXT_PRUNE_DISABLE": "1"}
    (o,) = off["results"]
    assert o["replay"]["patched"]["tokens_sent"] == sent("--scenario", "server_clearing")
    assert o["replay"]["patched"]["tokens_sent"] > s["replay"]["patched"]["tokens_sent"]


NATIVE_SESSION = "JanDeDobbeleer__oh-my-posh__6c0a282a-886f-458d-a426-93d95104b4a6.jsonl.xz"
DEARER_SESSION = "FSM1__cipher-box__12f1f541-2a05-4a60-a551-14b836a1ad82.jsonl.xz"


def test_a_native_session_is_reported_with_what_the_gateway_does(tmp_path: Path) -> None:
    """A native build's session (2.1.217): ctxpatch can only give it the gateway, so with
    ctxpatch is the server_clearing replay, equal to simulate --compare's, under its own name;
    the text prune it could never get (patched) is not replayed, in the JSON, the table or the
    totals."""
    src = need_shared(PUBLIC / NATIVE_SESSION)
    folder = tmp_path / "projects" / "-home-me-posh"
    folder.mkdir(parents=True)
    shutil.copy(src, folder / src.name)
    doc = report_json("--projects", str(folder.parent))
    s = _equals_simulate_compare(doc, folder / src.name, "server_clearing")
    assert s["version"] == "2.1.217"
    code, text, _ = run_cli("report", "--projects", str(folder.parent), "--jobs", "1")
    assert code == 0
    (row,) = [line for line in text.splitlines() if line.startswith("6c0a282a")]
    assert row.split()[4] == "server_clearing"
    assert "server_clearing for native builds (2.1.113 on" in text


def test_corrupt_files_are_listed_and_skipped(projects: Path) -> None:
    doc = report_json("--projects", str(projects))
    skipped = {Path(x["file"]).name: x["why"] for x in doc["skipped"]}
    assert set(skipped) == {"broken.jsonl", "noreply.jsonl"}
    assert "JSON" in skipped["broken.jsonl"] and "no assistant reply" in skipped["noreply.jsonl"]
    code, out, _ = run_cli("report", "--projects", str(projects), "--jobs", "1")
    assert code == 0 and "skipped 2 file(s)" in out and "broken.jsonl" in out


def test_the_ledger_beside_the_replay(projects: Path, tmp_path: Path) -> None:
    from engine.transcript import load_transcript

    sid = next(r["sessionId"] for r in load_transcript(SESSION).records if r.get("sessionId"))
    led = L.Ledger()
    rows = [(1000, 20, 5000, 300, 2, 700), (2000, 0, 9000, 100, 0, 0)]
    for i, (inp, w, read, out, cleared, tokens) in enumerate(rows):
        r = L.RequestRecord(
            t=1.0 + i, session=sid, model="claude-opus-4-6", edit="added", status=200
        )
        r.reply.take_usage(
            {
                "input_tokens": inp,
                "cache_creation_input_tokens": w,
                "cache_read_input_tokens": read,
                "output_tokens": out,
            }
        )
        r.reply.take_edits(
            {"applied_edits": [{"cleared_tool_uses": cleared, "cleared_input_tokens": tokens}]}
        )
        led.record(r)
    other = L.RequestRecord(t=3.0, session="someone-else", model="claude-opus-4-6", edit="skipped")
    led.record(other)
    assert led.flush()
    (s,) = report_json("--projects", str(projects))["results"]
    got = s["ledger"]
    assert got["requests"] == 2 and got["edits"] == {"added": 2}
    assert (got["cleared_tool_uses"], got["cleared_input_tokens"]) == (2, 700)
    assert got["usage"] == {
        "input_tokens": 3000,
        "cache_write_5m": 20,
        "cache_write_1h": 0,
        "cache_read": 14000,
        "output_tokens": 400,
    }
    want = (3000 * 5 + 20 * 6.25 + 14000 * 0.5 + 400 * 25) / 1e6
    assert got["usd"] == pytest.approx(want, abs=1e-4)


def test_both_writers_merge_and_a_request_both_saw_counts_once() -> None:
    from usage.report import ledger_by_session

    def line(src: str, rid: str | None, cleared: int) -> dict[str, object]:
        return {
            "t": 1.0,
            "src": src,
            "session": "s",
            "model": "m",
            "request_id": rid,
            "input": 10,
            "cache_read": 100,
            "cleared_tool_uses": cleared,
            "edit": "added",
        }

    sums = ledger_by_session(
        [
            line("gateway", "req_1", 1),
            line("cli.js", "req_1", 1),  # the same request: a patched cli.js through the gateway
            line("cli.js", "req_2", 2),  # cli.js alone
            line("cli.js", None, 4),
        ]
    )["s"]
    assert sums.requests == 3 and sums.cleared_tool_uses == 7
    assert (sums.usage.input_tokens, sums.usage.cache_read) == (30, 300)


def test_a_worker_keeps_nothing_of_a_session_it_replayed(projects: Path) -> None:
    """After each session a worker empties the engine's identity memos: what they held of it
    would stay alive (hundreds of MB over a few hundred sessions) and slow the next ones."""
    from engine import identity_memo
    from engine.replay.knobs import parse_knobs
    from usage.report import SessionNumbers, _work

    done = _work((str(projects / "-home-me-app" / "s1.jsonl"), "p", parse_knobs(process_env={})))
    assert isinstance(done, SessionNumbers) and done.requests > 0
    assert identity_memo._TABLES and not any(identity_memo._TABLES.values())


def test_cached_replays_give_the_same_report(projects: Path) -> None:
    first = report_json("--projects", str(projects))
    second = report_json("--projects", str(projects))
    assert first["replays"] == {"replayed": 3, "cached": 0}
    assert second["replays"] == {"replayed": 2, "cached": 1}  # the broken ones are not cached
    assert first["results"] == second["results"]
    (projects / "-home-me-app" / "s1.jsonl").touch()  # a changed file is replayed again
    assert report_json("--projects", str(projects))["replays"]["cached"] == 0


def test_filters(projects: Path) -> None:
    assert report_json("--projects", str(projects), "--project", "other")["results"] == []
    assert len(report_json("--projects", str(projects), "--since", "1d")["results"]) == 1
    assert (
        report_json("--projects", str(projects), "--since", "2999-01-01")["totals"]["sessions"] == 0
    )


def test_refusals(projects: Path, tmp_path: Path) -> None:
    code, _, err = run_cli("report", "--projects", str(tmp_path / "nope"))
    assert code == 3 and "no projects folder" in err
    code, _, err = run_cli(
        "report", "--projects", str(projects), "--plot", str(tmp_path / "no" / "x.png")
    )
    assert code == 2 and "does not exist" in err
    code, _, err = run_cli("report", "--projects", str(projects), "--since", "yesterday")
    assert code == 2 and "--since" in err
    bad = tmp_path / "p.toml"
    bad.write_text("[models.x]\ninput = 1\n")
    code, _, err = run_cli("report", "--projects", str(projects), "--prices", str(bad))
    assert code == 2 and "price file" in err


def test_plot_is_written(projects: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    png = tmp_path / "r.png"
    code, _, err = run_cli("report", "--projects", str(projects), "--plot", str(png), "--jobs", "1")
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_human_axis_numbers() -> None:
    from usage.plot import dollars, human

    assert [human(x) for x in (900, 250_000, 1_500_000, 2_000_000)] == ["900", "250K", "1.5M", "2M"]
    assert [dollars(x) for x in (0.5, 42, 1500)] == ["$0.50", "$42", "$1.5K"]
    assert [dollars(x) for x in (0, 5, 2.5)] == ["$0", "$5", "$2.50"]


# --- simulate in dollars ----------------------------------------------------------------------


def test_simulate_shows_dollars_beside_the_units(tmp_path: Path) -> None:
    code, out, _ = run_cli("simulate", str(SESSION), "--compare", "--json")
    assert code == 0
    doc = json.loads(out)
    usd = {r["scenario"]: r["usd"] for r in doc["results"]}
    table = builtin_table()
    for r in doc["results"]:
        assert "cost" in r["summary"]  # the engine units stay
        want = cost_usd(Usage(**r["usd"]["usage"]), r["model"], table)
        assert r["usd"]["usd"] == pytest.approx(want, abs=1e-4)
    saved = usd["unpatched"]["usd"] - usd["patched"]["usd"]
    assert doc["comparison"]["usd_saved"] == pytest.approx(saved, abs=1e-3) and saved > 0
    assert doc["vs_unpatched"]["server_clearing"]["usd_saved"] is not None
    assert doc["prices"]["date"] == table.date
    code, text, _ = run_cli("simulate", str(SESSION), "--compare")
    assert code == 0 and f"dollars (prices of {table.date}" in text and "patched saves $" in text
    code, one, _ = run_cli("simulate", str(SESSION), "--json")
    (rec,) = json.loads(one)["results"]
    assert rec["usd"]["usd"] > 0 and rec["usd"]["usage"]["cache_read"] > 0  # the real usage


def test_simulate_plot_to_a_missing_folder_fails_first(tmp_path: Path, monkeypatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("the transcript was read before the --plot check")

    monkeypatch.setattr("engine.transcript.load_transcript", boom)
    code, _, err = run_cli("simulate", str(SESSION), "--plot", str(tmp_path / "no" / "p.png"))
    assert code == 2 and "does not exist" in err


def test_simulate_plot_reads_in_k_and_marks_compactions(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    from engine.replay.report import tokens_label

    assert [tokens_label(v) for v in (500, 167_000, 1_000_000, 1_250_000)] == [
        "500",
        "167K",
        "1M",
        "1.2M",
    ]
    png = tmp_path / "s.png"
    code, _, err = run_cli("simulate", str(SESSION), "--compare", "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:4] == b"\x89PNG"


def _numbers(unseen: int, forced: int) -> dict:
    """A cached session's numbers (``asdict`` of ``SessionNumbers``), its patched replay with
    ``unseen`` tokens of history the file does not hold and ``forced`` compactions."""
    rep = {"auto_compactions": 1, "tokens_sent": 10, "cache_breaks": 0, "cost": 10, "usage": {}}
    return {
        "file": "/p/s.jsonl",
        "session": "43b2bd6e-ccc5",
        "project": "p",
        "version": "2.1.7",
        "profile": "2.1.7",
        "model": "claude-opus-4-5-20251101",
        "requests": 3,
        "started": None,
        "ended": None,
        "recorded_auto": [5],
        "recorded_manual": [],
        "recorded_usage": {},
        "with_scenario": "patched",
        "replays": {
            "unpatched": dict(rep),
            "patched": {
                **rep,
                "unseen_history_tokens": unseen,
                "compactions_unseen_history": forced,
            },
        },
    }


def test_a_session_that_starts_mid_conversation_says_what_it_forced() -> None:
    """The report keeps the unseen history and the compactions it forced (engine Event.cause)
    per replay, in the JSON and as a note under the table; other sessions show neither, and a
    cache entry written before the fields existed still reads."""
    from usage.report import SessionNumbers, render, session_result, totals

    table = builtin_table()
    n = SessionNumbers.from_dict(_numbers(64_323, 1))
    d = session_result(n, table, None)
    assert d["replay"]["patched"]["unseen_history_tokens"] == 64_323
    assert d["replay"]["patched"]["compactions_unseen_history"] == 1
    text = render([d], totals([d]), [], table)
    assert "43b2bd6e: starts mid-conversation, 64,323 tokens of history" in text
    assert "compactions with ctxpatch forced by them: 1" in text

    old = _numbers(0, 0)
    for rep in old["replays"].values():
        rep.pop("unseen_history_tokens", None)
        rep.pop("compactions_unseen_history", None)
    plain = session_result(SessionNumbers.from_dict(old), table, None)
    assert "unseen_history_tokens" not in plain["replay"]["patched"]
    assert "starts mid-conversation" not in render([plain], totals([plain]), [], table)


def test_with_ctxpatch_is_what_ctxpatch_installs_for_the_version() -> None:
    """cli.js builds get ``ctxpatch apply`` (patched), native builds the gateway
    (server_clearing), at the one boundary engine.versions keeps; a session without a version
    is replayed with DEFAULT_PROFILE's rules, so it gets that version's scenario."""
    from engine.versions import FIRST_NATIVE
    from usage.report import DEFAULT_PROFILE, with_scenario

    assert FIRST_NATIVE == "2.1.113"
    got = {v: with_scenario(v) for v in ("1.0.80", "2.1.39", "2.1.112", "2.1.113", "2.1.217")}
    assert got == {
        "1.0.80": "patched",
        "2.1.39": "patched",
        "2.1.112": "patched",
        "2.1.113": "server_clearing",
        "2.1.217": "server_clearing",
    }
    assert with_scenario(None) == with_scenario(DEFAULT_PROFILE) == "patched"


def test_native_numbers_sit_under_their_own_name_and_the_totals_add_each_sessions_with() -> None:
    """One cli.js and one native session: each result's "with" replay under its scenario's
    name, the totals' with_* the sum of the two, the table's "with" column and legend say
    which; the mid-conversation note reads the native session's own replay."""
    from usage.report import SessionNumbers, render, session_result, totals

    table = builtin_table()
    cli = SessionNumbers.from_dict(_numbers(0, 0))
    nat = _numbers(500, 0)
    nat.update(session="6c0a282a-886f", version="2.1.217", profile="2.1.195")
    nat["with_scenario"] = "server_clearing"
    nat["replays"]["server_clearing"] = nat["replays"].pop("patched")
    nat["replays"]["server_clearing"]["tokens_sent"] = 7
    native = SessionNumbers.from_dict(nat)
    a, b = session_result(cli, table, None), session_result(native, table, None)
    assert (a["with_scenario"], set(a["replay"])) == ("patched", {"unpatched", "patched"})
    assert (b["with_scenario"], set(b["replay"])) == (
        "server_clearing",
        {"unpatched", "server_clearing"},
    )
    t = totals([a, b])
    assert t["with_tokens_sent"] == 10 + 7 and t["unpatched_tokens_sent"] == 20
    assert t["with_scenarios"] == {"patched": 1, "server_clearing": 1}
    assert not any(k.startswith("patched_") for k in t)
    text = render([a, b], t, [], table)
    rows = {line.split()[0]: line.split() for line in text.splitlines()[1:3]}
    assert rows["43b2bd6e"][4] == "patched" and rows["6c0a282a"][4] == "server_clearing"
    assert text.splitlines()[0].split()[4] == "with"
    assert "patched for cli.js builds (before 2.1.113" in text
    assert "6c0a282a: starts mid-conversation, 500 tokens" in text


def test_a_cache_entry_of_the_old_scheme_is_not_reused(tmp_path: Path) -> None:
    """Entries written before the "with" replay followed the version (always ``patched``, no
    ``with_scenario``) are neither found (the key holds CACHE_SCHEME) nor read."""
    from usage import report as R

    old = _numbers(0, 0)
    del old["with_scenario"]
    (tmp_path / "k.json").write_text(json.dumps(old))
    assert R.cache_get(tmp_path, "k") is None
    (tmp_path / "k.json").write_text(json.dumps(_numbers(0, 0)))
    assert R.cache_get(tmp_path, "k") is not None
    f = R.SessionFile(tmp_path / "k.json", "p", 1, 2)
    key = R.cache_key(f, "knobs", "fp")
    assert R.CACHE_SCHEME >= 2
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(R, "CACHE_SCHEME", 1)
        assert R.cache_key(f, "knobs", "fp") != key


def test_a_dearer_session_says_where_ctxpatch_rewrote_the_cache(tmp_path: Path) -> None:
    """A session the replay with ctxpatch makes dearer (the shared 2.1.49 cipher-box session
    12f1f541: one text prune move 14 requests before a pause expired the cache) carries in the
    JSON the requests where the with-ctxpatch replay rewrote the cache and the unpatched one did
    not, as ``simulate --compare`` shows them request by request, and the table names it under
    "dearer with ctxpatch"."""
    src = need_shared(PUBLIC / DEARER_SESSION)
    folder = tmp_path / "projects" / "-home-me-cipher"
    folder.mkdir(parents=True)
    shutil.copy(src, folder / src.name)
    doc = report_json("--projects", str(folder.parent))
    (s,) = doc["results"]
    code, out, _ = run_cli("simulate", str(folder / src.name), "--compare", "--json")
    assert code == 0
    reqs = {r["scenario"]: r["requests"] for r in json.loads(out)["results"]}
    pairs = list(zip(reqs["unpatched"], reqs["patched"], strict=True))
    want = [i for i, (a, b) in enumerate(pairs, 1) if b["cache_break"] and not a["cache_break"]]
    assert want, "the session has a move"
    x = s["dearer"]
    assert x["cache_rewrites"] == want and x["requests"] == len(pairs)
    assert x["after_last_rewrite"] == len(pairs) - want[-1]
    assert x["usd"] == pytest.approx(-s["usd_saved"], abs=1e-3) and x["usd"] > 0
    code, text, _ = run_cli("report", "--projects", str(folder.parent), "--jobs", "1")
    assert code == 0
    assert "dearer with ctxpatch (replayed): 1 session" in text
    assert f"12f1f541: {fmt_usd(x['usd'])} more: " in text
    assert f"of {len(pairs)}), the last {len(pairs) - want[-1]} requests before the end" in text


def test_dearer_notes_name_the_dearest_and_what_made_each_so() -> None:
    """The note under the table: the dearest first, at most DEARER_LINES of them; a session
    with moves gives their requests and how far before its end the last came; one without,
    the recall tools' definitions (from 2.1.69: their names), or the compactions it
    avoided; a session that starts
    mid-conversation says so; one that is not dearer has no ``dearer`` entry."""
    from usage.report import DEARER_LINES, SessionNumbers, dearer_notes, session_result

    table = builtin_table()

    def one(sid: str, with_tokens: int, rewrites: list[int], **kw: Any) -> dict[str, Any]:
        d = _numbers(kw.pop("unseen", 0), 0)
        d.update(session=sid, rewrites=rewrites, replayed=40)
        d["replays"]["patched"]["usage"] = {"input_tokens": with_tokens}
        d["replays"]["unpatched"]["usage"] = {"input_tokens": 1_000_000}
        d["replays"]["patched"]["auto_compactions"] -= kw.pop("avoided", 0)
        return session_result(SessionNumbers.from_dict(d), table, None)

    cheaper = one("cheaper0", 900_000, [3])
    assert "dearer" not in cheaper
    moved = one("moved000", 1_200_000, [5, 9, 33])
    assert moved["dearer"]["cache_rewrites"] == [5, 9, 33]
    assert moved["dearer"]["after_last_rewrite"] == 7 and moved["dearer"]["requests"] == 40
    recall = one("recall00", 1_010_000, [])
    assert recall["dearer"]["after_last_rewrite"] is None
    avoided = one("avoided0", 1_100_000, [], avoided=1)
    sliced = one("sliced00", 1_050_000, [2], unseen=900)
    (at_end,) = dearer_notes([one("atend000", 1_001_000, [40])])
    assert at_end.endswith(
        "1 cache rewrite by its moves (request 40 of 40), the last at its last request"
    )
    lines = dearer_notes([cheaper, recall, moved, avoided, sliced])
    assert [x.split(":")[0] for x in lines] == ["moved000", "avoided0", "sliced00", "recall00"]
    assert lines[0].endswith(
        "3 cache rewrites by its moves (requests 5, 9, 33 of 40), the last 7 requests before the end"
    )
    assert "no cache rewrite of its own; it avoided 1 compaction" in lines[1]
    assert (
        "(request 2 of 40), the last 38 requests before the end (it starts mid-conversation"
        in lines[2]
    )
    assert lines[3].endswith(
        "no cache rewrite of its own: the recall tools' definitions in each of its 40 requests"
    )
    # a session of 2.1.69 on (here native): its requests carry the tools' names and instructions
    nat = _numbers(0, 0)
    nat.update(session="native00", rewrites=[], replayed=40, version="2.1.217", profile="2.1.195")
    nat["with_scenario"] = "server_clearing"
    nat["replays"]["server_clearing"] = nat["replays"].pop("patched")
    nat["replays"]["server_clearing"]["usage"] = {"input_tokens": 1_000_500}
    nat["replays"]["unpatched"]["usage"] = {"input_tokens": 1_000_000}
    (names,) = dearer_notes([session_result(SessionNumbers.from_dict(nat), table, None)])
    assert names.endswith(
        "no cache rewrite of its own: the recall tools' names and instructions in each of its 40 "
        "requests"
    )
    many = [one(f"s{i:07d}", 1_000_000 + 1_000 * (i + 1), [1]) for i in range(DEARER_LINES + 2)]
    lines = dearer_notes(many)
    assert len(lines) == DEARER_LINES + 1 and lines[0].startswith(f"s{DEARER_LINES + 1:07d}")
    assert lines[-1] == "... and 2 more (--json has each)"
