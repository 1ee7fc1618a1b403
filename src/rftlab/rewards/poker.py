"""Poker scoring (docs/poker.md §A.9, B.3, B.5): task metrics, normalisation, and the two RFT evaluator rewards.

Per-hand results are chips (``profit``) or big blinds (``bb`` = chips / 10). Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

BIG_BLIND = 10
BASELINE_CHIPS_PER_HAND = 15  # the fixed 1.5 BB/hand regret baseline
R_MAX = 9.4875  # BB/hand, upstream's reference maximum for the default schedule
HAND_CLIP_BB = 6.0
GAIN_CLIP_BB = 8.0
ILLEGAL_PENALTY = 0.02
SHORT_EPISODE_SCORE = -0.5
PROFITS_LINE = re.compile(r"HAND_PROFITS_BB:\s*([^\n]*)")
NET_CHANGE = re.compile(r"Net chip change this hand: ([+-]?\d+) chips")


def task_metrics(profits: Sequence[int]) -> dict[str, Any]:
    """The task's ``evaluate()`` metrics from per-hand chip results, in play order (A.9)."""
    n = len(profits)
    total = int(sum(profits))
    mid = n // 2
    first = sum(profits[:mid]) / mid if mid else 0.0
    second = sum(profits[mid:]) / (n - mid) if mid else 0.0
    regrets = [max(0, BASELINE_CHIPS_PER_HAND - p) for p in profits]
    curve, running = [], 0.0
    for r in regrets:
        running += r
        curve.append(float(running))
    cumulative = float(sum(regrets))
    return {
        "total_profit": total,
        "avg_profit_per_hand": total / n if n else 0.0,
        "hands_played": n,
        "bb_per_hand": total / n / BIG_BLIND if n else 0.0,
        "first_half_avg": first,
        "second_half_avg": second,
        "improvement": second - first,
        "cumulative_loss": cumulative,
        "normalized_loss": cumulative / 1000,
        "regret_rate": cumulative / n if n else 0.0,
        "loss_curve": curve,
    }


def normalized_gain(run_total_bb: float, baseline_total_bb: float, hands: int, r_max: float = R_MAX) -> float:
    """``(R − B) / (r_max·hands − B)``: the gain over the stateless baseline as a share of the headroom."""
    headroom = r_max * hands - baseline_total_bb
    return (run_total_bb - baseline_total_bb) / headroom


def gain_reward(hand_bb: Sequence[float], illegal: int) -> dict[str, float]:
    """The seed repo's gain-based RFT reward (B.3): clip hands to ±6 BB; fewer than two hands scores
    −0.5 − 0.02·illegal; else ``clip(late − early, ±8) − 0.02·illegal`` with halves split at ``n // 2``."""
    values = [max(-HAND_CLIP_BB, min(HAND_CLIP_BB, float(v))) for v in hand_bb]
    n = len(values)
    if n < 2:
        return {
            "score": SHORT_EPISODE_SCORE - ILLEGAL_PENALTY * illegal,
            "memory_gain": 0.0,
            "illegal_actions": float(illegal),
            "hands_completed": float(n),
            "early_mean": 0.0,
            "late_mean": 0.0,
        }
    half = n // 2
    early = sum(values[:half]) / half
    late = sum(values[half:]) / (n - half)
    gain = max(-GAIN_CLIP_BB, min(GAIN_CLIP_BB, late - early))
    return {
        "score": gain - ILLEGAL_PENALTY * illegal,
        "memory_gain": gain,
        "illegal_actions": float(illegal),
        "hands_completed": float(n),
        "early_mean": early,
        "late_mean": late,
    }


def mean_instance_reward(
    hand_bb: Sequence[float], illegal: int, *, parsed_any: bool = True
) -> dict[str, float]:
    """The verifiers rubric (B.5) as the RFT evaluator reward: ``1.0 × mean BB per completed hand``
    ``+ 1.0 × (−1.0 × illegal actions)`` ``+ 0.1 × best format score`` (1.0 once any output parsed —
    always, with tool calls)."""
    mean = sum(hand_bb) / len(hand_bb) if hand_bb else 0.0
    fmt = 1.0 if parsed_any else 0.0
    return {
        "score": mean - 1.0 * illegal + 0.1 * fmt,
        "mean_instance_reward": mean,
        "illegal_actions": float(illegal),
        "hands_completed": float(len(hand_bb)),
    }


REWARDS = {"mean_instance": mean_instance_reward, "gain": gain_reward}


def hand_profits_from_messages(messages: Sequence[Mapping[str, Any]]) -> list[float] | None:
    """Per-hand BB from the env's ``HAND_PROFITS_BB:`` line in the last env-authored (``tool``/``user``)
    message holding one; a model cannot forge it in its own (assistant) content. Fallback: every
    ``Net chip change this hand`` line of env messages / 10. ``None`` when neither is present."""
    env_msgs = [
        m for m in messages if m.get("role") in ("tool", "user") and isinstance(m.get("content"), str)
    ]
    for message in reversed(env_msgs):
        match = PROFITS_LINE.search(message["content"])
        if match:
            out = []
            for part in match.group(1).split(","):
                try:
                    out.append(float(part))
                except ValueError:
                    continue
            return out
    found = [int(x) / BIG_BLIND for m in env_msgs for x in NET_CHANGE.findall(m["content"])]
    return found or None


def illegal_count(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tool messages containing ``Invalid poker action`` (B.3's count)."""
    return sum(
        1
        for m in messages
        if m.get("role") == "tool"
        and isinstance(m.get("content"), str)
        and "Invalid poker action" in m["content"]
    )
