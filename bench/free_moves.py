"""What a move made where the cache breaks anyway would save: an experiment over the engine.

The ``paid`` rule (engine/twins/policy.py) decides from the message list alone, so it never
knows that a request's prefix changed anyway: the text prune's step, a micro-compaction. Such a
request rewrites the cache whatever the clearing does, so a move of the cleared part costs
nothing extra there. The oracle (engine/replay/oracle.py) puts its moves on those requests; the
online rule cannot, today.

This bench replays every shared session with a real auto-compaction ``patched`` under the
``paid`` rule plus one *stateful* addition: when the request's messages before its last one
differ from the previous request's (their role and content, compared by a hash), it clears all
it may (the round in progress and KEEP kept) and holds that boundary until the list shrinks (a
compaction). Printed per session: the defaults' cost and this rule's against ``unpatched``, its
compactions and how many free moves it made; then the totals. Compare with
``bench/oracle_gap.py`` (the oracle's saving). An experiment: the rule is not in the injected
code, the gateway or the twin.

    python bench/free_moves.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from real_sessions import sessions

from engine.api.context_editing import tool_uses
from engine.api.context_management import ClearToolUses
from engine.replay.counterfactual import fixed_prefix, simulate_counterfactual
from engine.replay.recall_tools import RECALL_TOOLS_ESTIMATE
from engine.twins.context_clear import trailing_results
from engine.twins.conversation_policy import PaidPolicy, clear_policy_from_env


def _key(m: Mapping[str, Any]) -> bytes:
    """A message's role and content (not the usage a replay writes into it later)."""
    text = orjson.dumps([m.get("role"), m.get("content")], option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.blake2b(text, digest_size=8).digest()


class FreeMoves:
    """The ``paid`` rule, plus a move of all it may clear wherever the prefix changed anyway."""

    def __init__(self, paid: PaidPolicy) -> None:
        self.paid = paid
        self.previous: list[bytes] | None = None
        self.forced = 0  # tool uses cleared by the free moves (held until a compaction)
        self.moves = 0

    def __call__(
        self,
        edit: ClearToolUses,
        api: Sequence[Mapping[str, Any]],
        costs: Sequence[float],
        overhead: float,
    ) -> ClearToolUses:
        keys = [_key(m) for m in api]
        prev = self.previous
        broke = prev is not None and (len(keys) < len(prev) or keys[: len(prev) - 1] != prev[:-1])
        self.previous = keys
        uses = len(tool_uses(api))
        if uses < self.forced:  # the list was compacted: start again
            self.forced = 0
        limit = max(0, uses - max(edit.keep, trailing_results(api)))
        fitted = self.paid(edit, api, costs, overhead)
        paid = uses - fitted.keep
        if broke and limit > max(paid, self.forced):
            self.forced = limit
            self.moves += 1
        keep = max(uses - max(paid, min(self.forced, limit)), edit.keep)
        return fitted if keep == fitted.keep else replace(edit, keep=keep)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="sessions whose name holds one of these")
    args = ap.parse_args(argv)
    tot = {"unpatched": 0.0, "defaults": 0.0, "free": 0.0}
    dearer: dict[str, list[str]] = {"defaults": [], "free": []}
    for s in sessions(log=lambda m: print(m, file=sys.stderr)):
        if args.only and not any(w in s.name for w in args.only):
            continue
        cal = s.calibration
        overhead, stable = fixed_prefix(cal, RECALL_TOOLS_ESTIMATE)
        paid = clear_policy_from_env({}, overhead, overhead - stable, cal.one_hour)
        assert paid is not None
        rule = FreeMoves(paid)
        un = s.replay("unpatched").summary
        de = s.replay("patched").summary
        fr = simulate_counterfactual(
            s.tr,
            s.profile,
            "patched",
            clear_policy=rule,
            microcompact_on=s.microcompact_on,
            calibration=cal,
        ).summary
        u = un["cost"]
        for name, summary in (("defaults", de), ("free", fr)):
            tot[name] += summary["cost"]
            if summary["cost"] > u:
                dearer[name].append(s.name)
        tot["unpatched"] += u
        print(
            f"{s.name:<40} {'1 h' if cal.one_hour else '5 min':>5}  defaults "
            f"{de['cost'] / u - 1:+6.1%} ({de['auto_compactions']} compactions)  free moves "
            f"{fr['cost'] / u - 1:+6.1%} ({fr['auto_compactions']} compactions, {rule.moves} free)",
            flush=True,
        )
    u = tot["unpatched"]
    print(
        f"total: defaults {tot['defaults'] / u - 1:+.2%}, with free moves {tot['free'] / u - 1:+.2%}"
    )
    for name, names in dearer.items():
        print(f"dearer than unpatched, {name}: {', '.join(names) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
