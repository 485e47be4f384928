"""``ctxpatch regress``: selection, the per-version cycle, resume, the matrix, the command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, IN_CI, app_with, need
from typer.testing import CliRunner

from ctxpatch.cli.inspecting import register
from ctxpatch.errors import UsageError
from patcher import npmcache, regress
from patcher.regress import Job, Outcome

CC = [
    "1.0.50",
    "1.0.60",
    "1.0.61",
    "1.0.128",
    "2.0.0",
    "2.0.76",
    "2.1.7",
    "2.1.30",
    "2.1.68",
    "2.1.112",
    "2.1.113",
]
SDK = ["0.0.4", "0.1.0", "0.1.76", "0.2.7", "0.2.30", "0.2.112", "0.2.113"]


def lister(pkg: str) -> list[str]:
    return CC if pkg == "cc" else SDK


# ------------------------------------------------------------------ selection


def test_default_is_the_ci_sample() -> None:
    jobs = regress.select(["cc", "sdk"], lister=lister)
    assert {(j.package, j.version) for j in jobs} == set(npmcache.CI_SAMPLE)
    assert {j.package for j in regress.select(["sdk"], lister=lister)} == {"sdk"}


def test_ranges_and_lists() -> None:
    jobs = regress.select(["cc"], versions="2.0.76..2.1.68", lister=lister)
    assert [j.version for j in jobs] == ["2.0.76", "2.1.7", "2.1.30", "2.1.68"]
    jobs = regress.select(["cc", "sdk"], versions="2.1.7..2.1.112,1.0.128", lister=lister)
    assert [j.key for j in jobs] == [
        "cc@1.0.128",
        "cc@2.1.7",
        "cc@2.1.30",
        "cc@2.1.68",
        "cc@2.1.112",
        "sdk@0.0.4",
        "sdk@0.2.7",
        "sdk@0.2.30",
        "sdk@0.2.112",
    ]
    # SDK numbers are accepted and mapped back for claude-code
    assert [j.key for j in regress.select(["cc"], versions="0.2.7", lister=lister)] == ["cc@2.1.7"]


def test_all_spans_the_patchable_versions_and_sample_spreads() -> None:
    cc = [j.version for j in regress.select(["cc"], all_=True, lister=lister)]
    assert cc == [
        "1.0.60",
        "1.0.61",
        "1.0.128",
        "2.0.0",
        "2.0.76",
        "2.1.7",
        "2.1.30",
        "2.1.68",
        "2.1.112",
    ]
    sample = [j.version for j in regress.select(["cc"], sample=3, lister=lister)]
    assert sample == ["1.0.60", "2.0.76", "2.1.112"]
    assert len(regress.select(["sdk"], sample=100, lister=lister)) == 6


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(versions="2.1.7", all_=True), "only one"),
        (dict(sample=0), "positive"),
        (dict(versions="latest"), "not a version"),
        (dict(versions="2.1.68..2.1.7"), "empty"),
    ],
)
def test_usage_errors(kw: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        regress.select(["cc"], lister=lister, **kw)


def test_version_mapping() -> None:
    assert regress.to_package("2.1.7", "sdk") == "0.2.7"
    assert regress.to_package("2.0.76", "sdk") == "0.1.76"
    assert regress.to_package("1.0.128", "sdk") == "0.0.4"
    assert regress.to_package("1.0.60", "sdk") is None
    assert regress.to_package("0.1.30", "cc") == "2.0.30"
    # the agent SDK went from 0.2.141 (= 2.1.141) to 0.3.142 (= 2.1.142): its published list
    assert regress.to_package("2.1.141", "sdk") == "0.2.141"
    assert regress.to_package("2.1.330", "sdk") == "0.3.330"
    assert regress.to_package("0.3.330", "cc") == "2.1.330"


# ------------------------------------------------------------------ the cycle on a fake cache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache holding fixtures as if npm pack had fetched them (no network)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("CTXPATCH_CACHE", str(root))

    def put(pkg: str, version: str, fixture: str) -> None:
        name = npmcache.SHORT[pkg]
        folder = root / "npm" / npmcache._slug(name, version) / "package"
        if (FIXTURES / fixture).is_dir():
            shutil.copytree(FIXTURES / fixture, folder)
            return
        folder.mkdir(parents=True)
        shutil.copyfile(FIXTURES / fixture, folder / "cli.js")
        (folder / "package.json").write_text(
            json.dumps({"name": name, "version": version, "type": "module"})
        )

    put("cc", "2.1.112", "rq-2.1.112.js")  # S6 with the request builder of 2.1.112
    put("cc", "2.1.7", "s1p-2.1.7.js")
    put("cc", "1.0.50", "none-1.0.50.js")
    put("cc", "2.1.113", "native-2.1.113")
    put("cc", "2.0.76", "ambiguous-two-sites.js")
    return root


def test_cycle_passes_and_leaves_the_cache_untouched(cache: Path) -> None:
    before = (
        cache / "npm" / "anthropic-ai-claude-code-2.1.112" / "package" / "cli.js"
    ).read_bytes()
    o = regress.run_one(Job("cc", "2.1.112"))
    assert (o.result, o.shape, o.microcompact, o.failed_step) == ("pass", "S6", "stub", None)
    assert (o.clearing, o.clearing_reason) == ("create/cm", "")
    assert list(o.steps) == [
        "fetch",
        "locate",
        "apply",
        "check",
        "apply-again",
        "node-check",
        "revert",
        "inspect",
    ]
    assert o.drift == [] and o.profile == "2.1.105" and o.ok
    after = (cache / "npm" / "anthropic-ai-claude-code-2.1.112" / "package" / "cli.js").read_bytes()
    assert after == before and not list((cache / "npm").rglob("*.backup"))


def test_refusals_and_failures_are_classified(cache: Path) -> None:
    assert regress.run_one(Job("cc", "1.0.50")).result == "unsupported"
    assert regress.run_one(Job("cc", "2.1.113")).result == "native"
    amb = regress.run_one(Job("cc", "2.0.76"))
    assert (amb.result, amb.failed_step) == ("fail", "locate") and "candidate" in amb.reason
    drift = regress.run_one(Job("cc", "2.1.7"))  # a synthetic 2.1.7 differs from the real one
    assert drift.result == "pass" and drift.drift and not drift.ok
    assert drift.clearing == "none" and "no .beta.messages" in drift.clearing_reason


def test_run_writes_json_and_resumes(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.json"
    jobs = [Job("cc", "2.1.112"), Job("cc", "1.0.50"), Job("cc", "2.0.76")]
    first = regress.run(jobs, json_path=out)
    doc = json.loads(out.read_text())
    assert doc["summary"]["results"]["pass"] == 1 and doc["summary"]["failed"] == ["cc@2.0.76"]
    assert [r["version"] for r in doc["results"]] == ["1.0.50", "2.0.76", "2.1.112"]
    assert not first.summary()["ok"]

    ran: list[str] = []
    real = regress.run_one

    def spy(job: Job, **kw: object) -> Outcome:
        ran.append(job.key)
        return real(job, **kw)  # type: ignore[arg-type]

    refreshed: list[str] = []
    real_refresh = regress.refresh_inspect

    def spy_refresh(o: Outcome) -> Outcome:
        refreshed.append(o.key)
        return real_refresh(o)

    monkeypatch.setattr(regress.runner, "run_one", spy)
    monkeypatch.setattr(regress.runner, "refresh_inspect", spy_refresh)
    again = regress.run(jobs, json_path=out, resume=True)
    assert ran == ["cc@2.0.76"]  # passed and refused versions are not run again
    assert sorted(refreshed) == ["cc@1.0.50", "cc@2.1.112"]  # but their drift is read again
    assert set(again.outcomes) == {j.key for j in jobs}
    assert again.outcomes["cc@2.1.112"].steps["inspect"] == "ok"
    assert json.loads(out.read_text())["summary"]["versions"] == 3


def test_parallel_run(cache: Path) -> None:
    jobs = [Job("cc", "2.1.112"), Job("cc", "1.0.50"), Job("cc", "2.1.113")]
    seen: list[int] = []
    res = regress.run(jobs, workers=2, on_done=lambda o, done, total: seen.append(done))
    assert sorted(seen) == [1, 2, 3]
    assert {o.result for o in res.outcomes.values()} == {"pass", "unsupported", "native"}
    assert res.summary()["ok"]


def test_matrix_and_details() -> None:
    outs = [
        Outcome(
            "cc",
            "2.1.7",
            result="pass",
            claude_code_version="2.1.7",
            shape="S1'",
            microcompact="legacy",
            clearing="stream/cm",
            drift=["mc_keep: file 4 != profile 3"],
        ),
        Outcome("sdk", "0.2.7", result="fail", failed_step="apply", reason="boom"),
        Outcome(
            "cc",
            "2.1.8",
            result="pass",
            shape="S1''",
            clearing="none",
            clearing_reason="no request builder",
        ),
    ]
    text = regress.matrix(outs)
    assert text.splitlines()[0].split() == [
        "package",
        "version",
        "claude-code",
        "shape",
        "mc",
        "clearing",
        "result",
        "drift",
        "seconds",
    ]
    assert "fail (apply)" in text and "S1'" in text and "stream/cm" in text
    assert "cc@2.1.8: no server-side clearing: no request builder" in regress.details(outs)
    assert "sdk@0.2.7: fail at apply: boom" in regress.details(outs)
    assert "cc@2.1.7: drift mc_keep" in regress.details(outs)


# ------------------------------------------------------------------ the command


def _invoke(*args: str):
    return CliRunner().invoke(app_with(register), list(args))


def test_cli_on_the_fake_cache(cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = _invoke("regress", "--versions", "2.1.112,1.0.50,2.1.113", "--json", str(out))
    assert res.exit_code == 0, res.output
    assert "2.1.112" in res.stdout and "pass" in res.stdout and "native" in res.stdout
    assert json.loads(out.read_text())["summary"]["ok"] is True
    res = _invoke("regress", "--versions", "2.1.7")  # drift: exit 1
    assert res.exit_code == 1 and "drift" in res.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["regress", "--all", "--sample", "3"],
        ["regress", "--jobs", "0"],
        ["regress", "--resume"],
        ["regress", "--versions", "nope"],
        ["regress", "--package", "npm"],
    ],
)
def test_cli_usage_errors(args: list[str]) -> None:
    assert _invoke(*args).exit_code == 2


@pytest.mark.real
def test_cli_on_two_real_versions(tmp_path: Path) -> None:
    need("npm", "real versions are downloaded with npm pack")
    need("node", "the ESM check of the patched file")
    out = tmp_path / "regress.json"
    res = _invoke("regress", "--versions", "1.0.60,1.0.128", "--json", str(out), "--jobs", "2")
    if res.exit_code != 0 and not IN_CI and "fetch-failed" in res.output:
        pytest.skip("cannot fetch the real versions")
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    rows = {r["version"]: r for r in doc["results"]}
    assert (rows["1.0.60"]["shape"], rows["1.0.128"]["shape"]) == ("S0", "S1")
    assert all(r["result"] == "pass" and r["drift"] == [] for r in rows.values())
    assert all(
        r["steps"]["revert"] == "ok" and r["steps"]["node-check"] == "ok" for r in rows.values()
    )
    assert rows["1.0.128"]["profile"] == "1.0.128"


# ------------------------------------------------------------------ the generated matrix


def test_support_matrix_is_generated_from_a_regress_json(cache: Path, tmp_path: Path) -> None:
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location(
        "support_matrix", ROOT / "scripts" / "support_matrix.py"
    )
    sm = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(sm)  # type: ignore[union-attr]
    out = tmp_path / "r.json"
    regress.run(
        [
            Job("cc", "2.1.112"),
            Job("cc", "1.0.50"),
            Job("cc", "2.0.76"),
            Job("cc", "2.1.113"),
            Job("cc", "2.1.7"),
        ],
        json_path=out,
    )
    md = tmp_path / "m.md"
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{sm.BEGIN}\nold\n{sm.END}\nrest\n")
    assert sm.main([str(out), "-o", str(md), "--readme", str(readme)]) == 0
    text = md.read_text()
    assert (
        "Do not edit by hand" in text and "| cc | 2.1.112 | same | 1 | S6 | stub | pass |" in text
    )
    assert "**FAIL** at locate" in text and "refused (native binary" in text
    assert "## Failures" in text and "cc@2.0.76" in text and "## Drift" in text
    assert sm.main([str(out), "-o", str(md)]) == 0 and md.read_text() == text  # reproducible
    body = readme.read_text()
    assert body.startswith("intro\n") and "old" not in body and "| cc | 2.1.112 |" in body
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert sm.main([str(bad), "-o", str(md)]) == 3
