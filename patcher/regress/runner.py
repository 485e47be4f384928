"""``ctxpatch regress`` over many versions: in worker processes, resumable, the ``--json``
file rewritten after every version."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

from patcher.regress.cycle import run_one
from patcher.regress.drift import refresh_inspect
from patcher.regress.outcome import OK_RESULTS, Job, Outcome, Run, load_previous


def run(
    jobs: list[Job],
    *,
    workers: int = 1,
    prune: bool = False,
    node_check: bool = True,
    json_path: Path | None = None,
    resume: bool = False,
    on_done: Callable[[Outcome, int, int], None] | None = None,
) -> Run:
    """Run ``jobs`` (``workers`` processes), calling ``on_done(outcome, done, total)``."""
    state = Run()
    todo = list(jobs)
    if resume and json_path is not None:
        previous = load_previous(json_path)
        wanted = {j.key for j in jobs}
        for key, o in previous.items():
            if key in wanted and o.result in OK_RESULTS:
                state.outcomes[key] = o
        todo = [j for j in jobs if j.key not in state.outcomes]
    resumed = list(state.outcomes.values())  # kept in the JSON until refreshed
    total = len(jobs)
    done = 0

    def finish(o: Outcome) -> None:
        nonlocal done
        state.outcomes[o.key] = o
        done += 1
        if json_path is not None:
            state.write(json_path)
        if on_done is not None:
            on_done(o, done, total)

    # versions that passed before keep their cycle result; their drift is read again (inspect
    # may have learnt something since), which costs about a second each
    if workers <= 1 or len(todo) + len(resumed) <= 1:
        for o in resumed:
            finish(refresh_inspect(o))
        for j in todo:
            finish(run_one(j, prune=prune, node_check=node_check))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures: dict[Future[Outcome], Job] = {
                pool.submit(refresh_inspect, o): Job(o.package, o.version) for o in resumed
            }
            futures.update(
                {pool.submit(run_one, j, prune=prune, node_check=node_check): j for j in todo}
            )
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    j = futures[f]
                    try:
                        o = f.result()
                    except Exception as e:  # the worker died (out of memory, killed)
                        o = Outcome(
                            j.package,
                            j.version,
                            failed_step="internal",
                            reason=f"worker failed: {type(e).__name__}: {e}",
                        )
                    finish(o)
    if json_path is not None:
        state.write(json_path)
    return state
