"""Independent runs in worker processes, so a study uses every core it may.

``map_processes(fn, items)`` applies ``fn`` to each item and returns the results in the items' order. With
more than one worker it runs them in spawned processes (``spawn``: a fresh interpreter, safe beside torch's
threads and the run store's locks); with one worker, or one item, it runs them here, one after the other.

Each run is deterministic given its spec and seed, and nothing passes between runs, so the results do not
depend on the number of workers or the order in which they finish (``tests/runs/test_parallel_runs.py`` checks
that parallel and serial launches write the same rollouts). The worker count is an implementation setting:
``$RFTLAB_WORKERS`` when set, else one per CPU core this process may use. It never enters a spec's hash.
Inside a worker it is 1, so work nested in a run (a study inside a study) runs there, one after the other.

``fn`` must be a module-level function and the items picklable (a spawned process imports ``fn`` by name).
A worker's exception is raised here once the runs already started have finished; the runs not yet started
are cancelled. An interrupt (a notebook's stop button, Ctrl-C) stops the workers at once. A worker also
stops when the process that started it dies (on Linux the kernel sends it SIGTERM: a killed or restarted
notebook kernel leaves no worker training behind). A run a stopped worker leaves unfinished is resumed or
restarted by the next launch, as after any crash; a finished run is kept, so a second call reuses it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
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


def spawn_executor(workers: int, nested_workers: int | None = None) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes, each stopped (SIGTERM) when the process that made it dies;
    ``nested_workers`` sets ``$RFTLAB_WORKERS`` inside them (``None``: left as inherited)."""
    import multiprocessing

    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(), nested_workers),
    )


def _start_worker(parent: int, nested_workers: int | None) -> None:
    """Worker initializer: the nested worker count, then ask Linux for SIGTERM when the parent dies
    (``prctl(PR_SET_PDEATHSIG)``); a parent already gone by now stops the worker at once."""
    if nested_workers is not None:
        os.environ[WORKERS_ENV] = str(nested_workers)
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(1)


def map_processes(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None) -> list[R]:
    """``[fn(item) for item in items]``, in ``worker_count`` spawned processes when that is above one."""
    todo = list(items)
    n = worker_count(len(todo), workers)
    if n <= 1:
        return [fn(item) for item in todo]
    with worker_pool(n, nested_workers=1) as pool:
        futures = [pool.submit(fn, item) for item in todo]
        return [future.result() for future in futures]


@contextlib.contextmanager
def worker_pool(workers: int, nested_workers: int | None = None) -> Iterator[ProcessPoolExecutor]:
    """``spawn_executor`` with the failure rules of the module docstring: an error in the block cancels
    the work not yet started and waits for the work under way; an interrupt stops the workers at once."""
    with spawn_executor(workers, nested_workers) as pool:
        try:
            yield pool
        except Exception:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        except BaseException:  # an interrupt (or a closed generator): stop the work under way too
            terminate(pool)
            raise


def terminate(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and stop every worker of ``pool`` now (SIGTERM)."""
    processes = list(getattr(pool, "_processes", None) or {})  # pid -> process (no public accessor in 3.11)
    for pid in processes:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    pool.shutdown(wait=True, cancel_futures=True)
