#!/usr/bin/env python3
"""The effect of ``ctxpatch apply`` at its default knobs on every shared real session with a
real auto-compaction: a Markdown table, one row per session, and the totals.

    python scripts/clearing_table.py                      # print the table
    python scripts/clearing_table.py --doc docs/clearing-defaults.md   # also replace its block there

Each session is replayed (``engine.replay.counterfactual``) ``unpatched`` and ``patched`` (the text prune and
server-side tool-result clearing), at the ``DEFAULT_*`` knobs of ``engine.twins.context_clear`` (what
the injected JavaScript sends) and at ``PLAIN_API`` (the API's own defaults with the plain keep,
STEP 1: what a client sending the bare edit gets). Columns: real auto-compactions in
the file, auto-compactions of the unpatched replay, and for each patched run its
auto-compactions, tokens sent and cost (prompt-cache prices, ``engine.api.prompt_cache``) relative
to unpatched; then the ``oracle`` (``engine.replay.oracle``: the cheapest clearing schedule in
hindsight), and the sessions the defaults make dearer, with why. ``--doc FILE`` (alias
``--readme``) replaces the text between
``<!-- clearing-table:begin -->`` and ``<!-- clearing-table:end -->``. The output depends only
on the sessions and the engine (no clock), so regenerating is reproducible.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from readme_block import markers, update_file
from real_sessions import sessions

from engine.twins import context_clear as ce
from engine.twins.policy import DEFAULT_CEILING, DEFAULT_POLICY

BLOCK = "clearing-table"
BEGIN, END = markers(BLOCK)
PLAIN_API = {
    "CLAUDE_CTX_CLEAR_POLICY": "fixed",
    "CLAUDE_CTX_CLEAR_TRIGGER": "100000",
    "CLAUDE_CTX_CLEAR_KEEP": "3",
    "CLAUDE_CTX_CLEAR_STEP": "1",
    "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "0",
}


def pct(new: int, old: int) -> str:
    return f"{(new - old) / old:+.1%}" if old else "—"


def knobs_text(env: dict[str, str]) -> str:
    return ", ".join(f"`{k.removeprefix('CLAUDE_CTX_CLEAR_')}={v}`" for k, v in env.items())


def defaults_env() -> dict[str, str]:
    inputs = ce.DEFAULT_TOOL_INPUTS
    return {
        "CLAUDE_CTX_CLEAR_POLICY": DEFAULT_POLICY,
        "CLAUDE_CTX_CLEAR_CEILING": str(DEFAULT_CEILING),
        "CLAUDE_CTX_CLEAR_TRIGGER": str(ce.DEFAULT_PAID_TRIGGER),
        "CLAUDE_CTX_CLEAR_KEEP": str(ce.DEFAULT_PAID_KEEP),
        "CLAUDE_CTX_CLEAR_TOOL_INPUTS": "1"
        if inputs is True
        else "0"
        if inputs is False
        else ",".join(inputs),
    }


def table(log=print) -> str:
    rows = []
    keys = ("req", "real", "un_auto", "d_auto", "r_auto", "un_tok", "d_tok", "r_tok")
    tot = dict.fromkeys((*keys, "un_cost", "d_cost", "r_cost", "o_auto", "o_cost"), 0)
    dearer: list[str] = []
    for s in sessions(log=log):
        un = s.replay("unpatched").summary
        d = s.replay("patched").summary  # the twin's defaults: what the injected JS sends
        r = s.replay("patched", PLAIN_API).summary
        o = s.replay("oracle").summary
        if d["cost"] > un["cost"]:
            dearer.append(_dearer(s.name, un, d, o))
        rows.append(
            f"| {s.name} | {s.tr.version} | {un['requests']} | {s.real_auto} | "
            f"{un['auto_compactions']} | {d['auto_compactions']} | "
            f"{pct(d['tokens_sent'], un['tokens_sent'])} | {pct(d['cost'], un['cost'])} | "
            f"{r['auto_compactions']} | {pct(r['tokens_sent'], un['tokens_sent'])} | "
            f"{pct(r['cost'], un['cost'])} | {o['auto_compactions']} | "
            f"{pct(o['cost'], un['cost'])} |"
        )
        for key, val in (
            ("req", un["requests"]),
            ("real", s.real_auto),
            ("un_auto", un["auto_compactions"]),
            ("d_auto", d["auto_compactions"]),
            ("r_auto", r["auto_compactions"]),
            ("un_tok", un["tokens_sent"]),
            ("d_tok", d["tokens_sent"]),
            ("r_tok", r["tokens_sent"]),
            ("un_cost", un["cost"]),
            ("d_cost", d["cost"]),
            ("r_cost", r["cost"]),
            ("o_auto", o["auto_compactions"]),
            ("o_cost", o["cost"]),
        ):
            tot[key] += val
    head = [
        "| session | Claude Code | requests | real auto-compactions | unpatched replay | "
        "defaults: compactions | tokens | cost | plain API keep: compactions | tokens | cost | "
        "oracle: compactions | cost |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total = (
        f"| **total ({len(rows)} sessions)** | | {tot['req']} | {tot['real']} | "
        f"{tot['un_auto']} | {tot['d_auto']} | {pct(tot['d_tok'], tot['un_tok'])} | "
        f"{pct(tot['d_cost'], tot['un_cost'])} | {tot['r_auto']} | "
        f"{pct(tot['r_tok'], tot['un_tok'])} | {pct(tot['r_cost'], tot['un_cost'])} | "
        f"{tot['o_auto']} | {pct(tot['o_cost'], tot['un_cost'])} |"
    )
    legend = (
        f"Patched at the defaults ({knobs_text(defaults_env())}) and with the plain API keep "
        f"({knobs_text(PLAIN_API)}); both with the text prune at its defaults. Tokens and cost "
        "relative to the unpatched replay; a compaction's summary request is in the cost "
        "(engine/replay/compaction_cost.py). Oracle: the cheapest clearing schedule in hindsight "
        "(docs/oracle.md)."
    )
    gain_d, gain_o = tot["un_cost"] - tot["d_cost"], tot["un_cost"] - tot["o_cost"]
    share = (
        f"The defaults reach {gain_d / gain_o:.0%} of the oracle's saving."
        if gain_o > 0
        else "The oracle saves nothing."
    )
    why = (
        "Dearer than unpatched at the defaults: " + "; ".join(dearer) + "."
        if dearer
        else "No session is dearer than unpatched at the defaults."
    )
    return "\n".join([legend, "", *head, *rows, total, "", f"{share} {why}"])


def _dearer(name: str, un: dict, d: dict, o: dict) -> str:
    """Why one session costs more at the defaults than unpatched."""
    text = f"`{name}` ({pct(d['cost'], un['cost'])})"
    if o["cost"] > un["cost"]:
        return (
            f"{text}: no clearing schedule avoids its compactions more cheaply than compacting "
            f"(the oracle: {pct(o['cost'], un['cost'])}, {o['auto_compactions']} compactions): "
            "after a compaction its prompt stays small for long, which clearing cannot match"
        )
    return (
        f"{text}: the oracle saves {pct(o['cost'], un['cost'])} here; the online policy moves "
        "the cleared part where hindsight would not"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--doc",
        "--readme",
        dest="doc",
        type=Path,
        help="replace the block between the markers here (docs/clearing-defaults.md)",
    )
    args = ap.parse_args(argv)
    block = table(log=lambda m: print(m, file=sys.stderr))
    print(block)
    if args.doc and not update_file(args.doc, BLOCK, block):
        print(f"error: {args.doc} has no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
