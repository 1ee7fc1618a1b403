"""Swarm arena (``arena-core-v1``): four BLUE agents against four scripted RED agents on a small graph.

Modules: ``world`` (state, generation, observations, fingerprints), ``rules`` (actions, legality, turn
resolution), ``reward`` (team value, zero-sum reward), ``oracle`` (exact joint-action solver),
``protocol`` (prompts, strict parsers, reference broadcasts), ``cases`` (the frozen 60-case manifest and
RED's styles) and ``env`` (``ArenaEnv``). The scripted team policy, the model-free baselines and their
evaluation are policies: ``rftlab.policies.arena.scripted``.
Mechanics: ``docs/arena.md``.
"""

from .cases import STYLES, FrozenCase, frozen_cases
from .env import ArenaEnv, ArenaObservation, ArenaStepInfo
from .oracle import JointSolution, oracle_regret, solve_joint_action
from .rules import Action, legal_actions, step
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
    "ArenaObservation",
    "ArenaStepInfo",
    "STYLES",
    "FrozenCase",
    "JointSolution",
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
