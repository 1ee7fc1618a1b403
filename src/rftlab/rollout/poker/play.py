"""Play poker policies over a schedule through the one episode loop, and flatten hands into rows.

trajectories = play_runs(Exploit(seed=0), schedule="default", runs=range(5))
rows = hand_rows(trajectories)      # one row per hand: run, position, stage, opponent, bb
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rftlab.envs.poker.env import PokerEnv, PokerEnvConfig
from rftlab.rollout.episode import episode
from rftlab.types import Policy, Trajectory


def play_runs(
    policy: Policy[Any, Any],
    *,
    schedule: str = "default",
    runs: Iterable[int] = (0,),
    policy_seed: int = 0,
    text: Any = None,
) -> list[Trajectory[Any, Any, Any]]:
    """One trajectory per permuted run of ``schedule`` (run 0 = canonical order)."""
    env = PokerEnv(PokerEnvConfig(mode="official", schedule=schedule), text=text)
    return [episode(env, policy, run, policy_seed=policy_seed + run) for run in runs]


def hand_rows(trajectories: Iterable[Trajectory[Any, Any, Any]]) -> list[dict[str, Any]]:
    """Per-hand rows (the replication unit of a stage's mean) from the trajectories' episode metrics."""
    rows = []
    for traj in trajectories:
        m = traj.metrics
        columns = zip(m["hand_id"], m["hand_bb"], m["hand_opponent"], m["hand_stage"], strict=True)
        for position, (hand_id, bb, opponent, stage) in enumerate(columns):
            rows.append(
                {"run": traj.key, "position": position, "hand_id": hand_id, "stage": stage,
                 "opponent": opponent, "bb": bb}
            )  # fmt: skip
    return rows


def play_rft(
    policy: Policy[Any, Any],
    row_ids: Iterable[str],
    *,
    hands: int = 16,
    policy_seed: int = 0,
) -> list[Trajectory[Any, Any, Any]]:
    """One RFT-mode episode per row id (opponent and cards from the row id, as every GRPO candidate of
    that row would see them)."""
    env = PokerEnv(PokerEnvConfig(mode="rft", hands=hands))
    return [episode(env, policy, row, policy_seed=policy_seed + i) for i, row in enumerate(row_ids)]
