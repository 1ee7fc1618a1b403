"""``rftlab serve fireworks``: the local control plane on a loopback port.

    serve_fireworks(FireworksServeConfig(port=8778))        # blocks; Ctrl-C or SIGTERM stops it cleanly
    with FireworksServerThread(FireworksServeConfig(port=0, api_keys={KEY: "acct"})) as srv:
        Fireworks(api_key=KEY, account_id="acct", base_url=srv.base_url)   # tests, notebooks

Keys: each accepted key stands for one account. First found of: ``api_keys`` (key → account), a
``--keys-file`` (mode 0600, one ``<account-id> <key>`` a line, ``#`` comments), the key in
``$FIREWORKS_API_KEY`` (``--api-key-env``) for ``--account-id`` (default ``$FIREWORKS_ACCOUNT_ID``, else
``local``), else a key generated into ``<storage>/api_key`` (mode 0600) at the first start. Keys are
compared in constant time and never logged. The storage folder is made private (0700) and holds every
resource as JSON, the uploaded files and the evaluators' code; never a key or a secret value.

Stopping (SIGINT/SIGTERM) ends every running job's evaluator process; those jobs become
``JOB_STATE_FAILED`` (``ABORTED``) and can be resumed after a restart on the same storage folder.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.runs.atomic import atomic_write_bytes
from rftlab.runs.serving import Log, is_loopback, stop_on_signals

from . import evaluators, jobs
from .http import create_app
from .runner import JobRunner, Policy
from .state import SIGNED_URL_TTL_S, ControlPlane, private_dir

DEFAULT_PORT = 8778
KEY_FILE = "api_key"
ACCOUNT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
DEFAULT_ACCOUNT = "local"
DEFAULT_POLICY = "accumulate"


class ServeError(RuntimeError):
    """The server cannot start as configured (the message says why, in one line)."""


@dataclass
class FireworksServeConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    storage: str | os.PathLike[str] | None = None
    api_key_env: str = "FIREWORKS_API_KEY"
    account_id: str | None = None
    keys_file: str | os.PathLike[str] | None = None
    api_keys: Mapping[str, str] = field(default_factory=dict)  # key -> account
    policy: str = DEFAULT_POLICY
    policy_url: str | None = None
    fail_epoch: int | None = None
    drop_chunk: tuple[int, int] | None = None  # (epoch, chunk) never written
    archive_epoch: int | None = None
    build_seconds: float = 0.0
    signed_url_ttl_s: float = SIGNED_URL_TTL_S
    max_running_jobs: int = 1
    log_level: str = "info"
    stop_after_s: float | None = None


def default_storage() -> Path:
    from rftlab.runs.paths import PROJECT_ROOT

    return PROJECT_ROOT / ".runs_local_fireworks"


def _check_key(key: str, where: str) -> str:
    if len(key) < 8 or not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        raise ServeError(f"{where}: a key must be 8 or more printable ASCII characters without spaces")
    return key


def _check_account(account: str, where: str) -> str:
    if not ACCOUNT_RE.match(account):
        raise ServeError(f"{where}: account id {account[:64]!r} must be letters, digits, '.', '_' or '-'")
    return account


def _private_text(path: Path, what: str) -> str:
    try:
        if path.stat().st_mode & 0o077:
            raise ServeError(f"{what} {path} is readable by others: chmod 600 it")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServeError(f"{what} {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None


def read_keys_file(path: Path) -> dict[str, str]:
    """``<account-id> <key>`` lines (blank lines and ``#`` comments skipped) as key → account."""
    keys: dict[str, str] = {}
    for number, raw in enumerate(_private_text(path, "--keys-file").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ServeError(f"--keys-file {path} line {number}: expected '<account-id> <key>'")
        account, key = _check_account(parts[0], f"line {number}"), _check_key(parts[1], f"line {number}")
        if key in keys:
            raise ServeError(f"--keys-file {path} line {number}: a key is listed twice")
        keys[key] = account
    if not keys:
        raise ServeError(f"--keys-file {path}: no key")
    return keys


def resolve_keys(config: FireworksServeConfig, storage: Path) -> tuple[dict[str, str], str]:
    """``(key -> account, where they came from)`` (module docstring)."""
    if config.api_keys:
        return {
            _check_key(k, "api_keys"): _check_account(a, "api_keys") for k, a in config.api_keys.items()
        }, "api_keys"
    if config.keys_file is not None:
        return read_keys_file(Path(config.keys_file)), f"--keys-file {config.keys_file}"
    account = _check_account(
        config.account_id or os.environ.get("FIREWORKS_ACCOUNT_ID") or DEFAULT_ACCOUNT, "--account-id"
    )
    value = os.environ.get(config.api_key_env)
    if value:
        return {_check_key(value, f"${config.api_key_env}"): account}, f"${config.api_key_env}"
    path = storage / KEY_FILE
    if path.exists():
        return {
            _check_key(_private_text(path, "the key file").strip(), str(path)): account
        }, f"the key file {path}"
    key = "fw_local_" + secrets.token_urlsafe(24)
    atomic_write_bytes(path, (key + "\n").encode(), check_secrets=False, mode=0o600, follow_symlinks=False)
    return {key: account}, f"the key file {path}"


def key_lookup(keys: Mapping[str, str]) -> Callable[[str | None], str | None]:
    """``lookup(sent) -> account`` (``None`` for any other key); every key is compared, in constant time."""
    table = [(k.encode(), a) for k, a in keys.items()]

    def lookup(sent: str | None) -> str | None:
        if not sent:
            return None
        given, found = sent.encode(), None
        for key, account in table:
            if hmac.compare_digest(given, key):
                found = account
        return found

    return lookup


class PolicySource:
    """The rollouts' policy: ``policy_url`` when given, else the project's policy server started on first
    use (``rftlab.policies.server.PolicyServer``, every servable scripted policy)."""

    def __init__(self, name: str, url: str | None) -> None:
        self.name, self.url, self.server, self._lock = name, url, None, threading.Lock()

    def __call__(self) -> Policy:
        with self._lock:
            if self.url is None:
                from rftlab.policies.server import PolicyServer

                self.server = PolicyServer().start()
                self.url = self.server.base_url
            return Policy(f"openai/{self.name}", self.url)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def check_config(config: FireworksServeConfig) -> None:
    if not is_loopback(config.host):
        raise ServeError(f"--host {config.host}: the local control plane listens on loopback addresses only")
    if not 0 <= config.port <= 65535:
        raise ServeError(f"--port must be between 0 and 65535, got {config.port}")
    if config.fail_epoch is not None and not 0 <= config.fail_epoch <= 1000:
        raise ServeError(f"--fail-epoch must be from 0 to 1000, got {config.fail_epoch}")
    if config.archive_epoch is not None and not 0 <= config.archive_epoch <= 1000:
        raise ServeError(f"--archive-epoch must be from 0 to 1000, got {config.archive_epoch}")
    if config.drop_chunk is not None and not all(0 <= v <= 100_000 for v in config.drop_chunk):
        raise ServeError(f"--drop-chunk epoch and chunk must be from 0 to 100000, got {config.drop_chunk}")
    for flag, value in (
        ("--build-seconds", config.build_seconds),
        ("--signed-url-ttl", config.signed_url_ttl_s),
    ):
        if not isinstance(value, int | float) or not 0 <= value <= 86400:
            raise ServeError(f"{flag} must be a number of seconds from 0 to 86400, got {value!r}")
    if config.stop_after_s is not None and not 0 < config.stop_after_s <= 86400 * 365:
        raise ServeError(f"--stop-after must be more than 0 seconds, got {config.stop_after_s!r}")
    if not 1 <= config.max_running_jobs <= 64:
        raise ServeError(f"--max-running-jobs must be from 1 to 64, got {config.max_running_jobs}")


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock


@dataclass
class Prepared:
    uvicorn: Any
    sock: socket.socket
    plane: ControlPlane
    runner: JobRunner
    policy: PolicySource
    url: str


def prepare(config: FireworksServeConfig, log: Log) -> Prepared:
    """Check the configuration, load the storage folder, bind the socket and wire the app."""
    import uvicorn

    check_config(config)
    storage = Path(config.storage) if config.storage is not None else default_storage()
    try:
        private_dir(storage)
        os.chmod(storage, 0o700)
    except OSError as exc:
        raise ServeError(f"--storage {storage}: {exc.strerror or exc}") from None
    keys, source = resolve_keys(config, storage)
    plane = ControlPlane(storage, signed_url_ttl_s=config.signed_url_ttl_s)
    jobs.interrupted(plane)
    policy = PolicySource(config.policy, config.policy_url)
    runner = JobRunner(
        plane,
        policy,
        max_running=config.max_running_jobs,
        fail_epoch=config.fail_epoch,
        drop_chunk=config.drop_chunk,
        archive_epoch=config.archive_epoch,
        log=log,
    )
    plane.on_job_changed = runner.changed

    def build(account: str, ev_id: str) -> None:
        args = (plane, account, ev_id, config.build_seconds)
        threading.Thread(target=evaluators.run_build, args=args, name=f"build-{ev_id}", daemon=True).start()

    plane.on_evaluator_uploaded = build
    for account, ev_id in evaluators.left_building(plane):
        build(account, ev_id)
    sock = _bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    plane.base_url = url
    app = create_app(plane, key_lookup(keys), log)
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", server_header=False)
    )
    log("info", "configured", url=url, storage=str(storage), auth=source, accounts=sorted(set(keys.values())))
    if source.startswith("the key file"):
        log.always(
            "info",
            "api_key",
            key_file=str(storage / KEY_FILE),
            hint="export FIREWORKS_API_KEY=$(cat <key_file>)",
        )
    return Prepared(server, sock, plane, runner, policy, url)


def _shutdown(p: Prepared, log: Log) -> None:
    p.runner.stop()
    p.policy.stop()
    p.sock.close()
    log.always("info", "stopped", url=p.url)


def serve_fireworks(config: FireworksServeConfig, log: Log | None = None) -> int:
    """Run until SIGINT/SIGTERM (or ``stop_after_s``); returns the exit code."""
    log = log or Log(level=config.log_level)
    p = prepare(config, log)
    log.always("info", "listening", url=p.url, base_url_env=f"FIREWORKS_BASE_URL={p.url}")
    if config.stop_after_s is not None:
        timer = threading.Timer(config.stop_after_s, lambda: setattr(p.uvicorn, "should_exit", True))
        timer.daemon = True
        timer.start()
    p.uvicorn.capture_signals = lambda: stop_on_signals(p.uvicorn, log)
    try:
        p.uvicorn.run(sockets=[p.sock])
    finally:
        _shutdown(p, log)
    return 0


class FireworksServerThread:
    """The server in a background thread of this process (tests and notebooks): ``base_url``, ``plane``."""

    def __init__(self, config: FireworksServeConfig, log: Log | None = None) -> None:
        self.log = log or Log(level=config.log_level)
        self.prepared = prepare(config, self.log)
        self.base_url, self.plane, self.runner = self.prepared.url, self.prepared.plane, self.prepared.runner
        self._thread = threading.Thread(
            target=lambda: self.prepared.uvicorn.run(sockets=[self.prepared.sock]),
            name="rftlab-fireworks",
            daemon=True,
        )

    def start(self) -> FireworksServerThread:
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self.prepared.uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ServeError("the server thread did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.prepared.uvicorn.should_exit = True
        self._thread.join(60)
        _shutdown(self.prepared, self.log)

    def __enter__(self) -> FireworksServerThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
