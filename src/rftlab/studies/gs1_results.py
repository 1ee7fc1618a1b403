"""The typed results of the GS1 study driver (``rftlab.studies.gs1``): the preflight, pilot and gate
records, each arm's run and training curve, the registration audit, the design, the per-seed and
run-level results and the summary ``run_study`` returns; with the names of the study's three arms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from rftlab.analysis.gs1 import ArmMonitor, RuleDecision, RuleDesign, StudyDecision, StudyOutcome
from rftlab.analysis.gs1.results import Contrast, GateRecord, Record
from rftlab.analysis.gs1.robustness import DerivedMargin, GateMargin, PermutationSweep
from rftlab.analysis.gs1.seeds import RunLevelBrief, RunLevelPlan, RunLevelPower, RunLevelVerdict, WithinSeed

TREATMENT, BASELINE, BASE = "gs1_kernel", "grpo_gs8", "base"


class PreflightCheckRecord(Record):
    """One check of the correctness preflight as recorded in ``preflight.json``."""

    id: str
    status: str
    detail: str
    values: dict[str, Any] = {}
    backend: str | None = None
    seconds: float | None = None


class PreflightRecord(Record):
    """A ``preflight.json`` record (``launch.gs1.preflight.PreflightReport.to_dict``)."""

    status: str
    passed: bool
    backend: str
    spec_sha256: str | None
    created_at: str
    checks: tuple[PreflightCheckRecord, ...]
    wall_seconds: float | None = None


class PreflightSummary(Record):
    """The preflight's status and record path; ``report`` is the record itself (not in ``to_dict``)."""

    status: str
    path: str
    completed_by: str | None = None
    report: PreflightRecord = Field(exclude=True)


class Feasibility(Record):
    """The full study's wall time estimated from the pilot (``training.gs1.pilot.feasibility``)."""

    status: str
    problems: tuple[str, ...]
    effective_config: dict[str, Any]
    source: str
    measurements: dict[str, dict[str, float]]
    phases: dict[str, dict[str, float]]
    wall_seconds: float
    budget_wall_seconds: float
    recovery_reserve_seconds: float | None
    gpu_hours: float | None


class PilotResult(Record):
    """``gate.json``: the pilot's gate at the chosen bandwidth, the calibration and the feasibility;
    ``by_construction`` (gate checks that cannot fail here) is added by the study."""

    gate: GateRecord
    gate_passed: bool
    evaluations: dict[str, GateRecord]
    chosen_bandwidth: float
    calibration_reason: str
    metrics_by_bandwidth: dict[str, dict[str, Any]]
    recompute_max_abs_diff: float | None
    pilot_runs: dict[str, str]
    feasibility: Feasibility
    by_construction: dict[str, str] = {}


class GateBrief(Record):
    passed: bool
    bandwidth: float


@dataclass(frozen=True)
class TrainingCurve:
    """An arm's logged training steps, one value per step (``nan`` where a step did not log it)."""

    step: tuple[int, ...]
    reward_mean: tuple[float, ...]
    reward_mean_se: tuple[float, ...]
    ess_p10: tuple[float, ...]
    ess_median: tuple[float, ...]
    distinct_mean: tuple[float, ...]
    distinct_min: tuple[float, ...]

    @classmethod
    def from_metrics(cls, rows: Sequence[Mapping[str, Any]]) -> TrainingCurve:
        def column(name: str) -> tuple[float, ...]:
            return tuple(math.nan if r.get(name) is None else float(r[name]) for r in rows)

        return cls(
            step=tuple(int(r["step"]) for r in rows),
            reward_mean=column("reward_mean"),
            reward_mean_se=column("reward_mean_se"),
            ess_p10=column("kernel_effective_neighbors_p10"),
            ess_median=column("kernel_effective_neighbors_median"),
            distinct_mean=column("distinct_samples_per_group_mean"),
            distinct_min=column("distinct_samples_per_group_min"),
        )


class ArmTimings(Record):
    setup_s: float | None = None
    train_s: float | None = None
    eval_s: float | None = None


class ArmRun(Record):
    """One arm's run: its folder and how it was obtained; the timings and the training curve come from
    its record and metrics (not in ``to_dict``)."""

    path: str
    origin: str
    timings: ArmTimings = Field(default=ArmTimings(), exclude=True)
    curve: TrainingCurve | None = Field(default=None, exclude=True)


class RegistrationAudit(Record):
    """The pre-registration audit of the registered decision (``rftlab.runs.plan_audit``): the spec's
    registered version and first commit, and whether the decision over the two arms' runs stays
    confirmatory (every reason when not), with what the audit cannot show."""

    family: str
    sentence: str
    registration: str
    limits: tuple[str, ...]


class GS1Summary(Record):
    """What ``run_study`` returns: every stage reached, and ``stopped`` when one stopped the study."""

    backend: str
    spec_sha256: str
    despite_failed_gate: bool
    preflight: PreflightSummary | None = None
    gate: GateBrief | None = None
    pilot: PilotResult | None = None
    runs: dict[str, ArmRun] = {}
    monitor: dict[str, ArmMonitor] = {}
    decision: StudyDecision | None = None
    audit: RegistrationAudit | None = None
    run_level: Any = None  # RunLevelResult (defined below) when a run-level plan was given
    gate_margins: dict[str, GateMargin] = {}
    placebo: PermutationSweep | None = None
    derived_margin: DerivedMargin | None = None
    stopped: str | None = None

    def outcome(self) -> StudyOutcome:
        return StudyOutcome(
            decision=self.decision,
            monitor=self.monitor,
            gate_passed=self.gate.passed if self.gate is not None else None,
            despite_failed_gate=self.despite_failed_gate,
            stopped=self.stopped,
            run_level=self.run_level.brief() if self.run_level is not None else None,
            placebo=self.placebo,
            derived_margin=self.derived_margin,
        )

    def report_lines(
        self, designs: Sequence[RuleDesign], local_model: str | None, local_detail: str | None
    ) -> list[str]:
        """The report's opening bullets (``analysis.gs1.report_summary``)."""
        from rftlab.analysis.gs1 import report_summary

        return report_summary(self.outcome(), designs, local_model, local_detail)

    def monitor_lines(self) -> list[str]:
        from rftlab.analysis.gs1 import monitor_sentences

        return monitor_sentences(self.monitor)


class DesignResult(Record):
    """What ``design`` returns: the rule's design, its table and caption, and with ``candidates`` every
    finite-sample bound and the one the numbers choose."""

    spec: str
    spec_sha256: str
    design: RuleDesign
    table: tuple[dict[str, Any], ...]
    note: str
    candidates: tuple[RuleDesign, ...] | None = None
    chosen_method: str | None = None
    planning_discordance: float | None = None
    cached: bool


class SeedResult(Record):
    """One seed's three runs (both arms and the base), their accuracies, the paired contrasts and the
    registered rule applied to that seed's two checkpoints (the item-level within-seed check)."""

    seed: int
    runs: dict[str, ArmRun]
    accuracy: dict[str, float]
    contrasts: dict[str, Contrast]
    within_seed: RuleDecision
    eval_paths: dict[str, str] = Field(default={}, exclude=True)


class RunLevelResult(Record):
    """The run-level plan's result: every seed, the three run-level contrasts and the power."""

    plan: RunLevelPlan
    seeds: tuple[SeedResult, ...]
    treatment_vs_control: RunLevelVerdict
    control_vs_base: RunLevelVerdict
    treatment_vs_base: RunLevelVerdict
    base_vs_control: RunLevelVerdict  # the run-level rule's placebo: the base as if it were the treatment
    power_planning: RunLevelPower
    power_observed: RunLevelPower | None
    base_identical_across_seeds: bool

    def scores(self, arm: str) -> dict[int, float]:
        return {r.seed: r.accuracy[arm] for r in self.seeds}

    def brief(self) -> RunLevelBrief:
        """What the summary bullets need (``analysis.gs1.seeds.run_level_bullets``)."""
        within = tuple(
            WithinSeed(
                seed=r.seed,
                decision=r.within_seed.decision,
                lower=r.within_seed.rule.primary.lower,
                mean_difference=r.within_seed.rule.primary.statistic_mean,
            )
            for r in self.seeds
        )
        return RunLevelBrief(
            treatment_vs_control=self.treatment_vs_control,
            control_vs_base=self.control_vs_base,
            base_vs_control=self.base_vs_control,
            power_planning=self.power_planning,
            power_observed=self.power_observed,
            within_seed=within,
            base_identical_across_seeds=self.base_identical_across_seeds,
        )


def arm_run(result) -> ArmRun:
    """An arm's run as the summary holds it: folder, origin, timings and training curve."""
    timings = result.run.record.provider.get("timings") or {}
    return ArmRun(
        path=str(result.run.path),
        origin=result.origin,
        timings=ArmTimings(**{k: timings.get(k) for k in ("setup_s", "train_s", "eval_s")}),
        curve=TrainingCurve.from_metrics(result.run.metrics()),
    )
