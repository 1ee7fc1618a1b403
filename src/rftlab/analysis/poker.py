"""Poker summaries: BB per hand by stage and overall, with intervals over deals, and early/late gains.

The replication unit is the **deal** (hand id): with several permuted runs the same deals recur in
another order, so a deal's result is first averaged over runs, and intervals are taken over deals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from rftlab.analysis.intervals import normal_mean_interval


def _interval(values: list[float]) -> dict[str, Any]:
    mean, low, high = normal_mean_interval(values)
    return {"hands": len(values), "bb_per_hand": mean, "ci95": [low, high]}


def bb_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"overall": {...}, "stages": [{stage, opponent, hands, bb_per_hand, ci95}, ...]}`` from
    ``rollout.poker_play.hand_rows`` rows; means over deals, each deal averaged over runs."""
    per_deal: dict[str, list[float]] = defaultdict(list)
    stage_of: dict[str, tuple[int, str]] = {}
    for row in rows:
        per_deal[row["hand_id"]].append(float(row["bb"]))
        stage_of[row["hand_id"]] = (int(row["stage"]), str(row["opponent"]))
    if not per_deal:
        raise ValueError("no hands to summarise")
    deal_means = {h: sum(v) / len(v) for h, v in per_deal.items()}
    stages: dict[tuple[int, str], list[float]] = defaultdict(list)
    for hand_id, value in deal_means.items():
        stages[stage_of[hand_id]].append(value)
    return {
        "overall": _interval(list(deal_means.values())),
        "runs": max(len(v) for v in per_deal.values()),
        "stages": [
            {"stage": k + 1, "opponent": name, **_interval(vals)}
            for (k, name), vals in sorted(stages.items())
        ],
    }


def stage_gains(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per run and stage, the later half's mean BB minus the earlier half's, in play order — the
    within-opponent learning signal (a memoryless policy's expected gain is zero)."""
    by: dict[tuple[Any, int, str], list[tuple[int, float]]] = defaultdict(list)
    for row in rows:
        by[(row["run"], int(row["stage"]), str(row["opponent"]))].append(
            (int(row["position"]), float(row["bb"]))
        )
    out = []
    for (run, stage, opponent), items in sorted(by.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        values = [bb for _, bb in sorted(items)]
        half = len(values) // 2
        if half == 0:
            continue
        early = sum(values[:half]) / half
        late = sum(values[half:]) / (len(values) - half)
        out.append({"run": run, "stage": stage + 1, "opponent": opponent, "early": early, "late": late,
                    "gain": late - early})  # fmt: skip
    return out


def rft_episode_rows(trajectories: Iterable[Any]) -> list[dict[str, Any]]:
    """One row per RFT-mode episode: opponent, BB/hand, both evaluator rewards (docs/poker.md §B.3 gain-based and the
    B.5 mean-instance rubric), illegal and forced actions."""
    from rftlab.rewards.poker import gain_reward, mean_instance_reward

    rows = []
    for traj in trajectories:
        m = traj.metrics
        hand_bb = list(m["hand_bb"])
        gain = gain_reward(hand_bb, m["illegal_actions"])
        mean = mean_instance_reward(hand_bb, m["illegal_actions"])
        rows.append(
            {
                "row_id": traj.key,
                "opponent": m["opponent"],
                "bb_per_hand": m["bb_per_hand"],
                "reward_gain": gain["score"],
                "memory_gain": gain["memory_gain"],
                "reward_mean_instance": mean["score"],
                "illegal_actions": m["illegal_actions"],
                "forced_actions": m["forced_actions"],
            }
        )
    return rows


def opponent_table(rows: Iterable[Mapping[str, Any]], value: str = "bb_per_hand") -> list[dict[str, Any]]:
    """Mean of ``value`` per opponent with a 95% interval over episodes (each episode is its own deal
    set, so episodes are independent)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        groups[str(row["opponent"])].append(float(row[value]))
    out = []
    for opponent, values in sorted(groups.items()):
        mean, low, high = normal_mean_interval(values)
        out.append({"opponent": opponent, "episodes": len(values), value: mean, "ci95": [low, high]})
    return out
