"""A local OpenAI-compatible chat server in front of scripted spectrum policies.

``/v1/chat/completions`` answers with the served policy's action as a ``submit_report`` tool call (see
``rftlab.policies.spectrum.chat`` for how the observation is rebuilt from the messages); ``/v1/models``
lists the served policies. The request's ``model`` picks the policy (``openai/accumulate`` through litellm
arrives as ``accumulate``). A real ASGI stack (FastAPI on uvicorn) bound to 127.0.0.1 only, so
eval-protocol, litellm and the openai client run end to end offline against it.

    with PolicyServer() as srv:                       # every policy of RFT_POLICIES, a free port
        completion_params = {"model": "openai/accumulate", "base_url": srv.base_url}

Episodes: a request carrying the episode from scan 1 is answered by replaying a fresh policy over its
scans (stateless; safe under concurrency). A windowed request (only the current scan) continues the
policy state of its session, keyed by ``(model, X-Rftlab-Session header or the body's user)``; concurrent
windowed episodes must send distinct keys (the bench-shaped rollout processor sends the header; litellm
drops ``user`` for ``openai/`` models). Errors are OpenAI-shaped JSON with status 400
(bad request or a scan the policy cannot answer), 401 (wrong key) or 404 (unknown model).

Command line (for notebooks and manual checks): ``python -m rftlab.policies.server --port 8011``.

(No ``from __future__ import annotations`` here: FastAPI resolves the handlers' ``Request`` annotation at
runtime, and the handlers import it lazily.)
"""

import argparse
import json
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from rftlab.policies.poker.chat import PromptParseError
from rftlab.policies.spectrum.chat import ChatPolicyError, ChatSession, HiddenNotAvailable, ScanParseError

HOST = "127.0.0.1"
SESSION_HEADER = "x-rftlab-session"  # per-episode key of windowed requests (or the body's `user`)


def default_policies() -> dict[str, Callable[[], Any]]:
    """Every RFT reference policy by name (those reading hidden ground truth answer with an error)."""
    from rftlab.policies.spectrum.reference import RFT_POLICIES

    return dict(RFT_POLICIES)


def _error(status: int, message: str, kind: str = "invalid_request_error"):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _usage(messages: Any, reply: Mapping[str, Any]) -> dict[str, int]:
    prompt = max(1, len(json.dumps(messages)) // 4)
    completion = max(1, len(json.dumps(reply)) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def create_app(
    policies: Mapping[str, Callable[[], Any]] | None = None,
    *,
    api_key: str | None = None,
    request_log: list[dict[str, Any]] | None = None,
    max_sessions: int = 4096,
    chat: Callable[[Callable[[], Any]], Any] | None = None,
):
    """The FastAPI app. ``policies`` maps model names to zero-argument policy factories. With ``api_key``
        every request must carry ``Authorization: Bearer <api_key>``. Request bodies (never headers) are
        appended to ``request_log`` when given. At most ``max_sessions`` episode sessions are kept (the least
    recently used is dropped first). ``chat`` is the chat adapter class, built per session from a policy
    factory, with a ``respond(messages)`` method and the name of its ``tool`` (default the spectrum
    ``ChatSession`` and ``submit_report``; ``rftlab.policies.poker.chat.PokerChat`` serves poker policies
    with ``poker_act``)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    served = dict(policies) if policies is not None else default_policies()
    adapter = chat or ChatSession
    tool = getattr(adapter, "tool", "submit_report")
    sessions: OrderedDict[tuple[str, str], ChatSession] = OrderedDict()  # least recently used first
    lock = threading.Lock()
    app = FastAPI(title="rftlab policy server", docs_url=None, redoc_url=None, openapi_url=None)

    def authorised(request: Request) -> bool:
        if api_key is None:
            return True
        return request.headers.get("authorization", "") == f"Bearer {api_key}"

    @app.get("/v1/models")
    async def models(request: Request):
        if not authorised(request):
            return _error(401, "invalid API key", "authentication_error")
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "rftlab"} for name in served]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        if not authorised(request):
            return _error(401, "invalid API key", "authentication_error")
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        if request_log is not None:
            request_log.append(body)
        model = str(body.get("model") or "")
        name = model.split("/")[-1]
        if name not in served:
            return _error(
                404, f"model {model!r} is not served here (served: {', '.join(served)})", "not_found"
            )
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return _error(400, "messages must be a list of objects")
        tools = body.get("tools") or []
        tool_names = {(t.get("function") or {}).get("name") for t in tools if isinstance(t, dict)}
        if tool not in tool_names:
            return _error(400, f"the request offers no {tool} tool, so the policy cannot answer")
        key = (name, request.headers.get(SESSION_HEADER) or str(body.get("user") or ""))
        with lock:
            session = sessions.get(key)
            if session is None:
                session = sessions[key] = adapter(served[name])
                while len(sessions) > max_sessions:
                    sessions.popitem(last=False)
            sessions.move_to_end(key)
            try:
                reply = session.respond(messages)
            except (ScanParseError, ChatPolicyError, HiddenNotAvailable, PromptParseError) as exc:
                return _error(400, f"policy {name!r} cannot answer: {exc}")
        n = body.get("n") or 1
        if not isinstance(n, int) or n < 1:
            return _error(400, "n must be a positive integer")
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        cid = "chatcmpl-" + uuid.uuid4().hex[:16]
        created = int(time.time())
        if body.get("stream"):
            return StreamingResponse(_sse(cid, created, model, reply, finish), media_type="text/event-stream")
        choices = [
            {"index": i, "message": reply, "finish_reason": finish, "logprobs": None} for i in range(n)
        ]
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": choices,
                "usage": _usage(messages, reply),
            }
        )

    return app


def _sse(cid: str, created: int, model: str, reply: Mapping[str, Any], finish: str):
    """The reply as server-sent chat.completion.chunk events (one delta, then the finish, then [DONE])."""
    delta: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if reply.get("tool_calls"):
        delta["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(reply["tool_calls"])]
    base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
    for choice in (
        {"index": 0, "delta": delta, "finish_reason": None},
        {"index": 0, "delta": {}, "finish_reason": finish},
    ):
        yield f"data: {json.dumps(dict(base, choices=[choice]))}\n\n"
    yield "data: [DONE]\n\n"


class PolicyServer:
    """``create_app`` served by uvicorn on a daemon thread, on 127.0.0.1 and a free port (or ``port``).

    ``start()``/``stop()`` or a ``with`` block; ``base_url`` is ``http://127.0.0.1:<port>/v1``;
    ``requests`` holds every request body received (for assertions)."""

    def __init__(
        self,
        policies: Mapping[str, Callable[[], Any]] | None = None,
        *,
        port: int = 0,
        api_key: str | None = None,
        chat: Callable[[Callable[[], Any]], Any] | None = None,
    ):
        self.requests: list[dict[str, Any]] = []
        self.app = create_app(policies, api_key=api_key, request_log=self.requests, chat=chat)
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

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, self._port))
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
    parser = argparse.ArgumentParser(
        prog="python -m rftlab.policies.server",
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

    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not key:
        parser.error(f"environment variable {args.api_key_env} is empty or unset")
    srv = PolicyServer(port=args.port, api_key=key).start()
    print(f"serving {', '.join(default_policies())} at {srv.base_url} (Ctrl-C to stop)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
