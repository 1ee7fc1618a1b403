"""One arm of the GS1-vs-GRPO study as data (``GS1ArmConfig``), with the study's fixed names and the
seed's prompt order of the train split (``prompt_order``, ``step_prompt_indices``). The loop that runs an
arm is ``rl_loop``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rftlab.training.gs1.advantages import MIN_KERNEL_MASS, WINDOW

EXPERIMENT = "gs1_vs_grpo"
LOSS_FN = "importance_sampling"
DEFAULT_RENDERER = "qwen3_5"  # the cookbook's recommended renderer for the served Qwen3.5 models


@dataclass(frozen=True)
class GS1ArmConfig:
    """One arm of the study as data (an ``rftlab.types.ArmSpec``): everything that changes its outcome.

    Sizes (``steps``, ``groups_per_batch``, ``max_tokens``, ``n_train``, ``n_eval``) are fields so a
    smaller backend can run the spec's recipe at its own scale; ``GS1Spec.arm_configs`` fills the spec's
    values (``rftlab.launch.gs1.spec``).
    """

    arm: str
    estimator: str  # "group_mean" | "kernel_baseline"
    group_size: int
    groups_per_batch: int
    experiment: str = EXPERIMENT
    steps: int = 40
    max_tokens: int = 512
    temperature: float = 1.0
    learning_rate: float = 4e-5
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    lora_rank: int = 32
    seed: int = 0
    base_model: str = "Qwen/Qwen3.5-2B"
    renderer_name: str = DEFAULT_RENDERER
    task: str = "gsm8k"
    n_train: int = 2560
    n_eval: int = 1319
    eval_max_tokens: int = 512
    bandwidth: float = 0.5
    window: int = WINDOW
    min_kernel_mass: float = MIN_KERNEL_MASS
    loss_fn: str = LOSS_FN
    heldout_group_size: int = 0  # pilot only: extra samples per prompt for baseline_reward_corr
    heldout_steps: tuple[int, ...] = ()
    # "test": the final evaluation on the first n_eval test items; "train" (the pilot, which only times
    # evaluation): n_eval train items from the end of the seed's prompt order, never the test items
    eval_split: str = "test"

    def __post_init__(self) -> None:
        if self.estimator not in ("group_mean", "kernel_baseline"):
            raise ValueError(f"unknown estimator {self.estimator!r}")
        if self.eval_split not in ("test", "train"):
            raise ValueError(f"eval_split must be 'test' or 'train', not {self.eval_split!r}")
        for name in ("group_size", "groups_per_batch", "max_tokens", "n_eval", "eval_max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.steps < 0 or self.n_train < self.groups_per_batch:
            raise ValueError("steps must be >= 0 and n_train >= groups_per_batch")

    @property
    def rollouts_per_step(self) -> int:
        return self.group_size * self.groups_per_batch

    def adam_params(self):
        from tinker import types

        return types.AdamParams(
            learning_rate=self.learning_rate, beta1=self.beta1, beta2=self.beta2, eps=self.eps
        )

    def to_dict(self) -> dict[str, Any]:
        """The config as the run store keys it; ``eval_split`` appears only when it is not the default
        ``test``, so every run made before the field existed keeps its hash."""
        out = asdict(self)
        out["heldout_steps"] = list(self.heldout_steps)
        if out["eval_split"] == "test":
            del out["eval_split"]
        return out


def prompt_order(n_available: int, seed: int) -> np.ndarray:
    """The fixed shuffled order of the train split: ``numpy.random.default_rng(seed).permutation``, the
    same permutation as ``datasets.Dataset.shuffle(seed=seed)`` (the cookbook's GSM8K order)."""
    return np.random.default_rng(seed).permutation(n_available)


def step_prompt_indices(config: GS1ArmConfig, step: int, n_available: int) -> list[int]:
    """Train-problem indices of ``step``: the next ``groups_per_batch`` of the first ``n_train`` prompts
    of the seed-``seed`` order (wrapping around when those are exhausted)."""
    n = min(config.n_train, n_available)
    order = prompt_order(n_available, config.seed)[:n]
    start = step * config.groups_per_batch
    return [int(order[(start + k) % n]) for k in range(config.groups_per_batch)]
