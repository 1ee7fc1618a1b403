"""What ``TinkerService`` keeps and for how long: its timing constants, the request identity (``OWNER``),
the records of sessions, models, samplers, request futures and worker jobs, and the error an HTTP
status refuses a request with (``ServiceError``). The ``service`` module docstring says how they are used.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict

from tinker import types

from .checkpoints import CheckpointError
from .errors import NonFiniteError, ParameterError
from .limits import LimitError
from .losses import DatumError
from .sampling_client import LocalSamplingClient
from .training_client import LocalTrainingClient

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
"""The identity (``auth.owner_of`` of the API key) of the request being served. Sessions, models,
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


class Released(TypedDict):
    """What ending a session released (logged with the event that ended it)."""

    models_released: int
    samplers_released: int


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
