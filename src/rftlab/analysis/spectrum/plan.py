"""The spectrum-memory study's pre-registered analysis plan (``data/specs/study_spectrum_memory.json``,
docs/spectrum.md "The analysis plan").

The plan fixes, before the runs it governs, everything that decides a finding: the primary metric and
contrast, the secondary metrics, every arm contrast with its hypothesis (a difference, or equivalence
within ``±ε``) and its family (confirmatory, adjusted by Holm at ``alpha``; or exploratory, reported
unadjusted and labelled so), the equivalence margins with their justification, the unit of analysis
and the replicate rule. ``load_study_plan`` validates the file (pydantic, like the arm specs) and
returns it with the SHA-256 of its bytes, which the report prints; editing the file makes it another
plan, which a study refuses until it is registered as an amendment (``rftlab plan amend``;
``rftlab.runs.registration``). ``seen_before`` names the contrasts whose results were known before the
plan was written: the pre-registration audit (``rftlab.runs.plan_audit``) reports them as exploratory,
while the Holm family stays the one registered (so the adjustment of the others is not loosened).

Margins are written over the run (first to last epoch, the seed's own reading) and used per epoch:
``per_epoch = over_run / (epochs − 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rftlab.launch.specs import load_spec_file
from rftlab.runs.hashing import file_sha256

METRICS: tuple[str, ...] = ("memory_gain", "mean_occ", "carry")
METRIC_LABELS: dict[str, str] = {"memory_gain": "memory_gain", "mean_occ": "occ", "carry": "carry"}

_Frozen = ConfigDict(frozen=True, extra="forbid")


class Margin(BaseModel):
    """A quantity over the run (first to last epoch) and why it has that size, in the reader's units."""

    model_config = _Frozen

    over_run: float = Field(gt=0.0, lt=1.0)
    justification: str = Field(min_length=20)


class PlannedContrast(BaseModel):
    """Arm ``treatment`` minus arm ``control`` on ``metric``: the slope per epoch of the row-paired
    difference (``rftlab.analysis.contrasts``)."""

    model_config = _Frozen

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    treatment: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    control: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    metric: Literal["memory_gain", "mean_occ", "carry"]
    hypothesis: Literal["difference", "equivalence"]
    family: Literal["confirmatory", "exploratory"]
    question: str = Field(min_length=10)

    @model_validator(mode="after")
    def _two_arms(self) -> PlannedContrast:
        if self.treatment == self.control:
            raise ValueError(f"contrast {self.id}: treatment and control are the same arm")
        return self


class Replicates(BaseModel):
    """Replicate runs of ``arms`` (one run per seed, seed 0 the arm's own spec), paired by seed.

    The count is decided by design power (``rule``) within ``[min_runs, max_runs]``; ``named`` maps a
    seed of an arm to an existing arm spec that already is that replicate (C's seed 1 is ``C_prime``).
    """

    model_config = _Frozen

    arms: tuple[str, ...] = Field(min_length=2, max_length=2)
    min_runs: int = Field(ge=2, le=20)
    max_runs: int = Field(ge=2, le=20)
    power: float = Field(gt=0.5, lt=1.0)
    named: dict[str, dict[int, str]] = Field(default_factory=dict)
    rule: str = Field(min_length=20)

    @model_validator(mode="after")
    def _range(self) -> Replicates:
        if self.min_runs > self.max_runs:
            raise ValueError(f"replicates: min_runs {self.min_runs} > max_runs {self.max_runs}")
        for arm in self.named:
            if arm not in self.arms:
                raise ValueError(f"replicates.named: {arm!r} is not a replicated arm")
        return self


class StudyPlan(BaseModel):
    """The analysis plan of the spectrum-memory study (see the module docstring)."""

    model_config = _Frozen

    plan: Literal["spectrum_memory"]
    question: str = Field(min_length=20)
    registered: str = Field(min_length=20, description="when and after which data the plan was fixed")
    arms: tuple[str, ...] = Field(min_length=2)
    epochs: int = Field(ge=3, le=1000)
    unit: Literal["row"]
    unit_note: str = Field(min_length=20)
    alpha: float = Field(gt=0.0, lt=0.5)
    interval_level: float = Field(gt=0.5, lt=1.0)
    multiplicity: Literal["holm"]
    primary_metric: Literal["memory_gain", "mean_occ", "carry"]
    secondary_metrics: tuple[Literal["memory_gain", "mean_occ", "carry"], ...]
    primary_contrast: str
    design_effect: Margin
    equivalence_margins: dict[Literal["memory_gain", "mean_occ", "carry"], Margin]
    replicates: Replicates
    contrasts: tuple[PlannedContrast, ...] = Field(min_length=1)
    seen_before: tuple[str, ...] = Field(
        default=(),
        description="contrasts whose results were seen before the plan was written: exploratory whatever "
        "their family says (docs/statistics.md §8)",
    )
    amendments: tuple[str, ...] = Field(
        default=(), description="what each amendment changed, when and why (the registry keeps the diffs)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> StudyPlan:
        if abs(self.interval_level - (1.0 - self.alpha)) > 1e-12:
            raise ValueError(f"interval_level {self.interval_level} must be 1 − alpha ({1.0 - self.alpha:g})")
        if self.primary_metric in self.secondary_metrics:
            raise ValueError("the primary metric cannot also be a secondary metric")
        ids = [c.id for c in self.contrasts]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"contrast ids must be unique: {', '.join(dup)} repeated")
        known = set(self.arms)
        for c in self.contrasts:
            for arm in (c.treatment, c.control):
                if arm not in known:
                    raise ValueError(f"contrast {c.id}: arm {arm!r} is not among the plan's arms")
            if c.hypothesis == "equivalence" and c.metric not in self.equivalence_margins:
                raise ValueError(f"contrast {c.id}: equivalence on {c.metric} needs an equivalence margin")
            if c.metric not in (self.primary_metric, *self.secondary_metrics):
                raise ValueError(f"contrast {c.id}: {c.metric} is neither the primary nor a secondary metric")
        primary = {c.id: c for c in self.contrasts}.get(self.primary_contrast)
        if primary is None:
            raise ValueError(f"primary_contrast {self.primary_contrast!r} is not a listed contrast")
        if primary.family != "confirmatory" or primary.metric != self.primary_metric:
            raise ValueError("the primary contrast must be confirmatory and on the primary metric")
        for cid in self.seen_before:
            if cid not in ids:
                raise ValueError(f"seen_before: {cid!r} is not a listed contrast")
        for arm in self.replicates.arms:
            if arm not in known:
                raise ValueError(f"replicates: arm {arm!r} is not among the plan's arms")
        return self

    # ------------------------------------------------------------------ reading the plan

    def per_epoch(self, margin: Margin) -> float:
        """A margin over the run, per epoch: ``over_run / (epochs − 1)``."""
        return margin.over_run / (self.epochs - 1)

    def epsilon(self, metric: str) -> float | None:
        """The per-epoch equivalence margin of ``metric`` (``None`` when the plan declares none)."""
        m = self.equivalence_margins.get(metric)  # type: ignore[call-overload]
        return None if m is None else self.per_epoch(m)

    def confirmatory(self) -> list[PlannedContrast]:
        return [c for c in self.contrasts if c.family == "confirmatory"]

    def family_of(self, test_id: str) -> str:
        """``confirmatory`` for a contrast the plan lists as such, else ``exploratory``."""
        for c in self.contrasts:
            if c.id == test_id:
                return c.family
        return "exploratory"

    def replicate_name(self, arm: str, seed: int) -> str:
        """The arm name of ``arm``'s replicate with ``seed`` (seed 0 is the arm itself)."""
        if seed == 0:
            return arm
        return self.replicates.named.get(arm, {}).get(seed, f"{arm}_seed{seed}")


@dataclass(frozen=True)
class LoadedPlan:
    """A validated plan with the SHA-256 of the file it was read from."""

    plan: StudyPlan
    sha256: str
    path: Path


def load_study_plan(path: str | Path) -> LoadedPlan:
    """Read and validate a study plan file; ``ValueError`` names the file and the bad field."""
    plan = load_spec_file(path, StudyPlan)
    return LoadedPlan(plan, file_sha256(path), Path(path))
