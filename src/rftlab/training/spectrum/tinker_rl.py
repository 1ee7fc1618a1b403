"""GRPO on the spectrum task through the Tinker API (issue 30 item 3): what the spectrum arm adds to the
generic loop ``rftlab.training.tinker_rl`` (the loop, the seeded sampler, advantages, datums, ``train_step``,
checkpoints, resume and the run-store writing live there, with the reasons the cookbook's
``rl.train.main`` is not run unmodified).

    config = SpectrumTinkerConfig(task=SpectrumCookbookConfig(...), epochs=2, learning_rate=1e-4, ...)
    train_spectrum_tinker(config, run, service)      # LocalServiceClient() or tinker.ServiceClient(...)

What is the spectrum's own: the dataset (``SpectrumRLDataset``: every candidate of a row on the row's band
``band_seed(row_id, salt_e)``, fresh bands each epoch, the simulated trainer's batch schedule), the record's
``memory_carry_rate`` (``None``: the simulated policy's own carry of what it read, unobserved for a language
model) and the metrics row: the simulated trainer's fields (``summarize_rollouts``: ``reward``, ``mean_occ``,
``memory_gain``, ``carry_rate``, the within-group statistics, ``frac_zero_variance_groups``) with the common
ones (``updates``, ``zero_advantage_groups``, ``datums``, ``sampled_tokens``) and the reply counts
(``valid_submit_rate``, ``parse_errors``, ``mean_model_calls``). Sample seeds start from
``("rftlab-spectrum-tinker", seed, epoch, batch)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from rftlab.training.spectrum.cookbook_env import SpectrumCookbookConfig, SpectrumRLDataset
from rftlab.training.spectrum.rollout import summarize_rollouts
from rftlab.training.tinker_rl import (
    DEFAULT_LORA_RANK,
    CommonFields,
    ContextTooLong,
    SeededSampler,
    TinkerRLConfig,
    TinkerTask,
    TinkerTrainResult,
    check_context,
    run_batch,
    saved_state,
    train_tinker,
)

__all__ = [
    "DEFAULT_LORA_RANK",
    "SPECTRUM_TASK",
    "TRAINER_VERSION",
    "ContextTooLong",
    "SeededSampler",
    "SpectrumTinkerConfig",
    "TinkerTrainResult",
    "check_context",
    "run_batch",
    "saved_state",
    "train_spectrum_tinker",
]

TRAINER_VERSION = "tinker-spectrum-v1"


@dataclass(frozen=True)
class SpectrumTinkerConfig(TinkerRLConfig):
    """One spectrum arm on a Tinker backend: the cookbook env's config (task, model, group size, batch rows)
    and the optimiser and sampling settings."""

    task: SpectrumCookbookConfig
    trainer: str = TRAINER_VERSION


class SpectrumTinkerTask(TinkerTask):
    family = "spectrum"
    seed_tag = "rftlab-spectrum-tinker"

    def dataset(self, config: TinkerRLConfig, epochs: Sequence[int]) -> SpectrumRLDataset:
        return SpectrumRLDataset(config.task, epochs)

    def salt(self, config: TinkerRLConfig, epoch: int) -> str:
        return config.task.salt(epoch)

    def extra_record(self, env: Any) -> dict[str, Any]:
        return {"memory_carry_rate": None}

    def epoch_row(
        self, config: TinkerRLConfig, epoch: int, records: list[dict[str, Any]], common: CommonFields
    ) -> dict[str, Any]:
        row: dict[str, Any] = {"step": epoch, "epoch": epoch, "salt": self.salt(config, epoch)}
        row.update(summarize_rollouts(records))
        row.update({k: common[k] for k in ("updates", "grad_norm", "zero_advantage_groups", "datums")})
        n = max(len(records), 1)
        row["valid_submit_rate"] = sum(r["valid_submits"] for r in records) / max(
            sum(r["model_calls"] for r in records), 1
        )
        row["parse_errors"] = int(sum(r["parse_errors"] for r in records))
        row["sampled_tokens"] = common["sampled_tokens"]
        row["mean_model_calls"] = sum(r["model_calls"] for r in records) / n
        return row


SPECTRUM_TASK = SpectrumTinkerTask()


# Train (or resume after its last finished epoch) a spectrum arm into a run's folder on any tinker-compatible
# ``ServiceClient``: ``train_tinker`` with this family's task (same arguments after the task).
train_spectrum_tinker = partial(train_tinker, SPECTRUM_TASK)
