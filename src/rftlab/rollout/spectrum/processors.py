"""The bench-shaped eval-protocol rollout processor for the spectrum RFT env (docs/spectrum.md §B.9, docs/platforms.md §2.5).

Every scan arrives as a ``user`` message and the agent answers with ``assistant`` tool calls; the env runs
in-process (no MCP server). The policy is whatever ``config.completion_params`` names (in the cloud, the
in-training model Fireworks injects; offline, ``openai/<policy>`` on the local policy server), called
through ``litellm.acompletion`` like eval-protocol's own ``SingleTurnRolloutProcessor``.

    SpectrumTurnProcessor()          # kwargs (rollout_processor_kwargs): think, salt, window, session_header

Per row: the env configuration comes from ``input_metadata.dataset_info.environment_context.config``
(written by ``rftlab.rollout.spectrum.dataset.dataset_rows``), the band from ``band_seed(row_id, salt)``;
every model call is one ``env.step(AssistantTurn(...))`` (all tool calls of the message in order, the env
applies the call budget and the forced empty step, B.9). The model input is ICL-off windowed
(``rftlab.rollout.windowing``); the full transcript goes to ``row.messages``. The env's own per-scan
records and metrics go to ``row.execution_metadata.extra["spectrum"]``.

Epoch salt (B.2), first match wins: the ``salt`` kwarg; ``$RFTLAB_EPOCH_SALT`` (an explicit string);
``$SPECTRUM_EPOCH_SALT=1`` or a row whose ``environment_context`` says ``"epoch_salt": true`` (written by
the Fireworks launch for a spec with ``epoch_salt``: an uploaded evaluator gets no environment variables)
(upstream behaviour: one random 8-hex token per process, i.e. per cloud epoch, recorded per row);
otherwise ``""`` (unsalted bands).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import threading
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from eval_protocol.pytest.default_mcp_gym_rollout_processor import MCPGymRolloutProcessor
from eval_protocol.pytest.rollout_processor import RolloutProcessor

from rftlab.envs.spectrum.rft import AssistantTurn, SpectrumRFTConfig, SpectrumRFTEnv, ToolCall
from rftlab.rollout.spectrum.turns import (
    NO_THINK,
    apply_thinking,
    first_messages,
    followup_messages,
    model_call_budget,
    system_messages,
    turn_config,
)
from rftlab.rollout.windowing import SCAN_MARKER, window_chat

__all__ = [
    "NO_THINK",
    "SpectrumMcpGymProcessor",
    "SpectrumTurnProcessor",
    "apply_thinking",
    "env_step",
    "resolve_salt",
    "row_config",
    "row_wants_epoch_salt",
    "run_turn_episode",
]
_PROCESS_SALT: str | None = None
_SALT_LOCK = threading.Lock()


def resolve_salt(explicit: str | None = None, row_wants_salt: bool = False) -> str:
    """The epoch salt for this process (see module docstring); ``row_wants_salt``: the row asks for one."""
    global _PROCESS_SALT
    if explicit is not None:
        return str(explicit)
    env_salt = os.environ.get("RFTLAB_EPOCH_SALT")
    if env_salt:
        return env_salt
    if os.environ.get("SPECTRUM_EPOCH_SALT") == "1" or row_wants_salt:
        with _SALT_LOCK:
            if _PROCESS_SALT is None:
                _PROCESS_SALT = secrets.token_hex(4)
            return _PROCESS_SALT
    return ""


def env_step(env: Any, action: Any) -> tuple[Any, float, bool, dict[str, Any]]:
    """``env.step(action)`` as ``(observation, reward, done, info)``, whether the env returns that tuple
    or a ``rftlab.types.StepResult`` (the one place that depends on the step return shape)."""
    out = env.step(action)
    if isinstance(out, tuple):
        return out  # type: ignore[return-value]
    return out.observation, out.reward, out.done, out.info


def row_wants_epoch_salt(row: Any) -> bool:
    """Whether the row's ``environment_context`` asks for a per-epoch salt (``"epoch_salt": true``)."""
    info = getattr(row.input_metadata, "dataset_info", None) or {}
    ctx = info.get("environment_context") if isinstance(info, Mapping) else None
    return isinstance(ctx, Mapping) and ctx.get("epoch_salt") is True


def row_config(row: Any, default_memory: str = "echo", delivery: str = "user") -> SpectrumRFTConfig:
    """The env configuration of a row (``environment_context.config``), with the path's delivery
    (``rftlab.rollout.spectrum.turns.turn_config``)."""
    return turn_config(getattr(row.input_metadata, "dataset_info", None), default_memory, delivery)


def _message_dict(message: Any) -> dict[str, Any]:
    """An OpenAI assistant message (litellm ``Message`` or dict) as a plain dict with ids on every call."""
    if hasattr(message, "model_dump"):
        message = message.model_dump()
    content = message.get("content")
    out: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else ""}
    calls = []
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        calls.append(
            {
                "id": tc.get("id") or "call_" + uuid.uuid4().hex[:12],
                "type": "function",
                "function": {"name": fn.get("name") or "", "arguments": fn.get("arguments") or ""},
            }
        )
    if calls:
        out["tool_calls"] = calls
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        out["reasoning_content"] = reasoning
    return out


def _as_turn(message: Mapping[str, Any]) -> AssistantTurn:
    calls = tuple(
        ToolCall(tc["function"]["name"], tc["function"]["arguments"], tc["id"])
        for tc in message.get("tool_calls") or []
    )
    return AssistantTurn(tool_calls=calls, content=message.get("content") or "")


def _request_params(completion_params: Mapping[str, Any]) -> dict[str, Any]:
    """completion_params → litellm kwargs, as SingleTurnRolloutProcessor shapes them (Fireworks model
    prefix, ``reasoning_effort`` into ``extra_body``, ``$EP_LLM_API_BASE``)."""
    from eval_protocol.pytest.utils import normalize_fireworks_model_for_litellm

    params = dict(normalize_fireworks_model_for_litellm(dict(completion_params)) or {})
    effort = params.pop("reasoning_effort", None)
    if effort is not None:
        params.setdefault("extra_body", {})
        params["extra_body"] = dict(params["extra_body"], reasoning_effort=str(effort))
    api_base = os.getenv("EP_LLM_API_BASE") or os.getenv("EP_LLM_BASE_URL")
    if api_base and "api_base" not in params and "base_url" not in params:
        params["api_base"] = api_base
    return params


async def run_turn_episode(
    row: Any,
    completion_params: Mapping[str, Any],
    *,
    think: bool | None = None,
    salt: str | None = None,
    window: bool | None = None,
    session_header: bool = True,
    max_model_calls: int | None = None,
) -> Any:
    """Roll out one row (see module docstring); returns the mutated row."""
    import litellm
    from eval_protocol.models import Message, Status

    cfg = row_config(row)
    if window is not None:
        cfg = replace(cfg, window=window)
    env = SpectrumRFTEnv(cfg)
    row_id = row.input_metadata.row_id
    used_salt = resolve_salt(salt, row_wants_epoch_salt(row))
    obs = env.reset(row_id, salt=used_salt)
    system = system_messages(row.messages, think)
    chat: list[dict[str, Any]] = first_messages(obs)
    tools = env.tools()
    params = _request_params(completion_params)
    if session_header:
        # the episode key for a stateful scripted policy behind a windowed chat endpoint (a header, which
        # any OpenAI-compatible provider ignores; litellm drops the body's `user` for openai/ models)
        rollout_id = getattr(row.execution_metadata, "rollout_id", None) or ""
        session = f"{row_id}:{rollout_id}:{uuid.uuid4().hex[:8]}"
        params["extra_headers"] = {**(params.get("extra_headers") or {}), "X-Rftlab-Session": session}
    budget = model_call_budget(cfg, max_model_calls)
    calls = 0
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    while not env.done and calls < budget:
        model_input = window_chat(system + chat, window=cfg.window)
        response = await litellm.acompletion(messages=model_input, tools=tools, **params)
        if not isinstance(response, litellm.ModelResponse):
            raise RuntimeError("litellm answered with a stream: the turn loop needs one whole reply per call")
        calls += 1
        u = getattr(response, "usage", None)
        for k in usage:
            v = getattr(u, k, None)
            if isinstance(v, int):
                usage[k] += v
        assistant = _message_dict(response.choices[0].message)
        chat.append(assistant)
        obs, _reward, _done, _info = env_step(env, _as_turn(assistant))
        chat.extend(followup_messages(obs))
    row.messages = [Message.model_validate(m) for m in system + chat]
    row.tools = tools
    row.input_metadata.completion_params = dict(completion_params)
    extra = dict(row.execution_metadata.extra or {})
    extra["spectrum"] = {
        "path": "turn",
        "row_id": row_id,
        "salt": used_salt,
        "band_seed": env.band_seed,
        "config": cfg.to_dict(),
        "records": env.records,
        "metrics": env.metrics(),
        "model_calls": calls,
        "complete": env.done,
    }
    row.execution_metadata.extra = extra
    try:
        from openai.types import CompletionUsage

        row.execution_metadata.usage = CompletionUsage(
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            total_tokens=usage["total_tokens"],
        )
    except Exception:  # usage is informative only
        pass
    row.rollout_status = Status.rollout_finished()
    return row


class SpectrumTurnProcessor(RolloutProcessor):
    """eval-protocol ``RolloutProcessor`` for the bench-shaped path (module docstring). Constructor
    arguments are defaults; ``rollout_processor_kwargs`` (``config.kwargs``) override them per test."""

    def __init__(
        self,
        *,
        think: bool | None = None,
        salt: str | None = None,
        window: bool | None = None,
        session_header: bool = True,
    ):
        self.defaults = {"think": think, "salt": salt, "window": window, "session_header": session_header}

    def __call__(self, rows, config):
        opts = dict(self.defaults)
        for k in opts:
            if k in (config.kwargs or {}):
                opts[k] = config.kwargs[k]
        completion_params = dict(config.completion_params or {})

        async def guarded(row):
            async with config.semaphore:
                return await run_turn_episode(row, completion_params, **opts)

        return [asyncio.create_task(guarded(r)) for r in rows]


# ------------------------------------------------------------------------------------ McpGym path


def _patient_server_manager(startup_timeout: float):
    from eval_protocol.pytest.default_mcp_gym_rollout_processor import MCPServerManager

    class PatientMCPServerManager(MCPServerManager):
        """eval-protocol 0.3.33 waits 15 s for the server's port and then, if the server is merely slow
        (importing eval-protocol takes 5-30 s on a loaded machine), blocks forever in ``communicate()``
        on the still-running process. Wait longer instead; a server that dies is still reported."""

        def _wait_for_server_ready(self, timeout: int = 15) -> bool:
            return super()._wait_for_server_ready(timeout=max(int(timeout), int(startup_timeout)))

        def start(self) -> None:
            """Upstream runs a bare ``python`` (the first on ``PATH``): without an activated venv that is
            not this interpreter and cannot import eval-protocol. Put this interpreter's folder first on
            the ``PATH`` the server inherits (the parent's ``PATH`` is restored afterwards)."""
            path = os.environ.get("PATH", "")
            os.environ["PATH"] = str(Path(sys.executable).parent) + (os.pathsep + path if path else "")
            try:
                super().start()
            finally:
                os.environ["PATH"] = path

    return PatientMCPServerManager


class SpectrumMcpGymProcessor(MCPGymRolloutProcessor):
    """eval-protocol's ``MCPGymRolloutProcessor`` with two changes:

    - a longer server start-up wait (``startup_timeout`` seconds, default 120; see
      ``PatientMCPServerManager``), and the server started by this interpreter (its folder first on
      ``PATH``), so no activated venv is needed;
    - ICL-off windowing of the model input (``window``, default on; B.5): each call sends the system
      message and the messages from the current scan's delivery onward (``rftlab.rollout.windowing``); the
      row keeps the full transcript. The window is applied where upstream's litellm policy cleans the
      messages before each call.

    Everything else is upstream behaviour: it runs ``python <server_script_path> --port <port>`` and
    drives the tool loop with litellm. ``rollout_processor_kwargs`` may set ``window``."""

    def __init__(self, startup_timeout: float = 120.0, window: bool = True, marker: str | None = None):
        super().__init__()
        self.startup_timeout = startup_timeout
        self.window = window
        self.marker = marker  # the window's delivery marker (None: the spectrum scan marker)

    def __call__(self, rows, config):
        from eval_protocol.pytest import default_mcp_gym_rollout_processor as upstream

        kwargs = dict(config.kwargs or {})
        window = bool(kwargs.pop("window", self.window))
        config = replace(config, kwargs=kwargs)
        original = upstream.MCPServerManager
        upstream.MCPServerManager = _patient_server_manager(self.startup_timeout)
        try:  # __call__ is synchronous: the swap is visible to this call only
            tasks = super().__call__(rows, config)
        finally:
            upstream.MCPServerManager = original
        policy = self.policy
        if window and policy is not None:
            # the rollout tasks have not run yet (no await since they were created), so every model call
            # of this run goes through the windowed cleaner
            clean = policy._clean_messages_for_api
            marker = self.marker or SCAN_MARKER
            policy._clean_messages_for_api = lambda messages: clean(window_chat(messages, marker=marker))
        return tasks
