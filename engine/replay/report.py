"""Human-readable renderings of thresholds and simulations (strings; the CLI prints them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ctxpatch.errors import PlotUnavailable  # the one error module (README "Layout")
from engine.claude_code.thresholds import Thresholds
from engine.replay.model import Simulation


def _n(v) -> str:
    return "—" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


def _auto_compact(t: Thresholds) -> str:
    if not t.auto_compact_enabled:
        return _n(t.auto_compact) + " (disabled)"
    if t.reactive:  # no proactive threshold: compaction once the prompt passes the window
        return f"over {_n(t.context_window)} (reactive)"
    return _n(t.auto_compact)


def render_thresholds(items: Sequence[tuple[str, Thresholds]]) -> str:
    rows = [
        ("profile (era)", lambda t: t.profile),
        ("model", lambda t: t.model),
        ("context window", lambda t: _n(t.context_window)),
        ("reserved output", lambda t: _n(t.reserved_output)),
        ("effective window", lambda t: _n(t.effective_window)),
        ("auto-compact at", _auto_compact),
        ("warning / error", lambda t: f"{_n(t.warning)} / {_n(t.error)}"),
        ("blocking", lambda t: _n(t.blocking)),
        ("micro-compaction", lambda t: t.microcompact.split(" (")[0]),
    ]
    head = ["", *(v for v, _ in items)]
    table = [head] + [[label, *(f(t) for _, t in items)] for label, f in rows]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(head))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in table
    ]
    for v, t in items:
        lines.append("")
        lines.append(f"why ({v}):")
        lines += [f"  - {x}" for x in t.explain]
    return "\n".join(lines)


def render_simulation(sim: Simulation, all_requests: bool = False) -> str:
    t = sim.thresholds
    out = [
        f"scenario {sim.scenario}  profile {sim.profile.name} ({sim.profile.range})  "
        f"model {sim.model}",
        f"thresholds: auto-compact {_auto_compact(t) if t.auto_compact_enabled else 'off'}"
        f"  warning {_n(t.warning)}  blocking {_n(t.blocking)}",
        "",
    ]
    head = ("#", "line", "count", "sent", "output", "cache", "events")
    rows = [head]
    for r in sim.requests:
        if not all_requests and not r.events and not r.cache_break:
            continue
        rows.append(
            (
                str(r.index),
                str(r.line),
                _n(r.tokens),
                _n(r.prompt_tokens),
                _n(r.output_tokens) + ("~" if r.output_estimated else ""),
                "break" if r.cache_break else "",
                ",".join(r.events),
            )
        )
    widths = [max(len(x[i]) for x in rows) for i in range(len(head))]
    out += [
        "  ".join(
            c.rjust(w) if i < 5 else c.ljust(w)
            for i, (c, w) in enumerate(zip(x, widths, strict=False))
        ).rstrip()
        for x in rows
    ]
    if not all_requests:
        out.append("(requests without events hidden; --all-requests shows them)")
    out.append("")
    out.append("events:")
    for e in sim.events:
        bits = [f"{e.kind} at line {e.line}", f"count {_n(e.tokens)}"]
        if e.threshold is not None:
            bits.append(f"threshold {_n(e.threshold)}")
        if e.pre_tokens is not None:
            diff = (e.tokens - e.pre_tokens) / e.pre_tokens * 100 if e.pre_tokens else 0.0
            bits.append(f"recorded preTokens {_n(e.pre_tokens)} ({diff:+.2f}%)")
        if e.saved_tokens is not None:
            bits.append(f"saves {_n(e.saved_tokens)}")
        if e.recorded is not None:
            bits.append("recorded" if e.recorded else "not recorded")
        if e.cause is not None:
            bits.append(
                f"cause {e.cause} (unseen history {_n(e.unseen_tokens)}, "
                f"count with all clearable cleared {_n(e.floor_tokens)})"
            )
        out.append("  " + ", ".join(bits) + (f" — {e.note}" if e.note else ""))
    if not sim.events:
        out.append("  none")
    out.append("")
    out.append("summary: " + ", ".join(f"{k} {_n(v)}" for k, v in sim.summary.items()))
    return "\n".join(out)


def compare_summary(base: Simulation, other: Simulation) -> dict:
    """``other`` against ``base``: compactions avoided, tokens and cost saved, cache breaks."""
    a, b = base.summary, other.summary

    def pct(x: int, y: int) -> float:
        return round((x - y) / x * 100, 2) if x else 0.0

    return {
        "compactions_avoided": a["auto_compactions"] - b["auto_compactions"],
        "tokens_saved": a["tokens_sent"] - b["tokens_sent"],
        "tokens_saved_pct": pct(a["tokens_sent"], b["tokens_sent"]),
        "extra_cache_breaks": b["cache_breaks"] - a["cache_breaks"],
        "cost_saved": a["cost"] - b["cost"],
        "cost_saved_pct": pct(a["cost"], b["cost"]),
    }


# summary rows that compare a replay with the recorded session: meaningful for ``unpatched`` only
_RECORDED_ROWS = ("recorded_auto_compactions", "matched_auto_compactions")


def _cell(sim: Simulation, key: str) -> str:
    if sim.scenario not in ("recorded", "unpatched") and key in _RECORDED_ROWS:
        return "—"
    return _n(sim.summary.get(key))  # the unseen-history rows: not in a recorded replay


def render_compare(sims: Sequence[Simulation]) -> str:
    """The summaries side by side, then each scenario against the first (``unpatched``)."""
    from engine.api.prompt_cache import FORMULA

    base = sims[0]
    keys = list(base.summary)
    w = max(len(k) for k in keys)
    cols = [max(14, len(s.scenario)) for s in sims]
    lines = [f"{'':{w}}" + "".join(f"  {s.scenario:>{c}}" for s, c in zip(sims, cols, strict=True))]
    lines += [
        f"{k:{w}}" + "".join(f"  {_cell(s, k):>{c}}" for s, c in zip(sims, cols, strict=True))
        for k in keys
    ]
    if any(s.scenario not in ("recorded", "unpatched") for s in sims):
        lines.append(
            "(—: recorded/matched compactions compare a replay with the recorded session; "
            "the patched runs have no recorded counterpart)"
        )
    lines.append("")
    for other in sims[1:]:
        d = compare_summary(base, other)
        lines.append(
            f"{other.scenario} vs {base.scenario}: {d['compactions_avoided']} compactions "
            f"avoided, {d['tokens_saved']:,} tokens saved ({d['tokens_saved_pct']}%), "
            f"{d['extra_cache_breaks']:+d} cache breaks, cost {-d['cost_saved_pct']:+.2f}%"
        )
    for s in sims:
        forced = s.summary.get("compactions_unseen_history")
        if forced:
            lines.append(
                f"{s.scenario}: {forced} compaction{'s' if forced > 1 else ''} forced by the "
                f"{s.summary['unseen_history_tokens']:,} tokens of history the file does not hold "
                "(it starts mid-conversation): with every tool use it shows cleared the count "
                "still reaches the threshold (events: cause unseen_history)"
            )
    lines.append(f"({FORMULA}; prompts only)")
    return "\n".join(lines)


def tokens_label(v: float) -> str:
    """An axis number as people read it: 167K, 1.2M."""
    if abs(v) >= 1e6:
        return f"{v / 1e6:.1f}M".replace(".0M", "M")
    if abs(v) >= 1e3:
        return f"{v / 1e3:.0f}K"
    return f"{v:g}"


def plot_simulations(sims: Sequence[Simulation], path: str | Path) -> list[str]:
    """Tokens per request for each scenario, with the threshold lines (needs matplotlib).

    A line identical to an earlier one would hide under it: it is drawn dashed, labelled
    "same as ...", and the returned notes say so (print them)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotUnavailable(
            f"--plot {path} needs matplotlib",
            why="matplotlib is not installed",
            hint="pip install 'ctxpatch[plot]', or leave out --plot",
        ) from e
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(10, 5))
    notes: list[str] = []
    drawn: list[tuple[list[int], str]] = []
    for s in sims:
        ys = [r.prompt_tokens for r in s.requests]
        same = next((name for prev, name in drawn if prev == ys), None)
        label = f"{s.scenario} (sent)" + (f", same as {same}" if same else "")
        if same:
            notes.append(
                f"the {s.scenario} and {same} lines coincide (identical prompt sizes): "
                f"{s.scenario} is drawn dashed over {same}"
            )
        ax.plot(
            [r.index for r in s.requests],
            ys,
            label=label,
            linewidth=1.2 if not same else 2.0,
            linestyle="--" if same else "-",
        )
        drawn.append((ys, s.scenario))
        # each compaction where it happened: on the first request after it
        lines = [r.line for r in s.requests]
        xs_c, ys_c = [], []
        for ev in s.events:
            if ev.kind in ("auto_compact", "manual_compact") and ev.predicted is not False:
                k = next((i for i, ln in enumerate(lines) if ln >= ev.line), None)
                if k is not None:
                    xs_c.append(s.requests[k].index)
                    ys_c.append(ev.tokens)
        if xs_c:
            ax.scatter(
                xs_c,
                ys_c,
                marker="v",
                s=60,
                color=ax.lines[-1].get_color(),
                edgecolors="black",
                zorder=4,
                label=f"{s.scenario}: {len(xs_c)} compaction{'s' if len(xs_c) != 1 else ''}",
            )
    t = sims[0].thresholds
    if t.auto_compact_enabled:
        ax.axhline(
            t.auto_compact,
            color="red",
            linestyle="--",
            label=f"auto-compact {tokens_label(t.auto_compact)}",
        )
    ax.axhline(t.warning, color="orange", linestyle=":", label=f"warning {tokens_label(t.warning)}")
    if t.blocking is not None:
        ax.axhline(
            t.blocking, color="black", linestyle="-.", label=f"blocking {tokens_label(t.blocking)}"
        )
    ax.set_xlabel("API request")
    ax.set_ylabel("prompt tokens")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: tokens_label(v)))
    ax.set_title(f"profile {sims[0].profile.name}, model {sims[0].model}")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return notes
