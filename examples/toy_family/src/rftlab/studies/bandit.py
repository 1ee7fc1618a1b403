"""The toy bandit study (``CONTRIBUTING.md``, "Adding a family"): the driver its notebook calls.

``compare_policies`` plays every policy on the same episode keys and compares each with a control by
paired differences over keys (the unit of analysis is the episode key: every policy faces the same draws).

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- envs: ``rftlab.envs.bandit``
- policies: ``rftlab.policies.bandit``
- studies: ``rftlab.studies.bandit``
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rftlab.analysis.intervals import normal_mean_interval
from rftlab.analysis.summaries import mean_se
from rftlab.envs.bandit import TwoArmedBandit
from rftlab.rollout.episode import episode


def compare_policies(
    policies: Mapping[str, Callable[[], Any]],
    control: str,
    episodes: int = 200,
    pulls: int = 20,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per policy: mean reward per pull ± s.e. over episodes, and the paired difference from
    ``control`` over the same keys (``difference``) with its 95% interval (``normal_mean_interval``)."""
    if control not in policies:
        raise ValueError(f"control {control!r} is not one of the policies {sorted(policies)}")
    if episodes < 2:
        raise ValueError("episodes must be >= 2 for an interval")
    keys = [seed * 1_000_003 + k for k in range(episodes)]
    rewards = {}
    for name, make in policies.items():
        env, policy = TwoArmedBandit(pulls=pulls), make()
        rewards[name] = [episode(env, policy, key, policy_seed=key).metrics["reward"] for key in keys]
    rows = []
    for name, values in rewards.items():
        diffs = [a - b for a, b in zip(values, rewards[control], strict=True)]
        summary = mean_se(values)
        difference, low, high = normal_mean_interval(diffs)
        rows.append(
            {
                "policy": name,
                "reward": summary.mean,
                "reward_se": summary.se,
                "difference": difference,
                "difference_low": low,
                "difference_high": high,
                "episodes": episodes,
            }
        )
    return rows
