"""The core of ``TinkerService``: its state, who may see what (``OWNER``), sessions, request futures and
calls run on the worker thread (``ServiceCore``). The training and sampling requests build on it
(``service_training``, ``service_sampling``); the ``service`` module docstring describes the protocol.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tinker import types

from rftlab.runs.serving import Log

from .checkpoints import CheckpointError, parse_path, read_run_record
from .clients import LocalServiceClient
from .limits import check_metadata
from .sampling_client import LocalSamplingClient
from .scheduler import Scheduler
from .service_records import (
    LONG_POLL_SECONDS,
    OWNER,
    RESULT_KEEP_SECONDS,
    SAMPLE_BATCH_GAP_SECONDS,
    SAMPLE_BATCH_MAX_SECONDS,
    SESSION_TIMEOUT_SECONDS,
    UNRETRIEVED_KEEP_SECONDS,
    Job,
    ModelEntry,
    Pending,
    Released,
    SamplerEntry,
    ServiceError,
    Session,
    _failure,
    at_once,
)
from .wire import PROTO_CONTENT_TYPE


class ServiceCore:
    """The state and the session and future handling of ``TinkerService`` (see the ``service`` module
    docstring). ``backend`` runs the computations; ``log`` records events."""

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

    def _release(self, s: Session) -> Released:
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
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[Any] = loop.create_future()

        def done(value: Any, exc: BaseException | None) -> None:
            def deliver() -> None:
                if fut.done():
                    return
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(value)

            loop.call_soon_threadsafe(deliver)

        self._enqueue(Job(None, fn, label=label, on_done=done), lane)
        return await fut

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
