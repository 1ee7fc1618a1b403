"""Swarm arena (``arena-core-v1``): four BLUE agents against four scripted RED agents on a small graph.

Modules: ``world`` (state, generation, observations, fingerprints), ``rules`` (actions, legality, turn
resolution), ``reward`` (team value, zero-sum reward), ``scripted`` (local-priority styles, team policy),
``oracle`` (exact joint-action solver), ``protocol`` (prompts, strict parsers, reference broadcasts),
``cases`` (the frozen 60-case manifest) and ``baselines`` (model-free policies on the frozen cases).
Mechanics: ``specs/arena.md``.
"""

from .cases import FrozenCase, frozen_cases
from .env import ArenaEnv
from .oracle import JointSolution, oracle_regret, solve_joint_action
from .rules import Action, legal_actions, step
from .scripted import deterministic_policy
from .world import (
    ARENA_VERSION,
    BLUE,
    GENERATOR_VERSION,
    NEUTRAL,
    RED,
    Agent,
    GameState,
    Node,
    Observation,
    generate_mechanics_state,
    generate_state,
    observation_for,
    state_fingerprint,
)

__all__ = [
    "Action",
    "ArenaEnv",
    "FrozenCase",
    "JointSolution",
    "deterministic_policy",
    "frozen_cases",
    "legal_actions",
    "oracle_regret",
    "solve_joint_action",
    "step",
    "ARENA_VERSION",
    "BLUE",
    "GENERATOR_VERSION",
    "NEUTRAL",
    "RED",
    "Agent",
    "GameState",
    "Node",
    "Observation",
    "generate_mechanics_state",
    "generate_state",
    "observation_for",
    "state_fingerprint",
]
