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

The pieces: ``serve_config`` (the configuration and its checks), ``auth`` (keys, identities, the private
storage folder), ``routes`` (the HTTP app); here the server's start, in this process, in a thread or in a
child process.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rftlab.runs.serving import stop_on_signals

from .auth import KEY_FILE, KeyCheck, make_private, resolve_keys
from .routes import client_config, create_app
from .serve_config import ServeConfig, ServeError, check_config, storage_of
from .service import Log, TinkerService

__all__ = [
    "ServeConfig",
    "ServeError",
    "ServerProcess",
    "ServerThread",
    "client_config",
    "make_private",
    "resolve_keys",
    "serve_tinker",
]


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
        log.always(
            "info",
            "api_key",
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
    log.always("info", "listening", url=url, base_url_env=f"TINKER_BASE_URL={url}")
    if config.stop_after_s is not None:
        timer = threading.Timer(config.stop_after_s, lambda: setattr(uv, "should_exit", True))
        timer.daemon = True
        timer.start()
    uv.capture_signals = lambda: stop_on_signals(uv, log)  # a clean exit 0, not uvicorn's re-raise
    try:
        uv.run(sockets=[sock])
    finally:
        sock.close()
    log.always("info", "stopped", url=url)
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
