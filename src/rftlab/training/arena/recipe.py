"""The Stage-1 LoRA SFT recipe of the arena handoff: the settings a GPU run uses and the trainer reads."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SftRecipe:
    """The Stage-1 LoRA SFT recipe (seed handoff; docs/arena.md §11 and §9.5)."""

    base_model: str = "Qwen/Qwen3-4B-Instruct-2507"
    lora_rank: int = 32
    lora_alpha: int = 64
    lora_dropout: float = 0.05
    lora_targets: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )
    max_sequence_length: int = 2048
    optimizer: str = "AdamW"
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    scheduler: str = "cosine"
    warmup_fraction: float = 0.03
    min_learning_rate: float = 5e-6
    effective_batch_size: int = 32
    epochs: int = 2
    gradient_clip_norm: float = 1.0
    gradient_checkpointing: bool = True
    loss: str = (
        "cross_entropy on assistant tokens only (target JSON + end-of-turn); system and user tokens masked"
    )
    chat_template: str = "the base model's own template, thinking disabled"
    validation_every_steps: int = 40
    evaluate_on_start: bool = True
    min_validation_measurements: int = 8
    overfit_rows: int = 256
    overfit_steps: int = 96
    overfit_batch_size: int = 16
    overfit_warmup_steps: int = 4
    overfit_weight_decay: float = 0.0
    overfit_min_schema_valid: float = 0.99

    def schedule(self, train_rows: int) -> dict[str, int]:
        """Optimizer steps, warm-up steps and validation points for ``train_rows`` rows per epoch."""
        draws = self.epochs * train_rows
        steps = math.ceil(draws / self.effective_batch_size)
        # Validate every ``validation_every_steps`` unless that gives too few measurements on a short run.
        every = min(
            self.validation_every_steps, max(1, steps // max(1, self.min_validation_measurements - 1))
        )
        points = sorted({0, *range(every, steps, every), steps})
        if not self.evaluate_on_start:
            points.remove(0)
        return {
            "draws": draws,
            "optimizer_steps": steps,
            "warmup_steps": math.ceil(self.warmup_fraction * steps),
            "validation_every_steps": every,
            "validation_points": len(points),
        }


STAGE1_RECIPE = SftRecipe()
