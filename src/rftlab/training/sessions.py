"""Ending a Tinker session when the work that opened it ends.

A ``tinker.ServiceClient`` opens a session on the service and keeps it alive with a heartbeat thread
until ``close(status)`` finishes it. A study that never closes its client leaves the session open on the
service until the heartbeat stops (the process exits) and, in a long-lived notebook kernel, keeps the
heartbeat running. ``closing_session`` finishes it with the outcome: ``"success"``, ``"errored"`` or
``"interrupted"`` (Ctrl-C).

    with closing_session(backend.service):
        run_study(backend, ...)

Clients without ``close`` (the in-process local backend, the simulated learner) are left as they are.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

FINISH_TIMEOUT_S = 30.0


def finish_session(service: Any, status: str = "success", detail: str | None = None) -> str | None:
    """Finish ``service``'s session with ``status`` (``ServiceClient.close``). Returns ``None``, or why it
    could not be finished; it never raises, so a failed close cannot hide the run's own outcome."""
    close = getattr(service, "close", None)
    if close is None or not callable(close):
        return None
    try:
        done = close(status, detail)
        result = getattr(done, "result", None)
        if callable(result):
            result(timeout=FINISH_TIMEOUT_S)
    except Exception as exc:  # the service went away, a timeout: the session ends with the process
        return f"{type(exc).__name__}: {exc}"
    return None


@contextlib.contextmanager
def closing_session(service: Any, detail: str | None = None) -> Iterator[Any]:
    """Run the block, then finish ``service``'s session as ``success``, ``errored`` or ``interrupted``; a
    failure to finish it is reported on stderr, never raised."""
    status = "success"
    try:
        yield service
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException:
        status = "errored"
        raise
    finally:
        why = finish_session(service, status, detail)
        if why:
            print(f"rftlab: the Tinker session could not be finished ({why})", file=sys.stderr)
