"""``ArenaEnv``: a small multi-turn wrapper around generation and ``rules.step`` (docs/arena.md §4, last paragraph).

The arena is a two-team game, mapped onto the single-agent ``rftlab.types.Env`` contract as follows:

- the action of one ``step`` is the **joint** action of every agent that acts this turn (a mapping
  ``agent_id -> Action | JSON-form dict | None``; missing agents WAIT), BLUE's and RED's alike — a
  policy driving the env (e.g. ``rftlab.policies.arena.scripted.ScriptedJointPolicy``) chooses for both teams;
- ``StepResult.reward`` is **BLUE's** team reward for the turn (the arena is zero-sum: RED's is its
  negative); both teams' rewards are in ``info.team_rewards``;
- the observation is an ``ArenaObservation``: every agent's own observation (what its prompt shows) and
  the full state (for scripted and oracle policies only; never shown to a model);
- ``done`` when a team owns no node (terminated) or ``turn >= horizon`` (``truncated=True``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rftlab.types import StepResult

from .rules import Action, legal_action_map, step
from .world import BLUE, RED, GameState, generate_state, observation_for


@dataclass(frozen=True)
class ArenaObservation:
    """The arena after ``turn`` resolved turns: ``agents`` maps every agent id to its own observation
    (``observation_for``); ``state`` is the full game state (hidden information included)."""

    turn: int
    agents: dict[str, dict[str, Any]]
    state: GameState


@dataclass(frozen=True, slots=True)
class ArenaStepInfo:
    """The typed per-step record of ``ArenaEnv.step``: both teams' rewards for the turn, the resolution
    events, the agents whose action was illegal or malformed (resolved as a penalised WAIT), the
    duplicate ``"KIND:target"`` claims per team and each team's value after the turn."""

    team_rewards: dict[str, float]
    events: tuple[dict[str, Any], ...]
    invalid_agents: tuple[str, ...]
    duplicate_targets: dict[str, tuple[str, ...]]
    team_values: dict[str, float]


class ArenaEnv:
    """Seeded arena episode: ``reset`` -> ``step(joint_actions)``* until ``done``.

    ``terminated`` when a team owns no node; ``truncated`` when ``turn >= horizon`` and not terminated.
    """

    def __init__(self, seed: int, size: int = 12, horizon: int = 8):
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.seed, self.size, self.horizon = seed, size, horizon
        self.state: GameState = generate_state(seed, size)
        self._returns = {BLUE: 0.0, RED: 0.0}

    def reset(self, key: int | None = None, /) -> ArenaObservation:
        """Regenerate the state of seed ``key`` (default: the seed given at construction)."""
        if key is not None:
            self.seed = key
        self.state = generate_state(self.seed, self.size)
        self._returns = {BLUE: 0.0, RED: 0.0}
        return self.observation()

    def observation(self) -> ArenaObservation:
        return ArenaObservation(self.state.turn, self.observations(), self.state)

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

    def step(self, joint_actions: Mapping[str, Any]) -> StepResult[ArenaObservation, ArenaStepInfo]:
        """Resolve one turn; illegal or malformed actions (whatever a model sent) become WAIT and are
        penalised, never raised. ``reward`` is BLUE's team reward; ``info.team_rewards`` has both. A mapping
        that names an agent the state does not have is the caller's bug: ``ValueError`` naming it."""
        if self.terminated or self.truncated:
            raise RuntimeError("the episode is over; call reset() first")
        if not isinstance(joint_actions, Mapping):
            joint_actions = {}
        result = step(self.state, joint_actions)
        self.state = result.state
        rewards = dict(result.rewards)
        for team in (BLUE, RED):
            self._returns[team] += rewards.get(team, 0.0)
        info = ArenaStepInfo(
            team_rewards=rewards,
            events=tuple(event.to_dict() for event in result.events),
            invalid_agents=tuple(result.invalid_agents),
            duplicate_targets={team: tuple(targets) for team, targets in result.duplicate_targets.items()},
            team_values=dict(result.values_after),
        )
        terminated, truncated = self.terminated, self.truncated
        return StepResult(self.observation(), rewards[BLUE], terminated or truncated, info, truncated)

    def metrics(self) -> dict[str, Any]:
        """``reward`` = BLUE's return so far (sum of its turn rewards), ``red_reward``, ``turn`` and the
        end flags."""
        return {
            "reward": self._returns[BLUE],
            "red_reward": self._returns[RED],
            "turn": self.state.turn,
            "terminated": self.terminated,
            "truncated": self.truncated,
        }
