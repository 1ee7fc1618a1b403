"""The training requests of ``TinkerService``: model creation (fresh or from a checkpoint), ``get_info``
and the requests that run in a model's ``seq_id`` order (``forward_backward``, ``optim_step``, saves and
loads), as the ``TrainingRequests`` part of the service. The ordering rules are the ``service`` module
docstring's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from tinker import types

from .checkpoints import private_dir
from .errors import ParameterError
from .limits import check_metadata
from .service_core import ServiceCore
from .service_records import (
    GAP_GRACE_SECONDS,
    MAX_SEQ_AHEAD,
    Job,
    ModelEntry,
    Pending,
    ServiceError,
    _json,
    at_once,
)
from .training_client import LocalTrainingClient
from .wire import PROTO_CONTENT_TYPE, ForwardBackwardCall, encode_forward_backward_output


class TrainingRequests(ServiceCore):
    """Models and their training requests (the ``service`` module docstring's first bullet)."""

    def _model(self, model_id: str) -> ModelEntry:
        with self._lock:
            entry = self.models.get(model_id)
        if entry is None or not self.mine(self.session_owner(entry.session_id)):
            raise ServiceError(
                404, f"unknown model {model_id!r} (its session ended, or the server restarted)"
            )
        self.session(entry.session_id)
        return entry

    def _register_model(
        self, session_id: str, model_seq_id: int, base_model: str, user_metadata: Mapping[str, Any] | None
    ) -> tuple[ModelEntry, Pending | None]:
        s = self.session(session_id)
        at_once(check_metadata, "create_model", user_metadata)
        model_id = f"{session_id}:train:{model_seq_id}"
        with self._lock:
            existing = self.models.get(model_id)
            if existing is not None:  # a retried creation: the first one's future
                return existing, self.futures.get(existing.seen.get(0, ""))
            entry = ModelEntry(model_id, session_id, base_model, dict(user_metadata or {}))
            self.models[model_id] = entry
            s.models.append(model_id)
        return entry, None

    def _creation_job(self, entry: ModelEntry, kind: str, make: Callable[[], LocalTrainingClient], result):
        p = self._pending(kind)
        entry.seen[0] = p.request_id

        def run() -> Any:
            try:
                entry.client = make()
            except BaseException:
                with self._lock:
                    self.models.pop(entry.model_id, None)
                raise
            entry.base_model = entry.client._host.key.base_model
            self._write_run_record(entry)
            return result(entry)

        self._enqueue(Job(p, run, label={"kind": kind, "model": entry.model_id}), entry.session_id)
        return p

    def create_model(self, request: types.CreateModelRequest) -> types.UntypedAPIFuture:
        entry, again = self._register_model(
            request.session_id, request.model_seq_id, request.base_model, request.user_metadata
        )
        if again is not None:
            return types.UntypedAPIFuture(request_id=again.request_id, model_id=entry.model_id)
        lora = request.lora_config
        served = self.backend.served_models()

        def make() -> LocalTrainingClient:
            if request.base_model not in served:
                raise ValueError(
                    f"base model {request.base_model!r} is not served here; served: {', '.join(served)}"
                )
            if lora is None:
                raise ValueError("create_model needs a lora_config: the service trains LoRA adapters only")
            return self.backend.new_lora_client(
                request.base_model,
                lora.rank,
                lora.seed,
                lora.train_mlp,
                lora.train_attn,
                lora.train_unembed,
                optimizer=request.optimizer_config,
                model_id=entry.model_id,
            )

        p = self._creation_job(
            entry, "CreateModel", make, lambda e: _json(types.CreateModelResponse(model_id=e.model_id))
        )
        self.log("info", "model_requested", model=entry.model_id, base_model=request.base_model)
        return types.UntypedAPIFuture(request_id=p.request_id, model_id=entry.model_id)

    def _write_run_record(self, entry: ModelEntry) -> None:
        assert entry.client is not None
        key = entry.client._host.key
        record = {
            "training_run_id": entry.model_id,
            "base_model": key.base_model,
            "is_lora": key.rank > 0,
            "lora_rank": key.rank or None,
            "user_metadata": {str(k): str(v) for k, v in entry.user_metadata.items()},
            "created_at": entry.created_at.isoformat(),
            "owner": self.session_owner(entry.session_id),
        }
        from rftlab.runs.atomic import atomic_write_text

        path = self.backend.storage_dir / entry.model_id / "run.json"
        private_dir(path.parent)
        atomic_write_text(path, json.dumps(record, indent=2) + "\n", mode=0o600)

    async def model_info(self, model_id: str) -> types.GetInfoResponse:
        """``get_info``, run on the worker in the model's session's turn."""
        entry = self._model(model_id)
        return await self.call(
            lambda: self.get_info(model_id), {"kind": "GetInfo", "model": model_id}, entry.session_id
        )

    def get_info(self, model_id: str) -> types.GetInfoResponse:
        entry = self._model(model_id)
        if entry.client is None:
            raise ServiceError(409, f"model {model_id} is still being created")
        return entry.client.get_info()

    def submit_train(self, model_id: str, seq_id: int | None, kind: str, fn) -> types.UntypedAPIFuture:
        """Queue a training request of ``model_id`` to run in ``seq_id`` order; ``fn(client)`` returns
        the result payload."""
        entry = self._model(model_id)
        if seq_id is None or seq_id < 1:
            raise ServiceError(400, f"{kind}: seq_id must be a positive integer, got {seq_id!r}")
        with self._lock:
            entry.last_request = datetime.now(UTC)
            if seq_id in entry.seen:  # an SDK retry of a request that arrived: the same future
                return types.UntypedAPIFuture(request_id=entry.seen[seq_id], model_id=model_id)
            if seq_id < entry.next_seq:
                raise ServiceError(409, f"{kind}: seq_id {seq_id} of model {model_id} has already run")
            if seq_id > entry.next_seq + MAX_SEQ_AHEAD:
                raise ServiceError(400, f"{kind}: seq_id {seq_id} is too far ahead of {entry.next_seq}")
            entry.refused.discard(seq_id)  # sent again after a refusal: this one counts
            p = self._pending(kind)
            entry.seen[seq_id] = p.request_id

            def run() -> Any:
                if entry.client is None:
                    raise RuntimeError(f"model {model_id} was not created")
                return fn(entry.client)

            entry.waiting[seq_id] = Job(p, run, label={"kind": kind, "model": model_id, "seq": seq_id})
            self._advance(entry)
            gap = entry.waiting and entry.next_seq not in entry.waiting
        if gap and self._loop is not None:
            self._loop.call_soon_threadsafe(
                self._loop.call_later, GAP_GRACE_SECONDS, self._skip_gap, model_id, seq_id
            )
        return types.UntypedAPIFuture(request_id=p.request_id, model_id=model_id)

    def _advance(self, entry: ModelEntry) -> None:
        """Queue the model's requests that are next in ``seq_id`` order; a refused ``seq_id`` is passed."""
        while True:
            if entry.next_seq in entry.waiting:
                self._enqueue(entry.waiting.pop(entry.next_seq), entry.session_id)
            elif entry.next_seq in entry.refused:
                entry.refused.discard(entry.next_seq)
            else:
                return
            entry.next_seq += 1

    def settle_refused(self, model_id: Any, seq_id: Any, reason: str) -> None:
        """A training request of ``model_id`` with ``seq_id`` was refused at submission (an HTTP 4xx, an
        unknown endpoint): its slot in the model's order is passed, so the client's next request runs.
        The SDK moves on to its next ``seq_id`` after any refusal; without this, every later request of
        the model would wait for the refused one for ever."""
        if not isinstance(model_id, str) or isinstance(seq_id, bool) or not isinstance(seq_id, int):
            return
        with self._lock:
            entry = self.models.get(model_id)
            if entry is None or seq_id in entry.seen or seq_id < entry.next_seq:
                return
            if seq_id > entry.next_seq + MAX_SEQ_AHEAD:
                return
            entry.refused.add(seq_id)
            self._advance(entry)
        self.log("info", "request_refused", model=model_id, seq=seq_id, reason=reason)

    def _skip_gap(self, model_id: str, seq_id: int) -> None:
        """``seq_id`` has waited ``GAP_GRACE_SECONDS`` for earlier ``seq_id``s that never arrived (a request
        the SDK numbered but never sent): pass them."""
        with self._lock:
            entry = self.models.get(model_id)
            if entry is None or not entry.waiting or entry.next_seq in entry.waiting:
                return
            first = min(entry.waiting)
            if first > seq_id:  # already run, and a later gap has its own timer
                return
            skipped = (entry.next_seq, first - 1)
            entry.next_seq = first
            self._advance(entry)
        self.log("warning", "seq_ids_skipped", model=model_id, first=skipped[0], last=skipped[1])

    def forward_backward(self, call: ForwardBackwardCall) -> types.UntypedAPIFuture:
        def fn(client: LocalTrainingClient) -> tuple[str, bytes]:
            method = client.forward if call.forward_only else client.forward_backward
            out = method(call.data, call.loss_fn, call.loss_fn_config).result()
            return PROTO_CONTENT_TYPE, encode_forward_backward_output(out)

        kind = "Forward" if call.forward_only else "ForwardBackward"
        return self.submit_train(call.model_id, call.seq_id, kind, fn)

    def optim_step(self, request: types.OptimStepRequest) -> types.UntypedAPIFuture:
        from .clients import check_adam_params

        if isinstance(request.optim_params, types.AdamParams):
            at_once(check_adam_params, request.optim_params)
        return self.submit_train(
            request.model_id,
            request.seq_id,
            "OptimStep",
            lambda c: _json(c.optim_step(request.optim_params).result()),
        )

    def save_weights(self, request: types.SaveWeightsRequest) -> types.UntypedAPIFuture:
        at_once(check_metadata, "save_weights", request.user_metadata)

        def fn(client: LocalTrainingClient) -> tuple[str, bytes]:
            if request.path == "":
                raise ParameterError("save_state: path (the checkpoint name) must not be empty")
            name = request.path if request.path is not None else f"checkpoint-{request.seq_id}"
            out = client.save_state(
                name,
                ttl_seconds=request.ttl_seconds,
                overwrite=request.overwrite,
                user_metadata=request.user_metadata,
            ).result()
            return _json(types.SaveWeightsResponse(path=out.path, type="save_weights"))

        return self.submit_train(request.model_id, request.seq_id, "SaveWeights", fn)

    def save_weights_external(self, request: types.SaveWeightsExternalRequest) -> types.UntypedAPIFuture:
        """Refused through the future (its place in the model's order is kept, so nothing waits on it)."""

        def fn(client: LocalTrainingClient) -> tuple[str, bytes]:
            raise ValueError(
                "save_weights_external is not supported by the local backend (no external-weights bucket "
                "here): use save_state or save_weights_for_sampler, whose tinker:// checkpoints are files "
                "under the server's --storage folder"
            )

        return self.submit_train(request.model_id, request.seq_id, "SaveWeightsExternal", fn)

    def save_weights_for_sampler(self, request: types.SaveWeightsForSamplerRequest) -> types.UntypedAPIFuture:
        entry = self._model(request.model_id)
        at_once(check_metadata, "save_weights_for_sampler", request.user_metadata)
        if request.path is None and request.sampling_session_seq_id is None:
            raise ServiceError(400, "save_weights_for_sampler needs a path or a sampling_session_seq_id")

        def fn(client: LocalTrainingClient) -> tuple[str, bytes]:
            if request.path is not None:
                out = client.save_weights_for_sampler(
                    request.path, ttl_seconds=request.ttl_seconds, user_metadata=request.user_metadata
                ).result()
                return _json(types.SaveWeightsForSamplerResponseInternal(path=out.path))
            if request.kind != "snapshot":
                raise ValueError(
                    f"sampling client kind {request.kind!r} is not supported locally (only 'snapshot')"
                )
            sampler = client._sampling_client_now()
            sampler_id = f"{entry.session_id}:sample:{request.sampling_session_seq_id}"
            self._add_sampler(entry.session_id, sampler_id, sampler, None)
            return _json(types.SaveWeightsForSamplerResponseInternal(sampling_session_id=sampler_id))

        return self.submit_train(request.model_id, request.seq_id, "SaveWeightsForSampler", fn)

    def load_weights(self, request: types.LoadWeightsRequest) -> types.UntypedAPIFuture:
        def response(path: str, model_id: str) -> tuple[str, bytes]:
            return _json(types.LoadWeightsResponse(path=path, model_id=model_id, type="load_weights"))

        self.own_path(request.path)
        if request.session_id is not None:  # create-via-load: the SDK named the model itself
            if request.model_seq_id is None or request.model_id is not None:
                raise ServiceError(400, "load_weights: session_id needs model_seq_id (and no model_id)")
            if request.optimizer_config is not None and request.optimizer_config.type != "adamw":
                raise ServiceError(400, "the local backend implements Adam only")
            entry, again = self._register_model(
                request.session_id, request.model_seq_id, request.base_model or "", request.user_metadata
            )
            if again is not None:
                return types.UntypedAPIFuture(request_id=again.request_id, model_id=entry.model_id)
            p = self._creation_job(
                entry,
                "LoadWeights",
                lambda: self.backend.client_from_state(
                    request.path, request.optimizer, base_model=request.base_model, model_id=entry.model_id
                ),
                lambda e: response(request.path, e.model_id),
            )
            self.log("info", "model_requested", model=entry.model_id, from_checkpoint=request.path)
            return types.UntypedAPIFuture(request_id=p.request_id, model_id=entry.model_id)
        if request.model_id is None:
            raise ServiceError(400, "load_weights needs model_id and seq_id, or session_id and model_seq_id")
        return self.submit_train(
            request.model_id,
            request.seq_id,
            "LoadWeights",
            lambda c: response(
                request.path, c._load(request.path, with_optimizer=request.optimizer).model_id
            ),
        )
