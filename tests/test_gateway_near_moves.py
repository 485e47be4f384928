"""The gateway's near move (gateway.policy with ``Knobs.margin``, the reply's prompt read by
gateway.reply_prompt) against its twin (engine.twins.free_moves: Conversation.observe and
free_edit's ``level``): the free-move sequences (tests/test_gateway_free_moves.py) with a prompt
told after each request, now and then past the near level: the same keep request by request,
near moves made; the knob at 0 and the free move off; through HTTP and the mock API, the reply's
usage (streamed or JSON, the ledger on or off) making the next request's keep the near move."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_gateway_free_moves import _pruned_sequence, _scenarios, marked
from test_gateway_policy import EDIT, MODEL, SERIALISE, SYSTEM, claude_code

from engine.twins.free_moves import (
    DEFAULT_MARGIN,
    Conversation,
    free_edit,
    near_level,
    near_need,
)
from engine.twins.policy import paid_edit
from engine.twins.policy_scan import system_facts
from gateway import reply_prompt
from gateway.policy import Fitter, Knobs
from gateway.toplevel import scan

LEVEL = near_level(MODEL, (), DEFAULT_MARGIN)  # 200,000 - 33,000 - 10,000
NEED = near_need(DEFAULT_MARGIN)  # a near move frees 40,000 characters or is not made
RESULT = 10_000  # the results of the growing requests below: a near move frees 4 or more
PATIENT = {"CLAUDE_CTX_CLEAR_PATIENCE": "100000"}  # the paid rule never moves on its own


def _prompt(rng: random.Random) -> int | None:
    """A reply's prompt: none said, well under the level, just under it, at it, over it."""
    return rng.choice([None, 40_000, LEVEL - 1, LEVEL, LEVEL + 5_000])


def check(seed: int, margin: int = DEFAULT_MARGIN, free: bool = True) -> tuple[int, int, int]:
    """The sequences of ``seed`` through one Fitter, each request's reply telling a prompt to
    the handle the fit gave (the gateway) and to its conversation's twin: the same keep each
    time. Returns (moves, near moves, requests whose keep the near move changed)."""
    requests, _, ceiling, patience = _scenarios(seed)
    rng = random.Random(seed)
    fitter = Fitter(Knobs("paid", 1, ceiling, patience, free, margin))
    level = near_level(MODEL, (), margin)
    twins: dict[int, Conversation] = {}
    near_changed = 0
    for n, r in enumerate(requests):
        raw = SERIALISE["javascript"](claude_code(r.messages, system=r.system))
        top = scan(raw)
        assert top is not None
        got, kept = fitter.fit(EDIT, raw, top, None, MODEL, ["context-management-2025"])
        rest, extra = system_facts(r.system)
        if free:
            twin = twins.setdefault(r.who, Conversation())
            near_before = twin.prompt is not None and level > 0 and twin.prompt >= level
            without = Conversation()  # the same memory told no prompt: the free move alone
            without.previous, without.forced, without.moved = twin.previous, twin.forced, twin.moved
            alone = free_edit(without, EDIT, r.messages, ceiling, patience, 0, rest, extra)
            need = near_need(margin)
            want = free_edit(
                twin, EDIT, r.messages, ceiling, patience, 0, rest, extra, level, need=need
            )
            near_changed += near_before and want.keep != alone.keep
        else:
            want = paid_edit(EDIT, r.messages, ceiling, patience, 0, rest, extra)
        assert got == want, (seed, n, r.who, got.keep, want.keep)
        # a handle exactly when the near move is on (every body here is walked and kept)
        assert (kept is not None) == (free and margin > 0)
        prompt = _prompt(rng)
        if prompt is not None:
            if kept is not None:
                kept.observe(prompt)
            if free:
                twins[r.who].observe(prompt)
    if free:
        assert fitter.free_moves == sum(t.moves for t in twins.values())
    return fitter.free_moves, fitter.near_moves, near_changed


SEEDS = range(16)


def test_generated_sequences_get_the_twins_keep_with_near_moves() -> None:
    """Prunes, rewinds, compactions, two conversations interleaved, and replies whose prompt
    reaches the level now and then: the twin's keep on every request, and near moves made that
    change keeps (so this test would see a gateway without them)."""
    moves = near = changed = 0
    for seed in SEEDS:
        m, n, c = check(seed)
        moves, near, changed = moves + m, near + n, changed + c
    assert near >= len(SEEDS) // 2 and changed >= near > 0 and moves > near


def test_margin_zero_never_moves_near() -> None:
    """``CLAUDE_CTX_CLEAR_MARGIN=0``: the free move alone (the twin at level 0), no handle."""
    for seed in SEEDS[:6]:
        _, near, changed = check(seed, margin=0)
        assert near == changed == 0


def test_free_off_is_the_stateless_keep() -> None:
    """``CLAUDE_CTX_CLEAR_FREE=0``: the stateless keep whatever the replies say, no handle."""
    for seed in SEEDS[:6]:
        assert check(seed, free=False) == (0, 0, 0)


def test_the_knobs_are_read_from_the_environment() -> None:
    assert Knobs.from_env({}).margin == DEFAULT_MARGIN == 10_000
    assert Knobs.from_env({"CLAUDE_CTX_CLEAR_MARGIN": "0"}).margin == 0
    assert Knobs.from_env({"CLAUDE_CTX_CLEAR_MARGIN": "12000"}).margin == 12_000
    assert Knobs.from_env({"CLAUDE_CTX_CLEAR_MARGIN": "-3"}).margin == DEFAULT_MARGIN


def _fit_seq(
    fitter: Fitter,
    lists: list[list[dict]],
    prompts: dict[int, int],
    model: str,
    betas: list[str],
    threshold: int | None = None,
) -> list[int]:
    keeps = []
    for i, m in enumerate(lists):
        raw = SERIALISE["javascript"](claude_code(m, model=model))
        top = scan(raw)
        assert top is not None
        got, kept = fitter.fit(EDIT, raw, top, None, model, betas, None, threshold)
        keeps.append(got.keep)
        if i in prompts:
            assert kept is not None
            kept.observe(prompts[i])
    return keeps


def test_the_level_is_the_models_window_and_the_prompt_is_used_once() -> None:
    """A prompt at the 200K level moves the next request (all but KEEP cleared, and held), not
    the one after (used once); under a 1M window (a ``[1m]`` model, a ``context-1m`` beta) the
    same prompt is far from its level: no move."""
    lists = _pruned_sequence(RESULT)[:7]  # seven growing requests, no break
    assert LEVEL == 157_000
    base = _fit_seq(Fitter(Knobs()), lists, {}, MODEL, [])
    keeps = _fit_seq(Fitter(Knobs()), lists, {3: LEVEL}, MODEL, [])
    assert keeps[:4] == base[:4] and keeps[4] == EDIT.keep < base[4]
    assert keeps[5:] == [EDIT.keep + 1, EDIT.keep + 2]  # the boundary held, not moved again
    # one under the level: no move
    assert _fit_seq(Fitter(Knobs()), lists, {3: LEVEL - 1}, MODEL, []) == base
    for model, betas in ((MODEL + "[1m]", []), (MODEL, ["x,context-1m-2025-08-07"])):
        wide = _fit_seq(Fitter(Knobs()), lists, {3: LEVEL}, model, betas)
        assert wide == base
        level_1m = near_level(model, betas, DEFAULT_MARGIN)
        assert level_1m == 1_000_000 - 33_000 - 10_000
        assert _fit_seq(Fitter(Knobs()), lists, {3: level_1m}, model, betas)[4] == EDIT.keep
    # a native client's own threshold (gateway.window.near_threshold) sets the level instead
    native = "claude-opus-5"
    assert near_level(native, (), DEFAULT_MARGIN, threshold=1_000_001) == 990_001
    assert near_level(native, (), DEFAULT_MARGIN, threshold=200_001) == 190_001
    assert near_level(native, (), 0, threshold=200_001) == 0  # the knob at 0: never
    assert near_level(native, (), DEFAULT_MARGIN) == LEVEL  # told none: the window's rule
    assert _fit_seq(Fitter(Knobs()), lists, {3: LEVEL}, native, [], 200_001) == base
    assert _fit_seq(Fitter(Knobs()), lists, {3: 190_001}, native, [], 200_001)[4] == EDIT.keep
    assert _fit_seq(Fitter(Knobs()), lists, {3: LEVEL}, native, [])[4] == EDIT.keep


NEW, OLD, CLI_JS = (f"claude-cli/{v} (external, cli)" for v in ("2.1.217", "2.1.150", "2.1.112"))


@pytest.mark.parametrize(
    ("agent", "model", "env", "want"),
    [
        (NEW, "claude-opus-5", {}, 1_000_001),  # natively 1M, compacts when the API refuses
        (NEW, "claude-opus-5-20261001", {}, 1_000_001),  # a dated id of the same model
        (NEW, "claude-opus-4-6", {}, 200_001),  # 200K, compacts when the API refuses
        (NEW, "claude-opus-4-6", {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000"}, 167_000),
        (NEW, "claude-opus-5", {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"}, 467_000),
        (NEW, "claude-opus-5", {"CLAUDE_CODE_DISABLE_1M_CONTEXT": "1"}, 200_001),
        (NEW, "claude-opus-5", {"DISABLE_AUTO_COMPACT": "1"}, None),  # nothing to avoid
        (OLD, "claude-opus-5", {}, 167_000),  # 2.1.150's table has no natively 1M model
        (OLD, "claude-opus-4-6", {}, 167_000),
        (CLI_JS, "claude-opus-4-6", {}, None),  # a cli.js build: the JavaScript's rule
        ("claude-cli/1.0.50 (external, cli)", "claude-opus-4-6", {}, None),
        ("my-agent/1.0", "claude-opus-5", {}, 1_000_001),  # no version: the newest profile's
        ("", "claude-sonnet-4-5", {}, 200_001),
    ],
)
def test_the_threshold_is_the_clients_builds(
    agent: str, model: str, env: dict[str, str], want: int | None
) -> None:
    """gateway.window.near_threshold: the engine's auto-compact threshold for the version the
    User-Agent names, its model and environment, for a native client; None for a cli.js one;
    a context-1m beta widens a 200K model's window as ``[1m]`` does."""
    from gateway.window import claude_env, near_threshold

    assert near_threshold(agent, model, [], claude_env(env)) == want
    if want == 200_001:
        assert near_threshold(agent, model, ["x,context-1m-2025-08-07"], claude_env(env)) == (
            1_000_001
        )


# --- the reply's prompt, read as it passes ------------------------------------------------------


class _Told:
    def __init__(self) -> None:
        self.prompts: list[int] = []

    def observe(self, prompt: int) -> None:
        self.prompts.append(prompt)


USAGE = {
    "input_tokens": 12,
    "cache_creation_input_tokens": 3_000,
    "cache_read_input_tokens": 158_000,
    "output_tokens": 1,
}


def sent_keeps(gw: Any, mock: Any, bodies: list[dict]) -> tuple[list[int], Fitter]:
    """Post ``bodies`` through the gateway ``gw`` in turn (each answered 200): the keep of the
    clearing edit the mock upstream received with each, and the gateway's fitter."""
    from test_gateway_http import HEADERS, post

    for body in bodies:
        raw = SERIALISE["javascript"](body)
        status, _, reply = post(gw.url, "/v1/messages", raw, HEADERS | {"User-Agent": CLAUDE})
        assert status == 200, reply
    sent = [r.body["context_management"]["edits"][-1]["keep"]["value"] for r in mock.requests()]
    fitter = gw.gateway.state.fitter
    assert fitter is not None
    return sent, fitter


# the client of the HTTP tests: a Claude Code build that compacts at 167,000 (the level 157,000)
CLAUDE = "claude-cli/2.1.150 (external, cli)"
SSE_HEADERS = {"Content-Type": "text/event-stream"}


def _sse(usage: object = USAGE, first: str = "", crlf: bool = False) -> bytes:
    start = {"type": "message_start", "message": {"id": "m", "content": [], "usage": usage}}
    text = (
        first
        + f"event: message_start\ndata: {json.dumps(start)}\n\n"
        + 'event: content_block_start\ndata: {"type":"content_block_start","index":0}\n\n'
        + 'event: message_delta\ndata: {"type":"message_delta","usage":{"input_tokens":1}}\n\n'
    )
    return (text.replace("\n", "\r\n") if crlf else text).encode()


def _read(chunks: list[bytes], headers: dict[str, str] = SSE_HEADERS, status: int = 200) -> list:
    told = _Told()
    r = reply_prompt.reader(told, status, headers)
    if r is not None:
        for c in chunks:
            if r.feed(c):
                break
        else:
            r.close()
    return told.prompts


def test_the_sse_prompt_is_read_whatever_the_chunking() -> None:
    """The message_start usage's input + cache write + cache read, once, however the stream is
    cut (every cut point, and byte by byte), with CRLF lines, after a ping or a comment."""
    want = [161_012]
    for body in (
        _sse(),
        _sse(crlf=True),
        _sse(first=': hi\n\nevent: ping\ndata: {"type":"ping"}\n\n'),
    ):
        assert _read([body]) == want
        for cut in range(1, len(body)):
            assert _read([body[:cut], body[cut:]]) == want, cut
        assert _read([body[i : i + 1] for i in range(len(body))]) == want


def test_no_prompt_when_the_reply_does_not_say_it() -> None:
    assert _read([_sse(usage={"output_tokens": 3})]) == []
    assert _read([_sse(usage="none")]) == []
    # another event before message_start, a start past the bound, a cut stream
    assert _read([_sse(first='event: x\ndata: {"type":"x"}\n\n')]) == []
    assert _read([b": " + b"p" * reply_prompt.MAX_HEAD + b"\n\n" + _sse()]) == []
    assert _read([_sse()[:40]]) == []
    assert _read([b'data: {"type":"message_start","message":\n\n']) == []  # not JSON
    # not 200, compressed: nothing read
    assert _read([_sse()], status=400) == []
    assert _read([_sse()], {**SSE_HEADERS, "Content-Encoding": "gzip"}) == []
    assert reply_prompt.reader(None, 200, SSE_HEADERS) is None


def test_a_json_reply_tells_its_usage() -> None:
    body = json.dumps(
        {"type": "message", "content": [{"type": "text", "text": '"usage"'}], "usage": USAGE}
    ).encode()
    headers = {"Content-Type": "application/json"}
    assert _read([body], headers) == [161_012]
    assert _read([body[:10], body[10:]], headers) == [161_012]
    # with its Content-Length: read with its last chunk, before that chunk is sent on
    told = _Told()
    sized = reply_prompt.reader(told, 200, {**headers, "Content-Length": str(len(body))})
    assert sized is not None and not sized.feed(body[:10]) and not told.prompts
    assert sized.feed(body[10:]) and told.prompts == [161_012]
    told = _Told()
    reply_prompt.observe_whole(told, 200, headers, body)
    reply_prompt.observe_whole(told, 200, SSE_HEADERS, _sse())
    reply_prompt.observe_whole(told, 529, headers, body)
    assert told.prompts == [161_012, 161_012]
    big = body[:-1] + b', "pad": "' + b"p" * reply_prompt.MAX_JSON + b'"}'
    assert _read([big], headers) == [] and reply_prompt.json_prompt(b"[1]") is None


# --- through the HTTP server --------------------------------------------------------------------


@pytest.mark.parametrize(("stream", "ledger"), [(True, False), (True, True), (False, False)])
def test_the_server_reads_the_reply_and_moves_near(
    tmp_path: Path, stream: bool, ledger: bool
) -> None:
    """Through HTTP and the mock API: the fourth reply's usage reaches the level, so the fifth
    request's keep is the near move (the twin's, told the same prompts), with the ledger on or
    off, the reply streamed or JSON; ``CLAUDE_CTX_CLEAR_MARGIN=0`` and ``CLAUDE_CTX_CLEAR_FREE=0``:
    no move."""

    from engine.twins.context_clear import knobs_from_env
    from gateway.server import ThreadedGateway
    from lab.mock import MockConfig, MockServer, Step, make_usage
    from usage.ledger import Ledger, read_ledger

    lists = _pruned_sequence(RESULT)[:7]  # seven growing requests, no break
    prompts = [40_000, 80_000, 120_000, LEVEL + 2_000, 150_000, 155_000, 158_000]
    for env in (
        PATIENT,
        PATIENT | {"CLAUDE_CTX_CLEAR_MARGIN": "0"},
        {"CLAUDE_CTX_CLEAR_FREE": "0"},
    ):
        edit = knobs_from_env(env)
        assert edit is not None
        rest, extra = system_facts(SYSTEM)
        twin = Conversation()
        margin = int(env.get("CLAUDE_CTX_CLEAR_MARGIN", DEFAULT_MARGIN))
        level, need = near_level(MODEL, (), margin), near_need(margin)
        want = []
        for m, p in zip(lists, prompts, strict=True):
            if env.get("CLAUDE_CTX_CLEAR_FREE") == "0":
                want.append(paid_edit(edit, m, rest=rest, extra=extra).keep)
            else:
                fitted = free_edit(
                    twin, edit, m, patience=100_000, rest=rest, extra=extra, level=level, need=need
                )
                want.append(fitted.keep)
                twin.observe(p)
        script = [Step.text(usage=make_usage(p + 1, output=1, cache_read=p // 2)) for p in prompts]
        book = Ledger(tmp_path / "ledger") if ledger else None
        with (
            MockServer(MockConfig(script=script)) as mock,
            ThreadedGateway(upstream=mock.base_url, env=env, ledger=book) as gw,
        ):
            bodies = [claude_code(m) | {"stream": stream} for m in lists]
            sent, fitter = sent_keeps(gw, mock, bodies)
        assert sent == want
        if book is not None:  # the ledger was on, and read the same replies
            book.close()
            entries = read_ledger(tmp_path / "ledger").entries[-len(lists) :]
            assert [e["cache_read"] for e in entries] == [p // 2 for p in prompts]
        near = 1 if env == PATIENT else 0
        assert fitter.near_moves == near == twin.moves
        if near:
            paid = paid_edit(edit, lists[4], patience=100_000, rest=rest, extra=extra).keep
            assert sent[4] == edit.keep < paid


@pytest.mark.parametrize(
    ("agent", "model", "env", "peak", "near"),
    [
        (NEW, "claude-opus-5", {}, LEVEL + 2_000, False),
        (NEW, "claude-opus-4-6", {}, LEVEL + 2_000, False),
        (NEW, "claude-opus-4-6", {}, 192_000, True),
        (
            NEW,
            "claude-opus-4-6",
            {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000"},
            LEVEL + 2_000,
            True,
        ),
        (OLD, "claude-opus-5", {}, LEVEL + 2_000, True),
        (CLI_JS, "claude-opus-4-6", {}, LEVEL + 2_000, True),
        ("", "claude-opus-5", {}, LEVEL + 2_000, False),
    ],
)
def test_the_server_takes_the_threshold_of_the_clients_build(
    agent: str, model: str, env: dict[str, str], peak: int, near: bool
) -> None:
    """Through HTTP: a reply's prompt of ``peak`` makes the next request a near move where it
    reached the client's threshold less the margin (its User-Agent's build, the gateway's
    environment): 157,000 for a build that compacts at 167,000 or a cli.js client, 190,001 for a
    2.1.195+ build that compacts only when the API refuses a 200K prompt, 990,001 for a model
    such a build runs at 1M. Before, every client got 157,000: claude-opus-5 on 2.1.217 moved
    near on every request past it (a cache rewrite each) in a window of 1,000,000."""
    from test_gateway_http import HEADERS, post

    from gateway.server import ThreadedGateway
    from lab.mock import MockConfig, MockServer, Step, make_usage

    lists = _pruned_sequence(RESULT)[:7]
    prompts = [40_000, 80_000, 120_000, peak, 150_000, 155_000, 156_000]
    script = [Step.text(usage=make_usage(p + 1, output=1, cache_read=p // 2)) for p in prompts]
    headers = HEADERS | {"User-Agent": agent} if agent else HEADERS
    with (
        MockServer(MockConfig(script=script)) as mock,
        ThreadedGateway(upstream=mock.base_url, env=PATIENT | env) as gw,
    ):
        for m in lists:
            body = SERIALISE["javascript"](claude_code(m, model=model))
            status, _, reply = post(gw.url, "/v1/messages", body, headers)
            assert status == 200, reply
        fitter = gw.gateway.state.fitter
        assert fitter is not None
        assert fitter.near_moves == int(near)


def test_a_json_reply_that_comes_whole_with_its_headers_tells_its_prompt() -> None:
    """An upstream that writes each JSON reply in one send (status, headers and body): the
    gateway reads it whole (its ``_buffered`` path) and the prompt still makes the next
    request's keep the near move."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from test_gateway_http import HEADERS, post

    from engine.twins.context_clear import knobs_from_env
    from gateway.server import ThreadedGateway

    lists = _pruned_sequence(RESULT)[:6]
    prompts = iter([40_000, 90_000, LEVEL + 1, 150_000, 155_000, 158_000])
    sent: list[dict] = []

    class Whole(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            sent.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            usage = {"input_tokens": next(prompts), "output_tokens": 1}
            body = json.dumps({"type": "message", "content": [], "usage": usage}).encode()
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            self.wfile.write(head.encode() + body)  # one send
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Whole)
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        upstream = f"http://127.0.0.1:{server.server_address[1]}"
        with ThreadedGateway(upstream=upstream, env=PATIENT, ledger=None) as gw:
            for m in lists:
                raw = SERIALISE["javascript"](claude_code(m) | {"stream": False})
                status, _, reply = post(
                    gw.url, "/v1/messages", raw, HEADERS | {"User-Agent": CLAUDE}
                )
                assert status == 200, reply
            fitter = gw.gateway.state.fitter
            assert fitter is not None
    finally:
        server.shutdown()
        server.server_close()
    edit = knobs_from_env(PATIENT)
    assert edit is not None
    rest, extra = system_facts(SYSTEM)
    twin = Conversation()
    level = near_level(MODEL, (), DEFAULT_MARGIN)
    want = []
    for m, p in zip(lists, [40_000, 90_000, LEVEL + 1, 150_000, 155_000, 158_000], strict=True):
        fitted = free_edit(twin, edit, m, 90_000, 100_000, 0, rest, extra, level, need=NEED)
        want.append(fitted.keep)
        twin.observe(p)
    assert [b["context_management"]["edits"][-1]["keep"]["value"] for b in sent] == want
    assert fitter.near_moves == twin.moves == 1 and want[3] == edit.keep


def _rewritten(msgs: list[dict], shared: int, rounds: int, texts: int, tag: str) -> list[dict]:
    """``msgs[:shared]``, then ``rounds`` tool rounds and ``texts`` text exchanges of another
    history (a rewind that went another way), marked for the cache."""
    out = list(msgs[:shared])
    for k in range(rounds):
        use = {"type": "tool_use", "id": f"{tag}{k}", "name": "Bash", "input": {"c": tag}}
        res = {"type": "tool_result", "tool_use_id": f"{tag}{k}", "content": tag * 2_000}
        out += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [res]}]
    for k in range(texts):
        out += [
            {"role": "assistant", "content": [{"type": "text", "text": f"{tag} said {k}"}]},
            {"role": "user", "content": [{"type": "text", "text": f"{tag} asks {k} " * 40}]},
        ]
    return marked(out, 1)


@pytest.mark.parametrize("other_system", [False, True])
def test_the_walk_takes_the_last_move_only_while_it_holds(other_system: bool) -> None:
    """The paid walk takes the conversation's last move as its own (Conversation.moved /
    paid_move, PolicyScan.move) exactly as the twin: a near move on a 20-round list; then the
    history rewritten after its second round, longer than the move's list but with fewer tool
    uses than the boundary (the hold ends: the walk must not take the move at its message
    again), grown; then rewritten again past that message (no move left to take). Resumed
    from the kept walk, or (``other_system``: another system prompt) walked whole."""
    from test_gateway_free_moves import SYSTEMS, _plain

    msgs = _plain(24)
    lists = [marked(msgs[: 2 * k + 1], 1) for k in range(16, 21)]
    a = _rewritten(msgs, 5, 10, 14, "a")
    lists += [a, _rewritten(msgs, 5, 10, 15, "a"), _rewritten(msgs, 5, 10, 16, "b")]
    lists.append(_rewritten(msgs, 5, 11, 16, "b"))
    prompts = {2: LEVEL}  # the near move on the fourth request (19 rounds)
    fitter = Fitter(Knobs("paid", 1, 90_000, 400))
    twin = Conversation()
    keeps, want = [], []
    for i, m in enumerate(lists):
        system = SYSTEMS[1 if other_system and i >= 5 else 0]
        raw = SERIALISE["javascript"](claude_code(m, system=system))
        top = scan(raw)
        assert top is not None
        got, kept = fitter.fit(EDIT, raw, top, None, MODEL, [])
        rest, extra = system_facts(system)
        keeps.append(got.keep)
        want.append(free_edit(twin, EDIT, m, 90_000, 400, 0, rest, extra, LEVEL, need=NEED).keep)
        assert keeps == want and fitter.free_moves == twin.moves, (i, twin.moved)
        if i in prompts:
            assert kept is not None
            kept.observe(prompts[i])
            twin.observe(prompts[i])
        if i == 3:  # the near move, handed to the walk
            assert fitter.near_moves == 1 and twin.moved == (len(m) - 1, twin.forced)
    assert fitter.resumed and (fitter.walked >= 2 if other_system else True)
