"""A policy served by any OpenAI-compatible endpoint (the local policy server, vLLM, a Fireworks
deployment). The smoke test behind ``rftlab endpoint check`` is ``rftlab.rollout.spectrum.endpoint_check``.

The key is read from an environment variable (``api_key_env``, default ``OPENAI_API_KEY``; use
``FIREWORKS_API_KEY`` for Fireworks) when the client is built; it is never stored in a record or printed.
An unset variable sends the placeholder ``EMPTY`` (what vLLM and the local server accept).

    policy = EndpointPolicy("http://127.0.0.1:8011/v1", "accumulate", system_prompt=...)
    traj = rftlab.rollout.episode(SpectrumRFTEnv(cfg), policy, "sc1_0")

``EndpointPolicy.act`` sends ``[system] + [current scan and this scan's tool turns]`` (ICL-off windowing,
user-delivered scans) with the env's tool schemas and returns an ``AssistantTurn`` (every tool call of the
reply, or its text), which ``SpectrumRFTEnv.step`` applies as the spec says, malformed calls included.
"""

from __future__ import annotations

import json
import os
from typing import Any, Protocol

from rftlab.envs.spectrum.rft import AssistantTurn, SpectrumRFTConfig, ToolCall, tool_schemas

PLACEHOLDER_KEY = "EMPTY"
CHECK_ROW = "endpoint_check_0"
CHECK_SYSTEM_PROMPT = (
    "You monitor one radio band. Each scan lists detected peaks. Call submit_report(center_freqs) with the "
    "centre frequencies (MHz) of the transmitters you believe occupy the band; each region is 8 MHz wide. "
    "Answer with the tool call only. /no_think"
)
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


class ChatCompletions(Protocol):
    """The ``create`` of an OpenAI-compatible client. Its signature is left open: the SDK's typed request
    overloads do not take the plain message and tool dicts this policy keeps."""

    def create(self, *args: Any, **kwargs: Any) -> Any: ...


class ChatNamespace(Protocol):
    @property
    def completions(self) -> ChatCompletions: ...


class ChatClient(Protocol):
    """What ``EndpointPolicy`` needs of a client: ``chat.completions.create`` (``openai.OpenAI`` has it)."""

    @property
    def chat(self) -> ChatNamespace: ...


class EndpointKeyError(ValueError):
    """The key in the environment cannot travel in an HTTP header (the message never shows the key)."""


def resolve_key(api_key_env: str = DEFAULT_KEY_ENV) -> tuple[str, bool]:
    """``(key, from_env)``: the key in ``$api_key_env``, or the placeholder when unset/empty. A key with a
    character an HTTP header cannot carry (non-ASCII, a control character) is refused with its position,
    never its text: sent as is it would fail every request with a bare ``UnicodeEncodeError``."""
    key = os.environ.get(api_key_env) or ""
    for position, ch in enumerate(key):
        if not (" " < ch <= "~"):
            kind = "a non-ASCII character" if ord(ch) > 126 else "a space or control character"
            raise EndpointKeyError(
                f"${api_key_env} holds {kind} at position {position + 1} of {len(key)}; API keys are printable "
                "ASCII (check the variable for a pasted quote, a line break or a look-alike letter)"
            )
    return (key, True) if key else (PLACEHOLDER_KEY, False)


def make_client(
    base_url: str, *, api_key_env: str = DEFAULT_KEY_ENV, timeout: float = 60.0, max_retries: int = 0
):
    """An ``openai.OpenAI`` client for ``base_url`` with the key from ``$api_key_env``."""
    import openai

    key, _ = resolve_key(api_key_env)
    return openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries)


def _turn_from_message(message: Any) -> tuple[AssistantTurn, dict[str, Any]]:
    """An OpenAI reply message → (``AssistantTurn`` for the env, the assistant message for the chat)."""
    calls = []
    chat_calls = []
    raw_calls = getattr(message, "tool_calls", None)
    for i, tc in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        fn = getattr(tc, "function", None)
        name = str(getattr(fn, "name", "") or "")
        args = getattr(fn, "arguments", "") or ""
        if not isinstance(args, str):  # some servers send the arguments as a JSON object
            args = json.dumps(args, default=str)
        cid = str(getattr(tc, "id", None) or f"call_{i}")
        calls.append(ToolCall(name, args, cid))
        chat_calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": args}})
    content = getattr(message, "content", None) or ""
    if isinstance(content, list):  # a list of content parts
        content = "".join(
            str(getattr(p, "text", None) or (p.get("text") if isinstance(p, dict) else "") or "")
            for p in content
        )
    content = content if isinstance(content, str) else str(content)
    chat: dict[str, Any] = {"role": "assistant", "content": content}
    if chat_calls:
        chat["tool_calls"] = chat_calls
    return AssistantTurn(tool_calls=tuple(calls), content=content), chat


class EndpointPolicy:
    """``rftlab.types.Policy`` for ``SpectrumRFTEnv`` (user delivery) backed by an OpenAI-compatible
    endpoint (module docstring). ``client`` may be injected (any object with ``chat.completions.create``)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        system_prompt: str = "",
        config: SpectrumRFTConfig | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        session: str | None = None,
        client: Any = None,
    ):
        self.base_url = base_url
        self.model = model
        self.system_prompt = system_prompt
        self.config = config or SpectrumRFTConfig()
        self.tools = tool_schemas(self.config)
        self.sampling = {
            k: v for k, v in {"temperature": temperature, "max_tokens": max_tokens}.items() if v is not None
        }
        self.client: ChatClient = client or make_client(base_url, api_key_env=api_key_env, timeout=timeout)
        self.session_prefix = session or f"endpoint-{id(self):x}"
        self.episodes = 0
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self.chat: list[dict[str, Any]] = []
        self.scan_start = 0
        self.episodes += 1
        self.calls = 0

    def act(self, observation: Any) -> AssistantTurn:
        for tr in getattr(observation, "tool_results", None) or []:
            self.chat.append({"role": "tool", "tool_call_id": tr["tool_call_id"], "content": tr["content"]})
        if observation.text is not None:
            self.scan_start = len(self.chat)
            self.chat.append({"role": "user", "content": observation.text})
        window = self.chat[self.scan_start :] if self.config.window else self.chat
        messages = (
            [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        ) + window
        reply = self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            tools=self.tools,
            extra_headers={"X-Rftlab-Session": f"{self.session_prefix}-{self.episodes}"},
            **self.sampling,
        )
        self.calls += 1
        turn, chat_message = _turn_from_message(reply.choices[0].message)
        self.chat.append(chat_message)
        return turn
