"""Scripted policies for the two-armed bandit (the toy family of ``CONTRIBUTING.md``).

- ``AlwaysArm(arm)``: pulls one arm every time (``AlwaysArm(1)`` is the best fixed arm by default).
- ``ExploreThenCommit(explore)``: pulls each arm ``explore`` times, then the arm with the higher payoff
  so far (ties go to arm 0).
- ``RandomArm``: a uniformly random arm from a generator seeded in ``reset``.
"""

from __future__ import annotations

import random

from rftlab.envs.bandit import BanditObservation


class AlwaysArm:
    def __init__(self, arm: int = 1):
        self.arm = arm

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, observation: BanditObservation) -> int:
        return self.arm


class ExploreThenCommit:
    def __init__(self, explore: int = 3):
        self.explore = explore

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, observation: BanditObservation) -> int:
        if observation.pull < 2 * self.explore:
            return observation.pull % 2
        rates = [observation.payoffs[a] / max(1, observation.pulls[a]) for a in (0, 1)]
        return int(rates[1] > rates[0])


class RandomArm:
    def __init__(self) -> None:
        self._rng = random.Random(0)

    def reset(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    def act(self, observation: BanditObservation) -> int:
        return self._rng.randrange(2)


BANDIT_POLICIES = {
    "always_1": lambda: AlwaysArm(1),
    "explore_then_commit": ExploreThenCommit,
    "random": RandomArm,
}
