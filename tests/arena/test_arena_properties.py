"""Randomised multi-turn checks: invariants, zero-sum rewards, purity and oracle exactness off turn 0."""

from __future__ import annotations

import random

from rftlab.envs.arena.oracle import solve_joint_action, solve_joint_action_bruteforce
from rftlab.envs.arena.rules import legal_actions, step
from rftlab.envs.arena.world import generate_state, state_fingerprint


def random_joint(state, rng):
    return {agent_id: rng.choice(legal_actions(state, agent_id)) for agent_id in sorted(state.agents)}


def test_random_legal_play_keeps_invariants_and_zero_sum():
    for seed in range(25):
        rng = random.Random(seed)
        state = generate_state(seed, 12 + seed % 3)
        for turn in range(4):
            joint = random_joint(state, rng)
            before = state_fingerprint(state)
            result = step(state, joint)  # check=True re-checks every invariant of §2.1
            assert state_fingerprint(state) == before
            assert result.invalid_agents == ()
            assert abs(result.rewards["BLUE"] + result.rewards["RED"]) <= 1e-12
            assert result.values_after["BLUE"] == -result.values_after["RED"]
            assert all(0 <= a.resource <= 4 for a in result.state.agents.values())
            state = result.state
            assert state.turn == turn + 1


def test_oracle_matches_bruteforce_on_random_later_turns():
    rng = random.Random(2026)
    checked = 0
    for seed in range(40):
        state = generate_state(100 + seed, 12)
        for _ in range(1 + seed % 3):
            state = step(state, random_joint(state, rng)).state
        team = "BLUE" if seed % 2 == 0 else "RED"
        other = "RED" if team == "BLUE" else "BLUE"
        fixed = {a: act for a, act in random_joint(state, rng).items() if a.startswith(other.lower())}
        fast = solve_joint_action(state, team, fixed)
        if fast.explored > 700:
            continue  # keep the brute force quick
        slow = solve_joint_action_bruteforce(state, team, fixed)
        assert (fast.reward, fast.canonical_assignment, fast.optimal_count, fast.action_options) == (
            slow.reward,
            slow.canonical_assignment,
            slow.optimal_count,
            slow.action_options,
        )
        checked += 1
    assert checked >= 10
