"""The GS1 study spec (``data/specs/gs1*.json``) as a model: parsed once, then passed to every consumer.

``GS1Spec`` holds what the launcher, the loop and the preflight read: the arms, the recipe sizes, the
optimizer, the preflight tolerances, the restoration groups and the budget. The decision rule and the
activation gate are validated by the analysis layer's subclass (``rftlab.analysis.gs1.GS1StudySpec``),
the model ``rftlab.studies.gs1.load_spec`` returns. The documentation fields (title, hypothesis, command,
the old feasibility records) are kept as they are. Unknown top-level fields are refused, so a typo is an
error and not a silent default.

The spec's identity is the SHA-256 of the file's bytes (``sha256``), exactly as before the model existed:
the run store keys and the decision records name it. A model built in memory has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator

from rftlab.launch.specs import SPEC_CONFIG, SpecFloat, SpecInt

if TYPE_CHECKING:  # the loop imports torch: only arm_configs needs it
    from rftlab.training.gs1.rl_loop import GS1ArmConfig

MAX_EVAL_ITEMS = 200_000
"""The most paired items a spec may evaluate (the design's items-for-power search stops there too)."""

ARM_ESTIMATORS = {"group_mean": "group_mean", "kernel_cross_prompt_baseline": "kernel_baseline"}
DEFAULT_LR = 4e-5


class _Block(BaseModel):
    model_config = SPEC_CONFIG


class ArmEntry(_Block):
    """One arm of the spec: its advantage estimator and batch shape."""

    name: str = Field(min_length=1)
    advantage: Literal["group_mean", "kernel_cross_prompt_baseline"]
    group_size: SpecInt = Field(ge=1)
    groups_per_batch: SpecInt = Field(ge=1)
    lr: SpecFloat | None = Field(default=None, gt=0)
    seed: SpecInt = Field(default=0, ge=0)


class DatasetBlock(_Block):
    name: str
    hf_path: str = ""
    split: str = ""
    n_examples: SpecInt = Field(ge=1)


class EvalBlock(_Block):
    benchmark: str = ""
    metric: str = ""
    n_examples: int
    aggregation: str | None = None

    @field_validator("n_examples", mode="before")
    @classmethod
    def _paired_items(cls, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_EVAL_ITEMS:
            shown = type(value).__name__ if isinstance(value, dict | list) else repr(value)[:40]
            raise ValueError(
                f"must be an integer from 2 to {MAX_EVAL_ITEMS} (the number of paired items), got {shown}"
            )
        return value


class OptimizerBlock(_Block):
    name: str = "adam"
    lr: SpecFloat = Field(default=DEFAULT_LR, gt=0)


class PreflightPath(_Block):
    """One checked code path of the correctness preflight and its tolerances."""

    id: str
    kind: str
    baseline_revision: str = ""
    reference_revision: str = ""
    tolerances: dict[str, dict[str, SpecFloat]] = Field(default_factory=dict)


class CorrectnessPreflight(_Block):
    required: bool = True
    status: str = ""
    paths: tuple[PreflightPath, ...] = ()


class RestorationArm(_Block):
    name: str
    optimizer: str = "adam"
    optimizer_config: dict[str, SpecInt | SpecFloat] = Field(default_factory=dict)


class RestorationGroup(_Block):
    arms: tuple[RestorationArm, ...] = Field(min_length=1)


class RestorationPreflight(_Block):
    applicable: bool = True
    reason: str = ""
    fixed_batch_required: bool = True
    groups: tuple[RestorationGroup, ...] = ()


class Budget(_Block):
    gpu_hours: SpecFloat | None = Field(default=None, ge=0)
    max_wall_minutes: SpecFloat | None = Field(default=None, gt=0)


class RevisionOf(_Block):
    """A revised spec's pointer to the file it revises (the original is never edited)."""

    file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    changes: str = ""
    reason: str = ""
    chosen_by: dict[str, Any] = Field(default_factory=dict)
    written: str = ""


class GS1Spec(_Block):
    """A GS1 study spec (see the module docstring)."""

    title: str = Field(min_length=1)
    revision_of: RevisionOf | None = None
    hypothesis: str = ""
    method: str = ""
    base_model: str = Field(min_length=1)
    lora_rank: SpecInt = Field(ge=1)
    training_type: Literal["rl"] = "rl"
    dataset: DatasetBlock
    optimizer: OptimizerBlock = OptimizerBlock()
    steps: SpecInt = Field(ge=0)
    batch_size: SpecInt | None = Field(default=None, ge=1)
    max_seq_len: SpecInt | None = Field(default=None, ge=1)
    eval: EvalBlock
    primary_endpoint: str = ""
    arms: tuple[ArmEntry, ...] = Field(min_length=1)
    feasibility_required: bool = False
    baseline: str = ""
    experiment_features: dict[str, bool] = Field(default_factory=dict)
    correctness_preflight: CorrectnessPreflight | None = None
    activation_gate: dict[str, Any] | None = None  # typed by GS1StudySpec
    restoration_preflight: RestorationPreflight | None = None
    success_criterion: str = ""
    decision_rule: dict[str, Any] | None = None  # typed by GS1StudySpec
    budget: Budget = Budget()
    generation_audit: dict[str, Any] = Field(default_factory=dict)
    command: str = ""
    preflight: dict[str, Any] = Field(default_factory=dict)
    feasibility: dict[str, Any] = Field(default_factory=dict)
    feasibility_check: dict[str, Any] = Field(default_factory=dict)
    spec_preflight: dict[str, Any] = Field(default_factory=dict)

    _sha256: str | None = PrivateAttr(default=None)
    _path: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _distinct_arms(self) -> GS1Spec:
        names = [arm.name for arm in self.arms]
        if len(set(names)) != len(names):
            raise ValueError(f"arm names must be distinct, got {names}")
        return self

    def with_file(self, sha256: str, path: str) -> Self:
        """This spec, stamped with the SHA-256 and the path of the file it was read from (the loader's step)."""
        self._sha256, self._path = sha256, path
        return self

    @property
    def sha256(self) -> str:
        """The SHA-256 of the spec file's bytes (``ValueError`` for a spec built in memory)."""
        if self._sha256 is None:
            raise ValueError("this spec was not read from a file: it has no file SHA-256")
        return self._sha256

    @property
    def path(self) -> str:
        """The spec file's path as it was given to the loader (``spec`` for a spec built in memory)."""
        return self._path or "spec"

    @property
    def file_name(self) -> str:
        return Path(self.path).name

    @property
    def registration(self) -> str:
        """``pre-registered`` for an original spec, ``revised`` for one with a ``revision_of`` block."""
        return "revised" if self.revision_of is not None else "pre-registered"

    def arm_configs(self, **overrides: Any) -> dict[str, GS1ArmConfig]:
        """The spec's arms (``grpo_gs8``, ``gs1_kernel``) as loop configs, with shared overrides applied."""
        from rftlab.training.gs1.rl_loop import GS1ArmConfig

        arms = {}
        for arm in self.arms:
            fields: dict[str, Any] = {
                "arm": arm.name,
                "estimator": ARM_ESTIMATORS[arm.advantage],
                "group_size": arm.group_size,
                "groups_per_batch": arm.groups_per_batch,
                "learning_rate": float(arm.lr if arm.lr is not None else self.optimizer.lr),
                "seed": arm.seed,
                "steps": self.steps,
                "lora_rank": self.lora_rank,
                "base_model": self.base_model,
                "n_train": self.dataset.n_examples,
                "n_eval": self.eval.n_examples,
            }
            fields.update(overrides)
            arms[arm.name] = GS1ArmConfig(**fields)
        return arms

    def tolerances(self, defaults: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        """The loss path's tolerances over ``defaults`` (the defaults alone when the spec names none)."""
        paths = self.correctness_preflight.paths if self.correctness_preflight else ()
        for path in paths:
            if path.kind == "loss" and path.tolerances:
                return {**defaults, **path.tolerances}
        return dict(defaults)
