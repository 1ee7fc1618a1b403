"""The HTTP routes of ``rftlab serve tinker`` (``create_app``): each endpoint of the tinker SDK's protocol
mapped onto ``TinkerService``, behind the key check, with the SDK's error shapes and one log line per
request. The ``server`` module docstring lists the routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from .auth import KeyCheck
from .limits import MAX_JSON_BODY_BYTES, MAX_PROTO_BODY_BYTES, LimitError, check_body_size, parse_json
from .service import OWNER, Log, ServiceError, TinkerService

API = "/api/v1"


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
