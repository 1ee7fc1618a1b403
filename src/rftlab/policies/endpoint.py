"""A policy served by any OpenAI-compatible endpoint (the local policy server, vLLM, a Fireworks
deployment), and the endpoint smoke test behind ``rftlab endpoint check``.

The key is read from an environment variable (``api_key_env``, default ``OPENAI_API_KEY``; use
``FIREWORKS_API_KEY`` for Fireworks) when the client is built; it is never stored in a record, printed or
put in an error message (``redact``). An unset variable sends the placeholder ``EMPTY`` (what vLLM and the
local server accept).

    policy = EndpointPolicy("http://127.0.0.1:8011/v1", "accumulate", system_prompt=...)
    traj = rftlab.rollout.episode(SpectrumRFTEnv(cfg), policy, "sc1_0")

``EndpointPolicy.act`` sends ``[system] + [current scan and this scan's tool turns]`` (ICL-off windowing,
user-delivered scans) with the env's tool schemas and returns an ``AssistantTurn`` (every tool call of the
reply, or its text), which ``SpectrumRFTEnv.step`` applies as the spec says, malformed calls included.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rftlab.envs.spectrum.rft import AssistantTurn, SpectrumRFTConfig, SpectrumRFTEnv, ToolCall, tool_schemas

PLACEHOLDER_KEY = "EMPTY"
CHECK_ROW = "endpoint_check_0"
CHECK_SYSTEM_PROMPT = (
    "You monitor one radio band. Each scan lists detected peaks. Call submit_report(center_freqs) with the "
    "centre frequencies (MHz) of the transmitters you believe occupy the band; each region is 8 MHz wide. "
    "Answer with the tool call only. /no_think"
)
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


def resolve_key(api_key_env: str = DEFAULT_KEY_ENV) -> tuple[str, bool]:
    """``(key, from_env)``: the key in ``$api_key_env``, or the placeholder when unset/empty."""
    key = os.environ.get(api_key_env) or ""
    return (key, True) if key else (PLACEHOLDER_KEY, False)


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every non-placeholder secret replaced by ``***``."""
    for s in secrets:
        if s and s != PLACEHOLDER_KEY and len(s) >= 4:
            text = text.replace(s, "***")
    return text


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
    for i, tc in enumerate(getattr(message, "tool_calls", None) or []):
        fn = getattr(tc, "function", None)
        name = getattr(fn, "name", "") or ""
        args = getattr(fn, "arguments", "") or ""
        cid = getattr(tc, "id", None) or f"call_{i}"
        calls.append(ToolCall(name, args, cid))
        chat_calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": args}})
    content = getattr(message, "content", None) or ""
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
        self.client = client or make_client(base_url, api_key_env=api_key_env, timeout=timeout)
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


# ------------------------------------------------------------------------------------ smoke test


@dataclass
class CheckReport:
    """The outcome of ``check_endpoint``: ``checks`` is a list of ``{name, passed, detail}``."""

    base_url: str
    model: str
    api_key_env: str
    key_from_env: bool
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks if c.get("required", True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "key_from_env": self.key_from_env,
            "passed": self.passed,
            "checks": self.checks,
        }


def _error_text(exc: BaseException, secrets: Sequence[str]) -> str:
    status = getattr(exc, "status_code", None)
    text = f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {exc}"
    return redact(" ".join(text.split())[:400], secrets)


def _number_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in value
    )


def check_endpoint(
    base_url: str,
    model: str,
    *,
    api_key_env: str = DEFAULT_KEY_ENV,
    timeout: float = 60.0,
    max_tokens: int = 1024,
    client: Any = None,
) -> CheckReport:
    """Connectivity and structured-tool-call smoke test (the seed's connection check):

    1. ``models``: ``GET /models`` answers (informative: some providers list no deployments);
    2. ``chat``: a chat completion with the spectrum ``submit_report`` tool on a real scan answers;
    3. ``tool_call``: the reply holds a ``submit_report`` call whose arguments are JSON with
       ``center_freqs`` a list of numbers; the detail says how that report scores on the scan's band.
    Never raises for an endpoint's failure; every message is redacted of the key."""
    key, from_env = resolve_key(api_key_env)
    secrets = [key]
    report = CheckReport(base_url, model, api_key_env, from_env)
    try:
        client = client or make_client(base_url, api_key_env=api_key_env, timeout=timeout)
    except Exception as exc:  # e.g. a malformed URL
        report.checks.append({"name": "client", "passed": False, "detail": _error_text(exc, secrets)})
        return report

    try:
        ids = [m.id for m in client.models.list().data]
        listed = model in ids
        detail = f"{len(ids)} model(s) listed" + (
            "; the model is listed" if listed else "; the model is not listed"
        )
        report.checks.append({"name": "models", "passed": True, "required": False, "detail": detail})
    except Exception as exc:
        report.checks.append(
            {"name": "models", "passed": False, "required": False, "detail": _error_text(exc, secrets)}
        )

    cfg = SpectrumRFTConfig(memory="echo")
    env = SpectrumRFTEnv(cfg)
    system, scan = CHECK_SYSTEM_PROMPT, env.reset(CHECK_ROW).text
    t0 = time.monotonic()
    try:
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": scan}],
            tools=tool_schemas(cfg),
            max_tokens=max_tokens,
            temperature=0.0,
        )
        message = reply.choices[0].message
    except Exception as exc:
        report.checks.append({"name": "chat", "passed": False, "detail": _error_text(exc, secrets)})
        report.checks.append({"name": "tool_call", "passed": False, "detail": "no reply to inspect"})
        return report
    latency = time.monotonic() - t0
    finish = getattr(reply.choices[0], "finish_reason", None)
    report.checks.append(
        {"name": "chat", "passed": True, "detail": f"answered in {latency:.2f} s (finish_reason {finish})"}
    )

    calls = [
        tc
        for tc in (getattr(message, "tool_calls", None) or [])
        if getattr(tc.function, "name", "") == "submit_report"
    ]
    if not calls:
        text = redact((getattr(message, "content", None) or "")[:200], secrets)
        report.checks.append(
            {"name": "tool_call", "passed": False, "detail": f"no submit_report tool call; text: {text!r}"}
        )
        return report
    raw = calls[0].function.arguments or ""
    try:
        args = json.loads(raw)
    except ValueError:
        report.checks.append(
            {
                "name": "tool_call",
                "passed": False,
                "detail": f"arguments are not JSON: {redact(raw[:200], secrets)!r}",
            }
        )
        return report
    if not isinstance(args, Mapping) or not _number_list(args.get("center_freqs")):
        report.checks.append(
            {
                "name": "tool_call",
                "passed": False,
                "detail": f"center_freqs is not a list of numbers: {redact(raw[:200], secrets)!r}",
            }
        )
        return report
    occ, avail = env.score_report(env_normalized(args["center_freqs"], cfg))
    report.checks.append(
        {
            "name": "tool_call",
            "passed": True,
            "detail": f"submit_report with {len(args['center_freqs'])} centre(s); scan 1 occupied-IoU {occ:.4f}, "
            f"available-IoU {avail:.4f}",
        }
    )
    return report


def env_normalized(values: Any, cfg: SpectrumRFTConfig) -> list[float]:
    from rftlab.envs.spectrum.rft import normalize_center_freqs

    return normalize_center_freqs(values, max_report=cfg.max_report, band=cfg.band_width)[0]
