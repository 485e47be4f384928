"""The picture of ``ctxpatch report --plot FILE``: what a person wants to see at a glance.

Left: each session's cost in dollars without ctxpatch (the engine's unpatched replay) and with
it (the replay of what ctxpatch installs for the session's version: ``patched`` for a ``cli.js``
build, ``server_clearing`` for a native one, a paler bar), the most expensive sessions first,
with the real cost as a tick; where
the replay without ctxpatch compacts, a marker per compaction. Right: the running total of
dollars over the sessions in time order, real, without and with ctxpatch. Axes read in K/M.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxpatch.errors import PlotUnavailable
from usage.prices import PriceTable

TOP = 25
# the "with ctxpatch" bar of each replay usage.report.with_scenario picks
WITH_BARS = (
    ("patched", "#4c72b0", "with ctxpatch, cli.js: patched (replay)"),
    ("server_clearing", "#8fb0d9", "with ctxpatch, native: server_clearing (replay)"),
)


def human(x: float, _pos: object = None) -> str:
    """Axis numbers as people read them: 1.5M, 250K, 900."""
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.1f}M".replace(".0M", "M")
    if a >= 1e3:
        return f"{x / 1e3:.0f}K"
    return f"{x:g}"


def dollars(x: float, _pos: object = None) -> str:
    a = abs(x)
    if a >= 1e6:
        return f"${x / 1e6:.1f}M"
    if a >= 1e3:
        return f"${x / 1e3:.1f}K"
    if a >= 10 or (a >= 1 and x == int(x)) or x == 0:
        return f"${x:,.0f}"
    return f"${x:.2f}"


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotUnavailable(
            "--plot needs matplotlib",
            why="matplotlib is not installed",
            hint="pip install 'ctxpatch[plot]', or leave out --plot",
        ) from e
    return plt


def plot_report(
    results: Sequence[Mapping[str, Any]],
    totals: Mapping[str, Any],
    path: str | Path,
    table: PriceTable,
) -> None:
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 6.5), gridspec_kw={"width_ratios": [1.35, 1]})
    priced = [r for r in results if r["replay"]["unpatched"]["usd"] is not None]
    top = sorted(priced, key=lambda r: r["replay"]["unpatched"]["usd"], reverse=True)[:TOP]
    top.reverse()  # the most expensive at the top of the bars
    ys = range(len(top))
    un = [r["replay"]["unpatched"]["usd"] for r in top]
    ax.barh(
        [y + 0.2 for y in ys], un, height=0.4, color="#c44e52", label="without ctxpatch (replay)"
    )
    for scenario, color, label in WITH_BARS:
        mine = [(y, r) for y, r in zip(ys, top, strict=True) if r["with_scenario"] == scenario]
        if mine:
            ax.barh(
                [y - 0.2 for y, _ in mine],
                [r["replay"][scenario]["usd"] for _, r in mine],
                height=0.4,
                color=color,
                label=label,
            )
    real = [r["recorded"]["usd"] for r in top]
    ax.scatter(
        [v if v is not None else 0 for v in real],
        list(ys),
        marker="|",
        s=180,
        color="black",
        label="real cost (transcript)",
        zorder=3,
    )
    for y, r in zip(ys, top, strict=True):
        n = r["replay"]["unpatched"]["auto_compactions"]
        m = r["replay"][r["with_scenario"]]["auto_compactions"]
        if n or m:
            ax.annotate(
                f"{n}→{m} compactions",
                (r["replay"]["unpatched"]["usd"], y + 0.2),
                xytext=(4, -3),
                textcoords="offset points",
                fontsize=7,
                color="#c44e52",
            )
    ax.set_yticks(list(ys))
    ax.set_yticklabels([f"{r['session'][:8]} {r['project'][-18:]}" for r in top], fontsize=7)
    ax.xaxis.set_major_formatter(FuncFormatter(dollars))
    ax.set_xlabel("session cost (USD)")
    shown = (
        f"the {len(top)} most expensive of {len(results)} sessions"
        if len(results) > len(top)
        else f"{len(results)} sessions"
    )
    ax.set_title(shown, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)

    ordered = sorted(priced, key=lambda r: r.get("started") or "")
    run = {"real": 0.0, "without": 0.0, "with": 0.0}
    series: dict[str, list[float]] = {k: [] for k in run}
    for r in ordered:
        run["real"] += r["recorded"]["usd"] or 0.0
        run["without"] += r["replay"]["unpatched"]["usd"]
        run["with"] += r["replay"][r["with_scenario"]]["usd"]
        for k, v in run.items():
            series[k].append(v)
    xs = list(range(1, len(ordered) + 1))
    ax2.plot(xs, series["without"], color="#c44e52", label="without ctxpatch (replay)")
    got = ", ".join(f"{n} {s}" for s, n in totals.get("with_scenarios", {}).items())
    ax2.plot(xs, series["with"], color="#4c72b0", label=f"with ctxpatch (replay: {got})")
    ax2.plot(xs, series["real"], color="black", linestyle=":", label="real (transcripts)")
    ax2.fill_between(xs, series["with"], series["without"], color="#4c72b0", alpha=0.12)
    ax2.yaxis.set_major_formatter(FuncFormatter(dollars))
    ax2.xaxis.set_major_formatter(FuncFormatter(human))
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.set_xlabel("sessions, oldest first")
    ax2.set_ylabel("running total (USD)")
    saved = totals.get("usd_saved")
    avoided = totals.get("compactions_avoided", 0)
    ax2.set_title(
        f"saved {dollars(saved) if saved is not None else 'unpriced'}, "
        f"{avoided} compaction{'s' if avoided != 1 else ''} avoided",
        fontsize=10,
    )
    ax2.legend(loc="upper left", fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(
        f"ctxpatch report: {totals['sessions']} sessions, {human(totals['requests'])} requests "
        f"(prices of {table.date})",
        fontsize=12,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
