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

``transcript(traj)`` renders an episode as chat messages (what ``rftlab view`` shows).

``max_steps`` guards against an env/policy pair that never finishes (every env here ends on its own):
when it is reached the loop stops and raises ``RuntimeError`` naming the env, since a silently cut
episode would be scored as if it were complete.
"""

from __future__ import annotations

import json
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


def _observation_text(observation: Any) -> str:
    """A CLBench-shaped observation (``content`` feedback, ``next_query.prompt``) as text; anything else
    as its ``repr``."""
    if not hasattr(observation, "content"):
        return repr(observation)
    parts = [observation.content] if observation.content else []
    query = getattr(observation, "next_query", None)
    if query is not None:
        parts.append(query.prompt)
    return "\n\n".join(parts)


def transcript(trajectory: Trajectory[Any, Any, Any]) -> list[dict[str, str]]:
    """The episode as chat messages: each observation acted on (the env's feedback, then the next
    decision's prompt) as a ``user`` turn, each action as the ``assistant``'s structured answer (JSON),
    and the closing feedback as a last ``user`` turn."""
    messages = []
    for step in trajectory.transitions:
        messages.append({"role": "user", "content": _observation_text(step.observation)})
        messages.append(
            {"role": "assistant", "content": json.dumps(step.action, sort_keys=True, default=str)}
        )
    closing = _observation_text(trajectory.final_observation)
    if closing:
        messages.append({"role": "user", "content": closing})
    return messages
