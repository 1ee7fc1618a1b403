"""The one episode loop: an ``Env`` and a ``Policy`` → a ``Trajectory``.

    traj = episode(env, policy, "row_7", epoch=3)      # env.reset("row_7", epoch=3), then act/step
    traj.metrics["reward"], traj.rewards, traj.transitions[k].info

Reference baselines, the bench90 evaluation, the notebooks and (later) trainers and rollout processors
all play episodes through this function, so "an episode" means the same thing everywhere:

1. ``observation = env.reset(key, **reset_options)``; ``policy.reset(policy_seed)``;
2. until a step reports ``done``: ``action = policy.act(observation)``, ``result = env.step(action)``,
   record ``Transition(observation, action, result.reward, result.done, result.info)``, continue from
   ``result.observation``;
3. the trajectory keeps the final observation and ``env.metrics()`` taken at the end.

``max_steps`` guards against an env/policy pair that never finishes (every env here ends on its own):
when it is reached the loop stops and raises ``RuntimeError`` naming the env, since a silently cut
episode would be scored as if it were complete.
"""

from __future__ import annotations

from typing import Any

from rftlab.types import Env, EpisodeKey, Policy, Trajectory, Transition

DEFAULT_MAX_STEPS = 100_000


def episode(
    env: Env[Any, Any, Any],
    policy: Policy[Any, Any],
    key: EpisodeKey = None,
    *,
    policy_seed: int | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    **reset_options: Any,
) -> Trajectory[Any, Any, Any]:
    """Play one episode of ``env`` (started with ``key`` and ``reset_options``) with ``policy`` (reset
    with ``policy_seed``) and return its ``Trajectory``."""
    observation = env.reset(key, **reset_options)
    policy.reset(policy_seed)
    transitions: list[Transition[Any, Any, Any]] = []
    append = transitions.append
    act, step = policy.act, env.step
    for _ in range(max_steps):
        action = act(observation)
        result = step(action)
        append(Transition(observation, action, result.reward, result.done, result.info))
        observation = result.observation
        if result.done:
            return Trajectory(key, tuple(transitions), observation, env.metrics())
    raise RuntimeError(f"{type(env).__name__} episode {key!r} did not finish within {max_steps} steps")
