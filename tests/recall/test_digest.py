"""recall.digest: what a compaction dropped, within the budget, from transcript lines."""

from __future__ import annotations

import json

import pytest
from digest_lines import CWD, prompt, result, session, use

from recall import digest


def test_the_calls_with_their_outcome() -> None:
    calls = {c.id: c for c in digest.calls(session())}
    # sub-agent lines and the recall tools' own calls are left out
    assert "toolu_sub" not in calls and "toolu_mcp" not in calls
    assert calls["toolu_test1"].exit_status == 1 and calls["toolu_test1"].is_test
    assert calls["toolu_test1"].error_line.startswith("FAILED tests/test_parse.py::test_empty")
    assert calls["toolu_test2"].exit_status == 0 and not calls["toolu_test2"].is_error
    assert calls["toolu_push"].exit_status == 128
    assert calls["toolu_push"].error_line == "fatal: no upstream branch"
    assert calls["toolu_web"].summary == "https://example.org/spec"
    assert calls["toolu_read1"].path == f"{CWD}/src/parse.py"


def test_the_digest_lists_the_last_of_each_with_its_id() -> None:
    d = digest.build(session(), 2000)
    text = d.text
    assert text.startswith("[ctxpatch recall]") and digest.GET_TOOL in text
    assert digest.SEARCH_TOOL in text
    # the test passed on its last run: a command, not a failure; the push failed last
    failing = text.split("Failing tests and errors")[1].split("\n\n")[0]
    assert "git push` -> exit 128: fatal: no upstream branch [toolu_push]" in failing
    assert "pytest" not in failing
    assert "`pytest tests/test_parse.py -q` -> exit 0 [toolu_test2]" in text
    assert "toolu_test1" not in text  # an earlier run of the same command
    # two edits of one file: one line, the last edit's id, relative to the session's folder
    assert "- src/parse.py (2x) [toolu_edit2]" in text and "toolu_edit1" not in text
    # read and then edited: listed once, under edited
    assert "toolu_read1" not in text
    assert "WebFetch `https://example.org/spec` [toolu_web]" in text
    assert "toolu_sub" not in text and "secret-subagent-dir" not in text
    # marks: typed prompts only (not the meta line), newest first
    marks = text.split("Marked by the user")[1].split("\n\n")[0].splitlines()[1:]
    assert marks == [
        "- Also #keep: write the changelog entry last.",
        "- Fix the parser. #keep the public API of parse() must not change",
    ]
    assert (d.listed, d.left_out, d.marks) == (4, 3, 2)  # test1, edit1, read1: superseded
    assert text.endswith("(+3 more tool results not listed: mcp__ctxpatch__search finds them)")
    assert d.tokens == digest.estimate(text) <= 2000


@pytest.mark.parametrize("budget", [160, 200, 400, 800])
def test_the_budget_is_held_and_what_is_left_out_is_counted(budget: int) -> None:
    lines = [prompt("start")]
    for i in range(300):
        lines += [
            use(f"toolu_{i:04d}", "Bash", command=f"make step{i}"),
            result(f"toolu_{i:04d}", "ok"),
        ]
    d = digest.build(lines, budget)
    assert d.tokens <= budget, (d.tokens, budget)
    assert d.listed + d.left_out == 300 and d.left_out > 0
    assert f"(+{d.left_out} more tool results not listed" in d.text
    # newest first: the listed ones are the last ones run
    listed = [int(x.split("]")[0]) for x in d.text.split("[toolu_")[1:]]
    assert listed == list(range(299, 299 - d.listed, -1))


def test_nothing_to_say_is_empty() -> None:
    assert digest.build([prompt("hello")]).text == ""
    assert digest.build(session(), 0).text == ""
    assert digest.build([], 2000).text == ""
    # a budget too small for the header says nothing rather than half of it
    assert digest.build(session(), 10).text == ""


def test_malformed_lines_are_skipped_not_fatal() -> None:
    lines = [None, 3, "x", {"type": "assistant", "message": "no"}, {"type": "user"}]
    lines += [{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": 5}]}}]
    lines += [use("toolu_ok", "Bash", command="true"), result("toolu_ok", "")]
    lines += [result("toolu_unknown", "orphan"), use("toolu_noresult", "Read", file_path="/x")]
    d = digest.build(lines, 2000)
    assert "`true` -> exit 0 [toolu_ok]" in d.text
    assert "- /x [toolu_noresult]" in d.text
    assert "orphan" not in d.text


def test_compact_instructions_are_the_marks_only() -> None:
    text = digest.compact_instructions(session())
    assert text.splitlines() == [
        "The user marked these messages with #keep: keep each of them verbatim in the summary, "
        "newest first.",
        "- Also #keep: write the changelog entry last.",
        "- Fix the parser. #keep the public API of parse() must not change",
    ]
    assert digest.compact_instructions([prompt("nothing marked")]) == ""
    long = [prompt("#keep " + "x" * 5000) for _ in range(20)]
    cut = digest.compact_instructions(long, limit=4000)
    assert 0 < len(cut) <= 4000 and all(
        len(x) <= digest.MARK_CHARS + 2 for x in cut.splitlines()[1:]
    )


def test_keep_needs_the_whole_tag() -> None:
    assert digest.marked([prompt("#keeper is not a mark"), prompt("#KEEP this")]) == ["#KEEP this"]


def test_a_real_session() -> None:
    """On a real shared session: the budget holds and every id named is one of its tool uses."""
    from shared_data import SPOTTER, need_shared

    path = need_shared(SPOTTER / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    d = digest.build(lines, 2000)
    ids = {c.id for c in digest.calls(lines)}
    named = {x.split("]")[0] for x in d.text.split("[toolu_")[1:]}
    assert named and {f"toolu_{x}" for x in named} <= ids
    assert d.tokens <= 2000 and d.listed == len(named) and d.listed + d.left_out == len(ids)
