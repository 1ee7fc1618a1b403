"""Team value and the one-step zero-sum team reward (docs/arena.md §5).

Floats are accumulated in exactly the order of §5.3 (nodes in generation index order, agents in
blue-0..red-3 order), so values are bit-identical to the reference implementation.
"""

from __future__ import annotations

from collections.abc import Mapping

from .world import BLUE, COMPROMISED, EXPOSED, NEUTRAL, GameState, Observation, opponent

SCAN_BONUS = 0.10
INVALID_ACTION_PENALTY = 1.0
POTENTIAL_RATE = 0.05
FORTIFICATION_BONUS = 0.15
EXPOSED_PENALTY = 0.25
COMPROMISED_PENALTY = 0.75


def opportunity(observation: Observation, team: str) -> int:
    """``opp_X(o)``: how attractive a remembered node is to an agent of ``team`` (§5.1)."""
    if observation.owner == team and observation.status == COMPROMISED:
        return 3 + observation.value
    if observation.owner != team and observation.status == EXPOSED:
        return 3 + observation.value
    if observation.owner != team:
        return 2 + observation.value
    if observation.critical:
        return 1 + observation.value
    return 0


def resource_potential(state: GameState, team: str) -> float:
    """``Pot(X)``: 0.05 x the best remembered opportunity of every ``team`` agent that has resource > 0."""
    total = 0.0
    for agent_id in sorted(state.agents):
        agent = state.agents[agent_id]
        if agent.team != team or agent.resource <= 0:
            continue
        best = max((opportunity(obs, team) for obs in state.knowledge[agent_id].values()), default=0)
        total += POTENTIAL_RATE * max(0, best)
    return total


def team_value(state: GameState, team: str) -> float:
    """``V_T``: weighted node control of ``team`` minus the opponent's, plus the resource-potential difference."""
    other = opponent(team)
    value = 0.0
    for node in state.nodes.values():
        if node.owner == NEUTRAL:
            continue
        weight = node.weight
        if node.owner == team:
            value += weight
            value += FORTIFICATION_BONUS * node.fortification
            if node.exposed:
                value -= EXPOSED_PENALTY * weight
            if node.compromised:
                value -= COMPROMISED_PENALTY * weight
        elif node.owner == other:
            value -= weight
            value -= FORTIFICATION_BONUS * node.fortification
            if node.exposed:
                value += EXPOSED_PENALTY * weight
            if node.compromised:
                value += COMPROMISED_PENALTY * weight
    value += resource_potential(state, team) - resource_potential(state, other)
    return value


def scan_bonus_total(scans: int) -> float:
    """``S_X`` for ``scans`` scanning agents, accumulated one 0.10 at a time (§5.3)."""
    total = 0.0
    for _ in range(scans):
        total += SCAN_BONUS * 1.0
    return total


def team_reward(
    value_before: float,
    value_after: float,
    scan_bonus: Mapping[str, float],
    invalid_counts: Mapping[str, int],
    team: str = BLUE,
) -> float:
    """``R_T = ((((dV + S_T) - S_O) - 1.0 k_T) + 1.0 k_O)``, evaluated left to right (§5.2, §5.3)."""
    other = opponent(team)
    reward = value_after - value_before
    reward += scan_bonus[team]
    reward -= scan_bonus[other]
    reward -= INVALID_ACTION_PENALTY * invalid_counts[team]
    reward += INVALID_ACTION_PENALTY * invalid_counts[other]
    return reward
