"""``ctxpatch regress``: the whole patch life cycle on published versions, one by one.

Per version: fetch (``npm pack``, cached) → locate → apply → check → apply again (no change) →
ESM node check of the patched file → revert (byte-identical) → ``inspect`` drift against the
engine's profile. Parallel-safe (one lock file per cached package, each version in its own
scratch folder) and resumable (``--json FILE --resume`` skips the patch cycle of versions
already passed or refused in FILE, re-reading only their drift with the current ``inspect``;
FILE is rewritten after every version).

One module per concept:

* :mod:`~patcher.regress.selection`: which versions (``npm view``, cc/sdk numbering, ranges);
* :mod:`~patcher.regress.outcome`: the records (:class:`Job`, :class:`Outcome`, :class:`Run`,
  the ``--json`` document);
* :mod:`~patcher.regress.cycle`: fetch and the patch cycle on one version;
* :mod:`~patcher.regress.drift`: ``inspect`` drift of one version, and its refresh on resume;
* :mod:`~patcher.regress.runner`: many versions (worker processes, resume);
* :mod:`~patcher.regress.matrix`: the printed matrix and details.

Their public names are importable from ``patcher.regress``.
"""

from patcher.regress.cycle import fetch, run_one
from patcher.regress.drift import refresh_inspect
from patcher.regress.matrix import details, matrix
from patcher.regress.outcome import OK_RESULTS, RESULTS, Job, Outcome, Run, load_previous
from patcher.regress.runner import run
from patcher.regress.selection import FIRST, LAST, PACKAGES, published, select, to_package

__all__ = [
    "FIRST",
    "LAST",
    "OK_RESULTS",
    "PACKAGES",
    "RESULTS",
    "Job",
    "Outcome",
    "Run",
    "details",
    "fetch",
    "load_previous",
    "matrix",
    "published",
    "refresh_inspect",
    "run",
    "run_one",
    "select",
    "to_package",
]
