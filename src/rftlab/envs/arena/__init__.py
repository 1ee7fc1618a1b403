"""Swarm arena (``arena-core-v1``): four BLUE agents against four scripted RED agents on a small graph.

Modules: ``world`` (state, generation, observations, fingerprints), ``rules`` (actions, legality, turn
resolution), ``reward`` (team value, zero-sum reward), ``scripted`` (local-priority styles, team policy),
``oracle`` (exact joint-action solver), ``protocol`` (prompts, strict parsers, reference broadcasts),
``cases`` (the frozen 60-case manifest) and ``baselines`` (model-free policies on the frozen cases).
Mechanics: ``specs/arena.md``.
"""

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
