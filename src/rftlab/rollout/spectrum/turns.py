"""The chat messages of the bench-shaped turn path (docs/spectrum.md §B.9), without eval-protocol.

Both clients of the turn path build their conversation from these functions, so they send the model the
same text: the eval-protocol processor (``rftlab.rollout.spectrum.processors.run_turn_episode``, the
Fireworks path) and the tinker-cookbook env (``rftlab.training.spectrum.cookbook_env``).

- ``turn_config(dataset_info)``: the env configuration a dataset row records, with user delivery;
- ``system_messages(messages, think)``: the row's system messages, thinking switch applied;
- ``first_messages(observation)`` / ``followup_messages(observation)``: what the conversation gains at
  ``reset`` (scan 1) and after each ``step`` (the tool results, then the next scan when one was delivered);
- ``model_call_budget(config)``: the most model calls one episode may make.

The model input of a call is ``rftlab.rollout.windowing.window_chat(system + chat)`` (ICL-off, B.5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from rftlab.envs.spectrum.rft import SpectrumRFTConfig

NO_THINK = "/no_think"


def turn_config(
    dataset_info: Mapping[str, Any] | None, default_memory: str = "echo", delivery: str = "user"
) -> SpectrumRFTConfig:
    """The env configuration of a row from its ``dataset_info`` (``environment_context.config``, written by
    ``rftlab.rollout.spectrum.dataset.dataset_rows``), with the path's delivery."""
    info = dataset_info if isinstance(dataset_info, Mapping) else {}
    ctx = info.get("environment_context")
    cfg_dict = ctx.get("config") if isinstance(ctx, Mapping) else None
    if isinstance(cfg_dict, Mapping):
        cfg = SpectrumRFTConfig.from_dict(cfg_dict)
    else:
        memory = ctx.get("memory", default_memory) if isinstance(ctx, Mapping) else default_memory
        cfg = SpectrumRFTConfig.from_dict({"memory": memory})  # the row's string, checked by the config
    if delivery == "user":
        return replace(cfg, delivery="user", render=True)
    return replace(cfg, delivery="tool", render=True, max_calls_per_scan=None)


def apply_thinking(system_text: str, think: bool | None) -> str:
    """``think=False``: make sure the prompt ends with `` /no_think``; ``True``: remove it; ``None``: keep."""
    stripped = system_text.rstrip()
    has = stripped.endswith(NO_THINK)
    if think is False and not has:
        return stripped + " " + NO_THINK
    if think is True and has:
        return stripped[: -len(NO_THINK)].rstrip()
    return system_text


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, Mapping) else getattr(message, name, None)


def system_messages(messages: Iterable[Any], think: bool | None = None) -> list[dict[str, Any]]:
    """The system messages of a row (dicts or eval-protocol ``Message`` objects) as
    ``{"role": "system", "content": ...}`` dicts, with ``apply_thinking(text, think)``."""
    out = []
    for m in messages:
        if _field(m, "role") == "system":
            content = _field(m, "content")
            text = content if isinstance(content, str) else ""
            out.append({"role": "system", "content": apply_thinking(text, think)})
    return out


def first_messages(observation: Any) -> list[dict[str, Any]]:
    """The conversation after ``env.reset``: scan 1 as a user message."""
    return [{"role": "user", "content": observation.text}]


def followup_messages(observation: Any) -> list[dict[str, Any]]:
    """What one ``env.step`` adds after the assistant message: its tool results in order, then the next
    scan as a user message when the step delivered one."""
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": tr["tool_call_id"], "content": tr["content"]}
        for tr in observation.tool_results
    ]
    if observation.text is not None:
        out.append({"role": "user", "content": observation.text})
    return out


def model_call_budget(config: SpectrumRFTConfig, max_model_calls: int | None = None) -> int:
    """The most model calls of one episode: ``max_model_calls`` when given, else ``num_scans`` times the
    per-scan call budget (6 when unlimited). With a per-scan budget the env always ends first."""
    if max_model_calls is not None:
        return max_model_calls
    return config.num_scans * (config.max_calls_per_scan or 6)
