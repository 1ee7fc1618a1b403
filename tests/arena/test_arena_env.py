"""The multi-turn ``ArenaEnv`` wrapper: determinism, flags and info."""

from __future__ import annotations

import pytest

from rftlab.envs.arena.env import ArenaEnv
from rftlab.envs.arena.scripted import deterministic_policy
from rftlab.envs.arena.world import state_fingerprint


def play(seed):
    env = ArenaEnv(seed, size=12, horizon=4)
    env.reset()
    trace = []
    while not (env.terminated or env.truncated):
        joint = {
            **deterministic_policy(env.state, "BLUE", "aggressive"),
            **deterministic_policy(env.state, "RED"),
        }
        transition = env.advance(joint)
        assert transition.rewards["BLUE"] == pytest.approx(-transition.rewards["RED"], abs=1e-12)
        assert transition.info["invalid_agents"] == []
        trace.append((transition.rewards["BLUE"], state_fingerprint(env.state)))
    return env, trace


def test_episode_is_deterministic_and_truncates_at_horizon():
    env, trace = play(5)
    assert trace == play(5)[1]
    assert env.state.turn == 4 and env.truncated and not env.terminated
    assert set(env.observations()) == {f"{t}-{k}" for t in ("blue", "red") for k in range(4)}
    with pytest.raises(RuntimeError, match="reset"):
        env.advance({})


def test_info_records_invalid_actions_instead_of_raising():
    env = ArenaEnv(0)
    transition = env.advance({"blue-0": {"type": "CAPTURE", "target": "V37"}})
    assert transition.info["invalid_agents"] == ["blue-0"]
    assert transition.rewards["BLUE"] < 0
    assert set(transition.info["team_values"]) == {"BLUE", "RED"}
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
    transition = env.advance({"blue-0": Action("CAPTURE", "Y")})
    assert transition.terminated and not transition.truncated
