"""The contracts: every spectrum env is an ``Env`` returning ``StepResult``, every policy a ``Policy``, and
``rollout.episode`` plays exactly the hand-written act/step loop."""

from __future__ import annotations

import pytest

from rftlab.envs.spectrum.bench import BenchStepInfo, SpectrumBenchEnv
from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, SpectrumStepInfo
from rftlab.policies.spectrum.reference import BENCH_POLICIES, RFT_POLICIES, ChatBenchPolicy, RFTPolicyOnBench
from rftlab.rollout.episode import episode
from rftlab.types import Env, Policy, StepResult, Trajectory


def test_envs_and_policies_satisfy_the_contracts():
    assert isinstance(SpectrumRFTEnv(), Env) and isinstance(SpectrumBenchEnv(0), Env)
    for factory in [*BENCH_POLICIES.values(), *RFT_POLICIES.values()]:
        pol = factory()
        assert isinstance(pol, Policy) and not callable(pol)  # one entry point: act()
    assert isinstance(RFTPolicyOnBench(RFT_POLICIES["oracle"]()), Policy)
    assert isinstance(ChatBenchPolicy(lambda m, s: "{}"), Policy)


@pytest.mark.parametrize("name", ["accumulate", "echo_follower", "memory"])
def test_episode_equals_the_hand_written_loop(name):
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo"))
    pol = RFT_POLICIES[name]()
    obs = env.reset("loop_check", epoch=1)
    pol.reset()
    rewards, infos = [], []
    while True:
        result = env.step(pol.act(obs))
        assert isinstance(result, StepResult) and isinstance(result.info, SpectrumStepInfo)
        rewards.append(result.reward)
        infos.append(result.info)
        if result.done:
            break
        obs = result.observation
    by_hand = env.metrics()
    traj = episode(
        SpectrumRFTEnv(SpectrumRFTConfig(memory="echo")), RFT_POLICIES[name](), "loop_check", epoch=1
    )
    assert isinstance(traj, Trajectory) and traj.key == "loop_check"
    assert traj.rewards == rewards and [t.info for t in traj.transitions] == infos
    assert traj.metrics == by_hand and traj.total_reward == by_hand["reward"]
    assert traj.transitions[-1].done and traj.final_observation.done


def test_bench_episode_and_reset_key():
    env = SpectrumBenchEnv(0)
    traj = episode(env, BENCH_POLICIES["oracle"](), 3)  # key = permuted run 3
    assert len(traj) == 90 and all(isinstance(t.info, BenchStepInfo) for t in traj.transitions)
    assert env.run_index == 3 and traj.final_observation.next_query is None
    fresh = episode(SpectrumBenchEnv(3), BENCH_POLICIES["oracle"]())
    assert fresh.rewards == traj.rewards and fresh.metrics == traj.metrics


def test_episode_refuses_to_cut_an_endless_episode():
    class Endless:
        def reset(self, key=None, /, **options):
            return 0

        def step(self, action):
            return StepResult(0, 0.0, False, None)

        def metrics(self):
            return {}

    with pytest.raises(RuntimeError, match="did not finish within 5 steps"):
        episode(Endless(), RFT_POLICIES["empty"](), max_steps=5)
