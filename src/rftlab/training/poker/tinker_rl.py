"""GRPO on the poker task through the Tinker API (issue 30 items 2-4): what a poker arm adds to the
generic loop ``rftlab.training.tinker_rl`` (the loop, the seeded sampler, advantages, datums, ``train_step``,
checkpoints, resume and the run-store writing live there).

    config = PokerTinkerConfig(task=PokerCookbookConfig(...), epochs=2, learning_rate=1e-6, max_tokens=1024)
    train_poker_tinker(config, run, service)         # LocalServiceClient() or tinker.ServiceClient(...)

What is poker's own: the dataset (``PokerRLDataset``: every candidate of a row plays the row's opponent and
card seed, the same deals every epoch, as every Fireworks epoch replays its dataset), the records
(``PokerCookbookEnv.record``: deal, reward, the evaluator's metrics, per-hand BB, notepad and the whole
McpGym-format transcript, plus the common ``advantage``, ``logp``, ``sampled_tokens``) and the metrics row:
the means over the epoch's rollouts of the metrics the Fireworks evaluator reports
(``rftlab.rollout.poker.scoring.METRIC_KEYS``: ``bb_per_hand``, ``memory_gain``, ``illegal_actions``,
``hands_completed``) and of ``reward``, the within-group statistics (``n_groups``,
``within_group_reward_sd``, ``frac_zero_variance_groups``), the common fields (``updates``,
``zero_advantage_groups``, ``datums``, ``sampled_tokens``) and the reply counts (``valid_call_rate``: read
``poker_act`` calls per model call, ``parse_errors``, ``refusals_unreadable``, ``mean_model_calls``,
``complete_rate``). Sample seeds start from ``("rftlab-poker-tinker", seed, epoch, batch)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from rftlab.rollout.poker.scoring import METRIC_KEYS
from rftlab.training.poker.cookbook_env import PokerCookbookConfig, PokerRLDataset
from rftlab.training.tinker_rl import CommonFields, TinkerRLConfig, TinkerTask, train_tinker

TRAINER_VERSION = "tinker-poker-v1"


@dataclass(frozen=True)
class PokerTinkerConfig(TinkerRLConfig):
    """One poker arm on a Tinker backend: the cookbook env's config (rows, hands, reward, model, group size,
    batch rows) and the optimiser and sampling settings."""

    task: PokerCookbookConfig
    epochs: int = 2
    learning_rate: float = 1e-6
    max_tokens: int = 1024
    trainer: str = TRAINER_VERSION


def _mean(records: Sequence[Mapping[str, Any]], key: str) -> float | None:
    vals = [float(r[key]) for r in records if r.get(key) is not None]
    return float(np.mean(vals)) if vals else None


class PokerTinkerTask(TinkerTask):
    family = "poker"
    seed_tag = "rftlab-poker-tinker"

    def dataset(self, config: TinkerRLConfig, epochs: Sequence[int]) -> PokerRLDataset:
        return PokerRLDataset(config.task, epochs)

    def epoch_row(
        self, config: TinkerRLConfig, epoch: int, records: list[dict[str, Any]], common: CommonFields
    ) -> dict[str, Any]:
        row: dict[str, Any] = {"step": epoch, "epoch": epoch, "n_rollouts": len(records)}
        for key in ("reward", *METRIC_KEYS):
            row[key] = _mean(records, key)
        groups: dict[str, list[float]] = {}
        for r in records:
            groups.setdefault(r["row_id"], []).append(float(r["reward"]))
        sds = [float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for v in groups.values()]
        row["n_groups"] = len(groups)
        row["within_group_reward_sd"] = float(np.mean(sds)) if sds else None
        row["frac_zero_variance_groups"] = float(np.mean([sd == 0.0 for sd in sds])) if sds else None
        row.update(common)
        calls = sum(r["model_calls"] for r in records)
        row["valid_call_rate"] = sum(r["valid_calls"] for r in records) / max(calls, 1)
        row["parse_errors"] = int(sum(r["parse_errors"] for r in records))
        row["refusals_unreadable"] = int(sum(r["refusals_unreadable"] for r in records))
        row["mean_model_calls"] = calls / max(len(records), 1)
        row["complete_rate"] = _mean(records, "complete")
        return row


POKER_TASK = PokerTinkerTask()


# Train (or resume after its last finished epoch) a poker arm into a run's folder on any tinker-compatible
# ``ServiceClient``: ``train_tinker`` with this family's task (same arguments after the task).
train_poker_tinker = partial(train_tinker, POKER_TASK)
