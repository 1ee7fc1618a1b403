"""The ``tinker`` backend: an arm spec → GRPO of a language model through the Tinker API
(``rftlab.training.spectrum.tinker_rl``), a run in the run store. docs/spectrum.md, "Training through the
Tinker API". What every family's ``tinker`` backend shares (target, service, context, the launch into the
run store) is ``rftlab.launch.tinker``.

``trainer_config(spec, base_model)`` maps the arm spec's own fields: ``response_candidates`` (group size),
``epochs``, ``learning_rate`` (a LoRA rate, used as is), ``temperature``, ``advantage``, ``seed`` and the task
fields; ``fireworks.max_output_tokens`` (max tokens per reply) and ``fireworks.lora_rank`` (32 when unset or
when the arm has no Fireworks block); the base model is the Fireworks block's, named as on Tinker
(``TINKER_MODELS``), except on a local target, where it is the built-in ``rftlab/tiny-qwen3-agent``.

Where it runs (``tinker_target``): ``TINKER_BASE_URL`` set → that server (``rftlab serve tinker``, or another
Tinker-API backend) through the ``tinker`` SDK; else ``TINKER_API_KEY`` set → hosted Tinker; else the
in-process ``LocalServiceClient`` (checkpoints beside the run store). The session is closed at the end as
GS1's are (``closing_session``).

    TinkerLauncher().launch(load_arm_spec("data/specs/spectrum_C.json"), root="runs")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rftlab.launch.spectrum.local import DEFAULT_BATCH_ROWS, LocalLauncher, default_row_prefix
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.launch.tinker import (
    TINKER_MODELS,
    TinkerArmLauncher,
    base_model_for,
    context_window,
    make_service,
    tinker_target,
)
from rftlab.launch.tinker import local_storage_dir as _local_storage_dir
from rftlab.training.spectrum.cookbook_env import SpectrumCookbookConfig
from rftlab.training.spectrum.tinker_rl import DEFAULT_LORA_RANK, SpectrumTinkerConfig, train_spectrum_tinker

__all__ = [
    "TINKER_MODELS",
    "TinkerLauncher",
    "context_window",
    "default_base_model",
    "local_storage_dir",
    "make_service",
    "tinker_target",
    "trainer_config",
]


def default_base_model(spec: SpectrumArmSpec, target: str) -> str:
    """The arm's base model on ``target`` (module docstring)."""
    return base_model_for(
        spec.fireworks.base_model if spec.fireworks else None, "accounts/fireworks/models/qwen3-1p7b", target
    )


def trainer_config(spec: SpectrumArmSpec, base_model: str, **overrides: Any) -> SpectrumTinkerConfig:
    """The Tinker trainer's config for an arm spec; ``overrides`` set implementation settings
    (``max_tokens``, ``batch_rows``, ``think``, ``renderer_name``, ``context_window``)."""
    task_keys = ("batch_rows", "think", "renderer_name", "fewshot")
    task_over = {k: overrides.pop(k) for k in task_keys if k in overrides}
    task = SpectrumCookbookConfig.from_arm_spec(
        spec,
        base_model=base_model,
        row_prefix=spec.row_prefix or default_row_prefix(spec.prompt, spec.memory),
        batch_rows=task_over.pop("batch_rows", min(DEFAULT_BATCH_ROWS, spec.rows)),
        **task_over,
    )
    fw = spec.fireworks
    values: dict[str, Any] = {
        "task": task,
        "epochs": spec.epochs,
        "learning_rate": spec.learning_rate,
        "max_tokens": fw.max_output_tokens if fw else 4096,
        "lora_rank": (fw.lora_rank if fw and fw.lora_rank else DEFAULT_LORA_RANK),
        "advantage": spec.advantage,
        "context_window": context_window(base_model),
    }
    values.update(overrides)
    return SpectrumTinkerConfig(**values)


def local_storage_dir(root: Path | str) -> Path:
    """Where the in-process backend keeps this family's checkpoints for the run store at ``root``: beside it,
    hidden, as GS1's (``.<root>_local_tinker/spectrum``)."""
    return _local_storage_dir(root, "spectrum")


class TinkerLauncher(TinkerArmLauncher, LocalLauncher):
    """``rftlab.types.Launcher`` for spectrum arms on backend ``tinker`` (module docstring;
    ``TinkerArmLauncher``); ``poll`` is the local launcher's."""

    family = "spectrum"
    train = staticmethod(train_spectrum_tinker)
    trainer_config = staticmethod(trainer_config)
    default_base_model = staticmethod(default_base_model)
