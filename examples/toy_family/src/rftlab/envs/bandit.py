"""A two-armed Bernoulli bandit: the smallest env that satisfies the project's ``Env`` contract.

It is the toy family of ``CONTRIBUTING.md`` ("Adding a family"): it shows what a new family costs, and
is not a research task. An episode is ``pulls`` pulls; pulling arm ``a`` pays 1 with probability
``means[a]`` and 0 otherwise. The draws of an episode come from ``random.Random(key)``, one uniform per
pull drawn before the action is known, so every policy facing the same key faces the same luck (a paired
comparison of policies over keys is exact). Pure: no I/O, clocks or global RNG.

    env = TwoArmedBandit()
    obs = env.reset(7)                 # the episode of key 7
    result = env.step(1)               # StepResult(observation, reward, done, info: BanditStepInfo)
    env.metrics()                      # {"reward": mean payoff per pull, "best_arm_rate": ...}

A malformed action (anything but the ints 0 and 1) pays 0, is recorded as ``valid=False`` in the step
info, and never raises.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from rftlab.types import StepResult


@dataclass(frozen=True, slots=True)
class BanditObservation:
    """What a policy sees before a pull: the pull index and, per arm, the pulls and payoffs so far."""

    pull: int
    pulls: tuple[int, int]
    payoffs: tuple[int, int]


@dataclass(frozen=True, slots=True)
class BanditStepInfo:
    """One pull: the arm pulled (``None`` for a malformed action) and whether the action was valid."""

    arm: int | None
    valid: bool


@dataclass
class TwoArmedBandit:
    """``pulls`` pulls of two Bernoulli arms with success probabilities ``means``."""

    means: tuple[float, float] = (0.4, 0.6)
    pulls: int = 20
    _draws: list[float] = field(default_factory=list, repr=False)
    _history: list[tuple[int | None, int]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if len(self.means) != 2 or not all(0.0 <= m <= 1.0 for m in self.means):
            raise ValueError(f"means must be two probabilities, got {self.means!r}")
        if self.pulls < 1:
            raise ValueError(f"pulls must be >= 1, got {self.pulls}")

    def reset(self, key: Any = None, /, **options: Any) -> BanditObservation:
        rng = random.Random(key)
        self._draws = [rng.random() for _ in range(self.pulls)]
        self._history = []
        return self._observation()

    def step(self, action: Any) -> StepResult[BanditObservation, BanditStepInfo]:
        if not self._draws or len(self._history) >= self.pulls:
            raise RuntimeError("step() before reset() or after the episode ended")
        valid = type(action) is int and action in (0, 1)
        arm = action if valid else None
        payoff = int(valid and self._draws[len(self._history)] < self.means[action])
        self._history.append((arm, payoff))
        done = len(self._history) == self.pulls
        return StepResult(self._observation(), float(payoff), done, BanditStepInfo(arm, valid))

    def metrics(self) -> dict[str, Any]:
        n = len(self._history)
        best = max((0, 1), key=lambda a: self.means[a])
        return {
            "reward": sum(p for _, p in self._history) / n if n else 0.0,
            "best_arm_rate": sum(a == best for a, _ in self._history) / n if n else 0.0,
            "invalid_actions": sum(a is None for a, _ in self._history),
        }

    def _observation(self) -> BanditObservation:
        pulls = tuple(sum(a == arm for a, _ in self._history) for arm in (0, 1))
        payoffs = tuple(sum(p for a, p in self._history if a == arm) for arm in (0, 1))
        return BanditObservation(len(self._history), pulls, payoffs)  # type: ignore[arg-type]
