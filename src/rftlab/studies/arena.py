"""The arena Stage-1 SFT study: the driver the notebooks (``04_arena_env``, ``05_arena``) and the CLI
(``rftlab arena``) both call.

The driver is split in parts, all re-exported here:

- ``rftlab.studies.arena_frozen``: frozen-evaluation I/O (``evaluate_frozen``, ``write_evaluation``,
  ``read_rows``, ``check_sft_rows``);
- ``rftlab.studies.arena_lineage``: ``run_stage1``, the seed's Stage-1 order of work as one lineage;
- ``rftlab.studies.arena_lineage_store``: a lineage's run-store side (``Stage1Result``, the lineage key);
- ``rftlab.studies.arena_lineages``: several lineages, their tables, the lineage study, the gates' audit;
- ``rftlab.studies.arena_sft``: notebook ``05_arena``'s study (``sft_study``); ``rftlab.studies.arena_sft_data``:
  the data build and its checks (``build_sft``, ``build_sft_data``);
- ``rftlab.studies.arena_env``: notebook ``04_arena_env``'s study, one function per section.

This module adds ``sft_smoke``, the overfit check alone (``rftlab arena sft-smoke``). Bad input raises
``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- envs: ``rftlab.envs.arena`` (world, rules, reward, oracle, protocol, frozen cases, env)
- policies: ``rftlab.policies.arena`` (scripted table and baselines, reply providers, the local server)
- rollout: ``rftlab.rollout.arena`` (SFT data, frozen evaluation and validation scorer)
- training: ``rftlab.training.arena`` (the Stage-1 recipe, LoRA SFT on the tinker interface, the Stage-1
  spec, backends and single-evaluation rule, the simulated learner)
- analysis: ``rftlab.analysis.arena`` (evaluation summaries, the §10.6 comparison, gates, checkpoint
  selection, comparisons of baselines, the data audit, handoff)
- studies: ``rftlab.studies.arena`` and the parts above
- cli: ``rftlab.cli.arena``
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.envs.arena.cases import FROZEN_CASE_COUNT
from rftlab.studies.arena_frozen import (
    FrozenEvaluation,
    check_sft_rows,
    evaluate_frozen,
    read_rows,
    write_evaluation,
)
from rftlab.studies.arena_lineage import run_stage1
from rftlab.studies.arena_lineage_store import STAGES, Stage1Result, balanced_prefix
from rftlab.studies.arena_lineages import (
    LineageStudy,
    audit_gates,
    final_records,
    lineage_rows,
    lineage_study,
    simulated_lineages,
    write_spec_variant,
)
from rftlab.studies.arena_sft import (
    ArenaSftStudy,
    CommunicationEffect,
    ConditionRow,
    FrozenCheck,
    LineageRow,
    sft_study,
)
from rftlab.studies.arena_sft_data import SftBuild, SftDataCheck, Stage1Digest, build_sft
from rftlab.training.arena.sft import OverfitResult

__all__ = [
    "FROZEN_CASE_COUNT",
    "STAGES",
    "ArenaSftStudy",
    "CommunicationEffect",
    "ConditionRow",
    "FrozenCheck",
    "FrozenEvaluation",
    "LineageRow",
    "LineageStudy",
    "SftBuild",
    "SftDataCheck",
    "SftSmokeResult",
    "Stage1Digest",
    "Stage1Result",
    "audit_gates",
    "balanced_prefix",
    "build_sft",
    "check_sft_rows",
    "evaluate_frozen",
    "final_records",
    "lineage_rows",
    "lineage_study",
    "read_rows",
    "run_stage1",
    "sft_smoke",
    "sft_study",
    "simulated_lineages",
    "write_evaluation",
    "write_spec_variant",
]


@dataclass(frozen=True)
class SftSmokeResult:
    """The overfit check alone: where it trained, on how many rows, and the verdict."""

    backend: str
    """``tinker`` (the SDK reaches a server or hosted Tinker) or ``local``"""
    base_model: str
    rows: int
    check: OverfitResult

    @property
    def passed(self) -> bool:
        return self.check.passed

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "base_model": self.base_model,
            "rows": self.rows,
            **self.check.to_dict(),
        }


def _smoke_work_dir(work_dir: str | Path | None) -> Path:
    """The local model and checkpoints: ``.<store>_local_tinker/arena_sft_smoke`` beside the run store
    (never inside it, where every folder is a run) unless ``work_dir`` is given."""
    if work_dir is not None:
        return Path(work_dir)
    from rftlab.runs.paths import runs_root

    store = runs_root()
    return store.parent / f".{store.name}_local_tinker" / "arena_sft_smoke"


def sft_smoke(
    data_dir: str | Path,
    *,
    rows: int | None = None,
    steps: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    max_tokens: int = 224,
    base_model: str | None = None,
    work_dir: str | Path | None = None,
) -> SftSmokeResult:
    """LoRA SFT on a phase-balanced prefix of ``rows`` overfit rows, then strict-JSON scoring of the same
    rows (seed step 2). It trains on Tinker when the SDK is configured, else on the local backend. A
    setting left ``None`` is the Stage-1 recipe's. Missing or malformed data raises ``ValueError``."""
    from rftlab.training.arena.recipe import STAGE1_RECIPE as recipe
    from rftlab.training.arena.sft import (
        LOCAL_CONTEXT,
        OptimizerSettings,
        local_arena_model,
        overfit_check,
        overfit_subset,
        service_client,
    )
    from rftlab.training.tinker_target import uses_sdk

    path = Path(data_dir) / "overfit_256.jsonl"
    if not path.is_file():
        raise ValueError(f"{path} does not exist (build the data with `rftlab arena build-sft`)")
    all_rows = read_rows(path)
    check_sft_rows(all_rows, str(path))
    subset = overfit_subset(all_rows, rows)
    work = _smoke_work_dir(work_dir)
    on_tinker = uses_sdk()
    if on_tinker:
        model, client, max_length = base_model or recipe.base_model, service_client(), 2048
    else:
        model = base_model or local_arena_model(work / "tiny-qwen3-arena")
        client, max_length = (
            service_client(storage_dir=work / "checkpoints", model_dirs=[model]),
            LOCAL_CONTEXT,
        )
    optimizer = OptimizerSettings(
        learning_rate=lr or recipe.learning_rate,
        min_learning_rate=recipe.min_learning_rate,
        warmup_steps=recipe.overfit_warmup_steps,
        weight_decay=recipe.overfit_weight_decay,
        gradient_clip_norm=recipe.gradient_clip_norm,
    )
    check = overfit_check(
        client,
        subset,
        model,
        rank=recipe.lora_rank,
        steps=steps or recipe.overfit_steps,
        batch_size=batch_size or recipe.overfit_batch_size,
        optimizer=optimizer,
        threshold=recipe.overfit_min_schema_valid,
        max_tokens=max_tokens,
        max_length=max_length,
    )
    return SftSmokeResult("tinker" if on_tinker else "local", model, len(subset), check)
