"""The message-level token estimate: iterates ``message.content`` and ends with x4/3.

The anchor is ``Math.ceil(n*1.3333333333333333)`` in a function reading ``.message.content``
with an ``"image"`` or ``"tool_result"`` branch (up to 2.1.104; 2.1.105 has none left). Read:
whether it counts documents like images (2.1.47+) and thinking/tool_use blocks by their text
(2.1.75+), its image constant and its ``s.length/N`` divisor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patcher import jsparse
from patcher.inspect.finding import Finding, Notes, present
from patcher.inspect.jsconst import Reader, name
from patcher.inspect.patterns import compares_type, image_and_divisor


@dataclass(frozen=True)
class Estimator(Finding):
    factor_4_3: bool = False  # an x4/3 estimator exists
    counts_documents: bool | None = None  # None: no x4/3 estimator to read
    counts_block_text: bool | None = None

    def features(self) -> dict[str, Any]:
        return {
            "estimate_factor_4_3": self.factor_4_3,
            **present(
                estimate_counts_documents=self.counts_documents,
                estimate_counts_block_text=self.counts_block_text,
            ),
        }


def extract(r: Reader) -> Estimator:
    notes = Notes()
    fn = None
    for hit in jsparse.iter_find(r.data, b"*1.3333333333333333)"):
        candidate = r.enclosing(hit)
        if candidate is None:
            continue
        body = r.body(candidate)
        if b".message.content" in body and (b'"image"' in body or b'"tool_result"' in body):
            fn = candidate
            break
    if fn is None:
        return Estimator(factor_4_3=False, **notes.common())
    notes.functions["estimator"] = name(fn)
    img, div = image_and_divisor(r, fn, depth=2)
    if img is not None:
        notes.constants["image_tokens"] = img
    if div is not None:
        notes.constants["chars_per_token"] = div
    return Estimator(
        factor_4_3=True,
        # 2.1.47+: ``x.type==="image"||x.type==="document"`` (profile estimate_counts_documents)
        counts_documents=compares_type(r, fn, "document", 0),
        # 2.1.75+: thinking/redacted_thinking/tool_use branches (estimate_counts_block_text)
        counts_block_text=all(
            compares_type(r, fn, t, 0) for t in ("thinking", "redacted_thinking", "tool_use")
        ),
        **notes.common(),
    )
