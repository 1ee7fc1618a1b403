"""The memory study's arms on a tiny language model through the Tinker API (part of the spectrum family,
whose driver is ``rftlab.studies.spectrum``; docs/spectrum.md, "A tiny language model").

``TinyLMDesign`` is the design, ``run_tiny_lm_study`` warm-starts the model and runs the arms, and
``restrict_plan`` narrows the registered plan to the design's arms, epochs and pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.analysis.spectrum.plan import LoadedPlan, StudyPlan
from rftlab.analysis.spectrum.study import ContrastResult, study_contrasts, unestimable_contrasts
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.runs import Run
from rftlab.runs.paths import runs_root
from rftlab.studies.spectrum import (
    launch_arms,
    load_registered_plan,
    replicate_specs,
    rollouts_of,
    study_specs,
)

TINY_LM_EXPERIMENT = "spectrum_memory_tiny_lm"


@dataclass(frozen=True)
class TinyLMDesign:
    """The memory study's arms on a tiny language model through the Tinker API (docs/spectrum.md, "A tiny
    language model"): the plan's arms ``arms`` at these sizes, ``pairs`` seed-matched C/B′ pairs, the
    warm start, and the valid-call rate below which the study stops with a diagnosis. Every field is part
    of the design the report prints; none is an implementation setting."""

    arms: tuple[str, ...] = ("probe", "C", "B_prime")
    pairs: int = 3
    rows: int = 4
    candidates: int = 4
    num_scans: int = 4
    epochs: int = 3
    temperature: float = 0.7
    max_tokens: int = 160
    warm_rows: int = 8
    warm_held_out: int = 2
    warm_steps: int = 180
    warm_batch: int = 8
    warm_learning_rate: float = 3e-3
    min_valid_rate: float = 0.5

    def size_overrides(self) -> dict[str, Any]:
        return {
            "experiment": TINY_LM_EXPERIMENT,
            "rows": self.rows,
            "response_candidates": self.candidates,
            "num_scans": self.num_scans,
            "epochs": self.epochs,
            "temperature": self.temperature,
        }


@dataclass
class TinyLMStudy:
    """The tiny-LM study as run: the design, the warm start, and (unless the warm start's valid-call rate
    stopped it) every arm's run, per-epoch rollouts and the restricted plan's contrasts."""

    design: TinyLMDesign
    plan: LoadedPlan
    restricted: StudyPlan
    warm_start: Any  # rftlab.training.agent_warm_start.AgentWarmStartResult
    specs: dict[str, SpectrumArmSpec]
    runs: dict[str, Run]
    rollouts: dict[str, list[list[dict[str, Any]]]]
    contrasts: list[ContrastResult]
    not_estimable: dict[str, str]  # contrast id → why it has no interval (left out of the analysis)

    @property
    def stopped(self) -> bool:
        """Whether the warm-started model wrote too few valid calls for RL to be worth running."""
        return not self.runs

    def epoch_rows(self) -> list[dict[str, Any]]:
        """One row per arm and epoch from the runs' metrics: reward, the plan's metrics, the valid-call rate,
        model calls per episode, zero-advantage groups, sampled tokens and seconds."""
        keys = {
            "reward": "reward",
            "mean_occ": "occ",
            "memory_gain": "memory_gain",
            "carry_rate": "carry",
            "valid_submit_rate": "valid-call rate",
            "mean_model_calls": "model calls / episode",
            "zero_advantage_groups": "zero-advantage groups",
            "sampled_tokens": "sampled tokens",
        }
        rows = []
        for arm, run in self.runs.items():
            for m in run.metrics():
                rows.append({"arm": arm, "epoch": int(m["epoch"]), **{v: m.get(k) for k, v in keys.items()}})
        return rows


def restrict_plan(
    plan: StudyPlan, arms: Iterable[str], epochs: int, pairs: int, drop: Iterable[str] = ()
) -> StudyPlan:
    """The plan's contrasts among ``arms`` only, less those in ``drop`` (Holm over the confirmatory ones
    left), at ``epochs`` and exactly ``pairs`` replicate pairs; validated as a plan (so dropping the
    primary contrast is a ``ValueError``)."""
    keep, gone = set(arms), set(drop)
    data = plan.model_dump()
    data["arms"] = [a for a in plan.arms if a in keep]
    data["contrasts"] = [
        c for c in data["contrasts"] if {c["treatment"], c["control"]} <= keep and c["id"] not in gone
    ]
    kept = {c["id"] for c in data["contrasts"]}
    data["seen_before"] = [c for c in data.get("seen_before", ()) if c in kept]
    data["epochs"] = epochs
    data["replicates"] = {**data["replicates"], "min_runs": pairs, "max_runs": pairs}
    return StudyPlan.model_validate(data)


def _tiny_warm_start(design: TinyLMDesign, specs: Mapping[str, SpectrumArmSpec], root: Path) -> Any:
    from rftlab.launch.spectrum.tinker import local_storage_dir
    from rftlab.training.agent_warm_start import AgentWarmStartConfig
    from rftlab.training.local_tinker.model import AGENT_MODEL
    from rftlab.training.spectrum.cookbook_env import SpectrumCookbookConfig
    from rftlab.training.spectrum.warm_start import WarmStartRows, prepare_spectrum_base

    configs = [SpectrumCookbookConfig.from_arm_spec(s, base_model=AGENT_MODEL) for s in specs.values()]
    config = AgentWarmStartConfig(
        base_model=AGENT_MODEL,
        batch_size=design.warm_batch,
        learning_rate=design.warm_learning_rate,
        steps=design.warm_steps,
        eval_every=max(design.warm_steps // 3, 1),
        temperature=design.temperature,
        max_tokens=design.max_tokens,
    )
    rows = WarmStartRows(rows=design.warm_rows, held_out=design.warm_held_out)
    return prepare_spectrum_base(local_storage_dir(root) / "warm_start_tiny_lm", configs, rows, config)


def run_tiny_lm_study(
    plan_path: str | Path,
    spec_dir: str | Path,
    design: TinyLMDesign = TinyLMDesign(),
    root: str | Path | None = None,
) -> TinyLMStudy:
    """Warm-start the tiny model on reference transcripts, stop there when its held-out valid-call rate is
    below ``design.min_valid_rate``, else run every arm and replicate pair through the Tinker API (the
    in-process service unless ``TINKER_BASE_URL`` or ``TINKER_API_KEY`` say otherwise) and compute the
    plan's contrasts among the design's arms. A contrast with no interval (a paired difference that never
    varied) is left out, with Holm over the confirmatory ones left, and named in ``not_estimable``."""
    loaded, _ = load_registered_plan(plan_path)
    restricted = restrict_plan(loaded.plan, design.arms, design.epochs, design.pairs)
    root = Path(runs_root() if root is None else root)
    specs = study_specs(restricted, spec_dir, design.size_overrides())
    warm = _tiny_warm_start(design, specs, root)
    if warm.valid_rate < design.min_valid_rate:
        return TinyLMStudy(design, loaded, restricted, warm, specs, {}, {}, [], {})
    specs.update(
        {k: v for k, v in replicate_specs(restricted, specs, design.pairs).items() if k not in specs}
    )
    runs = launch_arms(specs, "tinker", root, base_model=warm.path, max_tokens=design.max_tokens)
    rollouts = {arm: rollouts_of(run) for arm, run in runs.items()}
    dropped = unestimable_contrasts(restricted, rollouts)
    if restricted.primary_contrast in dropped:
        return TinyLMStudy(design, loaded, restricted, warm, specs, runs, rollouts, [], dropped)
    analysed = restrict_plan(restricted, design.arms, design.epochs, design.pairs, drop=dropped)
    contrasts = study_contrasts(analysed, rollouts)
    return TinyLMStudy(design, loaded, analysed, warm, specs, runs, rollouts, contrasts, dropped)
