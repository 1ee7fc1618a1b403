"""Scoring of poker McpGym rollouts for eval-protocol (docs/poker.md §B.3, B.5).

The per-hand BB come from the env-authored messages only (``tool``/``user``; a tool result's JSON is
decoded to its ``observation`` text first, so the ``HAND_PROFITS_BB:`` line is read as the env wrote it):
``rftlab.rewards.poker.hand_profits_from_messages`` and ``illegal_count``. The score is ``REWARDS[reward]``
with the reward the calling entry fixes (``mean_instance`` or ``gain``: one entry per reward, docs/poker.md
§B.5). A row that names its arm's reward (``environment_context.reward``, written by the Fireworks launch
from the arm spec) and reaches the other reward's evaluator scores 0 with ``is_score_valid=False`` and
says so, rather than being scored with the wrong reward; the metrics are
``bb_per_hand``, ``memory_gain`` (the gain reward's clipped late − early), ``illegal_actions`` and
``hands_completed``. A failed rollout, or a transcript without any hand result, scores 0 with
``is_score_valid=False`` and the reason (docs/platforms.md G6).
"""

from __future__ import annotations

from typing import Any

from rftlab.policies.poker.chat import message_text
from rftlab.rewards.poker import REWARDS, gain_reward, hand_profits_from_messages, illegal_count
from rftlab.rollout.spectrum.scoring import _plain, invalid_result, mcp_session_id

METRIC_KEYS = ("bb_per_hand", "memory_gain", "illegal_actions", "hands_completed")


def row_key(row: Any) -> str:
    """The env's row key of a result row: its McpGym session id (``rftlab.rollout.poker.mcp``)."""
    return mcp_session_id(row)


def env_messages(messages: Any) -> list[dict[str, Any]]:
    """The env-authored messages with their text (tool results decoded)."""
    out = []
    for m in messages:
        m = _plain(m)
        if m.get("role") in ("tool", "user"):
            out.append({"role": m["role"], "content": message_text(m)})
    return out


def poker_metrics(hand_bb: list[float], illegal: int, reward: str = "mean_instance") -> dict[str, float]:
    scored = REWARDS[reward](hand_bb, illegal)
    return {
        "score": float(scored["score"]),
        "bb_per_hand": sum(hand_bb) / len(hand_bb) if hand_bb else 0.0,
        "memory_gain": float(gain_reward(hand_bb, illegal)["memory_gain"]),
        "illegal_actions": float(illegal),
        "hands_completed": float(len(hand_bb)),
    }


def row_reward(row: Any) -> str | None:
    """The reward the row's arm names (``environment_context.reward``), or ``None``; an unknown name is a
    ``ValueError`` (a dataset for another evaluator version must not be scored with the wrong reward)."""
    meta = getattr(row, "input_metadata", None)
    info = getattr(meta, "dataset_info", None) or {}
    ctx = info.get("environment_context") if isinstance(info, dict) else None
    name = ctx.get("reward") if isinstance(ctx, dict) else None
    if name is None:
        return None
    if name not in REWARDS:
        raise ValueError(f"row reward must be one of {', '.join(REWARDS)}, got {name!r}")
    return name


def score_poker_row(row: Any, reward: str) -> Any:
    """Set ``row.evaluation_result`` (module docstring) with the ``reward`` of the calling entry."""
    from eval_protocol.models import EvaluateResult, MetricResult

    if reward not in REWARDS:
        raise ValueError(f"unknown poker reward {reward!r}: choose one of {', '.join(REWARDS)}")
    if row.rollout_status is not None and row.rollout_status.is_error():
        row.evaluation_result = invalid_result(f"rollout failed: {row.rollout_status.message}")
        return row
    declared = row_reward(row)
    if declared is not None and declared != reward:
        row.evaluation_result = invalid_result(
            f"the row belongs to a {declared} arm but reached the {reward} evaluator: not scored"
        )
        return row
    msgs = env_messages(row.messages)
    hand_bb = hand_profits_from_messages(msgs)
    if hand_bb is None:
        row.evaluation_result = invalid_result("the transcript holds no hand result")
        return row
    m = poker_metrics(hand_bb, illegal_count(msgs), reward)
    metrics = {
        k: MetricResult(score=m[k], is_score_valid=True, reason=f"{k} = {m[k]}", data={"value": m[k]})
        for k in METRIC_KEYS
    }
    row.evaluation_result = EvaluateResult(
        score=m["score"],
        reason=f"poker mcp: {reward} reward over {len(hand_bb)} hands (env-authored HAND_PROFITS_BB)",
        metrics=metrics,
    )
    return row
