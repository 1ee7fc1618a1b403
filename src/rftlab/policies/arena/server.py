"""The scripted arena team policy behind a local OpenAI-compatible chat endpoint.

``create_arena_app`` is a FastAPI app whose ``/v1/chat/completions`` answers an arena BROADCAST or ACT
prompt with the served policy's reply text (the request's ``model`` picks the policy). ``ArenaPolicyServer``
runs it on 127.0.0.1 with the uvicorn lifecycle of ``rftlab.policies.server.PolicyServer``, so the frozen
evaluation's ``endpoint`` provider can be exercised end to end over real HTTP without any hosted model.
Errors are OpenAI-shaped JSON: 400 (not an arena prompt, or a ``max_tokens`` outside 1 to the served
model's context, ``rftlab.policies.server.CONTEXT_TOKENS``), 401 (wrong key), 404 (unknown model). A client
that disconnects mid-request is one short log line, never a traceback.
"""

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, TypeGuard

from rftlab.policies.arena.providers import ScriptedProvider
from rftlab.policies.server import CONTEXT_TOKENS, PolicyServer, quiet_disconnects, token_limit_refusal


def default_arena_policies() -> dict[str, ScriptedProvider]:
    """Served model names: the scripted team policy, and the same policy ignoring its inbox."""
    return {"scripted-balanced": ScriptedProvider(), "scripted-no-inbox": ScriptedProvider(use_inbox=False)}


def _error(status: int, message: str, kind: str = "invalid_request_error"):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _is_arena_prompt(messages: Any) -> TypeGuard[list[dict[str, str]]]:
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return False
    try:
        user = json.loads(messages[-1].get("content") or "")
    except (TypeError, ValueError):
        return False
    return (
        isinstance(user, dict)
        and user.get("phase") in ("BROADCAST", "ACT")
        and isinstance(user.get("observation"), dict)
        and isinstance(user.get("legal_actions"), list)
    )


def create_arena_app(
    policies: Mapping[str, ScriptedProvider] | None = None,
    *,
    api_key: str | None = None,
    request_log: list[dict[str, Any]] | None = None,
    context_tokens: int = CONTEXT_TOKENS,
):
    """The FastAPI app serving ``policies`` (model name → provider). Request bodies go to ``request_log``;
    ``max_tokens`` / ``max_completion_tokens`` must lie in 1..``context_tokens`` when given."""
    from fastapi import FastAPI, Request

    served = dict(policies) if policies is not None else default_arena_policies()
    app = FastAPI(title="rftlab arena policy server", docs_url=None, redoc_url=None, openapi_url=None)
    quiet_disconnects(app)

    def authorised(request: Request) -> bool:
        return api_key is None or request.headers.get("authorization", "") == f"Bearer {api_key}"

    @app.get("/v1/models")
    async def models(request: Request):
        if not authorised(request):
            return _error(401, "invalid API key", "authentication_error")
        return {
            "object": "list",
            "data": [{"id": n, "object": "model", "owned_by": "rftlab"} for n in served],
        }

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
        for name in ("max_tokens", "max_completion_tokens"):
            if (why := token_limit_refusal(name, body.get(name), context_tokens)) is not None:
                return _error(400, why)
        model = str(body.get("model") or "").split("/")[-1]
        if model not in served:
            return _error(
                404, f"model {model!r} is not served here (served: {', '.join(served)})", "not_found"
            )
        messages = body.get("messages")
        if not _is_arena_prompt(messages):
            return _error(400, "the last message is not an arena BROADCAST/ACT prompt")
        text = served[model].complete(messages, "")
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex[:16],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    return app


class ArenaPolicyServer(PolicyServer):
    """``create_arena_app`` on 127.0.0.1 and a free port (``with ArenaPolicyServer() as srv: srv.base_url``)."""

    def __init__(
        self,
        policies: Mapping[str, ScriptedProvider] | None = None,
        *,
        port: int = 0,
        api_key: str | None = None,
    ):
        super().__init__({}, port=port, api_key=api_key)
        self.app = create_arena_app(policies, api_key=api_key, request_log=self.requests)
