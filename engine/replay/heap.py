"""The objects that exist before a replay starts, kept out of the cycle collector while it runs.

A replay allocates as it goes (the history's copies, the kept states, the results), so the
collector runs now and then, and a full collection walks every container the process tracks:
above all the loaded transcript, which a replay never frees (the caller holds it) and whose
size grows with the session. On a 10× session one full collection took as long as a tenth of
the replay. :func:`frozen_heap` moves every object tracked when the replay starts into the
collector's permanent generation (:func:`gc.freeze`) and back into the oldest generation when
it ends (:func:`gc.unfreeze`): both are O(1) list splices. Nothing the replay computes
depends on when the collector runs.

No collection runs by itself meanwhile (:func:`gc.disable`; an explicit :func:`gc.collect` still
does): a replay makes no reference cycles (its states, copies and results are freed by their
reference counts; ``tests/engine/test_heap.py`` checks every scenario), so a collection during it
only walks the containers it keeps (the kept states: a point per message walked, a record and a
signature entry per message sent) to find nothing. The 10x patched replay of the bench session
keeps up to 84,000 of them: 8 young collections at a threshold of 10,000 allocations took 5% of
its time (1% of the 1x replay's, one collection). Whatever it leaves is collected after it, as
before; the collector is given back as it was (a process that disabled it keeps it disabled).

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


@contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects tracked now left out of the collections, and no collection by itself, until the
    block ends (see the module doc); nested blocks and blocks while the process froze objects
    itself do nothing."""
    global _held
    if _held or gc.get_freeze_count():
        yield
        return
    _held = True
    enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.unfreeze()
        _held = False
