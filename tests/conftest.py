"""Test-wide guards: no test may reach a real platform or read a developer's credentials."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Must be set before litellm is ever imported (docs/platforms.md §4.5).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MPLBACKEND", "Agg")

# Property tests explore new random examples on every developer run; CI (CI=true) replays a fixed,
# derandomised set so a green commit stays green. A counterexample found locally becomes a regression test.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    _hypothesis_settings.load_profile("ci")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture(autouse=True)
def _offline_guards(monkeypatch, tmp_path, request):
    if request.node.get_closest_marker("live"):
        if os.environ.get("RFTLAB_LIVE") != "1":
            pytest.skip("live test: set RFTLAB_LIVE=1 and provide credentials in the environment")
        return
    for key in (
        "FIREWORKS_API_KEY",
        "TINKER_API_KEY",
        "TINKER_CREDENTIAL_CMD",
        "TINKER_BASE_URL",
        "WANDB_API_KEY",
    ):
        monkeypatch.delenv(key, raising=False)
    (tmp_path / "home").mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EP_NO_UPLOAD", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    # the default run store (rftlab.runs.paths.runs_root) is a fresh folder: no test writes into runs/
    monkeypatch.setenv("RFTLAB_RUNS_ROOT", str(tmp_path / "runs-store"))
    # independent runs go one after the other here (pytest -n already uses the cores); the tests of
    # rftlab.runs.parallel set their own worker counts
    monkeypatch.setenv("RFTLAB_WORKERS", "1")


@pytest.fixture
def shared_dir() -> Path:
    """The read-only ../shared folder (reference data); tests that need it skip when it is absent."""
    if not SHARED.is_dir():
        pytest.skip(f"reference data folder {SHARED} is absent (it sits beside the clone in CI)")
    return SHARED


@pytest.fixture
def no_network(monkeypatch):
    """Refuse (and record) every non-loopback connection or DNS lookup made in this process during the
    test; the test fails if one was attempted. Loopback servers (the local policy server) still work."""
    import socket

    local = {"127.0.0.1", "::1", "localhost", "0.0.0.0", None}
    attempts: list[str] = []
    real_connect, real_gai = socket.socket.connect, socket.getaddrinfo

    def connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in local:
            attempts.append(f"connect {address!r}")
            raise OSError(f"network access refused in an offline test: {address!r}")
        return real_connect(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        h = host.decode() if isinstance(host, bytes) else host
        if h not in local:
            attempts.append(f"getaddrinfo {h!r}")
            raise OSError(f"DNS lookup refused in an offline test: {h!r}")
        return real_gai(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield attempts
    assert not attempts, f"the test tried to reach the network: {attempts}"


def _loopback_url(url: str | None) -> bool:
    from urllib.parse import urlparse

    return bool(url) and urlparse(url).hostname in ("127.0.0.1", "localhost", "::1")


@pytest.fixture(autouse=True)
def _no_real_tinker_clients(monkeypatch, request):
    """Constructing a real tinker client in an offline test fails at once (with a key and no network a
    real ``create_lora_training_client`` blocks for ~300 s): inject a fake or the local backend. A client
    whose base URL (argument or ``TINKER_BASE_URL``) is a loopback address talks to a local
    ``rftlab serve tinker`` and is allowed."""
    if request.node.get_closest_marker("live"):
        return
    try:
        import tinker
    except ImportError:  # the tinker extra is not installed
        return

    def _guard(real):
        def make(*args, **kwargs):
            if _loopback_url(kwargs.get("base_url") or os.environ.get("TINKER_BASE_URL")):
                return real(*args, **kwargs)
            raise RuntimeError("real tinker client in an offline test; inject a fake or the local backend")

        return make

    monkeypatch.setattr(tinker, "ServiceClient", _guard(tinker.ServiceClient))
    monkeypatch.setattr(tinker, "RestClient", _guard(tinker.RestClient))


class FireworksApiRecorder:
    """A loopback stand-in for the Fireworks REST API (api.fireworks.ai cannot be reached from a test),
    for driving eval-protocol's real upload code offline through ``FIREWORKS_API_BASE``. It imitates
    ``GET /verifyApiKey`` (200 with the ``x-fireworks-account-id`` header eval-protocol derives the account
    from) and refuses every other request with 403 (as the API does for a key without rights), recording
    method, path and body of each request in ``calls``. Used as a context manager; ``base_url`` to point
    clients at it."""

    def __init__(self, account: str = "acct-under-test"):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        calls: list[dict] = []
        self.calls, self.account = calls, account

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                calls.append({"method": self.command, "path": self.path, "body": body})
                headers = {}
                if self.path.rstrip("/").endswith("/verifyApiKey"):
                    payload, status, headers = b"{}", 200, {"x-fireworks-account-id": account}
                else:
                    message = {"error": {"code": 403, "message": "refused by the test recorder"}}
                    payload, status = json.dumps(message).encode(), 403
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, *args):  # keep test output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def fireworks_api():
    """A running ``FireworksApiRecorder`` (see its docstring)."""
    with FireworksApiRecorder() as recorder:
        yield recorder


@pytest.fixture
def fireworks_api_class():
    """The ``FireworksApiRecorder`` class, for helpers that start one themselves (test modules cannot
    import from this conftest by name: several conftest modules exist)."""
    return FireworksApiRecorder


# ------------------------------------------------------------------ a tinker service that answers some calls


class ScriptedTinkerService:
    """A tinker ``ServiceClient`` over a real one (``LocalServiceClient``) whose training clients' samplers
    answer each request, chosen by ``pick(seed)``, with the ``valid`` reply (0), the ``bad`` one (1), or
    pass it to the model (2). It imitates no service: it gives a tiny random model's groups rewards that
    differ and puts a malformed tool call in the run. Replies are encoded once with the agent model's
    tokenizer."""

    def __init__(self, inner, valid: str, bad: str, pick=lambda seed: seed % 3):
        from rftlab.training.cookbook_envs import make_renderer
        from rftlab.training.local_tinker.model import AGENT_MODEL

        tok = make_renderer(AGENT_MODEL).tokenizer
        self.inner, self.pick = inner, pick
        self.replies = tuple(tok.encode(text, add_special_tokens=False) for text in (valid, bad))

    def create_lora_training_client(self, **kw):
        return _ScriptedTraining(self.inner.create_lora_training_client(**kw).result(), self)

    def create_training_client_from_state_with_optimizer(self, path):
        return _ScriptedTraining(
            self.inner.create_training_client_from_state_with_optimizer(path).result(), self
        )


class _ScriptedTraining:
    def __init__(self, inner, service: ScriptedTinkerService):
        self._inner, self._service = inner, service

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def save_weights_and_get_sampling_client_async(self, *a, **kw):
        inner = await self._inner.save_weights_and_get_sampling_client_async(*a, **kw)
        return _ScriptedSampler(inner, self._service)


class _ScriptedSampler:
    def __init__(self, inner, service: ScriptedTinkerService):
        self.inner, self._service = inner, service

    async def sample_async(self, prompt, num_samples, sampling_params, **kw):
        import numpy as np
        from tinker import types

        pick = self._service.pick(sampling_params.seed)
        if pick == 2:
            return await self.inner.sample_async(
                prompt=prompt, num_samples=num_samples, sampling_params=sampling_params, **kw
            )
        tokens = np.array(self._service.replies[pick])
        seq = types.SampledSequence(
            stop_reason="stop", sequence_id="s", tokens_np=tokens, logprobs_np=np.full(len(tokens), -0.5)
        )
        return types.SampleResponse(sequences=[seq])


@pytest.fixture(scope="session")
def scripted_tinker_service():
    """The ``ScriptedTinkerService`` class (test modules cannot import from this conftest by name)."""
    return ScriptedTinkerService


@pytest.fixture
def as_nobody():
    """Run ``argv`` as uid and gid ``nobody`` (65534) with system tools only, to act as another local user;
    skipped unless the tests run as root. This machine's Python lives in a folder only root can enter, so
    the other user's probes are ``ls``, ``cat`` and ``curl``."""
    import subprocess

    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to start a child as another uid")

    def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, user=65534, group=65534, env={"PATH": "/usr/bin:/bin"}, cwd=str(cwd),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    return run
