"""The ``tinker`` backend of poker arms: an arm spec → GRPO of a language model through the Tinker API
(``rftlab.training.poker.tinker_rl``), a run in the run store. docs/poker.md, "Training through the Tinker
API"; where it runs and how the run is launched, reused or resumed is shared with spectrum
(``rftlab.launch.tinker``).

``trainer_config(spec, base_model)`` maps the arm spec's own fields: ``rows``, ``hands``, ``reward``,
``illegal_retry_limit``, ``thinking``, ``response_candidates`` (group size), ``seed``, ``temperature``,
``epochs``, ``learning_rate`` (used as is), ``fireworks.max_output_tokens`` (max tokens per reply, 1024 when
the arm has no Fireworks block) and ``fireworks.lora_rank`` (32 when unset); the advantage is ``grpo``. The
base model is the Fireworks block's under its Tinker name (``Qwen/Qwen3-8B`` for the seed arms), except on
a local or ``TINKER_BASE_URL`` target, where it is the built-in ``rftlab/tiny-qwen3-agent`` (8192
positions; a poker arm's first prompt is about 1,010 of its tokens, so a 1024-token reply fits).

    PokerTinkerLauncher().launch(load_poker_arm_spec("data/specs/poker_seed.json"), root="runs")
"""

from __future__ import annotations

from typing import Any

from rftlab.launch.poker.spec import PokerArmSpec
from rftlab.launch.tinker import (
    TinkerArmLauncher,
    base_model_for,
    context_window,
    poll_run,
)
from rftlab.training.poker.cookbook_env import PokerCookbookConfig
from rftlab.training.poker.tinker_rl import PokerTinkerConfig, train_poker_tinker
from rftlab.training.tinker_rl import DEFAULT_LORA_RANK
from rftlab.types import RunRef, RunStatus

DEFAULT_BATCH_ROWS = 8
DEFAULT_MAX_TOKENS = 1024


def default_base_model(spec: PokerArmSpec, target: str) -> str:
    """The arm's base model on ``target`` (module docstring)."""
    return base_model_for(
        spec.fireworks.base_model if spec.fireworks else None, "accounts/fireworks/models/qwen3-8b", target
    )


def trainer_config(spec: PokerArmSpec, base_model: str, **overrides: Any) -> PokerTinkerConfig:
    """The Tinker trainer's config for a poker arm spec; ``overrides`` set implementation settings
    (``max_tokens``, ``batch_rows``, ``renderer_name``, ``max_env_steps``, ``lora_rank``,
    ``context_window``)."""
    fw = spec.fireworks
    max_tokens = overrides.pop("max_tokens", fw.max_output_tokens if fw else DEFAULT_MAX_TOKENS)
    task_keys = ("batch_rows", "renderer_name", "max_env_steps")
    task_over = {k: overrides.pop(k) for k in task_keys if k in overrides}
    task = PokerCookbookConfig.from_arm_spec(
        spec,
        base_model=base_model,
        max_tokens=max_tokens,
        batch_rows=task_over.pop("batch_rows", min(DEFAULT_BATCH_ROWS, spec.rows)),
        **task_over,
    )
    values: dict[str, Any] = {
        "task": task,
        "epochs": spec.epochs,
        "learning_rate": spec.learning_rate,
        "max_tokens": max_tokens,
        "lora_rank": (fw.lora_rank if fw and fw.lora_rank else DEFAULT_LORA_RANK),
        "advantage": "grpo",
        "context_window": context_window(base_model),
    }
    values.update(overrides)
    return PokerTinkerConfig(**values)


class PokerTinkerLauncher(TinkerArmLauncher):
    """``rftlab.types.Launcher`` for poker arms on backend ``tinker`` (module docstring; ``TinkerArmLauncher``)."""

    family = "poker"
    train = staticmethod(train_poker_tinker)
    trainer_config = staticmethod(trainer_config)
    default_base_model = staticmethod(default_base_model)

    def poll(self, run: RunRef) -> RunStatus:
        return poll_run(run)
