"""``rftlab serve tinker``: the local tinker backend behind the tinker SDK's HTTP protocol, so the
unmodified SDK (``tinker.ServiceClient(base_url=...)`` or ``TINKER_BASE_URL``) and tinker-cookbook recipes
run against this machine (docs/platforms.md §3.12).

    serve_tinker(ServeConfig(port=8777))          # blocks; Ctrl-C or SIGTERM stops it cleanly
    with ServerThread(ServeConfig(port=0)) as srv: # tests: in a thread, on a free port
        tinker.ServiceClient(base_url=srv.base_url, api_key="tml-local")

Routes (all under ``/api/v1``) are the ones tinker 0.38 calls: session (``client/config`` — whose answer
switches off JWT auth, parallel fwd/bwd chunks, zstd bodies and the session-wide futures poller —, ``client/dynamic_config``, ``create_session``, ``session_heartbeat``, ``telemetry``,
``sessions/{id}/finish``, ``get_server_capabilities``, ``healthz``), training (``create_model``,
``get_info``, ``forward_backward`` — protobuf in and out —, ``optim_step``, ``save_weights``,
``save_weights_for_sampler``, ``load_weights``), sampling (``create_sampling_session``, ``samplers/{id}``,
``asample``), futures (``retrieve_future``, ``cancel_future``) and the REST reads the cookbook makes
(``training_runs/{id}``, its ``checkpoints`` listed and deleted).

Authentication: the ``X-API-Key`` header must equal the key in the environment variable named by
``api_key_env`` (default ``TINKER_API_KEY``); with that variable unset any ``tml-`` key is accepted and
only a loopback address may be bound. The key is compared in constant time and never logged or stored.
Errors: a malformed body is a 400 and an unknown id a 404 (the SDK raises ``BadRequestError`` /
``NotFoundError``), a wrong key a 401 (``AuthenticationError``), a JSON ``forward_backward`` a 415; what the
service refuses (rank, loss function, checkpoint path...) fails the request's future
(``RequestFailedError``), see ``service``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .service import Log, ServiceError, TinkerService

API = "/api/v1"
DEFAULT_PORT = 8777
LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


class ServeError(RuntimeError):
    """The server cannot start as configured (the message says why)."""


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    model_dirs: Sequence[str] = ()
    device: str = "cpu"
    storage: str | os.PathLike[str] | None = None
    api_key_env: str = "TINKER_API_KEY"
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


class KeyCheck:
    """The API-key rule of the module docstring (the key itself is held only here)."""

    def __init__(self, env_name: str) -> None:
        self.env_name = env_name
        value = os.environ.get(env_name) or None
        if value is not None and not value.startswith("tml-"):
            raise ServeError(f"the key in ${env_name} must start with 'tml-' (the tinker SDK sends no other)")
        self._expected = value.encode() if value else None

    @property
    def exact(self) -> bool:
        return self._expected is not None

    def accepts(self, given: str | None) -> bool:
        if not given:
            return False
        if self._expected is None:
            return given.startswith("tml-")
        return hmac.compare_digest(given.encode(), self._expected)


def build_service(config: ServeConfig, log: Log) -> TinkerService:
    import torch

    from .clients import LocalServiceClient

    storage = Path(config.storage) if config.storage is not None else default_storage()
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
    return TinkerService(backend, log=log, **kwargs)


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


async def _body_json(request) -> Any:
    try:
        return json.loads(await request.body() or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ServiceError(400, "the body is not valid JSON") from None


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
        if not keys.accepts(request.headers.get("x-api-key")):
            response = _error(401, "missing or wrong API key (send this server's key in X-API-Key)")
        else:
            try:
                response = _ok(await fn(request))
            except ServiceError as exc:
                response = _error(exc.status, exc.message)
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
        reason = (body.get("reason") or {}).get("type", "unknown") if isinstance(body, dict) else "unknown"
        service.finish_session(request.path_params["session_id"], str(reason))
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
            reason = exc.message if isinstance(exc, ServiceError) else type(exc).__name__
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

    keys = KeyCheck(config.api_key_env)
    if not keys.exact and not is_loopback(config.host):
        raise ServeError(
            f"refusing to listen on {config.host}: with ${config.api_key_env} unset any 'tml-' key is accepted, "
            f"so only a loopback address may be bound (export {config.api_key_env}=tml-... to serve beyond "
            "this machine)"
        )
    service = build_service(config, log)
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
        auth=f"exact key from ${config.api_key_env}" if keys.exact else "any tml- key (loopback only)",
    )
    return uv, sock, service, url


@contextlib.contextmanager
def _stop_on_signals(uv: Any, log: Log):
    """SIGINT/SIGTERM ask uvicorn for a graceful shutdown (a second one forces it)."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: Any) -> None:
        log("info", "shutdown_requested", signal=signal.Signals(signum).name)
        if uv.should_exit:
            uv.force_exit = True
        uv.should_exit = True

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
    uv.capture_signals = lambda: _stop_on_signals(uv, log)  # a clean exit 0, not uvicorn's re-raise
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
    ) -> None:
        import sys

        self.argv = [python or sys.executable, "-m", "rftlab.cli", "serve", "tinker", *args]
        if "--port" not in args:
            self.argv += ["--port", "0"]
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
