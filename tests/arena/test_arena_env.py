"""The multi-turn ``ArenaEnv``: determinism, flags, the typed step record and the episode loop."""

from __future__ import annotations

import pytest

from rftlab.envs.arena.env import ArenaEnv, ArenaStepInfo
from rftlab.envs.arena.world import state_fingerprint
from rftlab.policies.arena.scripted import ScriptedJointPolicy, deterministic_policy
from rftlab.rollout.episode import episode
from rftlab.types import Env, Policy, StepResult


def play(seed):
    env = ArenaEnv(seed, size=12, horizon=4)
    env.reset()
    trace = []
    while not (env.terminated or env.truncated):
        joint = {
            **deterministic_policy(env.state, "BLUE", "aggressive"),
            **deterministic_policy(env.state, "RED"),
        }
        result = env.step(joint)
        assert isinstance(result, StepResult) and isinstance(result.info, ArenaStepInfo)
        rewards = result.info.team_rewards
        assert result.reward == rewards["BLUE"]
        assert rewards["BLUE"] == pytest.approx(-rewards["RED"], abs=1e-12)
        assert result.info.invalid_agents == ()
        assert result.done == (env.terminated or env.truncated)
        trace.append((rewards["BLUE"], state_fingerprint(env.state)))
    return env, trace


def test_episode_is_deterministic_and_truncates_at_horizon():
    env, trace = play(5)
    assert trace == play(5)[1]
    assert env.state.turn == 4 and env.truncated and not env.terminated
    assert set(env.observations()) == {f"{t}-{k}" for t in ("blue", "red") for k in range(4)}
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_the_episode_loop_replays_the_hand_written_loop():
    env, trace = play(5)
    assert isinstance(env, Env) and isinstance(ScriptedJointPolicy(), Policy)
    traj = episode(ArenaEnv(0, size=12, horizon=4), ScriptedJointPolicy("aggressive"), 5)
    assert traj.rewards == [r for r, _ in trace]
    assert state_fingerprint(traj.final_observation.state) == trace[-1][1]
    assert traj.transitions[-1].done and traj.total_reward == pytest.approx(sum(r for r, _ in trace))
    assert traj.metrics["truncated"] and traj.metrics["turn"] == 4


def test_info_records_invalid_actions_instead_of_raising():
    env = ArenaEnv(0)
    result = env.step({"blue-0": {"type": "CAPTURE", "target": "V37"}})
    assert result.info.invalid_agents == ("blue-0",)
    assert result.reward < 0 and result.info.team_rewards["BLUE"] == result.reward
    assert set(result.info.team_values) == {"BLUE", "RED"}
    assert env.legal_actions()["blue-0"]


def test_terminates_when_a_team_owns_no_node():
    from rftlab.envs.arena.rules import Action
    from rftlab.envs.arena.world import build_state

    env = ArenaEnv(0, horizon=8)
    env.state = build_state(
        [{"id": "X", "owner": "BLUE", "value": 1}, {"id": "Y", "owner": "RED", "value": 1, "exposed": True}],
        [("X", "Y")],
        [(f"blue-{k}", "X", 2) for k in range(4)] + [(f"red-{k}", "Y", 2) for k in range(4)],
    )
    result = env.step({"blue-0": Action("CAPTURE", "Y")})
    assert result.done and not result.truncated and env.terminated
