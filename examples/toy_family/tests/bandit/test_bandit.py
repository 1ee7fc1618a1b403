"""The toy bandit family: env mechanics against an independent computation, bad actions, the study."""

import random

import pytest

from rftlab.envs.bandit import TwoArmedBandit
from rftlab.policies.bandit import AlwaysArm, ExploreThenCommit
from rftlab.rollout.episode import episode
from rftlab.studies.bandit import compare_policies


def test_payoffs_follow_the_keyed_draws():
    rng = random.Random(7)  # independent: the episode's draws by hand
    draws = [rng.random() for _ in range(20)]
    want = sum(d < 0.6 for d in draws) / 20
    assert episode(TwoArmedBandit(), AlwaysArm(1), 7).metrics["reward"] == want


def test_a_malformed_action_pays_nothing_and_never_raises():
    env = TwoArmedBandit(pulls=3)
    env.reset(0)
    for action in ("1", 2, None):
        result = env.step(action)
        assert result.reward == 0.0 and result.info.valid is False
    assert env.metrics()["invalid_actions"] == 3


def test_the_study_is_paired_over_keys():
    rows = {
        r["policy"]: r for r in compare_policies({"a": lambda: AlwaysArm(1), "b": ExploreThenCommit}, "a", 30)
    }
    assert rows["a"]["difference"] == 0.0
    manual = [
        episode(TwoArmedBandit(), ExploreThenCommit(), k).metrics["reward"]
        - episode(TwoArmedBandit(), AlwaysArm(1), k).metrics["reward"]
        for k in range(30)
    ]
    assert rows["b"]["difference"] == pytest.approx(sum(manual) / 30)
    assert rows["b"]["difference_low"] < rows["b"]["difference"] < rows["b"]["difference_high"]
