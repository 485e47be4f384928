"""Recall with the real program, offline: the patched cli.js 2.1.112 and the native builds.

``recall.register`` writes the entries ``ctxpatch apply`` writes (the MCP server in the sandbox's
``~/.claude.json``, the hooks in its ``~/.claude/settings.json``), and the real Claude Code runs
against the loopback mock (a native build through ``ctxpatch run``, which adds the clearing)
in one live process fed several prompts (``--input-format stream-json``). Checked:

* Claude Code starts ``ctxpatch mcp`` and the hooks: the tools ``mcp__ctxpatch__search`` /
  ``mcp__ctxpatch__get`` are offered, SessionStart and PreCompact run (``hook.log``);
* the mock clears an old tool result (``clear_tool_uses_20250919``, ``applied_edits``), then
  the scripted model calls ``get`` with its id and receives the transcript's original bytes,
  and ``search`` with a word of it finds its id;
* a real compaction (``/compact``; the mock answers the summary request): the summary request
  carries the prompt the user marked ``#keep`` (the PreCompact hook's output, Claude Code's
  custom instructions), and the next request carries the digest as SessionStart additional
  context, naming the old result's id;
* recall's tools ride along as the replays count them (``engine.replay.recall_tools``): through
  this URL ``cli.js`` 2.1.112 sends the definitions; a native build behind the gateway only the
  two names, in its list of deferred tools (tool search, which ``ctxpatch run`` turns on for
  Anthropic's API, and 2.1.330 on keep on through any URL); both carry the server's
  instructions in a system reminder of the first message;
* two sessions running at once in one project each recall their own results, never the
  other's (``get`` of the other's id: no such call; ``search`` of the other's words: no hit);
* and, pinned here because the hook relies on it: a PreCompact hook that exits 2 blocks the
  compaction in both builds (no summary request), so ``ctxpatch recall hook`` never exits 2.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import native_builds
import pytest

from engine.profiles import profile_for
from engine.replay.recall_tools import RECALL_TOOLS_DEFERRED_ESTIMATE, recall_tools_for
from engine.twins.context_clear import ENV_KEEP, ENV_POLICY, ENV_STEP, ENV_TRIGGER
from lab.chain import _is_result, drive, stream_json_prompts
from lab.harness import MODEL
from lab.mock import MockConfig, MockServer, Step
from lab.sandbox import GatewaySandbox, NativeSandbox, Sandbox, _kill_group
from recall import register

from .conftest import RECALL_GET, RECALL_SEARCH, recall_instructions_place, recall_tools_form

pytestmark = [pytest.mark.e2e, pytest.mark.real]

ROOT = Path(__file__).resolve().parents[2]
NEWEST = native_builds.SDK_BUNDLED  # the newest native build (npm dist-tag latest, 2026-11-25)
# the fixed policy (clear past the trigger, keep 1): the old result is cleared at once
CLEAR = {ENV_POLICY: "fixed", ENV_TRIGGER: "1000", ENV_KEEP: "1", ENV_STEP: "1"}
TOOLS = "Bash,mcp__ctxpatch__get,mcp__ctxpatch__search"
STREAM = ("-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
ARGS = ("--model", MODEL, "--disallowedTools", "Skill", "--allowedTools", TOOLS)
GET, SEARCH = RECALL_GET, RECALL_SEARCH
MARK = "#keep the answer is 42"
ORIGINAL = "ORIGINAL-BYTES zebrafish-7731: build log line one / ünïcödé"
KINDS = ("cli.js 2.1.112", "native 2.1.330", f"native {NEWEST}")


@pytest.fixture
def make(sandbox_for, native_exe, e2e_node, tmp_path, monkeypatch):
    """``make(kind, name, gateway)``: a sandbox of that Claude Code with recall registered as
    ``ctxpatch apply`` registers it, and the environment its runs need (this checkout's code
    for the hook and the server, the state folder, the clearing knobs)."""

    def build(kind: str, name: str, gateway: bool = True) -> tuple[Sandbox, dict[str, str]]:
        state = tmp_path / f"state-{name}"
        monkeypatch.setenv("CTXPATCH_STATE_DIR", str(state))
        if kind.startswith("cli.js"):  # a fresh HOME and project around the patched copy
            sb = Sandbox(tmp_path / name, sandbox_for("2.1.112", patched=True).cli, e2e_node)
        else:
            version = kind.split()[1]
            exe = (
                native_exe(version) if version != NEWEST else native_builds.newest_native_or_skip()
            )
            cls = GatewaySandbox if gateway else NativeSandbox
            sb = cls(tmp_path / name, exe)
        report = register.register({"HOME": str(sb.home)})
        assert report.registered, report
        env = {"PYTHONPATH": str(ROOT), "CTXPATCH_STATE_DIR": str(state), **CLEAR}
        return sb, env

    return build


def tool_use(tid: str, name: str, **inp: object) -> Step:
    return Step([{"type": "tool_use", "id": tid, "name": name, "input": inp}], "tool_use")


def results_in(body: dict) -> dict[str, object]:
    """tool_use_id -> tool_result content of the last user message of a request body."""
    last = body["messages"][-1]
    out: dict[str, object] = {}
    if isinstance(last.get("content"), list):
        for b in last["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                out[b["tool_use_id"]] = b.get("content")
    return out


def text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def transcript_result(sb: Sandbox, tid: str) -> object:
    """The tool_result content of ``tid`` as the session's transcript holds it."""
    for path in sb.projects_dir.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            content = (rec.get("message") or {}).get("content")
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("tool_use_id") == tid:
                    return b.get("content")
    raise AssertionError(f"{tid} is not in any transcript under {sb.projects_dir}")


def hook_log(env: dict[str, str]) -> list[str]:
    return (Path(env["CTXPATCH_STATE_DIR"]) / "hook.log").read_text().splitlines()


@pytest.mark.parametrize("kind", KINDS)
def test_recall_and_the_digest_through_the_real_program(make, mock: MockServer, kind: str):
    sb, env = make(kind, "one")
    a, b = "toolu_recall_a0001", "toolu_recall_b0001"
    script = [
        tool_use(a, "Bash", command=f"echo '{ORIGINAL}'"),
        tool_use(b, "Bash", command="echo second"),
        tool_use("toolu_recall_get01", GET, tool_use_id=a),
        tool_use("toolu_recall_srch1", SEARCH, query="zebrafish"),
        Step.text("done"),
    ]
    mock.reset(MockConfig(script=script))
    run = drive(
        sb,
        [*STREAM, *ARGS],
        mock.base_url,
        env,
        [f"Run the build. {MARK}", "/compact", "go on"],
        300,
    )
    reqs = mock.requests()
    kinds = [r.kind for r in reqs if r.kind in ("main", "compact")]
    assert run.returncode == 0, run.describe()
    assert kinds == ["main"] * 5 + ["compact", "main"], (kinds, run.describe())
    main = [r for r in reqs if r.kind == "main"]

    # the server is started and its tools offered: through this URL, which is not Anthropic's,
    # cli.js 2.1.112 sends the definitions (its tool search is off there); 2.1.330 on keep tool
    # search on, and list only the names among the deferred tools
    form = "definitions" if kind.startswith("cli.js") else "names"
    assert recall_tools_form(main[0].body) == form
    # and the server's instructions, which say what the two are for, in a system reminder of
    # the first message (2.1.112 and the native builds)
    assert recall_instructions_place(main[0].body) == "reminder"
    # the mock cleared A's result (keep 1) before the model asked for it
    assert any(e.get("cleared_tool_uses", 0) >= 1 for e in main[2].applied_edits), main[2]
    # get: the original bytes, as the transcript holds them
    original = transcript_result(sb, a)
    assert ORIGINAL in text_of(original)
    got = text_of(results_in(main[3].body)["toolu_recall_get01"])
    assert text_of(original) in got, got
    # search: a word of it finds its id
    found = text_of(results_in(main[4].body)["toolu_recall_srch1"])
    assert a in found, found

    # the compaction: PreCompact's output (the #keep prompt) in the summary request ...
    compact = next(r for r in reqs if r.kind == "compact")
    asked = json.dumps(compact.body["messages"][-1], ensure_ascii=False)
    assert "marked these messages with #keep" in asked and MARK in asked, asked[-2000:]
    # ... and the digest on the next request, naming A's id
    after = json.dumps(main[5].body, ensure_ascii=False)
    assert "[ctxpatch recall] This conversation was compacted" in after
    digest = after.split("[ctxpatch recall]", 1)[1].split("</system-reminder>", 1)[0]
    assert f"[{a}]" in digest and MARK in digest, digest

    log = hook_log(env)
    events = [line.split()[1] for line in log]
    assert events.count("SessionStart") >= 2 and "PreCompact" in events, log
    assert not [line for line in log if "failed" in line], log


def test_2_1_113_behind_the_gateway_sends_only_recalls_names(make, mock: MockServer):
    """What recall's tools add to every request of a native build behind ``ctxpatch run``, as
    the replays count it (``Profile.tool_search_defers_mcp``): 2.1.113 turns tool search off for
    a base URL that is not Anthropic's, and ``ctxpatch run`` sets ``ENABLE_TOOL_SEARCH=true``
    when its upstream is Anthropic's API (this mock is not, so the test sets it): then only the
    two names ride along, in the list of deferred tools, with the server's instructions. (2.1.330 on keep tool search on through
    any URL: the test above; a ``cli.js`` build talking to Anthropic:
    tests/e2e/test_recall_first_party.py.)"""
    assert recall_tools_for(profile_for("2.1.113")) == RECALL_TOOLS_DEFERRED_ESTIMATE
    sb, env = make("native 2.1.113", "tools")
    env["ENABLE_TOOL_SEARCH"] = "true"
    mock.reset(MockConfig(script=[Step.text("ok")]))
    run = drive(sb, [*STREAM, *ARGS], mock.base_url, env, ["hello"], 300)
    assert run.returncode == 0, run.describe()
    first = next(r for r in mock.requests() if r.kind == "main")
    assert recall_tools_form(first.body) == "names"
    assert recall_instructions_place(first.body) == "reminder"


def _two_sessions(
    sbs: Sequence[Sandbox],
    mocks: Sequence[MockServer],
    env: dict[str, str],
    prompts: Sequence[str],
    timeout: float = 300,
) -> list[str]:
    """Run both sessions at once, each fed its prompts one at a time; the second prompt of
    each goes only when both have answered the first (so each exists when the other asks)."""
    barrier = threading.Barrier(len(sbs), timeout=timeout)
    outs: list[str] = ["" for _ in sbs]
    errors: list[BaseException] = []

    def one(i: int) -> None:
        sb, mock = sbs[i], mocks[i]
        cmd = sb.command([*STREAM, *ARGS], mock.base_url)
        with sb.network(mock.base_url):
            proc = subprocess.Popen(
                cmd,
                cwd=sb.proj,
                env=sb.env(mock.base_url, env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            assert proc.stdin is not None and proc.stdout is not None
            timer = threading.Timer(timeout, _kill_group, (proc,))
            timer.start()
            try:
                for n, prompt in enumerate(prompts):
                    if n:
                        barrier.wait()
                    proc.stdin.write(stream_json_prompts([prompt]))
                    proc.stdin.flush()
                    for line in proc.stdout:
                        outs[i] += line
                        if _is_result(line):
                            break
                proc.communicate(timeout=60)
            except BaseException as exc:
                errors.append(exc)
                barrier.abort()
            finally:
                timer.cancel()
                _kill_group(proc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sbs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return outs


@pytest.mark.parametrize("kind", KINDS)
def test_two_sessions_in_one_project_recall_only_their_own(make, kind: str, tmp_path: Path):
    first, env = make(kind, "first", gateway=False)
    second, _ = make(kind, "second", gateway=False)
    # the same HOME (settings, transcripts, .claude.json) and the same project folder
    second.home, second.proj = first.home, first.proj
    secret = {"a": "SECRET-A quokka-1111", "b": "SECRET-B narwhal-2222"}
    ids = {"a": "toolu_two_a_bash01", "b": "toolu_two_b_bash01"}
    mocks: list[MockServer] = []
    try:
        for me, other in (("a", "b"), ("b", "a")):
            script = [
                tool_use(ids[me], "Bash", command=f"echo '{secret[me]}'"),
                Step.text("first done"),
                tool_use(f"toolu_two_{me}_getown", GET, tool_use_id=ids[me]),
                tool_use(f"toolu_two_{me}_getoth", GET, tool_use_id=ids[other]),
                tool_use(f"toolu_two_{me}_search", SEARCH, query=secret[other].split()[1]),
                Step.text("second done"),
            ]
            mocks.append(MockServer(MockConfig(script=script)).__enter__())
        outs = _two_sessions([first, second], mocks, env, ["start", "recall"])
        for (me, other), mock, out in zip((("a", "b"), ("b", "a")), mocks, outs, strict=True):
            main = [r for r in mock.requests() if r.kind == "main"]
            assert len(main) == 6, out[-3000:]
            got_own = text_of(results_in(main[3].body)[f"toolu_two_{me}_getown"])
            got_other = text_of(results_in(main[4].body)[f"toolu_two_{me}_getoth"])
            found = text_of(results_in(main[5].body)[f"toolu_two_{me}_search"])
            assert secret[me] in got_own, got_own
            assert secret[other] not in got_other and "No tool call" in got_other, got_other
            assert ids[other] not in found, found
            # no hit but, at times, this very search call (its line may already be written)
            hits = [line.split(" | ")[0] for line in found.splitlines() if " | " in line]
            assert all(h == f"toolu_two_{me}_search" for h in hits), found
            assert hits or "No earlier tool call matches" in found, found
    finally:
        for m in mocks:
            m.close()


@pytest.mark.parametrize("kind", ("cli.js 2.1.112", f"native {NEWEST}"))
def test_a_pre_compact_hook_exiting_2_blocks_the_compaction(make, mock: MockServer, kind: str):
    """What the ADR's two versions disagree on, measured: exit 2 blocks it (2.0.76 ignored it;
    2.1.112 and 2.1.332 do not). So the recall hook prints its marks and exits 0, always."""
    sb, env = make(kind, "block", gateway=False)
    settings = sb.home / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    doc["hooks"]["PreCompact"] = [
        {"hooks": [{"type": "command", "command": "echo blocked-by-test >&2; exit 2"}]}
    ]
    settings.write_text(json.dumps(doc))
    mock.reset(MockConfig(script=[Step.text("hello")]))
    run = drive(
        sb,
        [*STREAM, *ARGS],
        mock.base_url,
        env,
        ["hello", "/compact"],
        300,
    )
    assert [r.kind for r in mock.requests() if r.kind == "compact"] == [], run.describe()
    assert (
        "Compaction blocked by PreCompact hook" in run.stdout
        or "blocked by PreCompact hook" in run.stdout
    )
