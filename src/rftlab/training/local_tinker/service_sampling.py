"""The sampling requests of ``TinkerService``: sampling sessions, their lookup and ``asample``, cut into
pieces of at most ``scheduler.PIECE_ROWS`` samples that the worker runs in batches (``SamplingRequests``).
The batching rules are the ``service`` module docstring's.
"""

from __future__ import annotations

import time

from tinker import types

from .checkpoints import CheckpointError
from .engine import check_sampling_params
from .limits import check_num_samples, check_shape
from .scheduler import PIECE_ROWS
from .service_core import ServiceCore
from .service_records import Gather, Job, SampleCall, ServiceError, _failure, at_once
from .wire import PROTO_CONTENT_TYPE, encode_sample_response


class SamplingRequests(ServiceCore):
    """Samplers and their sampling requests (the ``service`` module docstring's second bullet)."""

    async def create_sampling_session(
        self, request: types.CreateSamplingSessionRequest
    ) -> types.CreateSamplingSessionResponse:
        self.session(request.session_id)
        if request.model_path is not None:
            self.own_path(request.model_path)
        sampler_id = f"{request.session_id}:sample:{request.sampling_session_seq_id}"
        with self._lock:
            if sampler_id in self.samplers:
                return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)
        if request.model_path is None and request.base_model is None:
            raise ServiceError(400, "create_sampling_session needs a model_path or a base_model")
        if request.model_path is None and request.base_model not in self.backend.served_models():
            raise ServiceError(
                404,
                f"base model {request.base_model!r} is not served here; served: "
                + ", ".join(self.backend.served_models()),
            )
        try:
            client = await self.call(
                lambda: self.backend.new_sampling_client(request.model_path, request.base_model),
                {"kind": "CreateSamplingSession", "sampler": sampler_id},
                request.session_id,
            )
        except CheckpointError as exc:
            status = 404 if "not found" in str(exc) or "expired" in str(exc) else 400
            raise ServiceError(status, str(exc)) from None
        except ValueError as exc:
            raise ServiceError(400, str(exc)) from None
        self._add_sampler(request.session_id, sampler_id, client, request.model_path)
        self.log("info", "sampler_created", sampler=sampler_id, model_path=request.model_path)
        return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)

    def get_sampler(self, sampler_id: str) -> types.GetSamplerResponse:
        with self._lock:
            entry = self.samplers.get(sampler_id)
        if entry is None or not self.mine(self.session_owner(entry.session_id)):
            raise ServiceError(404, f"unknown sampler {sampler_id!r}")
        return types.GetSamplerResponse(
            sampler_id=sampler_id, base_model=entry.base_model, model_path=entry.model_path
        )

    def asample(self, request: types.SampleRequest) -> types.UntypedAPIFuture:
        if request.sampling_session_id is None or request.seq_id is None:
            raise ServiceError(400, "asample needs a sampling_session_id and a seq_id")
        at_once(check_num_samples, request.num_samples)
        at_once(check_sampling_params, request.sampling_params)
        target = request.target_prompt_logprobs
        if target is not None:
            at_once(check_shape, "target_prompt_logprobs", target.shape, len(target.data))
        with self._lock:
            entry = self.samplers.get(request.sampling_session_id)
        if entry is None or not self.mine(self.session_owner(entry.session_id)):
            raise ServiceError(404, f"unknown sampler {request.sampling_session_id!r}")
        self.session(entry.session_id)
        seq = int(request.seq_id)
        with self._lock:
            if seq in entry.seen:
                rid, ids = entry.seen[seq]
                return types.UntypedAPIFuture(request_id=rid, sample_sequence_ids=ids)
            p = self._pending("Sample")
            total = max(int(request.num_samples), 0)
            ids = [f"{entry.client.name}-{seq}-{i}" for i in range(total)]
            entry.seen[seq] = (p.request_id, ids)
        starts = list(range(0, max(total, 1), PIECE_ROWS))  # a refused num_samples < 1 is one piece
        gather = Gather(len(starts))
        label = {"kind": "Sample", "sampler": entry.sampler_id}
        for first in starts:
            rows = max(min(PIECE_ROWS, total - first), 1)
            piece = SampleCall(entry.client, request, seq, first, rows, gather)
            self._enqueue(Job(p, sample=piece, label=label), entry.session_id)
        return types.UntypedAPIFuture(request_id=p.request_id, sample_sequence_ids=ids)

    # ---------------------------------------------------------------------------------- worker

    def _run_samples(self, batch: list[Job]) -> None:
        """One batch of sampling pieces: submitted together (the engine batches their rows), then each
        piece's result handed to its request's ``Gather``."""
        t0 = time.perf_counter()
        futures = []
        for job in batch:
            call = job.sample
            assert call is not None
            r = call.request
            try:
                if r.record_stability_info:
                    raise ValueError("record_stability_info (StableReinforce) is not supported locally")
                fut, _ = call.sampler.submit(
                    r.prompt,
                    call.rows if r.num_samples >= 1 else r.num_samples,
                    r.sampling_params,
                    bool(r.prompt_logprobs) and call.first_row == 0,
                    prompt_logprobs_last_n=r.prompt_logprobs_last_n,
                    index=call.index,
                    first_row=call.first_row,
                    topk_prompt_logprobs=r.topk_prompt_logprobs,
                    topk_sample_logprobs=r.topk_sample_logprobs,
                    target_prompt_logprobs=r.target_prompt_logprobs,
                    prompt_alt_tokens_k=r.prompt_alt_tokens_k,
                )
            except Exception as exc:
                fut = exc
            futures.append(fut)
        errors = 0
        for job, fut in zip(batch, futures, strict=True):
            call = job.sample
            assert job.pending is not None and call is not None
            result, exc = None, None
            try:
                if isinstance(fut, Exception):
                    raise fut
                result = fut.result()
            except Exception as e:
                exc = e
                errors += 1
                reason, category = _failure(e)
                self.log("warning", "job_failed", reason=reason, category=category, **job.label)
            if not call.gather.add(call.first_row, result, exc):
                continue
            if call.gather.error is not None:
                self._resolve(job.pending, None, call.gather.error)
            else:
                payload = (PROTO_CONTENT_TYPE, encode_sample_response(call.gather.response()))
                self._resolve(job.pending, payload, None)
        self.counts["sample_batches"] += 1
        self.counts["sample_requests"] += len(batch)
        self.counts["errors"] += errors
        self.log(
            "debug",
            "sample_batch",
            pieces=len(batch),
            rows=sum(j.rows for j in batch),
            errors=errors,
            ms=round(1000 * (time.perf_counter() - t0), 2),
        )
