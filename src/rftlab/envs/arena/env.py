"""``ArenaEnv``: a small multi-turn wrapper around generation and ``rules.step`` (spec §4, last paragraph)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .rules import Action, legal_action_map, step
from .world import BLUE, RED, GameState, generate_state, observation_for


@dataclass(frozen=True)
class ArenaTransition:
    """What ``ArenaEnv.advance`` returns: per-team rewards, episode flags and the resolution record."""

    rewards: dict[str, float]
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class ArenaEnv:
    """Seeded arena episode: ``reset`` -> (``observations`` / ``legal_actions`` -> ``advance``)*.

    ``terminated`` when a team owns no node; ``truncated`` when ``turn >= horizon`` and not terminated.
    """

    def __init__(self, seed: int, size: int = 12, horizon: int = 8):
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.seed, self.size, self.horizon = seed, size, horizon
        self.state: GameState = generate_state(seed, size)

    def reset(self) -> dict[str, dict[str, Any]]:
        self.state = generate_state(self.seed, self.size)
        return self.observations()

    def observations(self) -> dict[str, dict[str, Any]]:
        return {agent_id: observation_for(self.state, agent_id) for agent_id in sorted(self.state.agents)}

    def legal_actions(self) -> dict[str, tuple[Action, ...]]:
        return legal_action_map(self.state)

    @property
    def terminated(self) -> bool:
        owners = {node.owner for node in self.state.nodes.values()}
        return BLUE not in owners or RED not in owners

    @property
    def truncated(self) -> bool:
        return self.state.turn >= self.horizon and not self.terminated

    def advance(self, joint_actions: Mapping[str, Any]) -> ArenaTransition:
        """Resolve one turn; illegal or malformed actions become WAIT and are penalised (never raised)."""
        if self.terminated or self.truncated:
            raise RuntimeError("the episode is over; call reset() first")
        result = step(self.state, joint_actions)
        self.state = result.state
        info = {
            "events": [event.to_dict() for event in result.events],
            "invalid_agents": list(result.invalid_agents),
            "duplicate_targets": {team: list(targets) for team, targets in result.duplicate_targets.items()},
            "team_values": dict(result.values_after),
        }
        return ArenaTransition(dict(result.rewards), self.terminated, self.truncated, info)
