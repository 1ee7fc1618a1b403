"""The spectrum family's warm start of a tiny language model (``rftlab.training.agent_warm_start``): reference
transcripts of the scripted policies ``memoryless`` and ``accumulate`` in the arms' own chat, and the
env's rule for a valid ``submit_report`` call.

    base = prepare_spectrum_base(out_dir, [cfg_probe, cfg_C, cfg_B_prime], WarmStartRows(rows=8))

**Rows.** Per arm configuration (prompt and memory channel: the arms' system prompts and echoes), ``rows``
training rows and ``held_out`` rows under their own row-id prefix (``warm-<prompt>-<memory>`` and
``held-<prompt>-<memory>``) and their own salt seed, so no warm-start band is a band of the study. Rows
alternate between the two reference policies, so the model sees both a reply without memory and one that
reports every centre seen so far; which it prefers is left to RL.

**Replies.** The policy's centres, rounded to the scan's 0.1 MHz display, in one ``submit_report`` call
(Qwen3 tool-call format, rendered by the arm's renderer). The held-out check samples one reply per
held-out prompt and lets a fresh env judge it (``is_valid_report``): the reply read as the cookbook env
reads it, stepped, valid when the report is scored with no malformed note (the ``valid_submit`` metric).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.policies.spectrum.reference import RFT_POLICIES
from rftlab.rollout.spectrum.turns import turn_config
from rftlab.training.agent_warm_start import (
    DEFAULT_CONFIG,
    AgentWarmStartConfig,
    AgentWarmStartResult,
    ReferenceTurn,
    prepare_agent_base,
    reference_turns,
)
from rftlab.training.cookbook_envs import make_renderer
from rftlab.training.spectrum.cookbook_env import (
    SpectrumCookbookConfig,
    SpectrumRLDataset,
    read_reply,
    valid_step,
)

REFERENCE_POLICIES = ("memoryless", "accumulate")
WARM_SALT_SEED = 7000  # the warm start's band salts: far from the study's seeds 0..3 and the truth's 1000+


@dataclass(frozen=True)
class WarmStartRows:
    """How many reference episodes per arm configuration to learn from, and to check on."""

    rows: int = 8
    held_out: int = 2


DEFAULT_ROWS = WarmStartRows()


def submit_message(centres: Sequence[float]) -> dict[str, Any]:
    """An assistant message holding one ``submit_report`` call (the cookbook's message format)."""
    from tinker_cookbook.renderers.base import ToolCall

    args = json.dumps({"center_freqs": [round(float(c), 1) for c in centres]})
    call = ToolCall(function=ToolCall.FunctionBody(name="submit_report", arguments=args))
    return {"role": "assistant", "content": "", "tool_calls": [call]}


class _Replies:
    """``reply_for(env)``: each env's own reference policy (by row order), reset at its first call."""

    def __init__(self, policies: Sequence[str]):
        self.policies = list(policies)
        self._by_env: dict[int, Any] = {}
        self._next = 0

    def __call__(self, env: Any) -> dict[str, Any]:
        policy = self._by_env.get(id(env))
        if policy is None:
            policy = RFT_POLICIES[self.policies[self._next % len(self.policies)]]()
            policy.reset()
            self._by_env[id(env)] = policy
            self._next += 1
        return submit_message(policy.act(env.observation))


def _configs(arm: SpectrumCookbookConfig, rows: int, kind: str) -> SpectrumCookbookConfig:
    return dataclasses.replace(
        arm,
        rows=rows,
        row_prefix=f"{kind}-{arm.prompt}-{arm.memory}",
        group_size=1,
        seed=WARM_SALT_SEED,
        batch_rows=max(rows, 1),
    )


def spectrum_reference_turns(
    arms: Sequence[SpectrumCookbookConfig], rows: int, kind: str = "warm"
) -> list[ReferenceTurn]:
    """Every model call of ``rows`` reference episodes per arm configuration (module docstring)."""
    out: list[ReferenceTurn] = []
    seen: set[tuple[str, str]] = set()
    for arm in arms:
        if (arm.prompt, arm.memory) in seen:
            continue
        seen.add((arm.prompt, arm.memory))
        cfg = _configs(arm, rows, kind)
        builders = SpectrumRLDataset(cfg, (0,)).epoch_builders(0)
        tags = [f"{b.row_id}:{REFERENCE_POLICIES[i % 2]}" for i, b in enumerate(builders)]
        out += reference_turns(builders, _Replies(REFERENCE_POLICIES), valid_key="valid_submit", tags=tags)
    return out


def is_valid_report(renderer: Any, tokens: list[int], stop_reason: str, config: SpectrumRFTConfig) -> bool:
    """Whether the env scores a sampled reply as a valid report: the reply read as the cookbook env reads
    it (``read_reply``), stepped on a fresh env of ``config`` (validity does not depend on the band)."""
    env = SpectrumRFTEnv(config)
    env.reset("judge")
    return valid_step(env.step(read_reply(renderer, tokens, stop_reason).turn).info)


def prepare_spectrum_base(
    out_dir: str | Path,
    arms: Sequence[SpectrumCookbookConfig],
    rows: WarmStartRows = DEFAULT_ROWS,
    config: AgentWarmStartConfig = DEFAULT_CONFIG,
    **kwargs: Any,
) -> AgentWarmStartResult:
    """The warm-started base for the spectrum arms ``arms`` (their prompts, memory channels, scans)."""
    if not arms:
        raise ValueError("no arm configurations to warm start for")
    renderer = make_renderer(config.base_model, arms[0].renderer_name)
    judge_config = turn_config(None, default_memory=arms[0].memory)
    train = spectrum_reference_turns(arms, rows.rows, "warm")
    held_out = spectrum_reference_turns(arms, rows.held_out, "held")
    return prepare_agent_base(
        out_dir,
        train,
        held_out,
        lambda tokens, stop_reason: is_valid_report(renderer, tokens, stop_reason, judge_config),
        renderer.get_stop_sequences(),
        config,
        **kwargs,
    )
