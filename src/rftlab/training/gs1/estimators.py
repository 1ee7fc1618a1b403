"""The RL loop's advantage estimators (``rl_loop`` step 5): the plug-in protocol (``AdvantageEstimator``),
GRPO's group mean and GS1's kernel baseline over a window of earlier rollouts, adapted from
``rftlab.training.gs1.advantages``, and ``make_estimator`` for an arm's config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rftlab.training.gs1.advantages import (
    MIN_KERNEL_MASS,
    WINDOW,
    KernelBaselineResult,
    WindowRollouts,
    group_mean,
    kernel_baseline,
)
from rftlab.training.gs1.config import GS1ArmConfig


@dataclass(frozen=True)
class AdvantageOutput:
    advantages: np.ndarray
    baselines: np.ndarray
    effective_neighbors: np.ndarray | None = None
    fallback: np.ndarray | None = None
    kernel: KernelBaselineResult | None = None


class AdvantageEstimator(Protocol):
    """The loop's plug-in: advantages of one step's rollouts; ``observe`` adds them to any state."""

    name: str

    def __call__(
        self, prompt_ids: Sequence[Any], rewards: np.ndarray, phi: np.ndarray
    ) -> AdvantageOutput: ...

    def observe(self, prompt_ids: Sequence[Any], rewards: np.ndarray, phi: np.ndarray) -> None: ...


class GroupMeanEstimator:
    """GRPO: reward minus the mean of its prompt's group (stateless)."""

    name = "group_mean"

    def __call__(self, prompt_ids, rewards, phi) -> AdvantageOutput:
        adv = group_mean(rewards, list(prompt_ids))
        return AdvantageOutput(adv, np.asarray(rewards, dtype=np.float64) - adv)

    def observe(self, prompt_ids, rewards, phi) -> None:
        return None


class KernelBaselineEstimator:
    """GS1: kernel-weighted cross-prompt baseline over a sliding window of earlier rollouts."""

    name = "kernel_baseline"

    def __init__(self, bandwidth: float = 0.5, window: int = WINDOW, min_mass: float = MIN_KERNEL_MASS):
        self.bandwidth, self.window, self.min_mass = bandwidth, window, min_mass
        self.history = WindowRollouts.empty()

    def __call__(self, prompt_ids, rewards, phi) -> AdvantageOutput:
        res = kernel_baseline(
            rewards, phi, list(prompt_ids), self.history, self.bandwidth, self.window, self.min_mass
        )
        return AdvantageOutput(res.advantages, res.baselines, res.effective_neighbors, res.fallback, res)

    def observe(self, prompt_ids, rewards, phi) -> None:
        self.history = self.history.extend(rewards, phi, list(prompt_ids), keep=self.window)


def make_estimator(config: GS1ArmConfig) -> AdvantageEstimator:
    if config.estimator == "group_mean":
        return GroupMeanEstimator()
    return KernelBaselineEstimator(config.bandwidth, config.window, config.min_kernel_mass)
