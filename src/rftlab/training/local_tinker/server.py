"""``rftlab serve tinker``: the local tinker backend behind the tinker SDK's HTTP protocol, so the
unmodified SDK (``tinker.ServiceClient(base_url=...)`` or ``TINKER_BASE_URL``) and tinker-cookbook recipes
run against this machine (docs/platforms.md §3.12).

    serve_tinker(ServeConfig(port=8777))          # blocks; Ctrl-C or SIGTERM stops it cleanly
    with ServerThread(ServeConfig(port=0)) as srv: # tests: in a thread, on a free port
        tinker.ServiceClient(base_url=srv.base_url, api_key=KEY)  # ServeConfig(api_keys=[KEY])

Routes (all under ``/api/v1``) are the ones tinker 0.38 calls: session (``client/config`` — whose answer
switches off JWT auth, parallel fwd/bwd chunks, zstd bodies and the session-wide futures poller —, ``client/dynamic_config``, ``create_session``, ``session_heartbeat``, ``telemetry``,
``sessions/{id}/finish``, ``get_server_capabilities``, ``healthz``), training (``create_model``,
``get_info``, ``forward_backward`` — protobuf in and out —, ``optim_step``, ``save_weights``,
``save_weights_for_sampler``, ``load_weights``), sampling (``create_sampling_session``, ``samplers/{id}``,
``asample``), futures (``retrieve_future``, ``cancel_future``) and the REST reads the cookbook makes
(``training_runs/{id}``, its ``checkpoints`` listed and deleted).

Authentication: the ``X-API-Key`` header must be one of the server's keys, first found of
``ServeConfig.api_keys``, ``--keys-file`` (a group sharing one server on purpose: one key each), the key in
the environment variable named by ``api_key_env`` (default ``TINKER_API_KEY``) when the server starts, else
the key in ``<storage>/api_key``, generated (random, mode 0600) at the first start and kept for the next
(the ``api_key`` log line names the file, never the key). Keys are compared in constant time and never
logged. Each key is an identity (``owner_of``): sessions, models, samplers, futures, training runs and
their checkpoints belong to the identity that created them, and another identity gets a 404 for them, as
for ids that do not exist (``service.OWNER``). The storage folder and everything under it is made
private (folders 0700, files 0600).
Errors: a malformed body is a 400 and an unknown id a 404 (the SDK raises ``BadRequestError`` /
``NotFoundError``), a wrong key a 401 (``AuthenticationError``), a JSON ``forward_backward`` a 415; what the
service refuses (rank, loss function, checkpoint path...) fails the request's future
(``RequestFailedError``), see ``service``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.runs.atomic import atomic_write_bytes
from rftlab.runs.serving import stop_on_signals

from .limits import (
    MAX_JSON_BODY_BYTES,
    MAX_PROTO_BODY_BYTES,
    LimitError,
    check_body_size,
    parse_json,
)
from .service import OWNER, Log, ServiceError, TinkerService

API = "/api/v1"
DEFAULT_PORT = 8777


class ServeError(RuntimeError):
    """The server cannot start as configured (the message says why)."""


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    model_dirs: Sequence[str] = ()
    device: str = "cpu"
    storage: str | os.PathLike[str] | None = None
    api_key_env: str = "TINKER_API_KEY"
    api_keys: Sequence[str] = ()
    keys_file: str | os.PathLike[str] | None = None
    sampler_dtype: str | None = None
    sampled_logprobs: str = "model"
    log_level: str = "info"
    session_timeout_s: float | None = None
    long_poll_s: float | None = None
    num_threads: int | None = 1
    stop_after_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def default_storage() -> Path:
    """Where checkpoints go when ``--storage`` is not given: beside the project's run store."""
    from rftlab.runs.paths import PROJECT_ROOT

    return PROJECT_ROOT / ".runs_local_tinker" / "service"


KEY_FILE = "api_key"
"""The generated key's file in the storage folder (mode 0600), when no key is given."""


def owner_of(key: str) -> str:
    """The identity a key stands for: a one-way digest (never the key), recorded with what it creates."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _check_key(key: str, where: str) -> str:
    if not key.startswith("tml-") or len(key) < 12 or any(c.isspace() for c in key):
        raise ServeError(
            f"{where}: a key must start with 'tml-', be 12 characters or more and hold no spaces"
        )
    return key


class KeyCheck:
    """The accepted keys of the module docstring, each one identity (the keys themselves are held only
    here). ``owner(given)`` is the identity of a sent key, ``None`` for any other."""

    def __init__(self, keys: Sequence[str], source: str) -> None:
        if not keys:
            raise ServeError(f"{source}: no key")
        if len(set(keys)) != len(keys):
            raise ServeError(f"{source}: a key is listed twice")
        self.source = source
        self._keys = [(_check_key(k, source).encode(), owner_of(k)) for k in keys]
        self.primary = self._keys[0][1]

    def owner(self, given: str | None) -> str | None:
        if not given:
            return None
        sent = given.encode()
        found = None
        for key, owner in self._keys:  # every key compared, in constant time
            if hmac.compare_digest(sent, key):
                found = owner
        return found

    def accepts(self, given: str | None) -> bool:
        return self.owner(given) is not None


def _private_file(path: Path, what: str) -> str:
    """The text of ``path``, which only its owner may read (else a ``ServeError`` saying so)."""
    try:
        info = path.stat()
        if info.st_mode & 0o077:
            raise ServeError(f"{what} {path} is readable by others: chmod 600 it")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServeError(f"{what} {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None


def stored_key(storage: Path) -> tuple[str, bool]:
    """``(key, generated)``: the key in ``storage/api_key``, made (random, mode 0600) when absent."""
    path = storage / KEY_FILE
    if path.exists():
        return _check_key(_private_file(path, "the key file").strip(), str(path)), False
    key = "tml-" + secrets.token_urlsafe(32)
    try:  # atomically (a kill never leaves an empty key file), private from its first byte, never via a link
        atomic_write_bytes(
            path, (key + "\n").encode("ascii"), check_secrets=False, mode=0o600, follow_symlinks=False
        )
    except OSError as exc:
        raise ServeError(f"cannot write the key file {path}: {exc.strerror or exc}") from None
    return key, True


def read_keys_file(path: str | os.PathLike[str]) -> list[str]:
    """The keys of a ``--keys-file``: one a line; blank lines and ``#`` comments are skipped."""
    text = _private_file(Path(path), "--keys-file")
    keys = [line.strip() for line in text.splitlines()]
    return [k for k in keys if k and not k.startswith("#")]


def resolve_keys(config: ServeConfig, storage: Path) -> tuple[KeyCheck, bool]:
    """The accepted keys, first found of: ``config.api_keys``, ``--keys-file``, ``$api_key_env``, the
    storage folder's key file (made when absent). Returns ``(keys, generated)``."""
    if config.api_keys:
        return KeyCheck(list(config.api_keys), "api_keys"), False
    if config.keys_file is not None:
        return KeyCheck(read_keys_file(config.keys_file), f"--keys-file {config.keys_file}"), False
    value = os.environ.get(config.api_key_env)
    if value:
        return KeyCheck([value], f"${config.api_key_env}"), False
    key, generated = stored_key(storage)
    return KeyCheck([key], f"the key file {storage / KEY_FILE}"), generated


def make_private(storage: Path) -> None:
    """``storage`` and everything under it: folders 0700, files 0600 (another local user lists nothing)."""
    storage.mkdir(parents=True, exist_ok=True)
    os.chmod(storage, 0o700)
    for folder, dirs, files in os.walk(storage):
        for names, mode in ((dirs, 0o700), (files, 0o600)):
            for name in names:
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    with contextlib.suppress(OSError):
                        os.chmod(path, mode)
    (storage / "tokenizers").mkdir(mode=0o700, exist_ok=True)


MAX_SECONDS = 10 * 365 * 24 * 3600.0
"""The longest ``--session-timeout`` / ``--stop-after`` (ten years; a timer of ``inf`` cannot be armed)."""


def check_config(config: ServeConfig) -> None:
    """Refuse a configuration whose numbers the server cannot honour (a ``ServeError`` naming the flag)."""
    if not 0 <= config.port <= 65535:
        raise ServeError(f"--port must be between 0 and 65535, got {config.port}")
    for flag, value in (
        ("--session-timeout", config.session_timeout_s),
        ("--stop-after", config.stop_after_s),
        ("long_poll_s", config.long_poll_s),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ServeError(f"{flag} must be a finite number of seconds, got {value!r}")
        if not 0 < value <= MAX_SECONDS:
            raise ServeError(
                f"{flag} must be more than 0 and at most {MAX_SECONDS:.0f} seconds, got {value!r}"
            )


def storage_of(config: ServeConfig) -> Path:
    return Path(config.storage) if config.storage is not None else default_storage()


def build_service(config: ServeConfig, log: Log, keys: KeyCheck | None = None) -> TinkerService:
    import torch

    from .clients import LocalServiceClient

    storage = storage_of(config)
    storage.mkdir(parents=True, exist_ok=True)
    for d in config.model_dirs:
        if not (Path(d) / "config.json").is_file():
            raise ServeError(f"--model-dir {d}: not a Hugging Face model directory (no config.json)")
    if config.device not in ("cpu", "cuda"):
        raise ServeError(f"--device must be cpu or cuda, got {config.device!r}")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ServeError("--device cuda: no CUDA device is available to torch here")
    sampler_dtype = None
    if config.sampler_dtype:
        sampler_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}.get(
            config.sampler_dtype
        )
        if sampler_dtype is None:
            raise ServeError("--sampler-dtype must be float32, bfloat16 or float64")
    backend = LocalServiceClient(
        storage_dir=storage,
        model_dirs=[str(Path(d).resolve()) for d in config.model_dirs],
        device=config.device,
        num_threads=config.num_threads,
        sampler_dtype=sampler_dtype,
        sampled_logprobs=config.sampled_logprobs,
    )
    kwargs: dict[str, Any] = {}
    if config.session_timeout_s is not None:
        kwargs["session_timeout_s"] = config.session_timeout_s
    if config.long_poll_s is not None:
        kwargs["long_poll_s"] = config.long_poll_s
    kwargs.update(config.extra)
    service = TinkerService(backend, log=log, **kwargs)
    service.default_owner = keys.primary if keys is not None else None
    return service


def client_config() -> dict[str, Any]:
    """The ``client/config`` answer: plain API keys, one fwd/bwd chunk at a time, no zstd, no session-wide
    futures poller, no server-side custom losses. The SDK's default transport (pyqwest) stays on: with it
    the SDK spent about half the CPU per sampling request that it spent on plain httpx (measured with
    ``benchmarks/bench_local_tinker.py``)."""
    return {
        "pjwt_auth_enabled": False,
        "credential_default_source": "api_key",
        "use_pyqwest_transport": True,
        "parallel_fwdbwd_chunks": False,
        "proto_compress_fwdbwd": False,
        "sample_use_retrieve_futures": False,
        "sample_join_sampling_session": False,
        "custom_loss_server_side": False,
    }


QUIET = {"/retrieve_future", "/session_heartbeat", "/telemetry"}  # logged at debug level: polled often


def _error(status: int, message: str):
    from starlette.responses import JSONResponse

    return JSONResponse({"detail": message}, status_code=status)


async def _read_body(request) -> None:
    """Read the body into the request (``request.body()`` then returns it), refusing one over its limit
    (``limits``: protobuf bodies are larger) as soon as it is known, before it is all in memory."""
    proto = "application/x-protobuf" in request.headers.get("content-type", "")
    limit = MAX_PROTO_BODY_BYTES if proto else MAX_JSON_BODY_BYTES
    check_body_size(request.headers.get("content-length"), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise LimitError(f"the body is over {limit} bytes, the limit", 413)
        chunks.append(chunk)
    request._body = b"".join(chunks)  # Starlette's cache of the body


async def _body_json(request) -> Any:
    """The body as strict JSON (``limits.parse_json``: finite numbers, bounded nesting and digits)."""
    return parse_json(await request.body())


async def _parse(request, model: type) -> Any:
    """The body validated as the SDK's request ``model``; a ``ServiceError`` 400 naming the field otherwise."""
    from pydantic import ValidationError

    data = await _body_json(request)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "body"
        raise ServiceError(400, f"{model.__name__}: {where}: {first.get('msg')}") from None


def _ok(value: Any):
    from starlette.responses import JSONResponse, Response

    if isinstance(value, Response):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json", exclude_none=True)
    return JSONResponse(value)


def _handler(fn, path: str, keys: KeyCheck, log: Log):
    """The Starlette handler of one endpoint: the key check, ``fn``, the SDK's error shapes (a bug answers
    500 with its reason; the traceback goes to the log only) and one log line (method, path, status, ms)."""

    async def handler(request):
        t0 = time.perf_counter()
        owner = keys.owner(request.headers.get("x-api-key"))
        if owner is None:
            response = _error(401, "missing or wrong API key (send this server's key in X-API-Key)")
        else:
            token = OWNER.set(owner)  # what this request may see and touch (service.OWNER)
            try:
                await _read_body(request)
                response = _ok(await fn(request))
            except ServiceError as exc:
                response = _error(exc.status, exc.message)
            except LimitError as exc:
                response = _error(exc.status, str(exc))
            except Exception as exc:  # a bug: the client gets the reason, the log the traceback
                import traceback

                log(
                    "error",
                    "request_crashed",
                    path=request.url.path,
                    reason=repr(exc),
                    traceback=traceback.format_exc(),
                )
                response = _error(500, f"internal error: {type(exc).__name__}: {exc}")
            finally:
                OWNER.reset(token)
        status = response.status_code
        level = "warning" if status >= 400 else ("debug" if path in QUIET else "info")
        log(
            level,
            "request",
            method=request.method,
            path=request.url.path,
            status=status,
            ms=round(1000 * (time.perf_counter() - t0), 2),
        )
        return response

    return handler


def _session_endpoints(service: TinkerService) -> list[tuple[str, str, Any]]:
    """Client configuration, sessions, heartbeats, telemetry and capabilities."""
    from tinker import types

    async def healthz(request):
        return {"status": "ok"}

    async def config(request):
        return client_config()

    async def dynamic_config(request):
        return types.ClientDynamicConfigResponse()

    async def create_session(request):
        return service.create_session(await _parse(request, types.CreateSessionRequest))

    async def heartbeat(request):
        service.heartbeat((await _parse(request, types.SessionHeartbeatRequest)).session_id)
        return types.SessionHeartbeatResponse()

    async def telemetry(request):
        await request.body()  # accepted and dropped
        return {"status": "accepted"}

    async def finish(request):
        body = await _body_json(request)
        reason = body.get("reason") if isinstance(body, dict) else None
        kind = reason.get("type") if isinstance(reason, dict) else None
        service.finish_session(request.path_params["session_id"], str(kind or "unknown")[:200])
        return {}

    async def capabilities(request):
        return service.backend.get_server_capabilities()

    return [
        ("GET", "/healthz", healthz),
        ("POST", "/client/config", config),
        ("POST", "/client/dynamic_config", dynamic_config),
        ("POST", "/create_session", create_session),
        ("POST", "/session_heartbeat", heartbeat),
        ("POST", "/telemetry", telemetry),
        ("POST", "/sessions/{session_id}/finish", finish),
        ("GET", "/get_server_capabilities", capabilities),
    ]


def _settling(service: TinkerService, fn):
    """``fn`` (a training request's endpoint), whose refusal at submission gives up the request's place in
    its model's ``seq_id`` order (``TinkerService.settle_refused``), so the client's next request runs."""
    from .wire import request_slot

    async def endpoint(request):
        try:
            return await fn(request)
        except Exception as exc:
            model_id, seq_id = request_slot(
                await request.body(),
                request.headers.get("content-type"),
                request.headers.get("content-encoding"),
            )
            if isinstance(exc, ServiceError):
                reason = exc.message
            else:
                reason = str(exc) if isinstance(exc, LimitError) else type(exc).__name__
            service.settle_refused(model_id, seq_id, reason)
            raise

    return endpoint


def _training_endpoints(service: TinkerService) -> list[tuple[str, str, Any]]:
    """Training models: create, info, forward_backward (protobuf only), optim_step, save and load; every
    request that takes a ``seq_id`` settles it when refused (``_settling``)."""
    from tinker import types

    from .wire import WireError, decode_forward_backward

    async def create_model(request):
        return service.create_model(await _parse(request, types.CreateModelRequest))

    async def get_info(request):
        req = await _parse(request, types.GetInfoRequest)
        return await service.model_info(req.model_id)

    async def forward_backward(request):
        if "application/x-protobuf" not in request.headers.get("content-type", ""):
            raise ServiceError(
                415, "forward_backward takes a protobuf body (Content-Type: application/x-protobuf)"
            )
        try:
            call = decode_forward_backward(await request.body(), request.headers.get("content-encoding"))
        except WireError as exc:
            raise ServiceError(400, str(exc)) from None
        return service.forward_backward(call)

    async def optim_step(request):
        return service.optim_step(await _parse(request, types.OptimStepRequest))

    async def save_weights(request):
        return service.save_weights(await _parse(request, types.SaveWeightsRequest))

    async def save_for_sampler(request):
        return service.save_weights_for_sampler(await _parse(request, types.SaveWeightsForSamplerRequest))

    async def load_weights(request):
        return service.load_weights(await _parse(request, types.LoadWeightsRequest))

    async def save_external(request):
        return service.save_weights_external(await _parse(request, types.SaveWeightsExternalRequest))

    ordered = [
        ("POST", "/forward_backward", forward_backward),
        ("POST", "/optim_step", optim_step),
        ("POST", "/save_weights", save_weights),
        ("POST", "/save_weights_for_sampler", save_for_sampler),
        ("POST", "/load_weights", load_weights),
        ("POST", "/save_weights_external", save_external),
    ]
    return [
        ("POST", "/create_model", create_model),
        ("POST", "/get_info", get_info),
        *[(method, path, _settling(service, fn)) for method, path, fn in ordered],
    ]


def _sampling_and_storage_endpoints(service: TinkerService) -> list[tuple[str, str, Any]]:
    """Samplers and sampling, the REST views of training runs, checkpoints and sessions (``rest``), and
    futures."""
    from starlette.responses import Response
    from tinker import types

    from .rest import RestViews

    views = RestViews(service)

    async def create_sampling_session(request):
        return await service.create_sampling_session(
            await _parse(request, types.CreateSamplingSessionRequest)
        )

    async def get_sampler(request):
        return service.get_sampler(request.path_params["sampler_id"])

    async def asample(request):
        return service.asample(await _parse(request, types.SampleRequest))

    async def training_runs(request):
        q = request.query_params
        return views.training_runs(q.get("limit", 20), q.get("offset", 0))

    async def training_run(request):
        return views.training_run(request.path_params["model_id"])

    async def list_checkpoints(request):
        return views.list_checkpoints(request.path_params["model_id"])

    async def user_checkpoints(request):
        q = request.query_params
        return views.user_checkpoints(q.get("limit", 100), q.get("offset", 0))

    async def delete_checkpoint(request):
        p = request.path_params
        views.delete_checkpoint(p["model_id"], p["checkpoint_id"])
        return {}

    async def set_ttl(request):
        p = request.path_params
        views.set_ttl(p["model_id"], p["checkpoint_id"], await _body_json(request))
        return {}

    async def weights_info(request):
        return views.weights_info(await _body_json(request))

    async def sessions(request):
        q = request.query_params
        return views.sessions(q.get("limit", 20), q.get("offset", 0))

    async def session(request):
        return views.session(request.path_params["session_id"])

    async def retrieve_future(request):
        req = await _parse(request, types.FutureRetrieveRequest)
        accept = "application/x-protobuf" in request.headers.get("accept", "")
        ctype, body = await service.retrieve(req.request_id, accept)
        return Response(content=body, media_type=ctype)

    async def cancel_future(request):
        await request.body()
        return {}

    return [
        ("POST", "/create_sampling_session", create_sampling_session),
        ("GET", "/samplers/{sampler_id}", get_sampler),
        ("POST", "/asample", asample),
        ("GET", "/training_runs", training_runs),
        ("GET", "/training_runs/{model_id}", training_run),
        ("GET", "/training_runs/{model_id}/checkpoints", list_checkpoints),
        ("PUT", "/training_runs/{model_id}/checkpoints/{checkpoint_id:path}/ttl", set_ttl),
        ("DELETE", "/training_runs/{model_id}/checkpoints/{checkpoint_id:path}", delete_checkpoint),
        ("GET", "/checkpoints", user_checkpoints),
        ("POST", "/weights_info", weights_info),
        ("GET", "/sessions", sessions),
        ("GET", "/sessions/{session_id}", session),
        ("POST", "/retrieve_future", retrieve_future),
        ("POST", "/cancel_future", cancel_future),
    ]


async def _unknown(request):
    raise ServiceError(
        404,
        f"no such endpoint: {request.method} {request.url.path} (not supported by rftlab serve tinker; "
        "see docs/platforms.md §3.12)",
    )


def create_app(service: TinkerService, keys: KeyCheck, log: Log, housekeeping_s: float = 10.0):
    """The ASGI app (Starlette) serving ``service``: every route checks the key, answers the SDK's shapes
    and is logged (method, path, status, milliseconds; never a header or a body)."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    @contextlib.asynccontextmanager
    async def lifespan(app):
        service.start(asyncio.get_running_loop())

        async def tidy() -> None:
            while True:
                await asyncio.sleep(housekeeping_s)
                service.housekeeping()

        task = asyncio.create_task(tidy())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.to_thread(service.stop)

    endpoints = [
        *_session_endpoints(service),
        *_training_endpoints(service),
        *_sampling_and_storage_endpoints(service),
    ]
    routes = [
        Route(API + path, _handler(fn, path, keys, log), methods=[method]) for method, path, fn in endpoints
    ]
    routes.append(
        Route(
            "/{rest:path}",
            _handler(_settling(service, _unknown), "*", keys, log),
            methods=["GET", "POST", "PUT", "DELETE", "PATCH"],
        )
    )
    return Starlette(routes=routes, lifespan=lifespan)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(512)
    sock.set_inheritable(True)
    return sock


def prepare(config: ServeConfig, log: Log):
    """Check the configuration and bind the socket: ``(uvicorn server, socket, service, url)``."""
    import uvicorn

    check_config(config)
    storage = storage_of(config)
    try:
        make_private(storage)
    except OSError as exc:
        raise ServeError(f"--storage {storage}: {exc.strerror or exc}") from None
    keys, generated = resolve_keys(config, storage)
    service = build_service(config, log, keys)
    sock = _bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    app = create_app(service, keys, log, housekeeping_s=min(10.0, service.session_timeout_s / 3))
    uv = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=30,
            server_header=False,
            date_header=False,
        )
    )
    log(
        "info",
        "configured",
        url=url,
        storage=str(service.backend.storage_dir),
        models=service.backend.served_models(),
        device=config.device,
        sampler_dtype=config.sampler_dtype or "same as trainer",
        sampled_logprobs=config.sampled_logprobs,
        auth=keys.source,
    )
    if keys.source.startswith("the key file"):  # its owner reads it there; the key is never logged
        key_file = str(storage / KEY_FILE)
        log(
            "info",
            "api_key",
            always=True,
            key_file=key_file,
            generated=generated,
            hint=f"export {config.api_key_env}=$(cat {key_file})",
        )
    return uv, sock, service, url


def serve_tinker(config: ServeConfig, log: Log | None = None) -> int:
    """Run the server until SIGINT/SIGTERM (clean shutdown: the running job finishes, checkpoints are
    whole on disk). Returns the exit code."""
    log = log or Log(level=config.log_level)
    uv, sock, service, url = prepare(config, log)
    log("info", "listening", always=True, url=url, base_url_env=f"TINKER_BASE_URL={url}")
    if config.stop_after_s is not None:
        timer = threading.Timer(config.stop_after_s, lambda: setattr(uv, "should_exit", True))
        timer.daemon = True
        timer.start()
    uv.capture_signals = lambda: stop_on_signals(uv, log)  # a clean exit 0, not uvicorn's re-raise
    try:
        uv.run(sockets=[sock])
    finally:
        sock.close()
    log("info", "stopped", always=True, url=url)
    return 0


class ServerThread:
    """The server in a background thread of this process (tests, notebooks, the benchmark)."""

    def __init__(self, config: ServeConfig, log: Log | None = None) -> None:
        self.log = log or Log(level=config.log_level)
        self.server, self._sock, self.service, self.base_url = prepare(config, self.log)
        self._thread = threading.Thread(target=self._run, name="rftlab-tinker-server", daemon=True)

    def _run(self) -> None:
        self.server.run(sockets=[self._sock])

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ServeError("the server thread did not start")
            time.sleep(0.01)
        self.log("info", "listening", url=self.base_url)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(60)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class ServerProcess:
    """``rftlab serve tinker`` in a child process, for tests of kills and restarts and for the benchmark.
    Its JSON-line log is collected in ``lines``; ``base_url`` is read from its ``listening`` line."""

    def __init__(
        self,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        python: str | None = None,
        timeout: float = 180.0,
        api_key: str | None = None,
    ) -> None:
        import sys

        self.argv = [python or sys.executable, "-m", "rftlab.cli", "serve", "tinker", *args]
        if "--port" not in args:
            self.argv += ["--port", "0"]
        if api_key is not None:  # the one key the child accepts (its $TINKER_API_KEY)
            env = {**(env if env is not None else os.environ), "TINKER_API_KEY": api_key}
        self.env = env
        self.timeout = timeout
        self.lines: list[str] = []
        self.base_url: str | None = None
        self.proc: Any = None

    def start(self) -> ServerProcess:
        import subprocess

        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env
        )
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                if self.base_url is None and '"event":"listening"' in line:
                    try:
                        self.base_url = json.loads(line)["url"]
                    except (json.JSONDecodeError, KeyError):
                        continue
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(self.timeout) or self.base_url is None:
            self.kill()
            raise ServeError("the server process did not start:\n" + "\n".join(self.lines[-20:]))
        return self

    @property
    def port(self) -> int:
        assert self.base_url is not None
        return int(self.base_url.rsplit(":", 1)[1])

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in list(self.lines):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("event") == name:
                out.append(record)
        return out

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: the clean shutdown. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.terminate(30)
            except Exception:
                self.kill()
