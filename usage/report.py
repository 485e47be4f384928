"""``ctxpatch report``: every session in a projects folder, what really happened and what the
engine replays without and with ctxpatch, in tokens and dollars; beside it, where the ledger has
the session, what the API really cleared and billed.

Per session (:func:`replay_session`, a pure function of the file and the knobs, run in worker
processes): the version and main model, the main chain's requests, the compactions the file
records (auto / manual), and two of the engine's replays exactly as ``ctxpatch simulate
--compare`` runs them (``engine.replay.session.replay_session``, the code path of both: the
recorded replay decides micro-compaction, one calibration serves every scenario): ``unpatched``
and what ctxpatch installs for the session's version (:func:`with_scenario`: ``patched`` for a
``cli.js`` build, ``server_clearing`` for a native one). What is kept of a replay is numbers
only (:class:`SessionNumbers`), cached by file identity (path, size, mtime), the knobs, the
engine's own files and :data:`CACHE_SCHEME`, in the XDG cache dir; prices are applied after, so
a price file never invalidates the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.replay.knobs import Knobs
from engine.replay.model import Simulation
from usage.money import fmt_usd, one_hour_cache, price_by_model, recorded_usage, replay_usage, usd
from usage.prices import PriceTable, Usage, cost_usd

DEFAULT_PROFILE = "2.1.39"
WITHOUT = "unpatched"
WITH_SCENARIOS = ("patched", "server_clearing")  # the "with ctxpatch" replays, cli.js / native
SUFFIXES = (".jsonl", ".jsonl.xz")
# part of every cache key: bumped when what a cached entry means changes (2: the "with" replay
# follows the session's version, not always ``patched``; 3: the requests where it rewrote the
# cache and the unpatched replay did not; 4: recall's tools as the session's version sends them,
# only their names on a native build; 5: and recall's instructions)
CACHE_SCHEME = 5
DEARER_LINES = 10  # the dearer sessions the text names (the JSON has all)


def with_scenario(version: str | None) -> str:
    """The replay of what ctxpatch installs for Claude Code ``version``: ``ctxpatch apply`` patches
    a ``cli.js`` build (``patched``: the text prune and server-side clearing), a native build
    (``engine.versions.is_native``) gets server-side clearing only, through the gateway
    (``server_clearing``). A session without a version is replayed with :data:`DEFAULT_PROFILE`'s
    rules (a ``cli.js`` build), so it gets that version's scenario: the replay stays one version's
    behaviour throughout."""
    from engine.versions import is_native

    return "server_clearing" if is_native(version or DEFAULT_PROFILE) else "patched"


# --- one session --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayNumbers:
    auto_compactions: int
    tokens_sent: int
    cache_breaks: int
    cost: int  # engine units (base input tokens), as simulate --compare prints
    usage: dict[str, int]  # usage.prices.Usage as the API would bill the replay
    # a file that starts mid-conversation: the history it does not hold (tokens in its first
    # prompt), and the compactions that history forced (engine.replay.model.COMPACTION_CAUSES)
    unseen_history_tokens: int = 0
    compactions_unseen_history: int = 0


@dataclass(frozen=True)
class SessionNumbers:
    """What a report keeps of one session (numbers and ids: cacheable, no content)."""

    file: str
    session: str
    project: str
    version: str | None
    profile: str
    model: str
    requests: int
    started: str | None
    ended: str | None
    recorded_auto: list[int]  # lines of the auto compactions the file records
    recorded_manual: list[int]
    recorded_usage: dict[str, dict[str, int]]  # model -> Usage
    with_scenario: str  # the "with ctxpatch" replay (:func:`with_scenario`), a key of replays
    replays: dict[str, ReplayNumbers]  # unpatched and with_scenario
    warnings: list[str] = field(default_factory=list)
    # the requests (1 to ``replayed``, the replays' requests) where the with_scenario replay
    # rewrote the prompt cache and the unpatched one did not: ctxpatch's moves
    rewrites: list[int] = field(default_factory=list)
    replayed: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SessionNumbers:
        reps = {k: ReplayNumbers(**v) for k, v in d["replays"].items()}
        return cls(**{**d, "replays": reps})


def _stamp(tr: Any, last: bool) -> str | None:
    recs = reversed(tr.records) if last else tr.records
    for r in recs:
        t = r.get("timestamp") if isinstance(r, dict) else None
        if isinstance(t, str):
            return t
    return None


def replay_session(path: str, project: str, knobs: Knobs) -> SessionNumbers:
    """Replay one session file (a worker process runs this)."""
    from ctxpatch.errors import TranscriptError
    from engine.api.previous_thinking import main_model
    from engine.profiles import profile_for
    from engine.replay import session
    from engine.transcript import load_transcript

    tr = load_transcript(path)
    if not tr.replies:
        raise TranscriptError(
            f"transcript {path}", "it has no assistant reply with usage", "nothing to replay"
        )
    version = tr.version or DEFAULT_PROFILE
    prof = profile_for(version)
    with_ = with_scenario(tr.version)
    replayed = session.replay_session(tr, prof, (WITHOUT, with_), knobs)
    recorded, sims = replayed.recorded, replayed.simulations
    assert recorded is not None  # it decided micro-compaction
    by_name = {s.scenario: s for s in sims}
    rewrites = extra_rewrites(by_name[WITHOUT], by_name[with_])
    used = recorded_usage(tr)
    hour = one_hour_cache(used.values())
    sid = next(
        (r["sessionId"] for r in tr.records if isinstance(r.get("sessionId"), str)),
        Path(path).name.split(".")[0],
    )
    return SessionNumbers(
        file=path,
        session=sid,
        project=project,
        version=tr.version,
        profile=prof.name,
        model=main_model(r.model for r in tr.replies) or recorded.model,
        requests=len(tr.replies),
        started=_stamp(tr, False),
        ended=_stamp(tr, True),
        recorded_auto=[b.line for b in tr.boundaries if b.trigger == "auto"],
        recorded_manual=[b.line for b in tr.boundaries if b.trigger != "auto"],
        recorded_usage={m: u.as_dict() for m, u in used.items()},
        with_scenario=with_,
        replays={
            s.scenario: ReplayNumbers(
                auto_compactions=s.summary["auto_compactions"],
                tokens_sent=s.summary["tokens_sent"],
                cache_breaks=s.summary["cache_breaks"],
                cost=s.summary["cost"],
                usage=replay_usage(s, hour).as_dict(),
                unseen_history_tokens=s.summary.get("unseen_history_tokens", 0),
                compactions_unseen_history=s.summary.get("compactions_unseen_history", 0),
            )
            for s in sims
        },
        warnings=list(tr.warnings[:3]),
        rewrites=rewrites,
        replayed=len(by_name[with_].requests),
    )


def extra_rewrites(without: Simulation, with_: Simulation) -> list[int]:
    """The requests (numbered from 1) where the ``with_`` replay's prompt cache broke and the
    ``without`` one's did not (the replays send the same requests, one for one)."""
    return [
        i
        for i, (a, b) in enumerate(zip(without.requests, with_.requests, strict=False), 1)
        if b.cache_break and not a.cache_break
    ]


# --- finding the sessions -------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionFile:
    path: Path
    project: str
    size: int
    mtime_ns: int


def find_sessions(
    projects: Path, since: datetime | None = None, project: str | None = None
) -> list[SessionFile]:
    """The session files of ``projects/<project>/<session>.jsonl`` (``.jsonl.xz`` too; the
    subagents' files under ``<session>/`` are part of their session, not sessions), newest
    last; ``since``: modified since; ``project``: the project folder's name contains it."""
    out: list[SessionFile] = []
    for d in sorted(p for p in projects.iterdir() if p.is_dir()):
        if project and project.lower() not in d.name.lower():
            continue
        for f in sorted(d.iterdir()):
            if not f.name.endswith(SUFFIXES) or not f.is_file():
                continue
            st = f.stat()
            if since is not None and st.st_mtime < since.timestamp():
                continue
            out.append(SessionFile(f, d.name, st.st_size, st.st_mtime_ns))
    return sorted(out, key=lambda s: s.mtime_ns)


# --- the cache ------------------------------------------------------------------------------------


def engine_fingerprint() -> str:
    """The engine's and this package's source files (name, size, mtime): a changed model
    invalidates every cached replay."""
    import engine

    h = hashlib.sha256()
    for pkg in (Path(engine.__file__).parent, Path(__file__).parent):
        for f in sorted(pkg.rglob("*.py")):
            st = f.stat()
            h.update(f"{f.relative_to(pkg.parent)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("ctxpatch", appauthor=False)) / "report"


def cache_key(s: SessionFile, knobs: str, fingerprint: str) -> str:
    raw = f"{CACHE_SCHEME}|{s.path.resolve()}|{s.size}|{s.mtime_ns}|{knobs}|{fingerprint}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def cache_get(d: Path, key: str) -> SessionNumbers | None:
    try:
        return SessionNumbers.from_dict(json.loads((d / f"{key}.json").read_bytes()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def cache_put(d: Path, key: str, n: SessionNumbers) -> None:
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = d / f".{key}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(asdict(n), separators=(",", ":")).encode())
        os.replace(tmp, d / f"{key}.json")
    except OSError:
        pass  # a cache that cannot be written costs time, never the report


# --- the whole folder -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    file: str
    why: str


def _work(args: tuple[str, str, Knobs]) -> SessionNumbers | Skipped:
    """A worker's job: the numbers, or why not (the reason as text: an exception need not
    survive the trip back between processes). The engine's identity memos are emptied after
    each session: what they held of it would stay alive while the worker replays the next ones
    (a worker grew to 626 MB over 176 sessions instead of 80 MB, each pass over the 44 shared
    sessions slower than the one before, the collector walking all of it)."""
    from engine.identity_memo import clear_memos

    try:
        return replay_session(*args)
    except Exception as exc:
        return Skipped(args[0], _why(exc))
    finally:
        clear_memos()


def _why(exc: BaseException) -> str:
    what = getattr(exc, "what", None)
    why = getattr(exc, "why", None)
    if what and why:
        return f"{why}"
    return f"{type(exc).__name__}: {exc}"[:300]


def replay_all(
    files: Sequence[SessionFile],
    knobs: Knobs,
    jobs: int,
    use_cache: bool = True,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[SessionNumbers], list[Skipped], dict[str, int]]:
    """Every session's numbers (from the cache, else replayed in ``jobs`` processes), the files
    skipped with their reason, and counts (replayed, cached)."""
    fp = engine_fingerprint()
    cdir = cache_dir()
    done: dict[int, SessionNumbers] = {}
    skipped: list[Skipped] = []
    todo: list[int] = []
    keys = [cache_key(s, knobs.cache_key(), fp) for s in files]
    for i in range(len(files)):
        hit = cache_get(cdir, keys[i]) if use_cache else None
        if hit is not None:
            done[i] = hit
            if progress:
                progress(1)
        else:
            todo.append(i)

    def finish(i: int, result: SessionNumbers | Skipped | BaseException) -> None:
        if isinstance(result, BaseException):
            skipped.append(Skipped(str(files[i].path), _why(result)))
        elif isinstance(result, Skipped):
            skipped.append(result)
        else:
            done[i] = result
            if use_cache:
                cache_put(cdir, keys[i], result)
        if progress:
            progress(1)

    args = [(str(files[i].path), files[i].project, knobs) for i in todo]
    if jobs <= 1 or len(todo) <= 1:
        for i, a in zip(todo, args, strict=True):
            try:
                finish(i, _work(a))
            except Exception as exc:
                finish(i, exc)
    else:
        # the largest files first: a long replay started last would leave the other workers idle
        # while it runs (the results are put back in the files' order below)
        order = sorted(range(len(todo)), key=lambda k: -files[todo[k]].size)
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futs = {pool.submit(_work, args[k]): todo[k] for k in order}
            for fut in as_completed(futs):
                try:
                    finish(futs[fut], fut.result())
                except Exception as exc:
                    finish(futs[fut], exc)
    ordered = [done[i] for i in sorted(done)]
    skipped.sort(key=lambda s: s.file)
    return ordered, skipped, {"replayed": len(todo), "cached": len(files) - len(todo)}


# --- joining the ledger and pricing ---------------------------------------------------------------


@dataclass
class LedgerSums:
    requests: int = 0
    usage: Usage = field(default_factory=Usage)
    by_model: dict[str, Usage] = field(default_factory=dict)
    cleared_tool_uses: int = 0
    cleared_input_tokens: int = 0
    edits: dict[str, int] = field(default_factory=dict)


def ledger_by_session(entries: Iterable[Mapping[str, Any]]) -> dict[str, LedgerSums]:
    """The ledger's lines summed per session, both writers merged; a request seen by both (a
    patched cli.js sent through the gateway: the same ``request_id``) counts once, the
    gateway's line."""
    entries = list(entries)
    through_gateway = {
        e.get("request_id")
        for e in entries
        if e.get("src") == "gateway" and isinstance(e.get("request_id"), str)
    }
    out: dict[str, LedgerSums] = {}
    for e in entries:
        sid = e.get("session")
        if not isinstance(sid, str):
            continue
        if e.get("src") == "cli.js" and e.get("request_id") in through_gateway:
            continue
        s = out.setdefault(sid, LedgerSums())
        u = Usage(
            *(
                int(e.get(k) or 0)
                for k in ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
            )
        )
        s.requests += 1
        s.usage = s.usage + u
        model = str(e.get("model") or "")
        s.by_model[model] = s.by_model.get(model, Usage()) + u
        s.cleared_tool_uses += int(e.get("cleared_tool_uses") or 0)
        s.cleared_input_tokens += int(e.get("cleared_input_tokens") or 0)
        edit = str(e.get("edit") or "")
        s.edits[edit] = s.edits.get(edit, 0) + 1
    return out


def session_result(
    n: SessionNumbers, table: PriceTable, ledger: LedgerSums | None
) -> dict[str, Any]:
    """One session of the report (the JSON ``results`` item)."""
    real = price_by_model({m: Usage(**u) for m, u in n.recorded_usage.items()}, table)
    replays: dict[str, Any] = {}
    for name, r in n.replays.items():
        replays[name] = {
            "auto_compactions": r.auto_compactions,
            "tokens_sent": r.tokens_sent,
            "cache_breaks": r.cache_breaks,
            "cost": r.cost,
            "usage": r.usage,
            "usd": usd(cost_usd(Usage(**r.usage), n.model, table)),
        }
        if r.unseen_history_tokens:
            replays[name]["unseen_history_tokens"] = r.unseen_history_tokens
            replays[name]["compactions_unseen_history"] = r.compactions_unseen_history
    un, pa = replays.get(WITHOUT), replays.get(n.with_scenario)
    d: dict[str, Any] = {
        "session": n.session,
        "project": n.project,
        "file": n.file,
        "version": n.version,
        "profile": n.profile,
        "model": n.model,
        "requests": n.requests,
        "started": n.started,
        "ended": n.ended,
        "with_scenario": n.with_scenario,
        "recorded": {
            "auto_compactions": len(n.recorded_auto),
            "auto_compaction_lines": n.recorded_auto,
            "manual_compactions": len(n.recorded_manual),
            "usage": n.recorded_usage,
            "usd": usd(real.usd),
        },
        "replay": replays,
    }
    if un and pa:
        saved = None if un["usd"] is None or pa["usd"] is None else un["usd"] - pa["usd"]
        d["compactions_avoided"] = un["auto_compactions"] - pa["auto_compactions"]
        d["usd_saved"] = usd(saved)
        if saved is not None and saved < 0:
            d["dearer"] = {
                "usd": usd(-saved),
                "cache_rewrites": n.rewrites,
                "requests": n.replayed,
                "after_last_rewrite": n.replayed - n.rewrites[-1] if n.rewrites else None,
            }
    if real.unpriced:
        d["unpriced_models"] = list(real.unpriced)
    if ledger is not None:
        billed = price_by_model(ledger.by_model, table)
        d["ledger"] = {
            "requests": ledger.requests,
            "usage": ledger.usage.as_dict(),
            "cleared_tool_uses": ledger.cleared_tool_uses,
            "cleared_input_tokens": ledger.cleared_input_tokens,
            "edits": dict(ledger.edits),
            "usd": usd(billed.usd),
        }
    if n.warnings:
        d["warnings"] = n.warnings
    return d


def totals(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    def add(values: Iterable[float | None]) -> float | None:
        vals = list(values)
        return None if any(v is None for v in vals) else usd(sum(v for v in vals if v is not None))

    without = [r["replay"][WITHOUT] for r in results]
    with_ = [r["replay"][r["with_scenario"]] for r in results]  # each session's own
    led = [r["ledger"] for r in results if "ledger" in r]
    return {
        "sessions": len(results),
        "requests": sum(r["requests"] for r in results),
        "recorded_auto_compactions": sum(r["recorded"]["auto_compactions"] for r in results),
        "recorded_manual_compactions": sum(r["recorded"]["manual_compactions"] for r in results),
        "recorded_usd": add(r["recorded"]["usd"] for r in results),
        **{
            f"{key}_{k}": (add if k == "usd" else sum)(x[k] for x in replays)
            for key, replays in (("unpatched", without), ("with", with_))
            for k in ("auto_compactions", "tokens_sent", "usd")
        },
        "with_scenarios": {
            s: n for s in WITH_SCENARIOS if (n := sum(r["with_scenario"] == s for r in results))
        },
        "compactions_avoided": sum(r.get("compactions_avoided", 0) for r in results),
        "usd_saved": add(r.get("usd_saved") for r in results),
        "ledger_sessions": len(led),
        "ledger_requests": sum(x["requests"] for x in led),
        "ledger_cleared_tool_uses": sum(x["cleared_tool_uses"] for x in led),
        "ledger_cleared_input_tokens": sum(x["cleared_input_tokens"] for x in led),
        "ledger_usd": add(x["usd"] for x in led) if led else None,
    }


# --- text -----------------------------------------------------------------------------------------


def _unseen_notes(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """A line per session whose file starts mid-conversation: the history the replays cannot
    see or clear, and the compactions with ctxpatch it forced."""
    out = []
    for r in results:
        pa = r["replay"].get(r["with_scenario"]) or {}
        if pa.get("unseen_history_tokens"):
            out.append(
                f"{r['session'][:8]}: starts mid-conversation, {pa['unseen_history_tokens']:,} "
                f"tokens of history the file does not hold (the replay cannot clear them); "
                f"compactions with ctxpatch forced by them: {pa['compactions_unseen_history']}"
            )
    return out


def dearer_notes(results: Sequence[Mapping[str, Any]], most: int = DEARER_LINES) -> list[str]:
    """The sessions the replay with ctxpatch makes dearer, the dearest first (at most ``most``),
    each with what made it so: the cache rewrites ctxpatch's moves caused (and how close to the
    session's end the last came: a move pays back over the requests after it), or none, when
    what it added is the recall tools' definitions in every request, or the compactions it
    avoided (a compaction makes the prompts after it smaller)."""
    from engine.profiles import profile_for

    dearer = sorted(
        (r for r in results if r.get("dearer")), key=lambda r: r["dearer"]["usd"], reverse=True
    )
    out = []
    for r in dearer[:most]:
        x = r["dearer"]
        head = f"{r['session'][:8]}: {fmt_usd(x['usd'])} more"
        moves = x["cache_rewrites"]
        avoided = r.get("compactions_avoided", 0)
        if moves:
            shown = ", ".join(map(str, moves[:5])) + (", ..." if len(moves) > 5 else "")
            after = x["after_last_rewrite"]
            last = (
                "the last at its last request"
                if after == 0
                else f"the last {after} request{'s' if after != 1 else ''} before the end"
            )
            why = (
                f"{len(moves)} cache rewrite{'s' if len(moves) > 1 else ''} by its moves "
                f"(request{'s' if len(moves) > 1 else ''} {shown} of {x['requests']}), {last}"
            )
        elif avoided > 0:
            why = (
                f"no cache rewrite of its own; it avoided {avoided} "
                f"compaction{'s' if avoided > 1 else ''}, which would have made later prompts "
                "smaller"
            )
        else:
            # the replay's own rule (engine.replay.recall_tools): from 2.1.69 the names and
            # the server's instructions
            deferred = profile_for(r["profile"]).tool_search_defers_mcp
            what = "names and instructions" if deferred else "definitions"
            why = (
                f"no cache rewrite of its own: the recall tools' {what} in each of its "
                f"{x['requests']} requests"
            )
        pa = r["replay"].get(r["with_scenario"]) or {}
        if pa.get("unseen_history_tokens"):
            why += " (it starts mid-conversation: the replay cannot clear the history before it)"
        out.append(f"{head}: {why}")
    if len(dearer) > most:
        out.append(f"... and {len(dearer) - most} more (--json has each)")
    return out


def with_legend(counts: Mapping[str, int]) -> str:
    """What the "with" column means, and how many sessions got each replay."""
    from engine.versions import FIRST_NATIVE

    said = {
        "patched": f"cli.js builds (before {FIRST_NATIVE}; ctxpatch apply: text prune and "
        "server-side clearing)",
        "server_clearing": f"native builds ({FIRST_NATIVE} on; the gateway, ctxpatch run: "
        "server-side clearing only)",
    }
    parts = [f"{s} for {said[s]}: {counts.get(s, 0)}" for s in WITH_SCENARIOS]
    return "with ctxpatch = what it installs for the session's version: " + "; ".join(parts)


def render(
    results: Sequence[Mapping[str, Any]],
    tot: Mapping[str, Any],
    skipped: Sequence[Skipped],
    table: PriceTable,
) -> str:
    head = (
        "session",
        "version",
        "model",
        "req",
        "with",
        "compactions real/without/with",
        "USD real",
        "USD without",
        "USD with",
        "ledger cleared/billed",
    )
    rows = [head]
    for r in results:
        un, pa = r["replay"][WITHOUT], r["replay"][r["with_scenario"]]
        led = r.get("ledger")
        rows.append(
            (
                r["session"][:8],
                r["version"] or "?",
                (r["model"] or "?").removeprefix("claude-"),
                str(r["requests"]),
                r["with_scenario"],
                f"{r['recorded']['auto_compactions']}/{un['auto_compactions']}/{pa['auto_compactions']}",
                fmt_usd(r["recorded"]["usd"]),
                fmt_usd(un["usd"]),
                fmt_usd(pa["usd"]),
                f"{led['cleared_input_tokens']:,} tok / {fmt_usd(led['usd'])}" if led else "—",
            )
        )
    widths = [max(len(x[i]) for x in rows) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i < 3 or i == 4 else c.rjust(w)
            for i, (c, w) in enumerate(zip(x, widths, strict=True))
        ).rstrip()
        for x in rows
    ]
    lines.append("")
    lines.append(
        f"total: {tot['sessions']} sessions, {tot['requests']:,} requests; auto compactions "
        f"real {tot['recorded_auto_compactions']}, replayed without ctxpatch "
        f"{tot['unpatched_auto_compactions']}, with {tot['with_auto_compactions']} "
        f"({tot['compactions_avoided']} avoided)"
    )
    lines.append(
        f"cost: real {fmt_usd(tot['recorded_usd'])}; replayed without ctxpatch "
        f"{fmt_usd(tot['unpatched_usd'])}, with {fmt_usd(tot['with_usd'])} "
        f"(saves {fmt_usd(tot['usd_saved'])})"
    )
    if tot["ledger_sessions"]:
        lines.append(
            f"ledger: {tot['ledger_sessions']} sessions, {tot['ledger_requests']:,} requests, the "
            f"API cleared {tot['ledger_cleared_tool_uses']:,} tool uses "
            f"({tot['ledger_cleared_input_tokens']:,} input tokens), billed {fmt_usd(tot['ledger_usd'])}"
        )
    lines.append(
        f"prices: {table.date} ({table.source}); main-chain requests; replays: engine model"
    )
    lines.append(with_legend(tot["with_scenarios"]))
    lines += _unseen_notes(results)
    dearer = dearer_notes(results)
    if dearer:
        n = sum(1 for r in results if r.get("dearer"))
        lines.append("")
        lines.append(f"dearer with ctxpatch (replayed): {n} session{'s' if n > 1 else ''}")
        lines += [f"  {x}" for x in dearer]
    if skipped:
        lines.append("")
        lines.append(f"skipped {len(skipped)} file(s):")
        lines += [f"  {s.file}: {s.why}" for s in skipped]
    return "\n".join(lines)
