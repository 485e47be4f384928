"""Differential test: the free move of the injected clearing JavaScript (its memory of the
conversations, CLAUDE_CTX_CLEAR_FREE) against its Python twin ``engine.twins.free_moves``, under
node, over SEQUENCES of requests sent to one node process as Claude Code sends them.

Generated conversations grow by rounds and, at random, have an earlier message's text shortened
(the text prune's step), an old tool result emptied (a micro-compaction), the list cut shorter (a
rewind), a compaction (a new first message and the last few messages); every request carries
``cache_control`` on the last block of its last one or two messages (Claude Code 2.1.112 marks the
last one, 2.0.x-2.1.7 the last two; a tool_use block is marked too); two or three conversations
are interleaved (different first messages, or the same first message under different session ids
in ``metadata.user_id``); the knob is turned off now and then. Most requests get a reply (SSE or
JSON, read through the snippet's own reply path: ``watch`` and the fetch Response's clone) whose
usage reports a prompt around the near move's level (CLAUDE_CTX_CLEAR_MARGIN unset, 0, custom
or invalid; a 200K model, a ``[1m]`` one or a ``context-1m`` beta). The twin keeps one
:class:`Conversation` per conversation key (:func:`js_key`, the JavaScript's: the session id,
the first message's role, size and first 64 UTF-16 units of text), the 16 most recently used,
like the JavaScript, and tells it each reply's prompt (:meth:`Conversation.observe`) where the
JavaScript reads one (the free move on, the level above 0). Every request carries a time (ms): the
driver stubs ``Date.now`` in node (the snippet reads it once per request) and the twin is given
the same (``free_edit(now=)``); the gaps between requests are mostly short, sometimes around the
expiry move's bounds (the cache's lifetime, 5 minutes or an hour under a system prompt marked
``ttl: "1h"``, plus 10 s of slack). The keeps must be equal request by request, and free, near
and expiry moves must happen.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import injected_clearing_js, need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_conversations import conversations

from engine.twins.context_clear import ENV_FREE, ENV_MARGIN, ENV_NAMES, knobs_from_env
from engine.twins.free_moves import (
    DEFAULT_MARGIN,
    GREW,
    Conversation,
    change,
    fingerprint,
    free_edit,
    free_from_env,
    is_expired,
    is_near,
    lifetime_ms,
    margin_from_env,
    message_size,
    near_level,
    near_need,
    role_of,
)
from engine.twins.policy import ceiling_from_env, paid_edit, patience_from_env
from engine.twins.policy_scan import system_facts

# A step: [env, body, reply, now]; now: the request's time in ms, what Date.now() returns while
# the snippet builds it (null or left out: 1 ms after the previous step's); reply null (no reply read: an error, or none yet) or {kind: "sse" |
# "json", usage}: given to the snippet's watch() as the SDK's APIPromise with a fetch Response (as
# tests/patcher/test_ledger_js.py builds them), read to its end by "Claude Code" (which must read
# every byte), then one macrotask for the snippet's copy to be read.
DRIVER = r"""
import { readFileSync } from "node:fs";
const STEPS = JSON.parse(readFileSync(0, "utf8"));
const fn = SNIPPET;
let clock = 1_700_000_000_000;
Date.now = () => clock;  // the requests' times (the snippet reads Date.now() once per request)
const names = [...NAMES, "CLAUDE_CTX_CLEAR_WINDOW_GUARD", "CTXPATCH_LEDGER"];
class FakeAPIPromise extends Promise {
  constructor(response, json) { super((r) => r(null)); this.response = response; this.json = json; }
  static get [Symbol.species]() { return Promise; }
  asResponse() { return Promise.resolve(this.response); }
  parse() {
    if (!this.parsed) this.parsed = Promise.resolve().then(() => this.json ? this.response.json() : this.response.text());
    return this.parsed;
  }
  then(a, b) { return this.parse().then(a, b); }
}
function replyText(r) {
  const message = {id: "msg_1", type: "message", role: "assistant", model: "m", content: [], usage: r.usage};
  if (r.kind === "json") return JSON.stringify({...message, content: [{type: "text", text: "ok"}]});
  const events = [{type: "message_start", message}, {type: "ping"},
    {type: "content_block_start", index: 0, content_block: {type: "text", text: ""}},
    {type: "content_block_delta", index: 0, delta: {type: "text_delta", text: "ok ".repeat(2000)}},
    {type: "content_block_stop", index: 0},
    {type: "message_delta", delta: {stop_reason: "end_turn"}, usage: {output_tokens: 5}},
    {type: "message_stop"}];
  return events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
}
const out = [];
for (const [env, body, reply, now] of STEPS) {
  clock = now == null ? clock + 1 : now;
  for (const n of names) delete process.env[n];
  Object.assign(process.env, env);
  const req = JSON.parse(body);
  const frozen = JSON.stringify(req);
  const sent = fn(req);
  if (JSON.stringify(req) !== frozen) throw new Error("the input was mutated");
  out.push(sent === req ? null : sent.context_management.edits.at(-1).keep.value);
  if (reply == null) continue;  // none, or a step of two (env, body)
  const text = replyText(reply);
  const type = reply.kind === "json" ? "application/json" : "text/event-stream; charset=utf-8";
  const response = new Response(text, {status: 200, headers: {"content-type": type, "request-id": "req_1"}});
  const pending = new FakeAPIPromise(response, reply.kind === "json");
  if (fn(pending, "watch") !== pending) throw new Error("watch returned something else");
  const read = await pending;
  if ((reply.kind === "json" ? JSON.stringify(read) : read) !== text) throw new Error("the reply was changed");
  await new Promise((r) => setTimeout(r, 0));
}
const kept = fn.memory.conversations.length;
process.stdout.write(JSON.stringify({keeps: out, kept}));
"""

MARK = {"type": "ephemeral"}
SYSTEMS: list[Any] = [
    [{"type": "text", "text": "You are Claude Code. " * 200, "cache_control": MARK}],
    [
        {"type": "text", "text": "You are Claude Code.", "cache_control": MARK},
        {"type": "text", "text": "Instructions \u00e9\U0001f600 " * 300},
    ],
    [{"type": "text", "text": "You are Claude Code.", "cache_control": {**MARK, "ttl": "1h"}}],
]
OFF = ["0", "off", " FALSE ", "No"]
# CLAUDE_CTX_CLEAR_MARGIN: unset (None), the default's, custom ones, 0 (never), invalid (default)
MARGINS: list[str | None] = [None, None, "10000", "5_000", " 20000 ", "0", "abc", "-1", "999999"]
MODELS = [("claude-sonnet-4-5", []), ("claude-sonnet-4-5[1m]", [])]
MODELS += [("claude-sonnet-4-5", ["context-1m-2025-08-07", "interleaved-thinking-2025-05-14"])]
MODELS += [("claude-opus-4-5", ["interleaved-thinking-2025-05-14"])]
# around the level: just under, at, just over, well over, well under
DELTAS = [-30_000, -1_000, -1, 0, 0, 1, 2_000, 50_000]
ON = ["", "1", "on", "yes", "whatever"]
CONVERSATIONS = 16  # what the JavaScript remembers


def utf16_head(text: str, n: int) -> str:
    """JavaScript's ``text.slice(0, n)``."""
    raw = text.encode("utf-16-le", "surrogatepass")[: 2 * n]
    return raw.decode("utf-16-le", "surrogatepass")


def _role_text(role: Any) -> str:
    """``String(roleKey(role))`` in the JavaScript (an object's role: one marker)."""
    if role is None:
        return "null"
    if isinstance(role, bool):
        return "1" if role else "0"
    if isinstance(role, (str, int)):
        return str(role)
    return "\x01"


def js_key(session: str | None, messages: list[dict]) -> tuple[str, str, str, str]:
    """The JavaScript's conversation key: the session id, the first message's role and
    ``message_size``, the first 64 UTF-16 units of its first text (string content, or the first
    text block's)."""
    if not messages:
        return (session or "", "undefined", "undefined", "")
    first = messages[0]
    content = first.get("content")
    text = ""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text":
                text = b["text"] if isinstance(b.get("text"), str) else ""
                break
    return (
        session or "",
        _role_text(role_of(first)),
        str(message_size(first)),
        utf16_head(text, 64),
    )


class Twin:
    """The twin of the JavaScript's process-wide memory: a Conversation per key, LRU of 16.
    ``near``: False for a twin without the near move (the level always 0); ``need``: False for
    the near move's old rule (a move however little it frees)."""

    def __init__(self, near: bool = True, need: bool = True) -> None:
        self.conversations: OrderedDict[tuple[str, ...], Conversation] = OrderedDict()
        self.moves = 0  # free, near and expiry moves made (all conversations, evicted ones too)
        self.near_moves = 0  # moves made where the list GREW and the prompt was near, not expired
        self.expiry_moves = 0  # moves made where the list GREW and the cache expired
        self.near = near
        self.need = need

    def keep(
        self,
        env: dict[str, str],
        session: str | None,
        body: dict,
        prompt: int | None = None,
        now: int | None = None,
    ) -> int | None:
        """The keep sent (None: no edit); ``prompt``: what the reply to it reported (None: no
        reply, or a usage without a prompt); ``now``: the request's time in ms (None: unknown,
        no expiry move)."""
        edit = knobs_from_env(env)
        if edit is None:
            return None
        messages = body["messages"]
        rest, extra = system_facts(body.get("system"))
        ceiling = ceiling_from_env(env, str(body.get("model")), body.get("betas") or ())
        knobs = (ceiling, patience_from_env(env), 0, rest, extra)
        if not free_from_env(env):
            return paid_edit(edit, messages, *knobs).keep
        key = js_key(session, messages)
        conv = self.conversations.pop(key, None) or Conversation()
        self.conversations[key] = conv
        while len(self.conversations) > CONVERSATIONS:
            self.conversations.popitem(last=False)
        margin = margin_from_env(env)
        level = near_level(body["model"], body["betas"], margin) if self.near else 0
        grew = change(conv.previous, fingerprint(messages)) == GREW
        expired = grew and is_expired(conv.at, now, lifetime_ms(extra))
        near = grew and not expired and is_near(conv.prompt, level)
        before = conv.moves
        need = near_need(margin) if self.need else 0
        keep = free_edit(conv, edit, messages, *knobs, level=level, now=now, need=need).keep
        self.moves += conv.moves - before
        self.near_moves += (conv.moves - before) if near else 0
        self.expiry_moves += (conv.moves - before) if expired else 0
        if level > 0 and prompt is not None:
            conv.observe(prompt)
        return keep


def marked(messages: list[dict], last: int) -> list[dict]:
    """The list as Claude Code sends it: ``cache_control`` on the last block of the ``last``
    newest messages (a string content becomes one text block)."""
    out = list(messages)
    for i in range(max(0, len(out) - last), len(out)):
        m = out[i]
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not content or not isinstance(content[-1], dict):
            continue
        out[i] = {**m, "content": [*content[:-1], {**content[-1], "cache_control": MARK}]}
    return out


def _points(msgs: list[dict]) -> list[int]:
    """The request points of a list: a user message followed by an assistant one, and the end."""
    return [
        i
        for i in range(1, len(msgs) + 1)
        if i == len(msgs) or (msgs[i - 1]["role"] == "user" and msgs[i]["role"] == "assistant")
    ]


@dataclass
class Thread:
    """One conversation of a case: its base rounds, what Claude Code holds now, its session."""

    base: list[dict]
    session: str | None
    user_id: str | None
    marks: int
    history: list[dict] = field(default_factory=list)
    at: int = 0  # messages of ``base`` consumed
    compactions: int = 0


def _uuid(rnd: random.Random) -> str:
    h = f"{rnd.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


def _user_id(rnd: random.Random, session: str | None) -> str | None:
    if session is None:
        return None
    if rnd.random() < 0.3:  # before 2.1.x: user_<hash>_account_<uuid>_session_<uuid>
        return f"user_{'ab' * 32}_account_{_uuid(rnd)}_session_{session}"
    return json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session})


def _shorten(m: dict) -> dict | None:
    """The message with its text halved (the text prune's step), or None when it holds none."""
    content = m.get("content")
    if isinstance(content, str):
        return {**m, "content": content[: len(content) // 2]} if content else None
    if not isinstance(content, list):
        return None
    for j, b in enumerate(content):
        if isinstance(b, dict) and b.get("type") == "text" and b.get("text"):
            cut = {**b, "text": b["text"][: len(b["text"]) // 2]}
            return {**m, "content": [*content[:j], cut, *content[j + 1 :]]}
    return None


def _emptied(m: dict) -> dict | None:
    """The message with its first non-empty tool result cleared (a micro-compaction)."""
    content = m.get("content")
    if not isinstance(content, list):
        return None
    for j, b in enumerate(content):
        if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("content"):
            done = {**b, "content": "[Old tool result content cleared]"}
            return {**m, "content": [*content[:j], done, *content[j + 1 :]]}
    return None


def _grow(t: Thread) -> bool:
    ends = [p for p in _points(t.base) if p > t.at]
    if not ends:
        return False
    t.history = t.history + t.base[t.at : ends[0]]
    t.at = ends[0]
    return True


def _step(rnd: random.Random, t: Thread) -> None:
    """Move the thread on by one request: a round more, or one of Claude Code's changes."""
    roll = rnd.random()
    n = len(t.history)
    if roll < 0.12 and n > 2:  # the text prune shortens an earlier message
        for i in rnd.sample(range(n - 1), n - 1):
            new = _shorten(t.history[i])
            if new is not None and i > 0:
                t.history = [*t.history[:i], new, *t.history[i + 1 :]]
                return
    elif roll < 0.22 and n > 2:  # a micro-compaction empties an old tool result
        for i in range(n - 1):
            new = _emptied(t.history[i])
            if new is not None:
                t.history = [*t.history[:i], new, *t.history[i + 1 :]]
                return
    elif roll < 0.28 and n > 2:  # a rewind: the list cut at an earlier request point
        points = [p for p in _points(t.history) if p < n and t.history[p - 1]["role"] == "user"]
        if points:
            t.history = t.history[: rnd.choice(points)]
            return
    elif roll < 0.33 and n > 4:  # a compaction: a summary, then the last few messages
        t.compactions += 1
        tail = t.history[-rnd.choice([1, 3]) :] if t.history[-1]["role"] == "user" else []
        summary = f"Summary {t.compactions} of the conversation so far. " * rnd.randint(1, 40)
        t.history = [{"role": "user", "content": summary}, *tail]
        return
    if not _grow(t) and n > 1:
        t.history = t.history[:-1] if t.history[-1]["role"] == "assistant" else t.history


def reply(rnd: random.Random, env: dict[str, str], body: dict) -> tuple[Any, int | None]:
    """A reply to ``body`` for node (None: none read) and the prompt its usage reports (None:
    none): around the near move's level for the request's model and betas (the default margin's
    where the margin is 0), split over input, cache write and cache read, a field left out now
    and then (it counts 0), rarely no prompt at all."""
    if rnd.random() < 0.15:
        return None, None
    level = near_level(body["model"], body["betas"], margin_from_env(env) or 10_000)
    prompt = max(0, level + rnd.choice(DELTAS) + rnd.randint(-50, 50))
    read = rnd.randint(0, prompt)
    write = rnd.randint(0, prompt - read)
    usage: dict[str, Any] = {
        "input_tokens": prompt - read - write,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "output_tokens": 1,
    }
    roll = rnd.random()
    if roll < 0.1:  # a field left out: the prompt is what is there
        gone = rnd.choice(["input_tokens", "cache_creation_input_tokens"])
        prompt -= usage.pop(gone)
    elif roll < 0.13:  # no prompt at all
        usage = {"output_tokens": 1, "input_tokens": "many"}
        return {"kind": rnd.choice(["sse", "json"]), "usage": usage}, None
    return {"kind": rnd.choice(["sse", "json"]), "usage": usage}, prompt


T0 = 1_800_000_000_000  # a request's time (ms since the epoch)
# gaps between requests around the expiry move's bounds: 5 min + 10 s, 1 h + 10 s
EDGES = [299_999, 309_999, 310_000, 310_001, 400_000, 3_609_999, 3_610_000, 3_610_001, 4_000_000]


def gaps(rnd: random.Random, far: float) -> int:
    """The gap before a request: short (under a minute), or with probability ``far`` one of
    :data:`EDGES`."""
    return rnd.choice(EDGES) if rnd.random() < far else rnd.randint(0, 60_000)


def case(
    seed: int, bases: list[list[dict]], far: float = 0.3
) -> tuple[list[tuple[dict, str, Any, int]], list[Any]]:
    """The steps of one case (env, body, reply and time per request, for node) and what the
    twin needs (env, session, body, the reply's prompt, the time) per request. ``far``: how
    often a gap is one of :data:`EDGES` (the times are drawn apart from the rest, so that a
    seed makes the same conversations whatever ``far``)."""
    rnd = random.Random(seed)
    clock = random.Random(seed + 1)
    now = T0
    env: dict[str, str] = {}
    margin = rnd.choice(MARGINS)
    if margin is not None:
        env[ENV_MARGIN] = margin
    model, betas = rnd.choice(MODELS)
    if rnd.random() < 0.5:
        env["CLAUDE_CTX_CLEAR_KEEP"] = rnd.choice(["0", "1", "3"])
    if rnd.random() < 0.5:
        env["CLAUDE_CTX_CLEAR_PATIENCE"] = rnd.choice(["0", "100", "400", "100000"])
    if rnd.random() < 0.3:
        env["CLAUDE_CTX_CLEAR_CEILING"] = rnd.choice(["20000", "90000"])
    system = rnd.choice(SYSTEMS)
    threads: list[Thread] = []
    for k, base in enumerate(bases):
        session = _uuid(rnd) if rnd.random() < 0.8 else None
        if k > 0 and threads[0].session is not None and rnd.random() < 0.5:
            # the same first message under another session id
            base = [threads[0].base[0], *base[1:]]
            session = _uuid(rnd)
        else:
            base = [{"role": "user", "content": f"Task {k}: " + str(base[0]["content"])}, *base[1:]]
        t = Thread(base, session, _user_id(rnd, session), rnd.choice([1, 2]))
        _grow(t)
        threads.append(t)
    steps: list[tuple[dict, str, Any, int]] = []
    twin: list[Any] = []
    for _ in range(rnd.randint(10, 60)):
        now += gaps(clock, far)
        t = rnd.choice(threads)
        step_env = dict(env)
        free = rnd.choice(OFF) if rnd.random() < 0.1 else rnd.choice(ON)
        if free:
            step_env[ENV_FREE] = free
        step_env["CTXPATCH_LEDGER"] = rnd.choice(["0", "1"])  # the session read twice ways
        body: dict[str, Any] = {"model": model, "messages": marked(t.history, t.marks)}
        body.update({"system": system, "betas": betas, "max_tokens": 1})
        if t.user_id is not None:
            body["metadata"] = {"user_id": t.user_id}
        node_reply, prompt = reply(rnd, step_env, body)
        steps.append((step_env, json.dumps(body, ensure_ascii=False), node_reply, now))
        twin.append((step_env, t.session, body, prompt, now))
        _step(rnd, t)
    return steps, twin


_CACHE: list[str] = []


def run_node(steps: list[Any]) -> dict:
    node = need("node", "node is the ground truth for JavaScript")
    if not _CACHE:
        _CACHE.append(injected_clearing_js())
    script = DRIVER.replace("NAMES", json.dumps(ENV_NAMES)).replace("SNIPPET", _CACHE[0])
    res = subprocess.run(
        [node, "--input-type=module", "-e", script],
        input=json.dumps(steps).encode(),
        capture_output=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "CTXPATCH_"))},
            "XDG_STATE_HOME": "/nonexistent-ctxpatch-test",  # no ledger line is written anyway
        },
        timeout=120,
    )
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)


def twin_keeps(twin_steps: list[Any], twin: Twin | None = None) -> tuple[list[int | None], Twin]:
    twin = twin or Twin()
    return [twin.keep(*step) for step in twin_steps], twin


_BASES = st.lists(conversations(), min_size=1, max_size=3)


@pytest.mark.node
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), bases=_BASES)
def test_the_javascript_remembers_the_conversations_as_the_twin_does(seed, bases) -> None:
    steps, twin_steps = case(seed, bases)
    got = run_node(steps)
    want, twin = twin_keeps(twin_steps)
    assert got["keeps"] == want
    assert got["kept"] == len(twin.conversations)


def _base(rounds: int, result: int = 3_000) -> list[dict]:
    msgs: list[dict] = [{"role": "user", "content": "Fix the tests, please."}]
    for k in range(rounds):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"p": "f" * 40}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * result}
        msgs.append(
            {"role": "assistant", "content": [{"type": "text", "text": "Let me see."}, use]}
        )
        msgs.append({"role": "user", "content": [res]})
        if k % 4 == 3:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": "Done that."}]})
            msgs.append({"role": "user", "content": [{"type": "text", "text": "Go on " * 30}]})
    return msgs


@pytest.mark.node
def test_free_moves_happen_and_the_javascript_makes_the_same() -> None:
    """Fixed seeds over long conversations: the JavaScript's keeps equal the twin's request by
    request, the twin made free moves, and they changed what was sent (the stateless rule's
    keeps differ on some requests): the free move is there, and the test can fail. Near moves
    too (moves where the list grew), and without them (a twin whose level is always 0) the keeps
    differ on some requests; near moves that free less than the margin are not made (the old
    rule, which made them, keeps less on some requests). Expiry moves too (moves where the list
    grew and the cache had expired), and without them (the twin told no time) the keeps differ
    on some requests."""
    steps: list[Any] = []
    twin_steps: list[Any] = []
    for seed in range(20):
        rnd = random.Random(seed)
        sizes = [500, 3_000, 9_000, 60_000]
        bases = [_base(rnd.randint(10, 30), rnd.choice(sizes)) for _ in range(3)]
        s, t = case(seed, bases, far=0.15)
        steps += s
        twin_steps += t
    got = run_node(steps)
    want, twin = twin_keeps(twin_steps)
    assert got["keeps"] == want
    assert twin.moves >= 10, twin.moves
    assert twin.near_moves >= 5, twin.near_moves
    assert twin.expiry_moves >= 10, twin.expiry_moves
    far, _ = twin_keeps(twin_steps, Twin(near=False))
    assert sum(1 for a, b in zip(got["keeps"], far, strict=True) if a != b) >= 5
    # near moves that would have freed less than the margin were not made
    greedy, old = twin_keeps(twin_steps, Twin(need=False))
    assert old.near_moves >= twin.near_moves + 20, (old.near_moves, twin.near_moves)
    assert sum(1 for a, b in zip(got["keeps"], greedy, strict=True) if a != b) >= 20
    timeless, _ = twin_keeps([step[:4] for step in twin_steps])
    assert sum(1 for a, b in zip(got["keeps"], timeless, strict=True) if a != b) >= 10
    stateless = []
    for env, _session, body, _prompt, _now in twin_steps:
        edit = knobs_from_env(env)
        assert edit is not None
        rest, extra = system_facts(body.get("system"))
        ceiling = ceiling_from_env(env, str(body.get("model")), body.get("betas") or ())
        knobs = (ceiling, patience_from_env(env), 0, rest, extra)
        stateless.append(paid_edit(edit, body["messages"], *knobs).keep)
    lower = sum(1 for a, b in zip(got["keeps"], stateless, strict=True) if a < b)
    assert lower >= 10, lower
    # (not all lower: after a move the walk restarts its rent, and may then move later than the
    # stateless rule would: engine.twins.policy.paid_boundary's moved)
    assert any(a > b for a, b in zip(got["keeps"], stateless, strict=True))


def _body(messages: list[dict], session: str | None = None) -> str:
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "messages": marked(messages, 2)}
    body.update({"system": SYSTEMS[0], "betas": [], "max_tokens": 1})
    if session is not None:
        body["metadata"] = {"user_id": json.dumps({"session_id": session})}
    return json.dumps(body)


PATIENT = {"CLAUDE_CTX_CLEAR_PATIENCE": "100000"}  # the paid rule never moves on its own


def _pruned(msgs: list[dict]) -> list[dict]:
    new = _shorten(msgs[1])  # the first answer's text
    assert new is not None
    return [msgs[0], new, *msgs[2:]]


@pytest.mark.node
def test_a_near_move_frees_at_least_the_margin() -> None:
    """Every reply reports a prompt past the near level, the paid rule never moves on its own,
    each round adds one result of 4,000 characters: a near move waits until what it clears
    beyond the boundary held reaches the margin (10,000 tokens of 4 characters), then clears it
    all in one rewrite. The old rule moved on every request, one result at a time (a rewrite of
    the whole prompt each). The JavaScript and the twin agree on both."""
    level = near_level("claude-sonnet-4-5", [], DEFAULT_MARGIN)
    steps: list[Any] = []
    twin_steps: list[Any] = []
    for n in range(1, 41):
        body = _body(_base(n, 4_000))
        usage = {"input_tokens": 7, "cache_read_input_tokens": level - 7 + 500}
        steps.append((PATIENT, body, {"kind": "json", "usage": usage}, T0 + 1_000 * n))
        twin_steps.append((PATIENT, None, json.loads(body), level + 500, T0 + 1_000 * n))
    got = run_node(steps)
    want, twin = twin_keeps(twin_steps)
    assert got["keeps"] == want
    cleared = [n - keep for n, keep in zip(range(1, 41), want, strict=True)]
    moves = [b - a for a, b in itertools.pairwise(cleared) if b != a]
    assert twin.near_moves == len(moves) >= 3
    assert all(m >= 10 for m in moves), moves  # 10 results of 4,000 and their inputs: 40,000
    greedy, old = twin_keeps(twin_steps, Twin(need=False))
    assert greedy[1:] == [1] * 39 and old.near_moves == 39
    old_steps = [({**env, ENV_MARGIN: "0"}, *rest) for env, *rest in steps]
    assert run_node(old_steps)["keeps"] == [n for n in range(1, 41)]  # no near move at all


@pytest.mark.node
@pytest.mark.parametrize("others", [15, 16])
def test_the_16_most_recent_conversations_are_remembered(others: int) -> None:
    """A conversation of 12 tool uses, then ``others`` other conversations, then the first one
    with an earlier message shortened: remembered (15 others), the edit clears all but KEEP (1);
    forgotten (16 others: the 17th most recent), it is a new conversation and the paid rule's
    keep (all 12: it never moves at this patience) goes."""
    msgs = _base(12)
    steps = [(PATIENT, _body(msgs))]
    steps += [(PATIENT, _body([{"role": "user", "content": f"Other {k}"}])) for k in range(others)]
    steps.append((PATIENT, _body(_pruned(msgs))))
    got = run_node(steps)
    assert got["keeps"][-1] == (1 if others == 15 else 12)
    assert got["kept"] == 16
    want, _ = twin_keeps([(env, None, json.loads(b)) for env, b in steps])
    assert got["keeps"] == want


@pytest.mark.node
def test_the_session_id_tells_two_conversations_with_the_same_first_message() -> None:
    """Two sessions of the same task: the second one's shorter list is not the first one
    rewound (no free move: the paid keep, all 10 tool uses), while within one session it is
    (all but KEEP 1 and the round in progress, 1 result, are cleared: 1 kept)."""
    a, b = _uuid(random.Random(1)), _uuid(random.Random(2))
    msgs = _base(12)
    steps = [
        (PATIENT, _body(msgs, a)),
        (PATIENT, _body(_pruned(msgs)[:-6], b)),  # another session: new, the paid keep
        (PATIENT, _body(_pruned(msgs)[:-6], a)),  # the same session, rewound and pruned
    ]
    got = run_node(steps)
    assert got["keeps"] == [12, 10, 1]
    off = [({**env, ENV_FREE: "off"}, body) for env, body in steps]
    assert run_node(off)["keeps"] == [12, 10, 10]


@pytest.mark.node
def test_odd_messages_never_break_the_memory() -> None:
    """Roles that are not strings (the twin compares them with Python's ``==``: True is 1),
    content that is neither a string nor blocks, a marked block of an unknown kind: the keeps
    are the twin's and the edit is still sent."""
    use = {"type": "tool_use", "id": "t0", "name": "Read", "input": {}}
    res = {"type": "tool_result", "tool_use_id": "t0", "content": "r" * 900}
    odd = [
        {"role": True, "content": None},
        {"role": "assistant", "content": [use, {"type": "custom", "cache_control": MARK}]},
        {"role": "user", "content": [res]},
        {"role": 1, "content": 7},
        {"role": None, "content": [{"type": "text", "text": "x" * 99}]},
        {"role": {"k": 1}, "content": "y"},
        {"role": "assistant", "content": [{**use, "id": "t1"}]},
        {"role": "user", "content": [{**res, "tool_use_id": "t1"}]},
    ]
    steps: list[tuple[dict, str]] = []
    # 8 twice: the same list (an object role included) grew by nothing; 3: another list of the
    # same conversation, shorter (a break); 7: a rewind, 2 uses, none of the round in progress
    for n in (8, 8, 3, 6, 8, 7, 8):
        steps.append((PATIENT, _body(odd[:n])))
    steps.append((PATIENT, _body([{**odd[0], "role": 1}, *odd[1:]])))  # True == 1: the same
    got = run_node(steps)
    want, twin = twin_keeps([(env, None, json.loads(b)) for env, b in steps])
    assert got["keeps"] == want
    assert got["keeps"][:2] == [2, 2]  # no break: the object roles are equal
    assert all(isinstance(k, int) for k in got["keeps"])
    assert twin.moves >= 1


# --- the expiry move: the cache's lifetime -------------------------------------------------------


def _rounds(n: int) -> list[dict]:
    """A conversation whose lists end at its request points: the k-th list holds k tool uses
    (the last one's result the round in progress)."""
    msgs: list[dict] = [{"role": "user", "content": "Fix the tests, please."}]
    for k in range(n):
        use = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"p": "f" * 40}}
        res = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "r" * 3_000}
        msgs += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [res]}]
    return msgs


def _timed(
    requests: list[tuple[int, str | None, int, int]], env: dict[str, str] = PATIENT
) -> tuple[list[Any], list[Any]]:
    """Steps for node and the twin: per request (its time after :data:`T0` in ms, its session,
    its tool uses, the system prompt's index in :data:`SYSTEMS`)."""
    steps: list[Any] = []
    twin: list[Any] = []
    for at, session, uses, system in requests:
        body = json.loads(_body(_rounds(uses), session))
        body["system"] = SYSTEMS[system]
        steps.append((env, json.dumps(body), None, T0 + at))
        twin.append((env, session, body, None, T0 + at))
    return steps, twin


FIVE, HOUR = 300_000 + 10_000, 3_600_000 + 10_000  # the lifetimes with the slack


@pytest.mark.node
@pytest.mark.parametrize(
    ("system", "gap", "moves"),
    [
        (0, FIVE - 1, False),
        (0, FIVE, False),  # "more than": the bound itself is not past
        (0, FIVE + 1, True),
        (1, FIVE + 1, True),  # marked without a ttl: 5 minutes
        (2, FIVE + 1, False),  # ttl "1h": an hour
        (2, HOUR, False),
        (2, HOUR + 1, True),
    ],
)
def test_a_request_after_the_cache_expired_clears_all_it_may(
    system: int, gap: int, moves: bool
) -> None:
    """Two requests of one conversation, the list grown by a round: the paid rule alone keeps
    all 12 tool uses at this patience, and the second request keeps all 13 unless it comes more
    than the cache's lifetime plus 10 s after the first one (then KEEP 1: the last tool use,
    whose result is the round in progress)."""
    steps, twin = _timed([(0, None, 12, system), (gap, None, 13, system)])
    got = run_node(steps)
    want, t = twin_keeps(twin)
    assert got["keeps"] == want
    assert got["keeps"] == [12, 1 if moves else 13]
    assert t.expiry_moves == int(moves)


@pytest.mark.node
def test_each_conversation_keeps_its_own_time() -> None:
    """Two interleaved conversations (sessions a and b): one's requests never refresh the
    other's time; every request refreshes its own (a new one's first too), so gaps under the
    lifetime that add up past it move nothing; a move holds its boundary (later lists keep 1
    + the tool uses since)."""
    a, b = _uuid(random.Random(1)), _uuid(random.Random(2))
    requests = [
        (0, a, 10, 0),  # new: never moves
        (1, b, 10, 0),  # new: a's request did not make b's
        (200_000, a, 11, 0),  # 200 s: warm
        (FIVE + 2, b, 11, 0),  # b's gap from 1 ms: FIVE + 1, expired though a asked at 200 s
        (400_000, a, 12, 0),  # a: 200 s since its last one
        (400_001, b, 12, 0),  # b: 90 s, the boundary held (10 cleared of 12)
        (600_000, a, 13, 0),  # a: 200 s again (600 s since its first): warm
        (600_000 + FIVE + 1, a, 14, 0),  # expired
        (700_000 + FIVE, a, 15, 0),  # 100 s after: the boundary held
    ]
    steps, twin = _timed(requests)
    got = run_node(steps)
    want, t = twin_keeps(twin)
    assert got["keeps"] == want
    assert got["keeps"] == [10, 10, 11, 1, 12, 2, 13, 1, 2]
    assert t.expiry_moves == 2 and got["kept"] == 2
    # FREE=0: no memory, no expiry move (the paid rule's keeps); and the memory is not told
    # the times of the requests sent with it off
    off = {**PATIENT, ENV_FREE: "0"}
    steps_off, twin_off = _timed(requests, off)
    got_off = run_node(steps_off)
    assert got_off["keeps"] == twin_keeps(twin_off)[0] == [10, 10, 11, 11, 12, 12, 13, 14, 15]
    assert got_off["kept"] == 0
    mixed = [steps[0], steps_off[2], (PATIENT, *steps[4][1:])]  # a at 0, off at 200 s, on at 400 s
    assert run_node(mixed)["keeps"] == [10, 11, 1]  # 400 s since the memory's last request
    assert twin_keeps([twin[0], twin_off[2], (PATIENT, *twin[4][1:])])[0] == [10, 11, 1]
