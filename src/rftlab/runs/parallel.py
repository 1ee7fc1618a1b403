"""Independent runs in worker processes, so a study uses every core it may.

``map_processes(fn, items)`` applies ``fn`` to each item and returns the results in the items' order. With
more than one worker it runs them in spawned processes (``spawn``: a fresh interpreter, safe beside torch's
threads and the run store's locks); with one worker, or one item, it runs them here, one after the other.

Each run is deterministic given its spec and seed, and nothing passes between runs, so the results do not
depend on the number of workers or the order in which they finish (``tests/test_parallel_runs.py`` checks
that parallel and serial launches write the same rollouts). The worker count is an implementation setting:
``$RFTLAB_WORKERS`` when set, else one per CPU core this process may use. It never enters a spec's hash.

``fn`` must be a module-level function and the items picklable (a spawned process imports ``fn`` by name).
A worker's exception is raised here once the runs already started have finished; the runs not yet started
are cancelled. A finished run is kept in the store, so a second call reuses it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

WORKERS_ENV = "RFTLAB_WORKERS"


def available_cores() -> int:
    """The CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def worker_count(items: int, workers: int | None = None) -> int:
    """Workers for ``items`` independent runs: ``workers``, else ``$RFTLAB_WORKERS``, else the cores;
    never more than the items. ``ValueError`` for a setting that is not a positive whole number."""
    if workers is None:
        configured = os.environ.get(WORKERS_ENV, "").strip()
        if configured:
            try:
                workers = int(configured)
            except ValueError:
                raise ValueError(f"${WORKERS_ENV} must be a whole number, got {configured!r}") from None
        else:
            workers = available_cores()
    if workers < 1:
        raise ValueError(f"the number of workers must be at least 1, got {workers}")
    return max(1, min(workers, items))


def map_processes(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None) -> list[R]:
    """``[fn(item) for item in items]``, in ``worker_count`` spawned processes when that is above one."""
    todo = list(items)
    n = worker_count(len(todo), workers)
    if n <= 1:
        return [fn(item) for item in todo]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(fn, item) for item in todo]
        try:
            return [future.result() for future in futures]
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # the runs not started are not started
            raise
