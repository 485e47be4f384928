#!/usr/bin/env python3
"""How well the engine estimates a reply's output tokens when the transcript kept only the
streaming placeholder (``engine.transcript._scale_estimates``), measured on the real sessions.

    python scripts/output_estimate_error.py

Every reply whose file holds its final ``output_tokens`` is a test case: it is estimated from
the other final replies of its session (leave-one-out), as if it had been a placeholder, by

* ``before``: one session ratio over chars/4 of the text the transcript shows (thinking as
  shown), the model up to this change;
* ``now``: thinking at the length its signature says (``engine.tokens.thinking_chars``), a
  reply with thinking scaled by the ratio of the session's replies with thinking
  (``thinking_ratio``), one without by the ratio of all (``output_ratio``).

Prints the median and 90th-percentile relative error per group (all, with / without thinking,
per model) and the token-weighted error (sum of errors / sum of outputs), which is what moves
the auto-compact count. The transcripts are read in place (``CTXPATCH_SHARED`` or ``../shared``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.transcript import (  # noqa: E402 (after the sys.path insert)
    OUTPUT_RATIO_MIN_REPLIES,
    Reply,
    load_transcript,
    output_ratio,
    thinking_ratio,
)

SHARED = Path(os.environ.get("CTXPATCH_SHARED", ROOT.parent / "shared"))
SESSIONS = sorted((SHARED / "transcripts" / "public").glob("*.jsonl.xz")) + sorted(
    (SHARED / "transcripts" / "spotter").glob("*.jsonl")
)


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def before(r: Reply, others: list[Reply]) -> int:
    ratios = [o.output_tokens / o.content_estimate for o in others if o.content_estimate >= 20]
    ratio = _median(ratios) if len(ratios) >= OUTPUT_RATIO_MIN_REPLIES else 1.0
    return max(r.content_estimate, round(r.content_estimate * max(1.0, ratio)))


def now(r: Reply, others: list[Reply]) -> int:
    ratio = thinking_ratio(others) if r.thinks else output_ratio(others)
    return max(r.content_estimate, round(r.signed_estimate * max(1.0, ratio)))


def main() -> int:
    if not SESSIONS:
        print(
            f"error: no sessions under {SHARED}/transcripts; set CTXPATCH_SHARED", file=sys.stderr
        )
        return 2
    cases: list[tuple[Reply, int, int]] = []
    for path in SESSIONS:
        final = [r for r in load_transcript(path).replies if not r.output_estimated]
        for i, r in enumerate(final):
            if r.content_estimate < 20:
                continue
            others = final[:i] + final[i + 1 :]
            cases.append((r, before(r, others), now(r, others)))
    groups: dict[str, Callable[[Reply], bool]] = {
        "all": lambda r: True,
        "with thinking": lambda r: r.thinks,
        "without thinking": lambda r: not r.thinks,
    }
    for model in sorted({r.model for r, _, _ in cases}):
        groups[f"  {model}, with thinking"] = lambda r, m=model: r.model == m and r.thinks
    print(f"{'replies':<44} {'n':>5}  before: median  p90 weighted   now: median  p90 weighted")
    for name, keep in groups.items():
        sel = [(r, b, n) for r, b, n in cases if keep(r)]
        if not sel:
            continue
        eb = sorted(abs(b - r.output_tokens) / r.output_tokens for r, b, _ in sel)
        en = sorted(abs(n - r.output_tokens) / r.output_tokens for r, _, n in sel)
        p90 = int(0.9 * len(sel))
        total = sum(r.output_tokens for r, _, _ in sel)
        wb = sum(abs(b - r.output_tokens) for r, b, _ in sel) / total
        wn = sum(abs(n - r.output_tokens) for r, _, n in sel) / total
        print(
            f"{name:<44} {len(sel):>5}  {_median(eb):>14.1%} {eb[p90]:>5.1%} {wb:>8.1%}"
            f" {_median(en):>12.1%} {en[p90]:>5.1%} {wn:>8.1%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
