"""The real native 2.1.113 and 2.1.330 through ``ctxpatch run``, offline (issue 9, part 3).

Each run is the real command line: ``python -m ctxpatch run --log LOG -- claude ...`` inside the
binary's loopback-only network namespace (:class:`lab.sandbox.GatewaySandbox`): the
gateway listens on the namespace's 127.0.0.1, the binary's ``ANTHROPIC_BASE_URL`` points at it,
and its upstream is the mock (the sandbox's own ``ANTHROPIC_BASE_URL``, reached through the
bridge). The gateway runs inside so that ``ctxpatch run`` itself is what is tested (its choice
of upstream, the environment it gives the binary), and so nothing listens on the host but the
mock. A direct run (:class:`NativeSandbox`) of the same sandbox folder is what the binary sends
without ctxpatch.

Checked, on each version:

* every ``/v1/messages`` request that reached the mock carries Claude Code's own
  ``clear_thinking_20251015`` then the knobs' ``clear_tool_uses_20250919`` and the
  ``context-management-2025-06-27`` beta; the mock clears and reports ``applied_edits``;
  thinking on with the preserved-thinking check enforced: 0 HTTP 400, 0 dropped blocks;
* the gateway changes nothing else: the same session run directly and through the gateway
  sends the same requests (every key, in order, messages included) but for
  ``context_management``, and each body is longer by exactly the length of the added edit
  (the bytes around it are the binary's);
* ``count_tokens`` and other paths pass through unchanged (the real ``ctxpatch run`` around a
  small HTTP client in the same namespace);
* Claude Code's next count follows the edited usage and its auto-compaction fires exactly
  where the engine predicts (one output token below: no; at it: yes); without the edit it
  fires one token below. On 2.1.330 too: it adds back the server's ``cleared_input_tokens``
  only for an edit it built itself (``engine.claude_code.count``), never for the gateway's. (After its own
  compaction 2.1.330 gets one HTTP 400 from the check and retries without the thinking blocks,
  with or without the edit: Claude Code's, pinned here);
* the binary and its package are byte-identical afterwards, and the sandbox ``HOME`` holds
  nothing the gateway wrote (the same files as after a direct run).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.api.context_management import BETA, CLEAR_THINKING, CLEAR_TOOL_USES, to_json
from engine.claude_code.count import autocompact_tokens
from engine.claude_code.thresholds import compute_thresholds
from engine.profiles import profile_for
from engine.twins.context_clear import ENV_DISABLE, knobs_from_env
from lab import netns
from lab.chain import THINK_ENV, Turns, run_turns
from lab.harness import MODEL, REQUEST_TIME_ATTACHMENTS
from lab.mock import MockConfig, Step
from lab.sandbox import GatewaySandbox, NativeSandbox
from lab.scenarios import thinking_session
from lab.server_edits import betas_of, prompt_tokens
from lab.signing import sign_session
from lab.verify_thinking import ARGS, CLEAR, run_thinking_proof

pytestmark = [pytest.mark.e2e, pytest.mark.real]

VERSIONS = ("2.1.113", "2.1.330")
WINDOW = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "150000"}  # 2.1.195+: the proactive compaction
PROMPTS = ("First prompt: explain the module.", "Second prompt: go on.")


def env_for(version: str) -> dict[str, str]:
    return {**THINK_ENV, **CLEAR, **(WINDOW if version >= "2.1.195" else {})}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# --- the edit, under the enforced check ------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_ctxpatch_run_sends_the_edit_and_passes_the_thinking_check(
    native_exe, mock, e2e_root, version
):
    exe = native_exe(version)
    package = exe.parent
    before = (sha256(exe), exe.stat().st_mtime_ns, (package / "package.json").read_bytes())
    sb = GatewaySandbox(e2e_root / f"gateway-{version}", exe)
    proofs, t = run_thinking_proof(sb, mock, version, 120)
    assert all(p.ok for p in proofs), "\n".join(p.detail for p in proofs) + "\n" + t.describe()
    assert t.run.returncode == 0, t.describe()

    # every /v1/messages request: Claude Code's edit first, then the knobs', with the beta
    want = to_json(knobs_from_env(CLEAR))  # type: ignore[arg-type]
    messages = [r for r in t.requests if r.kind in ("main", "compact", "side")]
    assert messages and all(r.kind == "main" for r in messages), t.describe()
    for r in messages:
        assert BETA in betas_of(r.headers), r.headers
        assert r.body["context_management"]["edits"] == [
            {"type": CLEAR_THINKING, "keep": "all"},
            want,
        ], r.body["context_management"]
        assert r.status == 200, t.describe()
        assert [e["type"] for e in r.applied_edits] == [CLEAR_TOOL_USES], t.describe()
    cleared = [r.applied_edits[0]["cleared_tool_uses"] for r in messages]
    assert cleared == sorted(cleared) and cleared[-1] > cleared[0], cleared
    assert t.rejected == [] and t.n_dropped == 0, t.describe()
    # the gateway's own log: one "clearing added" line per request, the mock as upstream
    log = sb.gateway_log.read_text()
    assert f"upstream {mock.base_url}" in log, log
    assert log.count("POST /v1/messages -> 200, clearing added") >= len(messages), log

    # the install is untouched; HOME and TMPDIR hold nothing of ctxpatch's
    assert (sha256(exe), exe.stat().st_mtime_ns, (package / "package.json").read_bytes()) == before
    written = files_under(sb.home) | files_under(sb.tmp)
    names = [Path(p).name for p in written]
    assert not [n for n in names if "ctxpatch" in n or "gateway" in n], sorted(written)


# --- nothing else changes ----------------------------------------------------------------------

VOLATILE_HEADERS = frozenset(
    {"content-length", "x-claude-code-session-id", "x-client-request-id"}
    | {"host", "connection", "keep-alive", "transfer-encoding"}  # each connection's own
)


def _without_volatile(body: dict) -> dict:
    """The body minus ``context_management`` and 2.1.113's per-request body hash (``cch=``,
    in the billing header: it differs between any two runs)."""
    out = {k: v for k, v in body.items() if k != "context_management"}
    system = out.get("system")
    if isinstance(system, list) and system and "cch=" in str(system[0].get("text", "")):
        out["system"] = system[1:]
    return out


def _compact(obj: object) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


@pytest.mark.parametrize("version", VERSIONS)
def test_the_gateway_changes_only_context_management(native_exe, mock, e2e_root, version):
    exe = native_exe(version)
    root = e2e_root / f"pair-{version}"
    direct, through = NativeSandbox(root, exe), GatewaySandbox(root, exe)
    env = env_for(version)
    s = thinking_session(str(direct.proj), version=version, turns=2)
    sign_session(direct, mock, s, model=MODEL, env=env, args=ARGS, live=True)
    script = [
        Step([{"type": "tool_use", "id": "toolu_pair_0", "name": "Read", "input": {}}], "tool_use"),
        Step.text("Done."),
    ]
    note = direct.proj / "pair-notes.txt"
    note.write_text("pair notes\n" * 100)
    script[0].content[0]["input"] = {"file_path": str(note)}
    runs: dict[str, Turns] = {}
    home_files: dict[str, set[str]] = {}
    for name, sb in (("direct", direct), ("gateway", through)):
        seen = files_under(sb.home) if name == "gateway" else set()
        cfg = MockConfig(
            script=list(script),
            thinking=True,
            binding="error",
            thinking_text="Mock reasoning: the same in both runs.",  # no message counter
        )
        runs[name] = run_turns(sb, mock, s, PROMPTS[:1], cfg, model=MODEL, env=env, args=ARGS)
        assert runs[name].run.returncode == 0, runs[name].describe()
        assert runs[name].rejected == [], runs[name].describe()
        home_files[name] = {re.sub(r"\d", "#", f) for f in files_under(sb.home) - seen}
    a, b = runs["direct"].requests, runs["gateway"].requests
    assert [(r.method, r.path, r.kind) for r in a] == [(r.method, r.path, r.kind) for r in b]
    mains = [(x, y) for x, y in zip(a, b, strict=True) if x.kind == "main"]
    assert len(mains) == 2, runs["gateway"].describe()
    for x, y in mains:
        assert CLEAR_TOOL_USES not in json.dumps(x.body["context_management"])
        assert y.body["context_management"]["edits"][:-1] == x.body["context_management"]["edits"]
        # every other key, in the same order, equal (messages first of all)
        assert list(_without_volatile(y.body)) == list(_without_volatile(x.body))
        assert json.dumps(_without_volatile(y.body)) == json.dumps(_without_volatile(x.body))
        # the bytes: longer by exactly the new value's length (compact JSON, as the binary
        # writes its own), so nothing else was re-spelt
        grown = _compact(y.body["context_management"]) - _compact(x.body["context_management"])
        assert int(y.headers["content-length"]) - int(x.headers["content-length"]) == grown
        hx = {k: v for k, v in x.headers.items() if k not in VOLATILE_HEADERS}
        hy = {k: v for k, v in y.headers.items() if k not in VOLATILE_HEADERS}
        # the beta was already there: Claude Code sends it with its own edit; the gateway adds
        # only its loop mark, and only because this upstream (the mock) is on this machine
        assert hy.pop("x-ctxpatch-hop", None) is not None
        assert hy == hx
    # HOME: the gateway run wrote no file the direct run did not (names with their digits
    # masked: 2.1.113's npm writes a timestamped log on every start), but ctxpatch's own ledger
    # of numbers in its XDG state dir (usage.ledger; CTXPATCH_LEDGER=0 turns it off)
    extra = home_files["gateway"] - home_files["direct"]
    assert extra == {".local/state/ctxpatch/ledger/ledger.jsonl"}, (
        home_files["gateway"] ^ home_files["direct"]
    )


COUNT_TOKENS_CLIENT = r"""
import json, os, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"]
def post(path, body, method="POST"):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else None,
        method=method, headers={"content-type": "application/json", "x-api-key": "k",
        "anthropic-beta": "token-counting-2024-11-01"})
    with urllib.request.urlopen(req, timeout=20) as r:
        return r.status, json.loads(r.read() or b"null")
body = {"model": "claude-sonnet-4-5-20250929", "messages": [{"role": "user", "content": "hi"}]}
print(json.dumps([base, post("/v1/messages/count_tokens", body), post("/v1/models", None, "GET")]))
"""


def test_count_tokens_and_other_paths_pass_unchanged(native_exe, mock, e2e_root):
    """The real ``ctxpatch run`` around a small client in the same namespace: ``count_tokens``
    and ``GET /v1/models`` reach the mock exactly as sent."""
    sb = GatewaySandbox(e2e_root / "gateway-paths", native_exe("2.1.330"))
    mock.reset(MockConfig(count_tokens=4321))
    cmd = [sys.executable, "-m", "ctxpatch", "run", "--", sys.executable, "-c", COUNT_TOKENS_CLIENT]
    wrapped = netns.wrap(cmd, mock.port, sb.socket)
    with netns.UnixBridge(sb.socket, mock.port):
        res = subprocess.run(
            wrapped,
            cwd=sb.proj,
            env=sb.env(mock.base_url, CLEAR),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert res.returncode == 0, (res.stdout, res.stderr)
    base, (status, counted), (got, _models) = json.loads(res.stdout.strip().splitlines()[-1])
    assert base != mock.base_url and base.startswith("http://127.0.0.1:"), base  # the gateway
    assert (status, counted, got) == (200, {"input_tokens": 4321}, 200)
    reqs = mock.requests()
    assert [(r.method, r.path.split("?")[0], r.kind) for r in reqs] == [
        ("POST", "/v1/messages/count_tokens", "count_tokens"),
        ("GET", "/v1/models", "other"),
    ]
    ct = reqs[0]
    assert "context_management" not in ct.body, ct.body
    assert ct.headers["anthropic-beta"] == "token-counting-2024-11-01"


# --- the next count and the auto-compaction ---------------------------------------------------


def _boundary_run(sb, mock, s, env: dict[str, str], output_tokens: int) -> Turns:
    """Two prompts in one process; the first reply reports ``output_tokens`` (its input tokens
    are the mock's count of the prompt after the server's edits)."""
    script = [
        Step.text("Reply one. " * 20, usage={"input_tokens": 1, "output_tokens": output_tokens}),
        Step.text("Reply two."),
    ]
    cfg = MockConfig(script=script, thinking=True, binding="error", count_prompt=True)
    return run_turns(sb, mock, s, PROMPTS, cfg, model=MODEL, env=env, args=ARGS, timeout=90)


def _compacted(t: Turns) -> bool:
    return any(r.kind == "compact" for r in t.checked)


def predicted_next_count(version: str, transcript: list[dict]) -> int:
    """The engine's count before the second prompt's request: :func:`autocompact_tokens` over
    the CLI's own transcript up to the second prompt and the attachments it came with (up to
    the first request-time one, as :func:`lab.harness.appended_records`)."""
    k = next(
        i
        for i, r in enumerate(transcript)
        if r.get("type") == "user" and PROMPTS[1] in json.dumps(r.get("message"))
    )
    upto = list(transcript[: k + 1])
    for r in transcript[k + 1 :]:
        kind = (r.get("attachment") or {}).get("type")
        if r.get("type") in ("assistant", "system") or kind in REQUEST_TIME_ATTACHMENTS:
            break
        if r.get("type") == "attachment":
            upto.append(r)
    return autocompact_tokens(upto, profile_for(version))


@pytest.mark.parametrize("version", VERSIONS)
def test_clearing_moves_auto_compaction_exactly_where_the_engine_predicts(
    native_exe, mock, e2e_root, version
):
    sb = GatewaySandbox(e2e_root / f"boundary-{version}", native_exe(version))
    env = env_for(version)
    s = thinking_session(str(sb.proj), version=version, turns=4, result_chars=16000)
    sign_session(sb, mock, s, model=MODEL, env=env, args=ARGS, live=True)
    th = compute_thresholds(profile_for(version), MODEL, env)
    assert th.auto_compact_enabled, th

    probe = _boundary_run(sb, mock, s, env, 1)
    assert probe.rejected == [] and not _compacted(probe), probe.describe()
    first = probe.checked[0]
    (applied,) = first.applied_edits
    original = prompt_tokens(first.body)
    # the usage answered is the edited prompt's: lower by exactly what the server cleared
    assert first.input_tokens == original - applied["cleared_input_tokens"] < original
    transcript = [
        json.loads(x) for x in sb.session_file(s.session_id).read_text().splitlines() if x
    ]
    recorded = [
        r
        for r in transcript
        if r.get("type") == "assistant" and (r.get("message") or {}).get("id") == _reply_id(probe)
    ]
    assert recorded and all(
        r["message"]["usage"]["input_tokens"] == first.input_tokens for r in recorded
    ), recorded
    # Claude Code does not record the server's applied_edits for an edit it did not build:
    # nothing for 2.1.330's add-back to read (engine.claude_code.count.server_cleared_tokens)
    assert not any((r["message"].get("context_management") or {}) for r in recorded), recorded
    count = predicted_next_count(version, transcript)  # with output_tokens 1
    at = th.auto_compact - (count - 1)  # the output_tokens that put the count at the threshold
    assert at > 1, (count, th.auto_compact)

    below = _boundary_run(sb, mock, s, env, at - 1)
    assert below.checked[0].input_tokens == first.input_tokens, below.describe()
    assert below.run.returncode == 0 and not _compacted(below), below.describe()
    on = _boundary_run(sb, mock, s, env, at)
    assert on.run.returncode == 0 and _compacted(on), on.describe()
    assert [r.kind for r in on.checked][:2] == ["main", "compact"], on.describe()
    # without the edit the reply's usage is the whole prompt: compaction one token below
    plain = _boundary_run(sb, mock, s, {**env, ENV_DISABLE: "1"}, at - 1)
    assert CLEAR_TOOL_USES not in json.dumps(plain.checked[0].body.get("context_management"))
    assert plain.checked[0].input_tokens == original, plain.describe()
    assert _compacted(plain), plain.describe()
    # after its own compaction 2.1.330 sends back thinking bound to the replaced history: the
    # enforced check refuses it once, then it retries without (thinking_stripped); with or
    # without the edit alike, so Claude Code's, not the gateway's. 2.1.113: no 400 at all.
    statuses = [[(r.kind, r.status) for r in t.checked] for t in (on, plain)]
    assert statuses[0] == statuses[1], statuses
    if version == "2.1.113":
        assert on.rejected == [] and plain.rejected == [], statuses
    else:
        assert statuses[0] == [("main", 200), ("compact", 200), ("main", 400), ("main", 200)]
        assert all(m.missing_from == "messages.0" for r in on.rejected for m in r.mismatches)


def _reply_id(t: Turns) -> str | None:
    for line in t.run.stdout.splitlines():
        if '"type":"assistant"' in line:
            obj = json.loads(line)
            if obj.get("type") == "assistant":
                return obj["message"].get("id")
    return None
