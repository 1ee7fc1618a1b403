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
import contextvars
import itertools
import json
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tinker import types

from rftlab.runs.serving import Log

from .checkpoints import CheckpointError, parse_path, private_dir, read_run_record
from .clients import LocalSamplingClient, LocalServiceClient, LocalTrainingClient
from .engine import check_sampling_params
from .errors import NonFiniteError, ParameterError
from .limits import LimitError, check_metadata, check_num_samples, check_shape
from .losses import DatumError
from .scheduler import PIECE_ROWS, Scheduler
from .wire import (
    PROTO_CONTENT_TYPE,
    ForwardBackwardCall,
    encode_forward_backward_output,
    encode_sample_response,
)

LONG_POLL_SECONDS = 20.0
"""How long ``retrieve_future`` holds a poll open before answering ``try_again`` (the SDK gives up on a
poll after 45 s)."""
SESSION_TIMEOUT_SECONDS = 300.0
"""A session without a heartbeat or request for this long expires (the SDK heartbeats every 10 s)."""
RESULT_KEEP_SECONDS = 60.0
"""A retrieved result is kept this long (a poll whose answer was lost can ask again), then dropped."""
UNRETRIEVED_KEEP_SECONDS = 3600.0
"""A result nobody retrieved is dropped after this long."""
SAMPLE_BATCH_GAP_SECONDS = 0.03
SAMPLE_BATCH_FIRST_GAP_SECONDS = 0.005
SAMPLE_BATCH_MAX_SECONDS = 0.5
"""Sampling requests are collected into one batch while they keep arriving: after a lone request the
worker waits ``FIRST_GAP`` for a second one; once two or more are queued it keeps waiting while they
arrive less than ``GAP`` apart, for at most ``MAX``. The SDK sends a step's requests in a burst (one HTTP
request per prompt), and one batch of a burst runs several times faster than the burst in pieces: on
the tiny model a decode batch costs about the same for 1 row as for 64 (measured)."""
MAX_SEQ_AHEAD = 100_000
"""A training request may be at most this many ``seq_id`` ahead of the next one to run."""
GAP_GRACE_SECONDS = 1.0
"""How long a training request waits for earlier ``seq_id``s that have not arrived before they are passed.
The SDK sends a model's requests one at a time, each after the previous one was accepted or refused, so a
missing ``seq_id`` is one the SDK numbered and then never sent (it failed in the client); requests refused
here settle their slot at once (``settle_refused``)."""


OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("rftlab_tinker_owner", default=None)
"""The identity (``server.owner_of`` of the API key) of the request being served. Sessions, models,
samplers, futures and training runs belong to the identity that created them; another identity is
answered as if they did not exist (404). ``None`` (the worker thread, in-process callers) sees everything."""


class ServiceError(Exception):
    """A request refused at once with an HTTP status (the SDK raises it as its typed error)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Pending:
    """A request future: pending until the worker stores a payload or an error."""

    request_id: str
    kind: str
    created: float
    event: asyncio.Event
    done: bool = False
    payload: tuple[str, bytes] | None = None  # (content type, body)
    error: str | None = None
    category: str = "user"
    retrieved_at: float | None = None
    owner: str | None = None


@dataclass
class Job:
    pending: Pending | None
    fn: Callable[[], Any] | None = None
    sample: SampleCall | None = None
    label: dict[str, Any] = field(default_factory=dict)
    on_done: Callable[[Any, BaseException | None], None] | None = None

    @property
    def rows(self) -> int:
        """Samples of a sampling piece (the scheduler's batch budget); 0 for any other job."""
        return self.sample.rows if self.sample is not None else 0


@dataclass
class SampleCall:
    """One piece of a sampling request: samples ``first_row .. first_row + rows - 1`` of it."""

    sampler: LocalSamplingClient
    request: types.SampleRequest
    index: int
    first_row: int
    rows: int
    gather: Gather


class Gather:
    """The pieces of one sampling request, put back together: when the last piece is in, the request's
    future gets the whole response (or the first piece's error)."""

    def __init__(self, pieces: int) -> None:
        self.pieces = pieces
        self.parts: dict[int, types.SampleResponse] = {}
        self.error: BaseException | None = None

    def add(self, first_row: int, result: types.SampleResponse | None, exc: BaseException | None) -> bool:
        """Record one piece; True once every piece is in."""
        if exc is not None and self.error is None:
            self.error = exc
        if result is not None:
            self.parts[first_row] = result
        self.pieces -= 1
        return self.pieces == 0

    def response(self) -> types.SampleResponse:
        first = self.parts[0]
        sequences = [seq for row in sorted(self.parts) for seq in self.parts[row].sequences]
        return types.SampleResponse(sequences=sequences, prompt_logprobs_np=first.prompt_logprobs_np)


@dataclass
class Session:
    session_id: str
    created: float
    last_seen: float
    user_metadata: dict[str, Any]
    models: list[str] = field(default_factory=list)
    samplers: list[str] = field(default_factory=list)
    finished: str | None = None
    owner: str | None = None


@dataclass
class ModelEntry:
    model_id: str
    session_id: str
    base_model: str
    user_metadata: dict[str, Any]
    client: LocalTrainingClient | None = None
    next_seq: int = 1
    waiting: dict[int, Job] = field(default_factory=dict)
    seen: dict[int, str] = field(default_factory=dict)
    refused: set[int] = field(default_factory=set)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    last_request: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class SamplerEntry:
    sampler_id: str
    session_id: str
    client: LocalSamplingClient
    base_model: str
    model_path: str | None
    seen: dict[int, tuple[str, list[str]]] = field(default_factory=dict)


def _json(model: Any) -> tuple[str, bytes]:
    """A result as strict JSON: a NaN or an infinity (which ``json.dumps`` would write as invalid JSON that
    the SDK cannot read) is refused as ``NonFiniteError``."""
    data = model.model_dump(mode="json", exclude_none=True) if hasattr(model, "model_dump") else model
    try:
        return "application/json", json.dumps(data, allow_nan=False).encode()
    except ValueError:
        raise NonFiniteError(f"the result holds a NaN or an infinity: {data!r}") from None


def at_once(check: Callable[..., None], *args: Any) -> None:
    """Run a parameter ``check`` at submission: its refusal is a 400 (``BadRequestError``) at once, not a
    failed future."""
    try:
        check(*args)
    except (LimitError, ParameterError) as exc:
        raise ServiceError(getattr(exc, "status", 400), str(exc)) from None


def _failure(exc: BaseException) -> tuple[str, str]:
    """``(reason, category)`` of an exception raised by a request: what the service refuses is the
    user's; anything else is the server's."""
    if isinstance(exc, (DatumError, CheckpointError, ValueError, TypeError, KeyError, AssertionError)):
        reason = str(exc) if not isinstance(exc, KeyError) else f"missing {exc}"
        return reason or type(exc).__name__, "user"
    return f"{type(exc).__name__}: {exc}", "server"


class TinkerService:
    """See the module docstring. ``backend`` runs the computations; ``log`` records events."""

    def __init__(
        self,
        backend: LocalServiceClient,
        *,
        log: Log | None = None,
        clock: Callable[[], float] = time.monotonic,
        long_poll_s: float = LONG_POLL_SECONDS,
        session_timeout_s: float = SESSION_TIMEOUT_SECONDS,
        batch_gap_s: float = SAMPLE_BATCH_GAP_SECONDS,
        batch_max_s: float = SAMPLE_BATCH_MAX_SECONDS,
    ) -> None:
        self.backend = backend
        self.log = log or Log()
        self.clock = clock
        self.long_poll_s = long_poll_s
        self.session_timeout_s = session_timeout_s
        self.batch_gap_s = batch_gap_s
        self.batch_max_s = batch_max_s
        self.sessions: dict[str, Session] = {}
        self.models: dict[str, ModelEntry] = {}
        self.samplers: dict[str, SamplerEntry] = {}
        self.futures: dict[str, Pending] = {}
        self._lock = threading.RLock()
        self._scheduler = Scheduler()
        self._stopping = False
        self._worker: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ids = itertools.count()
        self.default_owner: str | None = None
        """The identity of a training run whose record names none (written before records had one)."""
        self.counts = {"jobs": 0, "sample_batches": 0, "sample_requests": 0, "errors": 0}

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

    # ------------------------------------------------------------------------------- identity

    @staticmethod
    def mine(owner: str | None) -> bool:
        """Whether the identity serving this request (``OWNER``) may see what ``owner`` created."""
        current = OWNER.get()
        return current is None or owner == current

    def session_owner(self, session_id: str) -> str | None:
        with self._lock:
            s = self.sessions.get(session_id)
        return s.owner if s is not None else self.default_owner

    def run_owner(self, model_id: str) -> str | None:
        """The identity of a training run: its live session's, else its ``run.json``'s."""
        with self._lock:
            entry = self.models.get(model_id)
        if entry is not None:
            return self.session_owner(entry.session_id)
        record = read_run_record(self.backend.storage_dir, model_id)
        owner = record.get("owner") if record is not None else None
        return owner if isinstance(owner, str) else self.default_owner

    def own_path(self, path: Any) -> str:
        """``path``, unless it is a checkpoint path of another identity's run: then a 404, as for a missing
        checkpoint."""
        try:
            model_id, _, _ = parse_path(path)
        except CheckpointError:
            return path  # malformed: refused where it is used, with the reason
        if not self.mine(self.run_owner(model_id)):
            raise ServiceError(404, f"checkpoint {path} not found")
        return path

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:16]}-{next(self._ids)}"

    # -------------------------------------------------------------------------------- sessions

    def create_session(self, request: types.CreateSessionRequest) -> types.CreateSessionResponse:
        at_once(check_metadata, "create_session", request.user_metadata)
        session_id = str(uuid.uuid4())
        now = self.clock()
        with self._lock:
            self.sessions[session_id] = Session(
                session_id, now, now, dict(request.user_metadata or {}), owner=OWNER.get()
            )
        self.log("info", "session_created", session=session_id, sdk_version=request.sdk_version)
        return types.CreateSessionResponse(session_id=session_id)

    def session(self, session_id: str) -> Session:
        with self._lock:
            s = self.sessions.get(session_id)
            if s is None or not self.mine(s.owner):
                raise ServiceError(
                    404, f"unknown session {session_id!r} (it expired, or the server restarted)"
                )
            if s.finished:
                raise ServiceError(410, f"session {session_id} has finished ({s.finished})")
            s.last_seen = self.clock()
            return s

    def heartbeat(self, session_id: str) -> None:
        with self._lock:
            s = self.sessions.get(session_id)
            if s is None or s.finished or not self.mine(s.owner):  # another's: as an unknown one
                known = s is not None and self.mine(s.owner)
                raise ServiceError(410, f"session {session_id} is {'finished' if known else 'unknown'}")
            s.last_seen = self.clock()

    def finish_session(self, session_id: str, reason: str) -> None:
        with self._lock:
            s = self.sessions.get(session_id)
            if s is None or not self.mine(s.owner):
                raise ServiceError(404, f"unknown session {session_id!r}")
            if s.finished:
                return
            s.finished = reason
            released = self._release(s)
        self.log("info", "session_finished", session=session_id, reason=reason, **released)

    def _release(self, s: Session) -> dict[str, int]:
        models = [m for m in s.models if self.models.pop(m, None) is not None]
        samplers = [x for x in s.samplers if self.samplers.pop(x, None) is not None]
        s.models, s.samplers = [], []
        return {"models_released": len(models), "samplers_released": len(samplers)}

    def housekeeping(self) -> None:
        """Expire silent sessions and drop old results (called periodically by the server)."""
        now = self.clock()
        expired = []
        with self._lock:
            for s in self.sessions.values():
                if not s.finished and now - s.last_seen > self.session_timeout_s:
                    s.finished = "expired"
                    expired.append((s.session_id, self._release(s)))
            stale = [
                rid
                for rid, p in self.futures.items()
                if p.done
                and (
                    (p.retrieved_at is not None and now - p.retrieved_at > RESULT_KEEP_SECONDS)
                    or (p.retrieved_at is None and now - p.created > UNRETRIEVED_KEEP_SECONDS)
                )
            ]
            for rid in stale:
                del self.futures[rid]
            old = [k for k, s in self.sessions.items() if s.finished and now - s.last_seen > 24 * 3600]
            for k in old:
                del self.sessions[k]
        for session_id, released in expired:
            self.log("warning", "session_expired", session=session_id, **released)

    # -------------------------------------------------------------------------------- futures

    def _pending(self, kind: str) -> Pending:
        p = Pending(self._new_id("req"), kind, self.clock(), asyncio.Event(), owner=OWNER.get())
        with self._lock:
            self.futures[p.request_id] = p
        return p

    def _enqueue(self, job: Job, lane: str) -> None:
        """Queue ``job`` in ``lane`` (its session; see ``scheduler``)."""
        if self._stopping:
            raise ServiceError(503, "the server is shutting down")
        try:
            self._scheduler.put(lane, job)
        except RuntimeError:
            raise ServiceError(503, "the server is shutting down") from None

    def _resolve(self, p: Pending, payload: tuple[str, bytes] | None, exc: BaseException | None) -> None:
        with self._lock:
            if exc is not None:
                p.error, p.category = _failure(exc)
            else:
                p.payload = payload
            p.done = True
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(p.event.set)
            except RuntimeError:  # the loop is closed (shutdown)
                pass

    async def retrieve(self, request_id: str, accept_proto: bool) -> tuple[str, bytes]:
        """The result of a future (long-polling up to ``long_poll_s``), ``try_again`` or its error."""
        with self._lock:
            p = self.futures.get(request_id)
        if p is None or not self.mine(p.owner):
            raise ServiceError(
                404, f"unknown request id {request_id!r} (its result expired, or the server restarted)"
            )
        if not p.done:
            try:
                await asyncio.wait_for(p.event.wait(), self.long_poll_s)
            except TimeoutError:
                body = {"type": "try_again", "request_id": request_id, "queue_state": "active"}
                return "application/json", json.dumps(body).encode()
        with self._lock:
            p.retrieved_at = self.clock()
        if p.error is not None:
            return "application/json", json.dumps({"error": p.error, "category": p.category}).encode()
        assert p.payload is not None
        ctype, body = p.payload
        if ctype == PROTO_CONTENT_TYPE and not accept_proto:
            raise ServiceError(406, "this result is served as protobuf only (Accept: application/x-protobuf)")
        return ctype, body

    async def call(self, fn: Callable[[], Any], label: dict[str, Any], lane: str) -> Any:
        """Run ``fn`` on the worker (models are touched by one thread only), in ``lane``'s turn, and return
        its value."""
        assert self._loop is not None
        fut: asyncio.Future[Any] = self._loop.create_future()

        def done(value: Any, exc: BaseException | None) -> None:
            def deliver() -> None:
                if fut.done():
                    return
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(value)

            self._loop.call_soon_threadsafe(deliver)

        self._enqueue(Job(None, fn, label=label, on_done=done), lane)
        return await fut

    # ---------------------------------------------------------------------------------- models

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

    # -------------------------------------------------------------------------------- samplers

    def _add_sampler(
        self, session_id: str, sampler_id: str, client: LocalSamplingClient, model_path: str | None
    ) -> None:
        with self._lock:
            s = self.sessions.get(session_id)
            self.samplers[sampler_id] = SamplerEntry(
                sampler_id, session_id, client, client.get_base_model(), model_path
            )
            if s is not None:
                s.samplers.append(sampler_id)

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
