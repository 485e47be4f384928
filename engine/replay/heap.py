"""The objects that exist before a replay starts, kept out of the cycle collector while it runs.

A replay allocates as it goes (the history's copies, the kept states, the results), so the
collector runs now and then, and a full collection walks every container the process tracks:
above all the loaded transcript, which a replay never frees (the caller holds it) and whose
size grows with the session. On a 10× session one full collection took as long as a tenth of
the replay. :func:`frozen_heap` moves every object tracked when the replay starts into the
collector's permanent generation (:func:`gc.freeze`) and back into the oldest generation when
it ends (:func:`gc.unfreeze`): both are O(1) list splices. Objects the replay creates are
collected as before (a cycle it leaves is freed within it or after it), and nothing the replay
computes depends on when the collector runs.

The youngest generation is collected every :data:`YOUNG_THRESHOLD` allocations instead of
every 700 meanwhile: a replay allocates a few lists and tuples per message it prices, most freed
at once by their reference counts, and the 128 young collections of the 10× session (each
walking what had not been freed yet) became 7; the thresholds are given back at the end.

Safe for a process that replays many sessions one after the other (``ctxpatch report``'s
workers): what was frozen is unfrozen at the end of each replay, so the garbage of one session
is collected later as usual. The outermost replay only freezes, and only when nothing else of
the process froze objects (``gc.get_freeze_count() == 0``: a server that froze its heap before
forking keeps it frozen); a replay in another thread while one holds the freeze runs without
it, as before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_held = False  # a replay of this process holds the freeze

YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation during a replay (CPython's
default: 700). Measured on the 10x patched replay of the bench session: 0.09-0.10 s of
collections (of 1.1 s) with freeze alone, 0.03 s with this threshold too."""


@contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects tracked now left out of the collections, and the youngest generation collected
    less often, until the block ends (see the module doc); nested blocks and blocks while the
    process froze objects itself do nothing."""
    global _held
    if _held or gc.get_freeze_count():
        yield
        return
    _held = True
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(thresholds[0], YOUNG_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        _held = False
