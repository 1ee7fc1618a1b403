"""A local OpenAI-compatible chat server in front of scripted spectrum policies.

``/v1/chat/completions`` answers with the served policy's action as a ``submit_report`` tool call (see
``rftlab.policies.spectrum.chat`` for how the observation is rebuilt from the messages); ``/v1/models``
lists the served policies — only those that can answer over chat (a policy that reads hidden ground truth
is not served). The request's ``model`` picks the policy (``openai/accumulate`` through litellm arrives as
``accumulate``). A real ASGI stack (FastAPI on uvicorn) bound to 127.0.0.1 only, so eval-protocol, litellm
and the openai client run end to end offline against it.

    with PolicyServer() as srv:                       # every servable policy of RFT_POLICIES, a free port
        completion_params = {"model": "openai/accumulate", "base_url": srv.base_url}

Episodes: a request carrying the episode from scan 1 is answered by replaying a fresh policy over its
scans (stateless; safe under concurrency). A windowed request (only the current scan) continues the
policy state of its session, keyed by ``(model, X-Rftlab-Session header or the body's user)``; concurrent
windowed episodes must send distinct keys (the bench-shaped rollout processor sends the header; litellm
drops ``user`` for ``openai/`` models).

What a request may be (anything else is refused, never a traceback):

- a body of at most ``max_body_bytes`` (default 4 MiB; 413 beyond), strict JSON (no NaN/Infinity, no
  number that overflows, nesting that Python can parse), an object of the OpenAI chat shape
  (``ChatRequest``: ``messages`` a list of ``{role, content}`` with ``content`` a string, a list of text
  parts or null, ``tool_calls`` a list, ``tools`` a list of ``{type: function, function: {name}}``);
- ``n`` from 1 to ``max_n`` (default 16): each choice gets its own tool-call ids;
- ``max_tokens`` / ``max_completion_tokens``, when given, from 1 to ``context_tokens`` (default
  ``CONTEXT_TOKENS``, the served model's context);
- ``tool_choice``: ``"none"`` gets the action as text and no tool call; ``"auto"``/``"required"`` or a
  named function (the served tool) get the call; ``stream`` with ``stream_options.include_usage`` gets a
  final usage chunk.

Errors are OpenAI-shaped JSON (``{"error": {"message", "type", "code"}}``): 400 (bad request or a scan the
policy cannot answer), 401 (wrong key), 404 (unknown model or route), 405, 413 (body too large), 500
(a defect, without a traceback). Memory is bounded: at most ``max_sessions`` episode sessions (least
recently used dropped first) and, when a request log is kept, its last ``max_logged`` bodies. A client that
disconnects before its request was read is one short warning line in the log, never a traceback.

Command line (for notebooks and manual checks): ``python -m rftlab.policies.server --port 8011``; a port in
use is one line on stderr and exit 2.

(No ``from __future__ import annotations`` here: FastAPI resolves the handlers' ``Request`` annotation at
runtime, and the handlers import it lazily.)
"""

import argparse
import copy
import errno
import json
import logging
import math
import socket
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.policies.poker.chat import PromptParseError
from rftlab.policies.spectrum.chat import ChatPolicyError, ChatSession, HiddenNotAvailable, ScanParseError

HOST = "127.0.0.1"
SESSION_HEADER = "x-rftlab-session"  # per-episode key of windowed requests (or the body's `user`)
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_N = 16
MAX_LOGGED = 10_000
MAX_LOGGED_BYTES = 64 * 1024 * 1024
CONTEXT_TOKENS = 40_960
"""The served model's context: the scripted policies stand in for Qwen3-1.7B, the spectrum arms' default
base model (``rftlab.launch.spectrum.tinker``), whose config has 40,960 positions (as every Qwen3 up to
8B); ``max_tokens`` beyond it could never be honoured."""
_log = logging.getLogger(__name__)
ANSWER_ERRORS = (ScanParseError, ChatPolicyError, HiddenNotAvailable, PromptParseError)


# ----------------------------------------------------------------------------------- policies


def chat_refusal(factory: Callable[[], Any]) -> str | None:
    """Why a spectrum policy cannot answer over chat (it reads hidden ground truth), or ``None``: the
    policy is asked for scan 1 of a probe band through the same chat adapter the server uses."""
    scan = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo")).reset("chat_probe_0").text
    try:
        ChatSession(factory).respond([{"role": "user", "content": scan}])
    except HiddenNotAvailable as exc:
        return str(exc)
    except Exception:  # noqa: BLE001 - any other failure shows up, with its reason, when the policy is asked
        return None
    return None


def default_policies() -> dict[str, Callable[[], Any]]:
    """Every RFT reference policy that can answer over chat, by name (``chat_refusal``)."""
    from rftlab.policies.spectrum.reference import RFT_POLICIES

    return {name: f for name, f in RFT_POLICIES.items() if chat_refusal(f) is None}


def unservable_policies() -> dict[str, str]:
    """``{name: why}`` of the RFT reference policies that cannot answer over chat."""
    from rftlab.policies.spectrum.reference import RFT_POLICIES

    return {name: why for name, f in RFT_POLICIES.items() if (why := chat_refusal(f)) is not None}


# ------------------------------------------------------------------------------ request shape


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class _ContentPart(_Shape):
    type: StrictStr
    text: StrictStr | None = None


class _Function(_Shape):
    name: StrictStr = Field(max_length=256)
    arguments: StrictStr | dict[str, Any] | None = None


class _ToolCall(_Shape):
    id: StrictStr | None = Field(None, max_length=256)
    type: StrictStr = "function"
    function: _Function


class _Message(_Shape):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: StrictStr | list[_ContentPart] | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: StrictStr | None = None
    name: StrictStr | None = None


class _ToolFunction(_Shape):
    name: StrictStr = Field(max_length=256)


class _Tool(_Shape):
    type: Literal["function"] = "function"
    function: _ToolFunction


class _NamedChoice(_Shape):
    type: Literal["function"] = "function"
    function: _ToolFunction


class _StreamOptions(_Shape):
    include_usage: StrictBool = False


class ChatRequest(_Shape):
    """The chat-completion request this server accepts (OpenAI's shape; unknown fields are ignored)."""

    model: StrictStr = Field(max_length=512)
    messages: list[_Message] = Field(max_length=100_000)
    tools: list[_Tool] | None = Field(None, max_length=1024)
    tool_choice: Literal["none", "auto", "required"] | _NamedChoice | None = None
    n: StrictInt | None = None
    stream: StrictBool | None = False
    stream_options: _StreamOptions | None = None
    user: StrictStr | None = Field(None, max_length=512)
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: StrictInt | None = None
    max_completion_tokens: StrictInt | None = None

    def plain_messages(self) -> list[dict[str, Any]]:
        """The messages as plain dicts for the chat adapters, with a list of text parts joined into one
        string (what real clients send as ``content``)."""
        out = []
        for m in self.messages:
            d = m.model_dump(exclude_none=True)
            if isinstance(m.content, list):
                d["content"] = "".join(p.text or "" for p in m.content if p.type in ("text", "input_text"))
            out.append(d)
        return out


class RequestRefused(Exception):
    """A request the server answers with an OpenAI-style error (``status``, one-line ``message``)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} overflows a float")
    return value


def token_limit_refusal(name: str, value: object, limit: int) -> str | None:
    """Why ``value`` is no ``max_tokens``-like count (an integer from 1 to ``limit``), or ``None``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        shown = repr(value) if not isinstance(value, str) else repr(value[:40])
        return f"{name} must be an integer from 1 to {limit} (the served model's context), got {shown[:60]}"
    return None


def parse_request(raw: bytes, max_n: int = MAX_N, context_tokens: int = CONTEXT_TOKENS) -> ChatRequest:
    """A request body → ``ChatRequest``, or ``RequestRefused(400)`` saying what is wrong in one line."""
    try:
        body = json.loads(raw or b"{}", parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise RequestRefused(400, "request body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestRefused(
            400, f"request body is not valid JSON ({' '.join(str(exc).split())[:200]})"
        ) from None
    if not isinstance(body, dict):
        raise RequestRefused(400, "request body must be a JSON object")
    if not isinstance(body.get("messages"), list):
        raise RequestRefused(400, "messages must be a list of objects")
    try:
        request = ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise RequestRefused(400, f"{where}: {first['msg']}"[:300]) from None
    except RecursionError:
        raise RequestRefused(400, "request body is nested too deeply") from None
    n = 1 if request.n is None else request.n
    if not 1 <= n <= max_n:
        raise RequestRefused(400, f"n must be an integer from 1 to {max_n}, got {n}")
    for name in ("max_tokens", "max_completion_tokens"):
        if (why := token_limit_refusal(name, getattr(request, name), context_tokens)) is not None:
            raise RequestRefused(400, why)
    return request


# ---------------------------------------------------------------------------------- sessions


class SessionTable:
    """Episode sessions by key, least recently used dropped first beyond ``limit``; thread-safe."""

    def __init__(self, adapter: Callable[[Callable[[], Any]], Any], limit: int):
        self.adapter, self.limit = adapter, max(1, int(limit))
        self._sessions: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def respond(self, key: tuple[str, str], factory: Callable[[], Any], messages: list[dict[str, Any]]):
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = self.adapter(factory)
                while len(self._sessions) > self.limit:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(key)
            return session.respond(messages)


class RequestLog(list):
    """Request bodies received: the most recent ones, at most ``maxlen`` of them and about ``max_bytes`` of
    request JSON in all (a list, so tests can slice it)."""

    def __init__(self, maxlen: int = MAX_LOGGED, max_bytes: int = MAX_LOGGED_BYTES):
        super().__init__()
        self.maxlen, self.max_bytes = maxlen, max_bytes
        self._sizes: list[int] = []

    def append(self, item: Any, size: int | None = None) -> None:
        super().append(item)
        self._sizes.append(len(json.dumps(item, default=str)) if size is None else size)
        drop = 0
        total = sum(self._sizes)
        while len(self) - drop > 1 and (len(self) - drop > self.maxlen or total > self.max_bytes):
            total -= self._sizes[drop]
            drop += 1
        if drop:
            del self[:drop]
            del self._sizes[:drop]


# ---------------------------------------------------------------------------------- replies


def _usage(messages: Any, reply: Mapping[str, Any]) -> dict[str, int]:
    prompt = max(1, len(json.dumps(messages)) // 4)
    completion = max(1, len(json.dumps(reply)) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def as_text(reply: Mapping[str, Any]) -> dict[str, Any]:
    """``tool_choice="none"``: the reply without tool calls, the intended call(s) written as text."""
    calls = reply.get("tool_calls") or []
    text = "\n".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)
    return {"role": "assistant", "content": text or reply.get("content") or ""}


def choices_of(reply: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """``n`` choices of ``reply``; every choice after the first gets fresh tool-call ids."""
    out = []
    for i in range(n):
        message = copy.deepcopy(dict(reply))
        if i and message.get("tool_calls"):
            for call in message["tool_calls"]:
                call["id"] = "call_" + uuid.uuid4().hex[:12]
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        out.append({"index": i, "message": message, "finish_reason": finish, "logprobs": None})
    return out


def _sse(cid: str, created: int, model: str, choices: list[dict[str, Any]], usage: dict[str, int] | None):
    """The choices as server-sent chat.completion.chunk events (a delta and a finish per choice), the usage
    chunk when asked for, then [DONE]."""
    base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
    for choice in choices:
        message = choice["message"]
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(message["tool_calls"])]
        for part in (
            {"index": choice["index"], "delta": delta, "finish_reason": None},
            {"index": choice["index"], "delta": {}, "finish_reason": choice["finish_reason"]},
        ):
            yield f"data: {json.dumps(dict(base, choices=[part]))}\n\n"
    if usage is not None:
        yield f"data: {json.dumps(dict(base, choices=[], usage=usage))}\n\n"
    yield "data: [DONE]\n\n"


# ---------------------------------------------------------------------------------------- app


def _error(status: int, message: str, kind: str = "invalid_request_error"):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


async def _read_body(request: Any, limit: int) -> bytes:
    """The body, refusing (413) one larger than ``limit`` bytes before reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise RequestRefused(413, f"request body of {int(declared)} bytes exceeds the limit of {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestRefused(413, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def quiet_disconnects(app: Any) -> None:
    """A client that hangs up before its request body was read gets nothing (it is gone) and costs one
    short warning line in the log: not the framework's traceback."""
    from starlette.requests import ClientDisconnect
    from starlette.responses import Response

    @app.exception_handler(ClientDisconnect)
    async def gone(request, exc: ClientDisconnect):
        _log.warning(
            "client disconnected mid-request (%s %s); not answered", request.method, request.url.path
        )
        return Response(status_code=400)


def _install_error_handlers(app: Any) -> None:
    """Every error the framework raises (unknown route, wrong method) or a handler did not expect gets
    the OpenAI error shape, never FastAPI's ``{"detail": ...}`` or a traceback."""
    from starlette.exceptions import HTTPException

    quiet_disconnects(app)

    @app.exception_handler(RequestRefused)
    async def refused(request, exc: RequestRefused):
        return _error(exc.status, exc.message, exc.kind)

    @app.exception_handler(HTTPException)
    async def http_error(request, exc: HTTPException):
        if exc.status_code == 404:
            message = (
                f"unknown route {request.method} {request.url.path}: this server answers GET /v1/models and "
                "POST /v1/chat/completions"
            )
            return _error(404, message, "not_found")
        if exc.status_code == 405:
            return _error(405, f"method {request.method} is not allowed on {request.url.path}")
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def defect(request, exc: Exception):
        return _error(
            500, f"internal error ({type(exc).__name__}); the request was not answered", "server_error"
        )


def _served_and_refused(
    policies: Mapping[str, Callable[[], Any]] | None, chat
) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """The policies the server answers with, and the refused ones with the reason (with the spectrum
    adapter, a policy that reads hidden ground truth cannot answer over chat)."""
    served = dict(policies) if policies is not None else default_policies()
    refused: dict[str, str] = {}
    if chat is None:
        refused = {name: why for name, f in served.items() if (why := chat_refusal(f)) is not None}
        if policies is None:
            refused.update(unservable_policies())
        served = {name: f for name, f in served.items() if name not in refused}
    return served, refused


class _ChatResponder:
    """Turns a validated chat request into the served policy's reply (a tool call, or text with
    ``tool_choice="none"``); every refusal is a ``RequestRefused`` with an OpenAI-style status."""

    def __init__(self, served, refused, adapter, max_sessions: int):
        self.served, self.refused = served, refused
        self.tool = getattr(adapter, "tool", "submit_report")
        self.sessions = SessionTable(adapter, max_sessions)

    def policy_for(self, model: str) -> tuple[str, Callable[[], Any]]:
        name = model.split("/")[-1]
        if name in self.refused:
            raise RequestRefused(404, f"model {name!r} is not served: {self.refused[name]}", "not_found")
        if name not in self.served:
            raise RequestRefused(
                404, f"model {model!r} is not served here (served: {', '.join(self.served)})", "not_found"
            )
        return name, self.served[name]

    def answer(self, request, body: ChatRequest) -> dict[str, Any]:
        name, factory = self.policy_for(body.model)
        tool = self.tool
        offered = {t.function.name for t in body.tools or []}
        if tool not in offered:
            raise RequestRefused(400, f"the request offers no {tool} tool, so the policy cannot answer")
        if isinstance(body.tool_choice, _NamedChoice) and body.tool_choice.function.name != tool:
            raise RequestRefused(
                400,
                f"tool_choice names {body.tool_choice.function.name!r}, but this policy can only call {tool}",
            )
        key = (name, request.headers.get(SESSION_HEADER) or (body.user or ""))
        try:
            reply = self.sessions.respond(key, factory, body.plain_messages())
        except ANSWER_ERRORS as exc:
            raise RequestRefused(
                400, f"policy {name!r} cannot answer: {' '.join(str(exc).split())[:300]}"
            ) from None
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError) as exc:
            # a message shape the adapter did not expect: the request's fault, said in one line
            raise RequestRefused(
                400, f"policy {name!r} cannot read these messages ({type(exc).__name__}: {str(exc)[:200]})"
            ) from None
        return as_text(reply) if body.tool_choice == "none" else reply


def _completion(body: ChatRequest, reply: dict[str, Any]):
    """The chat completion of ``reply`` with ``n`` choices: a JSON body, or server-sent events when the
    request streams (with a final usage chunk when it asks for one)."""
    from fastapi.responses import JSONResponse, StreamingResponse

    choices = choices_of(reply, body.n or 1)
    cid, created = "chatcmpl-" + uuid.uuid4().hex[:16], int(time.time())
    usage = _usage(body.plain_messages(), reply)
    if body.stream:
        wants_usage = bool(body.stream_options and body.stream_options.include_usage)
        events = _sse(cid, created, body.model, choices, usage if wants_usage else None)
        return StreamingResponse(events, media_type="text/event-stream")
    return JSONResponse(
        {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": body.model,
            "choices": choices,
            "usage": usage,
        }
    )


def create_app(
    policies: Mapping[str, Callable[[], Any]] | None = None,
    *,
    api_key: str | None = None,
    request_log: list[dict[str, Any]] | None = None,
    max_sessions: int = 4096,
    chat: Callable[[Callable[[], Any]], Any] | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_n: int = MAX_N,
    context_tokens: int = CONTEXT_TOKENS,
):
    """The FastAPI app. ``policies`` maps model names to zero-argument policy factories (default: every
    servable RFT policy). With ``api_key`` every request must carry ``Authorization: Bearer <api_key>``.
    Request bodies (never headers) are appended to ``request_log`` when given. At most ``max_sessions``
    episode sessions are kept. ``chat`` is the chat adapter class, built per session from a policy factory,
    with a ``respond(messages)`` method and the name of its ``tool`` (default the spectrum ``ChatSession``
    and ``submit_report``; ``rftlab.policies.poker.chat.PokerChat`` serves poker policies with
    ``poker_act``). Limits: module docstring."""
    from fastapi import FastAPI, Request

    served, refused = _served_and_refused(policies, chat)
    responder = _ChatResponder(served, refused, chat or ChatSession, max_sessions)
    app = FastAPI(title="rftlab policy server", docs_url=None, redoc_url=None, openapi_url=None)
    _install_error_handlers(app)

    def authorise(request: Request) -> None:
        if api_key is not None and request.headers.get("authorization", "") != f"Bearer {api_key}":
            raise RequestRefused(401, "invalid API key", "authentication_error")

    @app.get("/v1/models")
    async def models(request: Request):
        authorise(request)
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "rftlab"} for name in served]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        authorise(request)
        raw = await _read_body(request, max_body_bytes)
        body = parse_request(raw, max_n, context_tokens)
        if isinstance(request_log, RequestLog):
            request_log.append(json.loads(raw), len(raw))
        elif request_log is not None:
            request_log.append(json.loads(raw))
        return _completion(body, responder.answer(request, body))

    return app


# ------------------------------------------------------------------------------------- server


class PortInUseError(OSError):
    """The requested port on 127.0.0.1 is taken."""


class PolicyServer:
    """``create_app`` served by uvicorn on a daemon thread, on 127.0.0.1 and a free port (or ``port``).

    ``start()``/``stop()`` or a ``with`` block; ``base_url`` is ``http://127.0.0.1:<port>/v1``;
    ``requests`` holds the request bodies received (the last ``MAX_LOGGED``, for assertions)."""

    def __init__(
        self,
        policies: Mapping[str, Callable[[], Any]] | None = None,
        *,
        port: int = 0,
        api_key: str | None = None,
        chat: Callable[[Callable[[], Any]], Any] | None = None,
        **limits: Any,
    ):
        self.requests: list[dict[str, Any]] = RequestLog()
        self.app = create_app(policies, api_key=api_key, request_log=self.requests, chat=chat, **limits)
        self._port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the policy server is not running")
        return f"http://{HOST}:{self.port}/v1"

    def start(self, timeout: float = 15.0) -> "PolicyServer":
        import uvicorn

        if not isinstance(self._port, int) or isinstance(self._port, bool) or not 0 <= self._port <= 65535:
            raise ValueError(f"port must be an integer from 0 to 65535, got {self._port!r}")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, self._port))
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    exc.errno,
                    f"port {self._port} on {HOST} is already in use (another server?); choose another with "
                    "--port, or --port 0 for a free one",
                ) from None
            raise
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="rftlab-policy-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the policy server did not start on {HOST}:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> "PolicyServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    prog = "python -m rftlab.policies.server"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve the spectrum reference policies over an OpenAI-compatible API on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8011, help="port on 127.0.0.1 (default 8011; 0 = free)")
    parser.add_argument(
        "--api-key-env",
        default=None,
        help="require the key held in this environment variable (Authorization: Bearer ...)",
    )
    args = parser.parse_args(argv)
    import os

    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be from 0 to 65535, got {args.port}")
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not key:
        parser.error(f"environment variable {args.api_key_env} is empty or unset")
    try:
        srv = PolicyServer(port=args.port, api_key=key).start()
    except PortInUseError as exc:
        print(f"{prog}: error: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"serving {', '.join(default_policies())} at {srv.base_url} (Ctrl-C to stop)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
