"""Differential tests: the injected JavaScript against its Python twin, under node.

node is the ground truth for JavaScript. Every generated case is run through
``_aggressiveTextPrune`` (by ``harness.mjs``) and through ``engine.twins.textprune.prune``; the
results must be identical: the same ``JSON.stringify`` text, the same "returned the input
itself" answer, and the JavaScript side must not mutate, throw or print, and must share every
unchanged message and block.

One node process serves a whole hypothesis run (``harness.mjs --serve``: one JSON document
per line), so shrinking still works and the run stays fast.

(Over 500 lines on purpose: the node server, the comparison and the case generators are one
instrument; a change of the snippet changes all three together, and the generated cases, one
strategy per rule of the prune, are half of the file.)
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import stat
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import esprima
import native_builds
import pytest
from conftest import need, patched_fixture
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from msgs import EAGER, assistant, properties, text, user

from ctxpatch.errors import CtxpatchError
from engine.javascript import js_json_stringify, js_truthy, utf16_len
from engine.twins.textprune import prune_detailed
from engine.twins.textprune_estimate import estimate_tokens
from engine.twins.textprune_shorten import MARKER

ROOT = Path(__file__).resolve().parents[2]
SNIPPET_PATH = ROOT / "patcher" / "snippets" / "text_prune.js"
HARNESS = Path(__file__).resolve().with_name("harness.mjs")
NODE = shutil.which("node")
NODE_MISSING = "node not on PATH: differential tests need it"
ENV_PREFIX = "CLAUDE_TEXT_PRUNE_"

BEGIN_MARKER = re.compile(r"/\*ctxpatch:begin\b.*?\*/", re.DOTALL)
END_MARKER = "/*ctxpatch:end*/"
DECLARATION = "function _aggressiveTextPrune("


# --------------------------------------------------------------------------- the JavaScript


def load_snippet() -> str:
    """The JavaScript under test (for now: the snippet file itself)."""
    return SNIPPET_PATH.read_text(encoding="utf-8").strip()


@functools.cache
def injected_snippet() -> str:
    """The JavaScript under test, taken out of a fixture patched by ctxpatch: what users run."""
    return snippet_in_patched(patched_fixture("s6-2.1.112.js").decode(), "s6-2.1.112.js")


def test_injected_snippet_is_the_snippet_file() -> None:
    assert injected_snippet() == load_snippet()


def load_snippet_from_patched(path: str | os.PathLike[str]) -> str:
    """The ``_aggressiveTextPrune`` declaration as injected into a patched cli.js.

    Looks inside the regions between ``/*ctxpatch:begin ...*/`` and ``/*ctxpatch:end*/`` for
    the declaration and returns it, from ``function`` to its closing brace (found with
    esprima's tokenizer, so braces in strings, regexes and comments do not confuse it).
    Raises ``ValueError`` when there is no such region or declaration.
    """
    return snippet_in_patched(Path(path).read_text(encoding="utf-8"), path)


def snippet_in_patched(source: str, path: object) -> str:
    """:func:`load_snippet_from_patched` on the text of the file ``path``."""
    position = 0
    while True:
        begin = BEGIN_MARKER.search(source, position)
        if begin is None:
            raise ValueError(f"{path}: no ctxpatch region holds {DECLARATION}...")
        end = source.find(END_MARKER, begin.end())
        if end == -1:
            raise ValueError(f"{path}: ctxpatch region at offset {begin.start()} is not closed")
        region = source[begin.end() : end]
        start = region.find(DECLARATION)
        if start != -1:
            return _function_at(region[start:], path)
        position = end + len(END_MARKER)


def _function_at(text: str, path: object) -> str:
    depth = 0
    for token in esprima.tokenize(text, {"range": True, "tolerant": True}):
        if token.type != "Punctuator":
            continue
        if token.value == "{":
            depth += 1
        elif token.value == "}":
            depth -= 1
            if depth == 0:
                return text[: token.range[1]]
    raise ValueError(f"{path}: unbalanced braces after {DECLARATION}...")


def test_snippet_is_one_es2017_function_declaration() -> None:
    source = load_snippet()
    program = esprima.parseScript(source)  # ES2017 only: raises on ?. ?? {...x} catch {}
    assert len(program.body) == 1
    declaration = program.body[0]
    assert declaration.type == "FunctionDeclaration"
    assert declaration.id.name == "_aggressiveTextPrune"
    assert [p.name for p in declaration.params] == ["messages"]
    assert source.startswith("function _aggressiveTextPrune(messages) {")
    assert source.endswith("}")
    # shown to users and run on every request: no printing, no minified one-liners
    assert "console." not in source and "process.stdout" not in source
    assert max(len(line) for line in source.splitlines()) <= 100


def test_load_snippet_from_patched(tmp_path: Path) -> None:
    snippet = load_snippet()
    patched = tmp_path / "cli.js"
    patched.write_text(
        "var a = 1; /*ctxpatch:begin call v1*/x = y;/*ctxpatch:end*/\n"
        f"/*ctxpatch:begin snippet v1 sha=abc*/{snippet}/*ctxpatch:end*/\nfunction z() {{}}\n",
        encoding="utf-8",
    )
    assert load_snippet_from_patched(patched) == snippet
    (tmp_path / "plain.js").write_text("function _aggressiveTextPrune(m) { return m; }")
    with pytest.raises(ValueError):
        load_snippet_from_patched(tmp_path / "plain.js")


# --------------------------------------------------------------------------- running node


def require_node() -> str:
    """node's path; a skip without node, but a failure on CI (where CI is set)."""
    if NODE is None:
        if "CI" in os.environ:
            pytest.fail(NODE_MISSING)
        pytest.skip(NODE_MISSING)
    return NODE


def run_once(
    cases: list[dict[str, Any]],
    snippet: str | None = None,
    *,
    node: list[str] | None = None,
    timeout: float = 120,
    **options: Any,
) -> list[dict[str, Any]]:
    """One node process for a batch of cases (the harness's one-shot mode).

    ``node`` is the command that runs node (default: node on PATH); ``options`` go into the
    document (``withoutGetBuiltinModule``: delete ``process.getBuiltinModule`` first).
    """
    command = node or [require_node()]
    document = json.dumps({"snippet": snippet or injected_snippet(), "cases": cases, **options})
    done = subprocess.run(
        [*command, str(HARNESS)],
        input=document.encode("ascii"),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return json.loads(done.stdout.decode("utf-8"))["results"]


class NodeServer:
    """``node harness.mjs --serve``: one process, one JSON line per batch of cases."""

    def __init__(self, node: str, snippet: str) -> None:
        self.snippet = snippet
        self.process = subprocess.Popen(
            [node, str(HARNESS), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def run(self, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        line = json.dumps({"snippet": self.snippet, "cases": cases}) + "\n"
        self.process.stdin.write(line.encode("ascii"))
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "node harness died: " + self.stderr()
        document = json.loads(answer.decode("utf-8"))
        assert "fatal" not in document, document.get("fatal")
        return document["results"]

    def stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read().decode("utf-8", "replace")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def node_server() -> Iterator[NodeServer]:
    server = NodeServer(require_node(), injected_snippet())
    try:
        yield server
    finally:
        server.close()


@pytest.mark.node
def test_node_accepts_the_snippet_as_module_code() -> None:
    done = subprocess.run(
        [require_node(), "--input-type=module", "--check"],
        input=load_snippet().encode("utf-8"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")


# --------------------------------------------------------------------------- comparing


def normalized(value: Any) -> Any:
    """What the value becomes in JavaScript and back (surrogate pairs joined, etc.)."""
    return json.loads(json.dumps(value))


def canonical(value: Any) -> str:
    """Order-insensitive, type-exact text of JSON data (True and 1 differ)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


def compare(case: dict[str, Any], result: dict[str, Any]) -> str:
    """Assert node and Python agree on one case; returns Python's reason."""
    messages = case["messages"]
    environ = {k: v for k, v in case["env"].items() if k != ENV_PREFIX + "DEBUG"}
    outcome = prune_detailed(messages, environ)
    context = f"env={case['env']!r} reason={outcome.reason}"
    assert outcome.reason != "error", context
    assert not result["threw"], result["error"]
    assert not result["wrote"], "the snippet wrote to stdout/stderr/console: " + context
    assert not result["mutated"], "the snippet mutated its input: " + context
    assert result["aligned"], context
    assert result["sameWhenUnchanged"], "an unchanged result must be the input array: " + context
    assert result["sharedUnchanged"], "unchanged messages/blocks must be shared: " + context
    assert result["freshChanged"], "changed messages must be new objects: " + context
    # the same data, as parsed JSON and byte for byte as JSON.stringify writes it
    assert canonical(result["output"]) == canonical(outcome.messages), context
    assert js_json_stringify(result["output"]) == js_json_stringify(outcome.messages), context
    assert result["same"] == (outcome.messages is messages), context
    return outcome.reason


def fixed_cases() -> list[dict[str, Any]]:
    long = "0123456789ABCDEF" * 3  # 48 units: at MAX_CHARS=10 pruned to 35
    convo = [user(long + "\r\nmore"), assistant([text(long)]), user([text("x" * 40)])]
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": long}}
    tool_result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [text(long)]}
    varied = [
        user("012345678😀 pair at the cut, and enough text after it to prune"),
        assistant(
            [
                text("01234567😀9 fits, and enough text after it to prune"),
                {"type": "thinking", "thinking": long, "signature": "s"},
                tool_use,
            ]
        ),
        user([tool_result]),
        assistant(
            [text("\ud83d lone high then text" * 3), {"type": "redacted_thinking", "data": long}]
        ),
        user(long, isMeta=[]),
        user(long, isCompactSummary=True),
        {"type": "system", "message": {"content": [text(long)]}},
        user([{"type": "image", "source": {"type": "base64", "data": "AAAA"}}, text(long)]),
        user([]),
        assistant(long * 2),  # assistant string content stays
        user("ab\rcdefghijklmnopqrstuvwxyz0123456789"),  # a lone CR ends the first line too
        # never made longer (MAX_CHARS=10: a shortened form is 10 + 25 units)
        assistant(
            [
                text("0123456789X"),  # just over MAX_CHARS: kept
                text("0123456789" + "X" * 25),  # the shortened form as long: kept
                text("0123456789" + "X" * 26),  # one unit shorter: pruned
                text("first\r\nsecond line that is lon"),  # as long: kept
                text("first\r\nsecond line that is long"),  # one unit shorter: pruned
            ]
        ),
        user([{**tool_result, "content": [{"type": "document", "source": {}}, text("abcdef")]}]),
        user("last"),
    ]
    cases = [
        {"env": EAGER, "messages": convo},
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_DISABLE": "1"}, "messages": convo},
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_DISABLE": "true"}, "messages": convo},
        {"env": {}, "messages": convo},
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_KEEP": " 1"}, "messages": convo},
        {"env": EAGER, "messages": varied},
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_MAX_CHARS": "1"}, "messages": varied},
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_STEP": "2"}, "messages": varied},
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_STEP": "4"}, "messages": varied},  # P = 3 -> 0
        {"env": EAGER, "messages": []},
        {"env": EAGER, "messages": [None, 3, "x", [], {}, {"type": "user", "message": None}]},
    ]
    for case in list(cases[:1] + cases[5:6]):
        est = estimate_tokens(normalized(case["messages"]))
        for delta in (-1, 0, 1):
            threshold = {"CLAUDE_TEXT_PRUNE_THRESHOLD": str(max(0, est + delta))}
            cases.append({"env": {**case["env"], **threshold}, "messages": case["messages"]})
    return normalized(cases)


@pytest.mark.node
def test_fixed_cases_one_shot() -> None:
    cases = fixed_cases()
    results = run_once(cases)
    assert len(results) == len(cases)
    reasons = Counter(compare(case, result) for case, result in zip(cases, results, strict=True))
    assert reasons["pruned"] >= 6, reasons
    assert {"disabled", "few-turns", "below-threshold", "step"} <= set(reasons), reasons
    # the exact-boundary cases: prunes at the estimate, not one token above it
    assert [r["same"] for r in results[-6:]] == [False, False, True, False, False, True]
    # idempotent in JavaScript too: pruning a pruned result gives back that very array
    again = [
        {"env": case["env"], "messages": result["output"]}
        for case, result in zip(cases, results, strict=True)
        if not result["same"]
    ]
    assert again
    for case, result in zip(again, run_once(again), strict=True):
        assert compare(case, result) != "pruned"
        assert result["same"]


def thinking_session(turns: int, rounds: int) -> list[dict[str, Any]]:
    """Claude Code's shape: one record per block, sharing message.id; thinking first."""
    long = "0123456789ABCDEF" * 3
    out: list[dict[str, Any]] = []
    serial = 0

    def reply(*blocks: dict[str, Any]) -> None:
        nonlocal serial
        serial += 1
        for block in blocks:
            out.append(assistant([block]))
            out[-1]["message"]["id"] = f"msg_{serial}"

    for t in range(turns):
        out.append(user(f"prompt {t}: {long}"))
        for r in range(rounds):
            tid = f"toolu_{t}_{r}"
            thought = (
                {"type": "redacted_thinking", "data": f"r{t}{r}"}
                if (t + r) % 3 == 0
                else {"type": "thinking", "thinking": long, "signature": f"s{t}{r}"}
            )
            reply(thought, text(long), {"type": "tool_use", "id": tid, "name": "Bash", "input": {}})
            out.append(user([{"type": "tool_result", "tool_use_id": tid, "content": long}]))
        reply({"type": "thinking", "thinking": long, "signature": f"s{t}"}, text(long))
    return out


def thinking_fixed_cases() -> list[dict[str, Any]]:
    """The thinking-safe rule: cutoff moves at a prompt, inside a round, one merged record
    (thinking and text in one message), and the 0.1.0 rule on the same lists."""
    at_prompt = [*thinking_session(5, 1), user("next prompt")]
    in_round = thinking_session(5, 2)[:-2]  # ends with a tool result
    merged = [*thinking_session(4, 1), user("and now")]
    merged[1] = assistant([*merged[1]["message"]["content"], text("x" * 40)])
    cases = []
    for messages in (at_prompt, in_round, merged):
        for extra in ({}, {"CLAUDE_TEXT_PRUNE_THINKING": "drop"}, {"CLAUDE_TEXT_PRUNE_STEP": "2"}):
            env = {k: v for k, v in EAGER.items() if k != ENV_PREFIX + "THINKING"}
            cases.append({"env": {**env, **extra}, "messages": messages})
        cases.append({"env": EAGER, "messages": messages})
    # a threshold crossed only inside the tool round: the cutoff must wait for the next prompt
    prompt = max(i for i, m in enumerate(in_round) if m["type"] == "user" and "prompt" in str(m))
    threshold = str(estimate_tokens(normalized(in_round[: prompt + 1])) + 1)
    env = {k: v for k, v in EAGER.items() if k != ENV_PREFIX + "THINKING"}
    cases.append({"env": {**env, ENV_PREFIX + "THRESHOLD": threshold}, "messages": in_round})
    # a pass that empties the thinking message pinning the edit end lets the next one shorten
    # more (typed messages after a tool result): the result is settled by a second pass
    cases.append({"env": {**env, ENV_PREFIX + "MAX_CHARS": "1"}, "messages": unsettled()})
    return normalized(cases)


def unsettled() -> list[Any]:
    """A list one pass of the thinking-safe rule does not leave at a fixed point (hypothesis's
    example, KEEP=1, STEP=1, MAX_CHARS=1, THRESHOLD=0): the pass empties the thinking-only
    message, which is left out, and a second pass then shortens the second typed text."""
    thinking = {"type": "thinking", "thinking": "", "signature": "s"}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": ""}
    long = "x" * 27
    return [user(long), assistant([thinking]), user(""), user([result]), user(long), user("")]


@pytest.mark.node
def test_thinking_fixed_cases_one_shot() -> None:
    cases = thinking_fixed_cases()
    results = run_once(cases)
    dropped = removed = 0
    for case, result in zip(cases, results, strict=True):
        compare(case, result)
        outcome = prune_detailed(case["messages"], case["env"])
        dropped += outcome.thinking_dropped
        removed += outcome.messages_removed
    assert dropped > removed > 0  # records left out, and a merged record kept without thinking


def boundary_texts(max_chars: int) -> list[tuple[str, str]]:
    """(text, what pruning must make of it) around "shortened only when that is shorter"."""
    head = "h" * max_chars  # the longest first line that is kept whole
    pad = len(MARKER)  # a shortened text is its kept first line plus these 25 units
    pairs = [
        ("h" * (max_chars + 1), "h" * (max_chars + 1)),  # just over MAX_CHARS, no newline
        (head + "t" * pad, head + "t" * pad),  # the shortened form is exactly as long
        (head + "t" * (pad + 1), head + MARKER),  # one unit shorter
        (head + "\n" + "t" * (pad - 1), head + "\n" + "t" * (pad - 1)),  # as long
        (head + "\n" + "t" * pad, head + MARKER),  # one unit shorter
        (head + "\r\n" + "t" * (pad - 2), head + "\r\n" + "t" * (pad - 2)),  # as long
        (head + "\r\n" + "t" * (pad - 1), head + MARKER),  # one unit shorter
    ]
    if max_chars < pad:  # an empty first line (the text must still be over MAX_CHARS)
        pairs += [("\r" + "t" * (pad - 1), "\r" + "t" * (pad - 1)), ("\r" + "t" * pad, MARKER)]
    if max_chars > 1:  # a surrogate pair across the cut: the kept line is one unit shorter
        cut = "h" * (max_chars - 1)
        pairs += [
            (cut + "😀" + "t" * (pad - 2), cut + "😀" + "t" * (pad - 2)),  # as long
            (cut + "😀" + "t" * (pad - 1), cut + MARKER),  # one unit shorter
        ]
    return pairs


@pytest.mark.node
def test_never_longer_boundary_in_node() -> None:
    cases = []
    expected = []
    for max_chars in (1, 2, 10, 80):
        pairs = boundary_texts(max_chars)
        messages = [
            user([text(t) for t, _ in pairs]),
            user(pairs[2][0]),  # string content of a typed message: pruned the same way
            user(pairs[1][0]),
            user("last"),
        ]
        env = {**EAGER, "CLAUDE_TEXT_PRUNE_MAX_CHARS": str(max_chars)}
        cases.append({"env": env, "messages": messages})
        expected.append([e for _, e in pairs] + [pairs[2][1], pairs[1][0]])
    cases = normalized(cases)
    results = run_once(cases)
    for case, result, want in zip(cases, results, expected, strict=True):
        assert compare(case, result) == "pruned"
        out = result["output"]
        got = [b["text"] for b in out[0]["message"]["content"]]
        got += [out[1]["message"]["content"], out[2]["message"]["content"]]
        assert got == normalized(want), case["env"]
        assert out[2] == case["messages"][2]  # kept as is: the very same message, unchanged
        blocks = case["messages"][0]["message"]["content"]
        for before, after in zip(blocks, got[: len(blocks)], strict=True):
            assert after == before["text"] or utf16_len(after) < utf16_len(before["text"])


@pytest.mark.node
def test_debug_line(tmp_path: Path) -> None:
    log = tmp_path / "prune.jsonl"
    convo = normalized(fixed_cases()[5]["messages"])
    debug = {**EAGER, "CLAUDE_TEXT_PRUNE_DEBUG": str(log)}
    cases = [
        {"env": debug, "messages": convo},  # prunes: one line
        {"env": {**debug, "CLAUDE_TEXT_PRUNE_THRESHOLD": "999999"}, "messages": convo},  # no line
        {"env": {**debug, "CLAUDE_TEXT_PRUNE_DEBUG": ""}, "messages": convo},  # off: no line
        {"env": {**debug, "CLAUDE_TEXT_PRUNE_DEBUG": str(tmp_path)}, "messages": convo},  # a dir
        {
            "env": {**debug, "CLAUDE_TEXT_PRUNE_DEBUG": str(tmp_path / "no" / "such")},
            "messages": convo,
        },
    ]
    results = run_once(cases)
    for case, result in zip(cases, results, strict=True):
        compare(case, result)  # a failing debug write changes nothing
    assert [r["same"] for r in results] == [False, True, False, False, False]
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    outcome = prune_detailed(convo, EAGER)
    assert entry["turns"] == outcome.turns
    assert entry["cutoff"] == outcome.cutoff
    assert entry["blocksPruned"] == outcome.blocks_pruned
    assert entry["messagesChanged"] == outcome.messages_changed
    assert entry["tokensBefore"] == estimate_tokens(convo)
    assert entry["tokensAfter"] == estimate_tokens(outcome.messages)
    assert not (tmp_path / "no").exists()


def node18() -> list[str]:
    """A Node 18 command (``CTXPATCH_NODE18``, else the Node 18 that ``npx node@18`` would
    install, fetched with npm pack: its tarball kept in ctxpatch's cache, never in ``~/.npm``,
    tests/native_builds.py), or a skip saying why."""
    configured = os.environ.get("CTXPATCH_NODE18")
    if configured:
        return [configured]
    need("npm", "Node 18 is fetched with npm pack (or set CTXPATCH_NODE18 to a Node 18 binary)")
    try:
        node = native_builds.node18()
    except (CtxpatchError, RuntimeError) as e:
        pytest.skip(f"cannot fetch Node 18 ({e}); set CTXPATCH_NODE18 to a Node 18 binary")
    done = subprocess.run([node, "--version"], capture_output=True, timeout=60, check=False)
    if done.returncode != 0 or not done.stdout.startswith(b"v18."):
        pytest.skip(f"{node} is not Node 18: {done.stdout!r} {done.stderr.decode()[-200:]}")
    return [str(node)]


def debug_cases(tmp_path: Path) -> tuple[list[dict[str, Any]], Path, Path]:
    log = tmp_path / "prune.jsonl"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    convo = normalized(fixed_cases()[5]["messages"])
    cases = [
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_DEBUG": str(fifo)}, "messages": convo},
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_DEBUG": str(log)}, "messages": convo},
        {"env": {**EAGER, "CLAUDE_TEXT_PRUNE_DEBUG": "/dev/null"}, "messages": convo},
    ]
    return cases, log, fifo


@pytest.mark.node
@pytest.mark.parametrize("old_node", [False, True], ids=["getBuiltinModule", "import-fallback"])
def test_debug_log_never_blocks_on_a_fifo(tmp_path: Path, old_node: bool) -> None:
    """A FIFO with no reader used to block the request loop forever (appendFileSync); now it
    is refused without blocking, and the regular file still gets its line; also with
    process.getBuiltinModule deleted, as on Node < 20.16 (the import("node:fs") fallback)."""
    cases, log, fifo = debug_cases(tmp_path)
    results = run_once(cases, timeout=30, withoutGetBuiltinModule=old_node)
    for case, result in zip(cases, results, strict=True):
        compare(case, result)
        assert not result["same"]
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["event"] == "ctxpatch.textPrune"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # left as it was


@pytest.mark.node
def test_debug_log_on_node_18(tmp_path: Path) -> None:
    """Node 18 (supported by Claude Code): ESM without require nor getBuiltinModule."""
    command = node18()
    cases, log, _ = debug_cases(tmp_path)
    results = run_once(cases, node=command, timeout=240)
    for case, result in zip(cases, results, strict=True):
        compare(case, result)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["thinking"] == "ignore"


# --------------------------------------------------------------------------- generated cases

# Crafted texts (cheap to draw): emoji and surrogate pairs around typical cut positions, lone
# surrogates, CR/LF/CRLF first lines, characters JSON escapes, already pruned texts.
PIECES = [
    "",
    " ",
    "\n",
    "\r",
    "\r\n",
    "\t",
    "é",
    "中",
    "😀",
    "👍🏽",
    "🇫🇷",
    "\ud83d",
    "\ude00",
    "\udbff",
    '"',
    "\\",
    "\x00",
    "\x1f",
    "\x7f",
    "\u2028",
    "\ufeff",
    "[earlier context pruned]",
    MARKER,
]
TEXT_POOL = sorted(  # longest first: hypothesis favours the first elements
    {
        *PIECES,
        *(
            "a" * k + tail + rest
            for k in (0, 1, 2, 4, 7, 9, 19, 79)
            for tail in ("😀😀😀", "\ud83dxyz", "\nz")
            for rest in ("", "w" * 30)  # with the rest, the cut is short enough to be used
        ),
        *("a" * k for k in (1, 3, 5, 8, 10, 11, 20, 21, 40, 80, 81, 120)),
        # a text is only shortened when first line (cut) + MARKER is shorter than the text:
        # lengths right at that boundary for each MAX_CHARS drawn below, and longer texts
        *("b" * (m + len(MARKER) + d) for m in (1, 2, 3, 5, 8, 10, 20, 80) for d in (0, 1)),
        *("c" * k + "\n" + "d" * 40 for k in (0, 3, 10, 30)),
        *("e" * k + "😀" + "f" * 60 for k in (0, 1, 4, 7, 9, 19, 79)),
        "g" * 200,
        *("j" * k for k in (150, 300, 1000)),
        *("h" * k + "\n" + "i" * 120 for k in (5, 80, 81)),
        *("a" * 79 + "😀" + "l" * k for k in (23, 24, 40)),  # at 80 the pair is not split
        "中" * 110,
        "👍🏽" * 30,
        "\ud83d" + "k" * 110,
        "```python\n" + "print('hello, world')\n" * 8 + "```",
        "Sure! Here is the plan:\r\n" + "1. a step of the plan\r\n" * 6,
        'a tab\t and a quote " and a backslash \\ ' * 4,
        "\u2028".join(["not a line break for the cut"] * 5),
        "é" * 130,
        "\ufeff" + "text after a byte order mark " * 5,
        "\x00\x1f\x7f" * 40,
        (
            "A paragraph of prose, long enough to be pruned at every MAX_CHARS drawn here: "
            "it runs on past one hundred and five UTF-16 units before its first line ends.\n"
            "Then a second line."
        ),
        "## Heading\n\n" + "Body text that goes on and on. " * 5,
        "😀" * 50,
        "first line\r\nsecond line, which is long enough to be pruned",
        "x" * 80 + "\n" + "y" * 30,
        "\n" + "z" * 30,
        "0123456789" + MARKER,
        "a" * 80 + MARKER,
    },
    key=lambda t: (-len(t), t),
)
pool_text = st.sampled_from(TEXT_POOL)
texts = st.one_of(
    pool_text,
    pool_text,
    st.tuples(pool_text, pool_text, pool_text).map("".join),
    st.text(max_size=6),
)
ids = st.sampled_from(["toolu_01", "toolu_02", "toolu_03"])
keys = st.sampled_from(["command", "path", "description", "a", "ü", "😀", "x-y", "_"])
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**9), 10**9), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=6,
)
text_blocks = st.one_of(
    st.builds(text, texts),
    st.builds(lambda t: {"type": "text", "text": t, "citations": None}, texts),
    st.builds(lambda t: {"cache_control": {"type": "ephemeral"}, "text": t, "type": "text"}, texts),
    st.sampled_from(
        [
            {"type": "text"},
            {"type": "text", "text": None},
            {"type": "text", "text": 7},
            {"type": "text", "text": ["x" * 90]},
        ]
    ),
)
media = st.sampled_from(
    [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}},
    ]
)
tool_result = st.builds(
    lambda i, c, e: {"type": "tool_result", "tool_use_id": i, "content": c, **e},
    ids,
    st.one_of(
        texts,
        st.lists(
            st.one_of(text_blocks, media, st.just({"type": "mystery"}), st.none()), max_size=3
        ),
        st.none(),
        st.just({"text": "not a list"}),
    ),
    st.sampled_from([{}, {"is_error": True}, {"is_error": False}]),
)
tool_use = st.builds(
    lambda i, n, inp: {"type": "tool_use", "id": i, "name": n, "input": inp},
    ids,
    st.sampled_from(["Bash", "Read", "Edit"]),
    json_values,
)
odd_blocks = st.one_of(
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "EqQB"}, texts),
    st.just({"type": "thinking"}),
    st.builds(lambda t: {"type": "redacted_thinking", "data": t}, texts),
    st.builds(
        lambda k, t: {"type": k, "text": t, "id": "srvtoolu_1"},
        st.sampled_from(["server_tool_use", "web_search_tool_result", "mystery", "Text"]),
        texts,
    ),
    st.sampled_from([None, 0, "a loose string", [], {}, {"type": None}, {"type": ["text"]}]),
)
user_blocks = st.lists(st.one_of(text_blocks, text_blocks, media, tool_result), max_size=4)
assistant_blocks = st.lists(st.one_of(text_blocks, text_blocks, tool_use, odd_blocks), max_size=4)
flag_values = st.sampled_from([True, False, None, 0, 1, "", "yes", [], {}])
flags = st.one_of(
    st.just({}),
    st.just({}),
    st.just({}),
    st.builds(lambda v: {"isMeta": v}, flag_values),
    st.builds(lambda v: {"isCompactSummary": v}, flag_values),
)
uuids = st.uuids().map(str)


def _msg(kind: str, content: Any, flags: dict[str, Any], uuid: str) -> dict[str, Any]:
    return {
        "parentUuid": None,
        "type": kind,
        "message": {"role": "assistant" if kind == "assistant" else "user", "content": content},
        **flags,
        "uuid": uuid,
    }


typed_user = st.builds(
    _msg,
    st.just("user"),
    st.one_of(texts, st.lists(st.one_of(text_blocks, media, tool_result), min_size=1, max_size=3)),
    st.just({}),
    uuids,
)
other_message = st.one_of(
    st.builds(
        _msg,
        st.just("assistant"),
        st.one_of(assistant_blocks, assistant_blocks, texts),
        flags,
        uuids,
    ),
    st.builds(_msg, st.just("user"), st.lists(tool_result, min_size=1, max_size=2), flags, uuids),
    st.builds(_msg, st.just("user"), st.one_of(texts, user_blocks, st.just([])), flags, uuids),
    st.builds(
        _msg,
        st.sampled_from(["system", "attachment", "progress"]),
        st.one_of(texts, user_blocks),
        flags,
        uuids,
    ),
    st.sampled_from(
        [
            {"type": "user"},
            {"type": "user", "message": None},
            {"type": "assistant", "message": "text"},
            {"type": "user", "message": {"content": None}},
            {"type": "user", "message": {"content": 12}},
            None,
            "loose",
        ]
    ),
)
# conversations: a typed user message followed by a few others, repeated
conversations = st.lists(
    st.tuples(typed_user, st.lists(other_message, max_size=3)), min_size=5, max_size=12
).map(lambda exchanges: [m for first, rest in exchanges for m in (first, *rest)])


def setting(valid: list[str]) -> st.SearchStrategy[str | None]:
    invalid = ["", "0", " 1", "1 ", "2\n", "+1", "-1", "1.0", "1e1", "0x2", "x", "٢", "1234567890"]
    return st.one_of(*[st.sampled_from(valid)] * 4, st.none(), st.sampled_from(invalid))


# weighted towards thresholds that let pruning happen (absent/invalid mean 20000: never here)
THRESHOLD_WEIGHTS = ["absent", "invalid", "huge", "at+1"] + ["zero", "small", "at-1", "at"] * 3
environments = st.fixed_dictionaries(
    {
        "KEEP": setting(["1", "1", "1", "2", "3", "4", "01", "12"]),
        "STEP": setting(["1", "1", "1", "2", "3", "4"]),
        "MAX_CHARS": setting(["5", "1", "2", "3", "8", "10", "20", "80"]),
        "DISABLE": st.sampled_from([None] * 12 + ["1", "0", "true", " 1", ""]),
        "THINKING": st.sampled_from([None] * 6 + ["ignore"] * 3 + ["drop", "Ignore", " ignore"]),
        "threshold": st.sampled_from(THRESHOLD_WEIGHTS),
        "small": st.integers(0, 100),
    }
)


def make_cases(messages: list[Any], specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One conversation under several environments (a threshold mode picks THRESHOLD)."""
    messages = normalized(messages)  # what JavaScript will see
    estimate = estimate_tokens(messages)
    cases = []
    for spec in specs:
        env = {ENV_PREFIX + k: v for k, v in spec.items() if k.isupper() and v is not None}
        threshold = {
            "absent": None,
            "zero": "0",
            "small": str(spec["small"]),
            "invalid": " 0",
            "at-1": str(max(0, estimate - 1)),
            "at": str(estimate),
            "at+1": str(estimate + 1),
            "huge": "999999999",
        }[spec["threshold"]]
        if threshold is not None:
            env[ENV_PREFIX + "THRESHOLD"] = threshold
        cases.append({"env": env, "messages": messages, "mode": spec["threshold"]})
    return cases


def long_texts(messages: list[Any], output: list[Any], cutoff: int, max_chars: int) -> Counter[str]:
    """Older prunable texts over MAX_CHARS in node's output: "kept" (shortening would not
    make them shorter) or "shortened" (then strictly shorter)."""
    seen: Counter[str] = Counter()
    for before, after in zip(messages[:cutoff], output[:cutoff], strict=True):
        if not isinstance(before, dict) or before.get("type") not in ("user", "assistant"):
            continue
        if js_truthy(before.get("isMeta")) or js_truthy(before.get("isCompactSummary")):
            continue
        if not isinstance(before.get("message"), dict):
            continue
        old, new = before["message"].get("content"), after["message"]["content"]
        if isinstance(old, str):
            pairs = [(old, new)] if before["type"] == "user" else []
        elif isinstance(old, list):
            pairs = [
                (x["text"], y["text"])
                for x, y in zip(old, new, strict=True)
                if isinstance(x, dict)
                and x.get("type") == "text"
                and isinstance(x.get("text"), str)
            ]
        else:
            pairs = []
        for x, y in pairs:
            if utf16_len(x) <= max_chars:
                continue
            if y == x:
                seen["kept"] += 1
            else:
                assert utf16_len(y) < utf16_len(x) and y.endswith(MARKER)
                seen["shortened"] += 1
    return seen


cases_strategy = st.builds(
    make_cases, conversations, st.lists(environments, min_size=4, max_size=8)
)


@pytest.mark.node
def test_generated_cases_agree_with_node(node_server: NodeServer, tmp_path: Path) -> None:
    reasons: Counter[str] = Counter()
    boundary: Counter[str] = Counter()
    texts_seen: Counter[str] = Counter()
    thinking_seen: Counter[str] = Counter()
    checked_debug_lines = 0
    log = tmp_path / "prune.jsonl"

    @properties(health=(HealthCheck.too_slow, HealthCheck.data_too_large))
    @given(cases=cases_strategy, debug=st.booleans())
    def run(cases: list[dict[str, Any]], debug: bool) -> None:
        nonlocal checked_debug_lines
        sent = [
            {
                "env": {**c["env"], **({ENV_PREFIX + "DEBUG": str(log)} if debug else {})},
                "messages": c["messages"],
            }
            for c in cases
        ]
        log.write_text("", encoding="utf-8")
        results = node_server.run(sent)
        assert len(results) == len(cases)
        pruned = []
        for case, result in zip(cases, results, strict=True):
            reason = compare(case, result)
            reasons[reason] += 1
            if case["mode"].startswith("at"):
                boundary[f"{case['mode']}:{reason}"] += 1
            if reason == "pruned":
                pruned.append(case)
                outcome = prune_detailed(case["messages"], case["env"])
                assert outcome.cutoff is not None and outcome.settings is not None
                if outcome.thinking_dropped:  # texts are counted where no block was removed
                    thinking_seen["dropped"] += 1
                    continue
                texts_seen.update(
                    long_texts(
                        case["messages"],
                        result["output"],
                        outcome.cutoff,
                        outcome.settings.max_chars,
                    )
                )
        # the debug line of every pruning call: JavaScript's own estimate, before and after
        # (written asynchronously, so in any order: compared as a multiset)
        lines = log.read_text(encoding="utf-8").splitlines()
        assert len(lines) == (len(pruned) if debug else 0)
        expected = []
        for case in pruned if debug else []:
            outcome = prune_detailed(case["messages"], case["env"])
            expected.append(
                (
                    estimate_tokens(case["messages"]),
                    estimate_tokens(outcome.messages),
                    outcome.turns,
                    outcome.cutoff,
                    outcome.blocks_pruned,
                    outcome.thinking_dropped,
                    outcome.messages_removed,
                )
            )
        got = []
        for line in lines:
            entry = json.loads(line)
            got.append(
                (
                    entry["tokensBefore"],
                    entry["tokensAfter"],
                    entry["turns"],
                    entry["cutoff"],
                    entry["blocksPruned"],
                    entry["thinkingDropped"],
                    entry["messagesRemoved"],
                )
            )
        assert sorted(got, key=repr) == sorted(expected, key=repr)
        checked_debug_lines += len(got)

    run()
    total = sum(reasons.values())
    # not vacuous: a good share prunes, and every gate is exercised
    # (the thinking-safe rule, drawn in about half the cases, prunes less often: its cutoff
    # moves only at a free request point)
    assert reasons["pruned"] >= 0.2 * total, reasons
    for reason in ("disabled", "few-turns", "step", "nothing-to-prune", "below-threshold"):
        assert reasons[reason] > 0, reasons
    # the threshold gate right at JavaScript's estimate: prunes at it, not one above it
    assert boundary["at:pruned"] > 0 and boundary["at-1:pruned"] > 0, boundary
    assert boundary["at+1:below-threshold"] > 0 and boundary["at+1:pruned"] == 0, boundary
    assert checked_debug_lines > 0
    # both sides of "shortened only when that is shorter" reach node
    assert texts_seen["kept"] > 0 and texts_seen["shortened"] > 0, texts_seen
    # the thinking-safe rule is reached too: thinking blocks left out, in node as in Python
    assert thinking_seen["dropped"] > 0, thinking_seen


# --------------------------------------------------------------------------- the test's own power

MUTANTS = [
    # the round in progress loses its thinking
    (
        "if (inForce(producedBy[d][1]).end < now.end)",
        "if (inForce(producedBy[d][1]).end <= now.end)",
    ),
    # a point inside a reply counts as a free request point
    (
        "lastFree.push(openRound || isAssistant ? lastFree[i] : i + 1);",
        "lastFree.push(openRound ? lastFree[i] : i + 1);",
    ),
    # the knob is read wrong
    ('env.CLAUDE_TEXT_PRUNE_THINKING !== "ignore"', 'env.CLAUDE_TEXT_PRUNE_THINKING !== "Ignore"'),
    # an emptied message is kept
    ("if (kept.length === 0) {", "if (kept.length === -1) {"),
    # the cutoff moves inside a tool round
    ("return editEnd(k <= first ? k : Math.max(first, lastFree[k]));", "return editEnd(k);"),
    # one pass, not settled
    ("again <= passes && last.unsettled;", "again < 0;"),
]


@pytest.mark.node
@pytest.mark.parametrize("mutant", range(len(MUTANTS)))
def test_the_generated_cases_catch_a_broken_copy(mutant: int) -> None:
    """Each deliberately broken copy of the thinking rule disagrees with the twin on a fixed
    case. (The generated cases found each of them in one run and missed the emptied-message
    one in another: a fixed case makes the catch certain.)"""
    before, after = MUTANTS[mutant]
    source = injected_snippet()
    assert source.count(before) == 1, before
    server = NodeServer(require_node(), source.replace(before, after))

    try:
        fixed = thinking_fixed_cases()
        with pytest.raises(AssertionError):
            for case, result in zip(fixed, server.run(fixed), strict=True):
                compare(case, result)
    finally:
        server.close()
