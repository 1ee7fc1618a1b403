"""Team value terms, resource potential, zero-sum reward, float determinism (docs/arena.md §5)."""

from __future__ import annotations

import pytest

from rftlab.envs.arena.reward import (
    opportunity,
    resource_potential,
    scan_bonus_total,
    team_reward,
    team_value,
)
from rftlab.envs.arena.rules import Action, step
from rftlab.envs.arena.world import Observation, build_state, generate_state


def value_fixture():
    nodes = [
        {"id": "A", "owner": "BLUE", "value": 2, "critical": True, "fortification": 1},  # +3 +0.15
        {"id": "B", "owner": "RED", "value": 3, "exposed": True},  # -(3 - 0.75)
        {"id": "C", "owner": "BLUE", "value": 1, "compromised": True},  # +(1 - 0.75)
        {"id": "D", "owner": "NEUTRAL", "value": 3},  # 0
        {"id": "E", "owner": "RED", "value": 1, "fortification": 2, "compromised": True},  # -(1 + 0.3 - 0.75)
    ]
    edges = [("A", "B"), ("B", "C"), ("C", "D"), ("D", "E"), ("E", "A")]
    agents = [
        ("blue-0", "A", 1),
        ("blue-1", "C", 2),
        ("blue-2", "C", 0),
        ("blue-3", "A", 3),
        ("red-0", "B", 2),
        ("red-1", "E", 1),
        ("red-2", "E", 0),
        ("red-3", "B", 4),
    ]
    only_own = {agent_id: [] for agent_id, _, _ in agents}
    return build_state(nodes, edges, agents, only_own)


def test_opportunity_cases():
    def obs(owner, status, value=2, critical=False):
        return Observation("N", owner, status, value, critical, 0)

    assert opportunity(obs("BLUE", "COMPROMISED"), "BLUE") == 5  # own compromised: 3 + v
    assert opportunity(obs("RED", "EXPOSED"), "BLUE") == 5  # enemy exposed: 3 + v
    assert opportunity(obs("NEUTRAL", "EXPOSED"), "BLUE") == 5
    assert opportunity(obs("RED", "FORTIFIED"), "BLUE") == 4  # enemy, other status: 2 + v
    assert opportunity(obs("RED", "COMPROMISED"), "BLUE") == 4
    assert opportunity(obs("NEUTRAL", "SECURE"), "BLUE") == 4
    assert opportunity(obs("BLUE", "SECURE", critical=True), "BLUE") == 3  # own critical: 1 + v
    assert opportunity(obs("BLUE", "EXPOSED"), "BLUE") == 0
    assert opportunity(obs("BLUE", "FORTIFIED"), "BLUE") == 0


def test_team_value_terms_by_hand():
    state = value_fixture()
    node_terms = (3 + 0.15) - (3 - 0.75) + (1 - 0.75) - (1 + 0.3 - 0.75)
    # Pot(BLUE): blue-0 on A (own critical, 1+2) + blue-1 on C (own compromised, 3+1) + blue-3 on A; blue-2 has 0.
    pot_blue = 0.05 * 3 + 0.05 * 4 + 0.05 * 3
    # Pot(RED): red-0/red-3 on B (own exposed, not critical: 0), red-1 on E (own compromised, 3+1); red-2 has 0.
    pot_red = 0.05 * 4
    assert resource_potential(state, "BLUE") == pytest.approx(pot_blue, abs=1e-12)
    assert resource_potential(state, "RED") == pytest.approx(pot_red, abs=1e-12)
    assert team_value(state, "BLUE") == pytest.approx(node_terms + pot_blue - pot_red, abs=1e-12)
    assert team_value(state, "RED") == -team_value(state, "BLUE")


def test_potential_uses_stale_knowledge_and_ignores_resource_amount():
    state = value_fixture()
    rich, poor = state.copy(), state.copy()
    rich.agents["blue-3"].resource, poor.agents["blue-3"].resource = 4, 1
    assert resource_potential(rich, "BLUE") == resource_potential(poor, "BLUE")
    stale = state.copy()
    stale.knowledge["blue-0"]["D"] = Observation(
        "D", "NEUTRAL", "EXPOSED", 3, False, 0
    )  # remembered, not true
    assert resource_potential(stale, "BLUE") == pytest.approx(resource_potential(state, "BLUE") + 0.05 * 3)


def test_seed0_team_value_is_bit_exact():
    assert team_value(generate_state(0, 12), "BLUE") == -1.4499999999999997
    assert team_value(generate_state(0, 12), "RED") == 1.4499999999999997


def test_scan_bonus_accumulates_one_tenth_at_a_time():
    assert [scan_bonus_total(k) for k in range(5)] == [0.0, 0.1, 0.2, 0.30000000000000004, 0.4]


def test_team_reward_left_to_right():
    reward = team_reward(1.0, 1.5, {"BLUE": 0.2, "RED": 0.1}, {"BLUE": 1, "RED": 2}, "BLUE")
    assert reward == ((((1.5 - 1.0) + 0.2) - 0.1) - 1.0) + 2.0
    assert team_reward(-1.0, -1.5, {"BLUE": 0.2, "RED": 0.1}, {"BLUE": 1, "RED": 2}, "RED") == pytest.approx(
        -reward
    )


def test_step_reward_is_zero_sum_with_scan_bonus_and_invalid_penalties():
    state = build_state(
        [
            {"id": "X", "owner": "BLUE", "value": 1},
            {"id": "Y", "owner": "RED", "value": 2},
            {"id": "Z", "owner": "NEUTRAL", "value": 1},
        ],
        [("X", "Y"), ("Y", "Z"), ("X", "Z")],
        [(f"blue-{k}", "X", 2) for k in range(4)] + [(f"red-{k}", "Y", 2) for k in range(4)],
        {"blue-0": ["X", "Y"]},
    )
    joint = {"blue-0": Action("SCAN", "Z"), "red-0": Action("RECOVER", "Y"), "red-1": Action("PROBE", "Z")}
    result = step(state, joint)
    delta = result.values_after["BLUE"] - result.values_before["BLUE"]
    assert result.invalid_agents == ("red-0",)  # Y is not compromised
    assert result.rewards["BLUE"] == (((delta + 0.1) - 0.0) - 0.0) + 1.0
    assert result.rewards["RED"] == pytest.approx(-result.rewards["BLUE"], abs=1e-12)
