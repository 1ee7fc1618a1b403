"""The state behind ``rftlab serve tinker``: sessions, models, samplers and request futures of the tinker
SDK's HTTP protocol (tinker 0.38), executed on the in-process backend (``LocalServiceClient``).

The SDK never waits on an HTTP request for a computation: a training or sampling request returns a
*future* (``{"request_id": ...}``) at once and the SDK long-polls ``/api/v1/retrieve_future`` for its
result. Here every computation runs on one worker thread, so the models are never touched concurrently;
what it runs next is the ``scheduler``'s choice, fair between sessions (round-robin):

* training requests of a model (``forward_backward``, ``optim_step``, ``save_weights``,
  ``save_weights_for_sampler``, ``load_weights``) run in ``seq_id`` order, whatever order they arrive in; a
  request repeated with a ``seq_id`` already seen (an SDK retry) gets the first one's future back. A
  request refused at submission (an HTTP 4xx: a malformed body, an unknown endpoint) gives up its
  ``seq_id`` at once, so the model's next request runs; a ``seq_id`` that never arrives is passed after
  ``GAP_GRACE_SECONDS``;
* sampling requests (``asample``; ``compute_logprobs`` is an ``asample`` with ``max_tokens=1`` and prompt
  logprobs) are independent of each other and of training (a sampler is a snapshot): they are cut into
  pieces of at most ``scheduler.PIECE_ROWS`` samples, and the worker runs queued pieces together in
  batches, waiting a few milliseconds for more while they keep arriving; a request's pieces are put back
  together into its one response (the same tokens as unsplit: each sample's randomness is its own);
* a result is kept until retrieved (then for ``RESULT_KEEP_SECONDS``); an unknown request id is a 404.

A failure the service would report (a refused rank, an unknown loss function, a bad checkpoint path, a
malformed datum) resolves the future with ``{"error": reason, "category": "user"}``, which the SDK raises
as ``tinker.RequestFailedError``; a bug is category ``server``. Malformed or unknown requests are refused
at once with an HTTP status the SDK turns into its typed errors (``BadRequestError``, ``NotFoundError``...),
see ``server``. Sessions that stop sending heartbeats for ``session_timeout_s`` expire: their models and
samplers are released (a killed client leaves nothing behind but its checkpoints).
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback

from rftlab.runs.serving import Log

from .service_records import OWNER, SAMPLE_BATCH_FIRST_GAP_SECONDS, Job, ServiceError, _failure
from .service_sampling import SamplingRequests
from .service_training import TrainingRequests

__all__ = [
    "OWNER",
    "Log",
    "ServiceError",
    "TinkerService",
]


class TinkerService(TrainingRequests, SamplingRequests):
    """See the module docstring. ``backend`` runs the computations; ``log`` records events. Its parts:
    ``ServiceCore`` (state, identity, sessions, futures), ``TrainingRequests``, ``SamplingRequests``,
    and here the worker thread that runs every computation."""

    # ------------------------------------------------------------------------------- lifecycle

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        removed = self.backend.checkpoints.sweep()
        if removed:
            self.log("info", "checkpoints_expired", count=len(removed))
        self._worker = threading.Thread(target=self._work, name="rftlab-tinker-worker", daemon=True)
        self._worker.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the running job, drop the queued ones, stop the worker."""
        with self._lock:
            self._stopping = True
        dropped = self._scheduler.stop()
        if self._worker is not None:
            self._worker.join(timeout)
        self.log("info", "worker_stopped", dropped_jobs=dropped, **self.counts)

    # ---------------------------------------------------------------------------------- worker

    def _work(self) -> None:
        while True:
            unit = self._scheduler.take(
                gap_s=self.batch_gap_s,
                first_gap_s=SAMPLE_BATCH_FIRST_GAP_SECONDS,
                max_wait_s=self.batch_max_s,
            )
            if unit is None:
                return
            if unit[0].sample is not None:
                self._run_samples(unit)
            else:
                self._run_job(unit[0])

    def _run_job(self, job: Job) -> None:
        t0 = time.perf_counter()
        value, exc = None, None
        try:
            assert job.fn is not None
            value = job.fn()
        except Exception as e:  # delivered to the client; a server-side bug is logged with its traceback
            exc = e
        ms = round(1000 * (time.perf_counter() - t0), 2)
        self.counts["jobs"] += 1
        if exc is not None:
            reason, category = _failure(exc)
            self.counts["errors"] += 1
            fields = {"traceback": "".join(traceback.format_exception(exc))} if category == "server" else {}
            self.log(
                "warning" if category == "user" else "error",
                "job_failed",
                ms=ms,
                reason=reason,
                category=category,
                **job.label,
                **fields,
            )
        else:
            self.log("debug", "job_done", ms=ms, **job.label)
        if job.on_done is not None:
            job.on_done(value, exc)
        if job.pending is not None:
            self._resolve(job.pending, value, exc)
