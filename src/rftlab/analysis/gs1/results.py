"""Typed results of the GS1 analysis: decisions, contrasts, assay sensitivity, gate records, monitoring.

Each model is frozen and reads back the JSON record the study writes (``decision.json``, ``gate.json``)
with ``model_validate``; ``to_dict`` gives that record again (the fields it held, in its order). The
records on disk are written from the same dicts as before these models existed, so their bytes do not
change. Unknown keys in an older record are kept, not refused.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """A frozen view of one JSON record."""

    model_config = ConfigDict(frozen=True, extra="allow")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


class Interval(Record):
    lower: float | None
    upper: float | None


class CriterionVerdict(Record):
    """One criterion of a decision rule on the paired items (``decision_rules.CriterionResult``)."""

    id: str
    metric: str
    method: str
    n: int
    statistic_mean: float
    lower: float | None
    upper: float | None
    margin: float
    decision: str
    passed: bool
    alpha: float
    one_sided_level: float
    two_sided_level: float
    statistic_range: tuple[float, float]
    order_dependent: bool
    permutation_seed: int | None
    sidedness: str = ""
    replication_unit: str = "item"
    note: str = ""


class RuleVerdict(Record):
    """A decision rule's verdict (``decision_rules.DecisionRuleResult.to_dict``)."""

    spec_sha256: str | None
    decision: str
    passed: bool
    method: str
    alpha: float
    one_sided_level: float
    two_sided_level: float
    order_dependent: bool
    permutation_seed: int | None
    permutation_seed_source: str
    criteria: tuple[CriterionVerdict, ...]

    @property
    def primary(self) -> CriterionVerdict:
        return self.criteria[0]


class BoundVerdict(Record):
    """One method's bounds on the paired difference (``noninferiority.BoundResult``)."""

    method: str
    lower: float | None
    upper: float | None
    decision: str
    p_value: float | None
    alpha: float
    one_sided_level: float
    two_sided_level: float
    margin: float
    n: int
    validity: str
    sidedness: str = ""
    replication_unit: str = "item"
    note: str = ""
    order_dependent: bool = False
    permutation_seed: int | None = None


class AllBounds(Record):
    """Every method on the same paired items (``noninferiority.NoninferiorityReport.to_dict``)."""

    n: int
    mean_difference: float
    alpha: float
    one_sided_level: float
    two_sided_level: float
    margin: float
    decision: str
    decision_method: str
    range: tuple[float, float]
    replication_unit: str
    permutation_seed: int | None
    bounds: dict[str, BoundVerdict]


class RuleDecision(Record):
    """A spec's decision rule on two ``eval.jsonl`` files, with every other bound beside it."""

    spec: str
    spec_sha256: str
    registration: str
    rule: RuleVerdict
    decision: str
    n: int
    treatment_accuracy: float
    baseline_accuracy: float
    all_bounds: AllBounds

    def bound_rows(self) -> list[dict[str, Any]]:
        """One row per bound: the rule's own first (registered in its spec), then every other bound, each
        labelled exploratory with its one-sided level and permutation seed (``none`` when order-free)."""
        crit = self.rule.primary
        rows = [
            {
                "method": crit.method,
                "status": f"{self.registration}: {self.spec} {self.spec_sha256[:12]}",
                "one-sided level": crit.one_sided_level,
                "permutation seed": crit.permutation_seed if crit.permutation_seed is not None else "none",
                "lower": crit.lower,
                "upper": crit.upper,
                "decision": crit.decision,
                "validity": "finite-sample",
            }
        ]
        for name, b in self.all_bounds.bounds.items():
            if name == crit.method:
                continue
            rows.append(
                {
                    "method": name,
                    "status": "exploratory",
                    "one-sided level": b.one_sided_level,
                    "permutation seed": b.permutation_seed if b.permutation_seed is not None else "none",
                    "lower": b.lower,
                    "upper": b.upper,
                    "decision": b.decision,
                    "validity": b.validity,
                }
            )
        return rows


class Contrast(Record):
    """``treatment`` minus ``baseline`` on the same items (exploratory: not a registered decision)."""

    treatment: str
    baseline: str
    n: int
    treatment_accuracy: float
    baseline_accuracy: float
    mean_difference: float
    gained: int  # items the treatment gets right and the baseline wrong
    lost: int
    alpha: float
    bounds: dict[str, Interval] = {}
    status: str = "exploratory (not pre-registered); each bound one-sided at 1 - alpha, order-free"

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


class AssaySensitivity(Record):
    """Does the active control beat the untrained base by more than the margin (``assay_sensitivity``)."""

    revised_placebo_decision: str | None
    revised_placebo_method: str | None
    revised_placebo_lower: float | None
    control: str
    margin: float
    control_minus_base: float
    hoeffding_lower: float | None
    empirical_bernstein_lower: float | None
    one_sided_level: float
    established: bool
    placebo_decision: str
    placebo_lower: float | None

    def sentence(self) -> str:
        """The report's assay-sensitivity line (``rftlab.analysis.gs1.assay_sentence``)."""
        from rftlab.analysis.gs1 import assay_sentence

        return assay_sentence(self)


class StudyDecision(RuleDecision):
    """``decision.json``: the registered decision, the revised rule's, the contrasts and the assay check;
    ``gate_passed`` is added by the study (it is not in the record)."""

    revised: RuleDecision | None
    contrasts: dict[str, Contrast]
    assay_sensitivity: AssaySensitivity
    base_accuracy: float
    gate_passed: bool | None = None

    def decisions(self) -> list[RuleDecision]:
        """The registered decision, then the revised rule's when there is one."""
        return [self, self.revised] if self.revised is not None else [self]

    @property
    def control_vs_base(self) -> Contrast:
        """The active control (GRPO) minus the untrained base."""
        return self.contrasts["grpo_gs8-base"]


class CheckRecord(Record):
    """One gate check as recorded (``gates.CheckResult``)."""

    metric: str
    measures: str
    observed: Any
    threshold: dict[str, Any]
    passed: bool
    reason: str
    evidence: dict[str, Any] = {}


class GateRecord(Record):
    """One gate evaluation as recorded (``gates.GateEvaluation.to_dict``)."""

    spec_sha256: str
    spec_path: str | None
    passed: bool
    n_checks: int
    n_failed: int
    checks: tuple[CheckRecord, ...]


class ArmMonitor(Record):
    """One arm's training monitor over every logged step (``training_monitor``); a field the arm's
    metrics do not hold is ``None``."""

    steps: int
    ess_p10_min: float | None = None
    ess_p10_min_step: int | None = None
    ess_p10_median: float | None = None
    ess_min: float | None = None
    steps_below_ess_min: tuple[int, ...] = ()
    distinct_samples_per_group_min: int | None = None
    distinct_samples_per_group_mean: float | None = None
    steps_with_collapsed_groups: tuple[int, ...] = ()
    kl_sample_train_v1_max_abs: float | None = None
    kl_sample_train_v2_max: float | None = None
