"""The GS1 kernel-baseline vs GRPO study (``data/specs/gs1_vs_grpo.json``): the driver the notebook
(``notebooks/03_gs1.py``) and the CLI (``rftlab gs1``) both call.

``design`` gives, before anything runs, what the spec's decision rule can decide at its n (and the
revised rule's, ``data/specs/gs1_vs_grpo_betting.json``). ``run_study`` does, in order and reusing whatever
the run store already holds for the same configuration: the correctness preflight (no arm trains while it
is unresolved; reused only from the same commit with a clean tree), the 2-step activation pilot with its
gate (``rftlab.analysis.gates``) and the pre-registered bandwidth calibration, the arms (40 steps each,
greedy evaluation into each run's ``eval.jsonl``), the untrained base evaluated on the same items, and,
with both arms evaluated, the spec's decision rule (paired Hoeffding, margin -0.03, one-sided alpha 0.05)
with the labelled exploratory bounds beside it, the revised rule's decision after it, the paired contrasts
against the base and the assay-sensitivity check. With a run-level plan (``RUN_PLAN``,
``data/specs/gs1_runlevel.json``) it then trains both arms and evaluates the base at every other seed of
the plan (seed 0's runs are the ones above, their hashes unchanged) and returns the run-level result
(``analysis.gs1.seeds``: the run as the unit, exploratory), the gate margins, the revised rule's placebo
across permutation seeds and the margin a future run derives (``analysis.gs1.robustness``). A failed
gate stops before the full runs unless ``despite_failed_gate`` is given (the summary records it; the
decision is then not a test of the GS1 hypothesis). Bad input raises ``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- envs: ``rftlab.envs.gs1`` (the GSM8K-style task and its grader)
- training: ``rftlab.training.gs1`` (advantage estimators, the client-side RL loop, the activation pilot,
  the local warm start)
- launch: ``rftlab.launch.gs1`` (backend composition, correctness preflight)
- analysis: ``rftlab.analysis.gs1`` (design numbers, contrasts against the base, assay sensitivity,
  gates by construction, step monitoring)
- studies: ``rftlab.studies.gs1``
- cli: ``rftlab.cli.gs1``
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field

from rftlab.analysis.gs1 import (
    ESS_METRIC,
    ArmMonitor,
    GS1StudySpec,
    RuleDecision,
    RuleDesign,
    StudyDecision,
    StudyOutcome,
)
from rftlab.analysis.gs1.results import Contrast, GateRecord, Record
from rftlab.analysis.gs1.robustness import DerivedMargin, GateMargin, PermutationSweep
from rftlab.analysis.gs1.seeds import RunLevelBrief, RunLevelPlan, RunLevelPower, RunLevelVerdict, WithinSeed
from rftlab.launch.gs1 import ARMS, DEFAULT_SPEC, REVISED_SPEC, RUN_PLAN
from rftlab.runs.paths import PROJECT_ROOT, display_path, notebook_runs_root
from rftlab.training.sessions import closing_session

# what notebook 03 and the CLI take from here besides the driver's own functions
__all__ = [
    "ARMS",
    "DEFAULT_SPEC",
    "ESS_METRIC",
    "REVISED_SPEC",
    "RUN_PLAN",
    "GS1StudySpec",
    "closing_session",
    "notebook_runs_root",
]

TREATMENT, BASELINE, BASE = "gs1_kernel", "grpo_gs8", "base"


def check_input_file(path: str | Path, what: str) -> None:
    """``ValueError`` unless ``path`` is an existing file: a folder is named as one."""
    file = Path(path)
    if file.is_dir():
        raise ValueError(f"{what} {path} is a folder, not a file")
    if not file.exists():
        raise ValueError(f"{what} {path}: file not found")
    if not file.is_file():
        raise ValueError(f"{what} {path} is not a regular file (a FIFO, socket or device)")


def load_spec(path: str | Path) -> GS1StudySpec:
    """The GS1 spec at ``path``, validated once, with its file's SHA-256 (``spec.sha256``).

    A missing or unreadable file, bad JSON or a bad field is a ``ValueError`` of one line naming the file
    and the field."""
    from rftlab.analysis.gs1 import parse_study_spec
    from rftlab.analysis.io import read_file_bytes

    check_input_file(path, "spec")
    return parse_study_spec(read_file_bytes(Path(path), "spec"), path)


def load_run_plan(path: str | Path = RUN_PLAN) -> RunLevelPlan:
    """The run-level plan at ``path`` (the seeds and the run-level rule); ``ValueError`` of one line."""
    from rftlab.analysis.gs1.seeds import parse_run_plan
    from rftlab.analysis.io import read_file_bytes

    check_input_file(path, "run-level plan")
    return parse_run_plan(read_file_bytes(Path(path), "run-level plan"), path)


def write_json(path: Path, obj: Any) -> Path:
    from rftlab.runs.store import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=2, default=str) + "\n")
    return path


EXPERIMENT = "gs1_vs_grpo"


def _record_run(store, arm: str, spec: dict[str, Any], backend: str, filename: str, payload_fn):
    """A bookkeeping run (gate, decision) holding one JSON file; reused when finished."""
    run, origin = store.start_or_reuse(EXPERIMENT, arm, spec, backend=backend)
    path = run.path / filename
    if origin == "reused" and path.exists():
        return json.loads(path.read_text(encoding="utf-8")), run, origin
    with run.working():
        payload = payload_fn()
        write_json(path, payload)
    return payload, run, origin


def get_backend(backend: str | None, spec: GS1StudySpec, root: str | Path, quick: bool):
    """The study's backend (``local`` or ``tinker``; ``None``: tinker when ``TINKER_BASE_URL`` or ``TINKER_API_KEY`` is
    set, ``rftlab.training.tinker_target``);
    ``ValueError`` when it cannot be built here."""
    from rftlab.launch.gs1.backend import BackendUnavailable, default_backend, make_gs1_backend

    try:
        return make_gs1_backend(backend or default_backend(), spec, root=str(root), quick=quick)
    except BackendUnavailable as exc:
        raise ValueError(str(exc)) from None


# ------------------------------------------------------------------------------------- typed results


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


def audit_decision(spec: GS1StudySpec, runs: Sequence[Any]) -> RegistrationAudit:
    """Audit the registered decision over ``runs`` (the two arms' runs) against the spec file it was
    read from (``rftlab.runs.plan_audit.audit_decision``); a spec that matches no registered version is
    exploratory, never refused."""
    from rftlab.runs.plan_audit import audit_decision as audit_registered

    return RegistrationAudit.model_validate(dataclasses.asdict(audit_registered(spec.path, runs)))


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


# ---------------------------------------------------------------------------------- study functions


def same_clean_code(record_git: Mapping[str, Any] | None, current_git: Mapping[str, Any] | None) -> bool:
    """Whether a record was made by the code checked out now: the same commit, neither tree dirty."""
    a, b = dict(record_git or {}), dict(current_git or {})
    return (
        bool(a.get("commit"))
        and a.get("commit") == b.get("commit")
        and a.get("dirty") is False
        and (b.get("dirty") is False)
    )


def study_preflight(backend, spec: GS1StudySpec, store) -> tuple[dict[str, Any], Path]:
    """Run (or reuse) the correctness preflight for these arm configs on this backend: the record and
    its path.

    A finished preflight is reused only when it was made at the commit checked out now with a clean tree,
    and the tree is still clean: a preflight tests the code, so one made on other or uncommitted code is
    never reused (nor, by ``reference_completion``, accepted for the Tinker handoff)."""
    from rftlab.launch.gs1.preflight import run_preflight
    from rftlab.runs.gitinfo import git_state

    key = {
        "kind": "gs1_preflight",
        "spec_sha256": spec.sha256,
        "arms": {k: v.to_dict() for k, v in backend.arms.items()},
    }
    found = store.find_run(EXPERIMENT, "preflight", key, "finished", backend.name)
    if found is not None and (found.path / "preflight.json").exists():
        if same_clean_code(found.record.git, git_state(store.repo)):
            return json.loads((found.path / "preflight.json").read_text(encoding="utf-8")), (
                found.path / "preflight.json"
            )
    run = store.create_run(EXPERIMENT, "preflight", key, backend=backend.name)
    t0 = time.perf_counter()
    with run.working():
        report = run_preflight(
            backend.arms,
            backend.service_client,
            backend.renderer,
            backend.task,
            backend.name,
            spec,
            spec.sha256,
            send_seeds=backend.send_seeds,
            reference_client=backend.reference_client,
        )
        out = report.to_dict()
        out["wall_seconds"] = time.perf_counter() - t0
        write_json(run.path / "preflight.json", out)
    return out, run.path / "preflight.json"


def reference_completion(store, pre: dict[str, Any], pre_path: Path) -> tuple[dict[str, Any] | None, str]:
    """Complete a preflight whose gradient/weight checks this backend cannot run with the newest passed
    preflight of the same spec on another backend in the store, made by the same committed code
    (``training.gs1_preflight.complete_with_reference``)."""
    from rftlab.launch.gs1.preflight import complete_with_reference, load_preflight, preflight_resolved
    from rftlab.runs import load_run

    own = load_run(pre_path.parent).record
    best, reason = None, "no passed preflight of this spec on a backend that exposes gradients"
    for run in sorted(store.runs(EXPERIMENT, "preflight"), key=lambda r: r.record.created_at, reverse=True):
        path = run.path / "preflight.json"
        if run.record.backend == own.backend or not path.exists():
            continue
        reference = load_preflight(path)
        if not preflight_resolved(reference) or reference.get("spec_sha256") != pre.get("spec_sha256"):
            continue
        best, reason = complete_with_reference(
            pre, reference, preflight_git=own.git, reference_git=run.record.git, reference_path=str(path)
        )
        if best is not None:
            break
    return best, reason


def gate_evaluator(spec: GS1StudySpec):
    from rftlab.analysis.gates import evaluate_gate

    checks = list(spec.activation_gate.checks)
    return lambda metrics: evaluate_gate(checks, metrics, spec.sha256)


def study_pilot(backend, spec: GS1StudySpec, store, preflight_s: float | None = None) -> dict[str, Any]:
    """The 2-step pilot, its gate at the pre-registered bandwidth (and the calibration), feasibility: the
    ``gate.json`` record."""
    from rftlab.runs.strictjson import nonfinite_as_text
    from rftlab.training.gs1.pilot import calibrate_bandwidth, feasibility, run_pilot

    pilot = run_pilot(
        backend.arms,
        backend.service_client,
        backend.renderer,
        backend.task,
        store,
        backend.name,
        send_seeds=backend.send_seeds,
    )
    calib = calibrate_bandwidth(pilot.metrics_by_bandwidth, gate_evaluator(spec))
    gate = calib.evaluations[calib.chosen_bandwidth]
    source = ", ".join(f"{k}:{r.run.run_id}" for k, r in pilot.runs.items())
    feas = feasibility(
        backend.arms, pilot.timings, spec.budget.max_wall_minutes, source, preflight_s=preflight_s
    )
    return {  # a gate record keeps a non-finite observed value as text ("NaN"), as it always has
        "gate": nonfinite_as_text(gate.to_dict()),
        "gate_passed": gate.passed,
        "evaluations": {str(h): nonfinite_as_text(e.to_dict()) for h, e in calib.evaluations.items()},
        "chosen_bandwidth": calib.chosen_bandwidth,
        "calibration_reason": calib.reason,
        "metrics_by_bandwidth": {str(h): m for h, m in pilot.metrics_by_bandwidth.items()},
        "recompute_max_abs_diff": pilot.recompute_max_abs_diff,
        "pilot_runs": {k: str(r.run.path) for k, r in pilot.runs.items()},
        "feasibility": feas,
    }


def decision_record(
    spec: GS1StudySpec, treatment_eval: str | Path, baseline_eval: str | Path
) -> dict[str, Any]:
    """The spec's decision rule on the two ``eval.jsonl`` files, with every other bound beside it (the
    order-dependent ones on the rule's permutation seed, or seed 0 when the rule registers none), as the
    record ``decision.json`` holds."""
    from rftlab.analysis.gs1 import rule_verdict
    from rftlab.analysis.io import load_paired_items
    from rftlab.analysis.noninferiority import paired_noninferiority

    result = rule_verdict(spec, treatment_eval, baseline_eval)
    rule = spec.decision_rule
    crit = rule.criteria[0]
    paired = load_paired_items(treatment_eval, baseline_eval)
    seed = rule.permutation_seed if rule.permutation_seed is not None else 0
    report = paired_noninferiority(
        paired.treatment, paired.baseline, margin=-crit.margin, alpha=rule.alpha, permutation_seed=seed
    )
    return {
        "spec": spec.file_name,
        "spec_sha256": spec.sha256,
        "registration": spec.registration,
        "rule": result.to_dict(),
        "decision": result.decision,
        "n": int(report.n),
        "treatment_accuracy": float(paired.treatment.mean()),
        "baseline_accuracy": float(paired.baseline.mean()),
        "all_bounds": report.to_dict(),
    }


def decide(spec: GS1StudySpec, treatment_eval: str | Path, baseline_eval: str | Path) -> RuleDecision:
    """The spec's decision rule on the two ``eval.jsonl`` files, typed (``decision_record``)."""
    return RuleDecision.model_validate(decision_record(spec, treatment_eval, baseline_eval))


def design(
    spec: GS1StudySpec,
    candidates: bool = False,
    discordances=None,
    reps: int | None = None,
    seed: int | None = None,
    on_miss: Callable[[], None] | None = None,
) -> DesignResult:
    """What the spec's decision rule can decide at its n before any run (``rftlab.analysis.gs1``): the
    probability of ``noninferior`` at −margin, 0, +0.02 and +0.045 and the items for 80% power at
    equality. With ``candidates``, every finite-sample bound at the planning discordance and the one the
    design numbers choose.

    The tables are deterministic for their inputs, so they are cached in the run store
    (``rftlab.runs.cache``) under the spec's SHA-256, the options and the digest of the code that computes
    them. ``on_miss`` is called before a computation (a Monte Carlo rule's takes tens of seconds).
    ``cached`` in the result says which it was."""
    from rftlab.runs.cache import cached_json
    from rftlab.runs.codehash import closure_digest

    opts: dict[str, Any] = {}
    if discordances is not None:
        opts["discordances"] = [float(r) for r in discordances]
    if reps is not None:
        opts["reps"] = int(reps)
    if seed is not None:
        opts["seed"] = int(seed)
    key = {
        "spec_sha256": spec.sha256,
        "candidates": bool(candidates),
        "options": opts,
        "code": closure_digest("rftlab.analysis.gs1"),
    }
    value, hit = cached_json(
        "gs1_design", key, lambda: _design_tables(spec, candidates, opts), on_miss=on_miss
    )
    return DesignResult.model_validate(
        {
            "spec": spec.path,
            "spec_sha256": spec.sha256,
            **value,
            "design": RuleDesign.from_dict(value["design"]),
            **({"candidates": [RuleDesign.from_dict(c) for c in value["candidates"]]} if candidates else {}),
            "cached": hit,
        }
    )


def _design_tables(spec: GS1StudySpec, candidates: bool, opts: dict[str, Any]) -> dict[str, Any]:
    from rftlab.analysis import gs1 as ana

    run_opts = {k: (tuple(v) if k == "discordances" else v) for k, v in opts.items()}
    d = ana.spec_design(spec, **run_opts)
    out: dict[str, Any] = {"design": d.to_dict(), "table": ana.design_table(d), "note": ana.design_note(d)}
    if candidates:
        cand_opts = {k: v for k, v in run_opts.items() if k in ("reps", "seed")}
        designs = ana.candidate_designs(spec.decision_rule, d.n, **cand_opts)
        out["candidates"] = [c.to_dict() for c in designs]
        out["chosen_method"] = ana.choose_method(designs)
        out["planning_discordance"] = ana.PLANNING_DISCORDANCE
    return out


# ------------------------------------------------------------------------------------- the study


def check_served(backend) -> None:
    """A clear error (``ModelNotServedError``) before anything is paid for."""
    from rftlab.training.gs1.rl_loop import check_model_served, service_capabilities

    capabilities = service_capabilities(backend.service_client)
    for cfg in backend.arms.values():
        check_model_served(capabilities, cfg.base_model)


def resolved_preflight(backend, spec: GS1StudySpec, store, summary: dict[str, Any]) -> dict[str, Any] | None:
    """The preflight, completed by a local reference when this backend cannot run every check; ``None``
    (with ``summary["stopped"]``) when it is unresolved."""
    from rftlab.launch.gs1.preflight import preflight_resolved

    pre, pre_path = study_preflight(backend, spec, store)
    report = PreflightRecord.model_validate(pre)
    summary["preflight"] = PreflightSummary(status=pre["status"], path=str(pre_path), report=report)
    if preflight_resolved(pre):
        return pre
    completed, why = reference_completion(store, pre, pre_path)
    if completed is None:
        summary["stopped"] = (
            f"preflight is {pre['status']}: no full run starts (its record: the newest run under "
            f"{display_path(pre_path.parent.parent)}; {why})"
        )
        return None
    summary["preflight"] = PreflightSummary(
        status="passed", path=str(pre_path), completed_by=completed["completed_by"], report=report
    )
    return completed


def pilot_gate(backend, spec: GS1StudySpec, store, preflight: Mapping[str, Any]) -> PilotResult:
    """The activation pilot and its gate (recorded once per configuration in ``gate.json``), with the gate
    checks that pass by construction here flagged."""
    from rftlab.analysis.gs1 import gate_construction_notes

    key = {
        "kind": "gs1_pilot_gate",
        "spec_sha256": spec.sha256,
        "arms": {k: v.to_dict() for k, v in backend.arms.items()},
        "pilot_eval_split": "train",  # a gate whose pilot timed evaluation on test items is not reused
    }
    gate, _, _ = _record_run(
        store,
        "activation_gate",
        key,
        backend.name,
        "gate.json",
        lambda: study_pilot(backend, spec, store, preflight.get("wall_seconds")),
    )
    notes = gate_construction_notes(backend.arms[TREATMENT].estimator, backend.warm_start)
    return PilotResult.model_validate({**gate, "by_construction": notes})


def train_arms(
    backend, store, arms, bandwidth: float, spec: GS1StudySpec, progress=None, seed: int | None = None
) -> dict[str, Any]:
    """Each requested arm's run (trained, or resumed, or reused) at the gate's bandwidth; ``progress``
    gets every new step's metrics with the ``arm`` and its ``alerts`` (``analysis.gs1.step_alerts``).
    ``seed`` replaces every arm's training seed (``None``: the spec's, whose runs keep their hashes)."""
    from rftlab.analysis.gs1 import ESS_METRIC, step_alerts
    from rftlab.training.gs1.rl_loop import run_arm

    configs = dict(backend.arms)
    configs[TREATMENT] = replace(configs[TREATMENT], bandwidth=float(bandwidth))
    if seed is not None:
        configs = {name: replace(cfg, seed=int(seed)) for name, cfg in configs.items()}
    ess_min = spec.activation_gate.minimum(ESS_METRIC)
    results = {}
    for name in arms:

        def report(metrics, arm=name):
            if progress is not None:
                progress({"arm": arm, **metrics, "alerts": step_alerts(metrics, ess_min)})

        results[name] = run_arm(
            configs[name],
            backend.service_client,
            backend.renderer,
            backend.task,
            store,
            backend.name,
            progress=report,
            send_seeds=backend.send_seeds,
            plan_sha256=spec.sha256,
        )
    return results


def base_config(backend, seed: int | None = None):
    """The untrained base as an evaluation arm: the baseline arm's configuration with 0 steps, i.e. the
    seed-0 LoRA initialisation both arms start from (preflight check (e)), evaluated the same way; with
    ``seed``, that seed's initialisation."""
    cfg = replace(backend.arms[BASELINE], arm=BASE, steps=0)
    return cfg if seed is None else replace(cfg, seed=int(seed))


def evaluate_base(backend, store, seed: int | None = None):
    """Evaluate (or reuse) the untrained base on the arms' test items."""
    from rftlab.training.gs1.rl_loop import run_arm

    return run_arm(
        base_config(backend, seed),
        backend.service_client,
        backend.renderer,
        backend.task,
        store,
        backend.name,
        send_seeds=backend.send_seeds,
    )


def study_decision(
    spec: GS1StudySpec,
    revised: GS1StudySpec | None,
    evals: Mapping[str, Path],
    run_ids: Mapping[str, str],
    store,
    backend_name: str,
) -> dict[str, Any]:
    """The registered decision, the revised rule's decision, the paired contrasts against the base and
    the assay-sensitivity check: the record ``decision.json`` holds (one per set of evaluated runs)."""
    from rftlab.analysis.gs1 import assay_sensitivity, paired_contrast

    key = {
        "kind": "gs1_decision",
        "spec_sha256": spec.sha256,
        "revised_spec_sha256": revised.sha256 if revised is not None else None,
        **{name: run_ids[name] for name in (TREATMENT, BASELINE, BASE)},
    }

    def payload():
        out = decision_record(spec, evals[TREATMENT], evals[BASELINE])
        out["revised"] = decision_record(revised, evals[TREATMENT], evals[BASELINE]) if revised else None
        pairs = [(TREATMENT, BASELINE), (BASELINE, BASE), (TREATMENT, BASE)]
        contrasts = {f"{t}-{b}": paired_contrast(evals[t], evals[b], t, b) for t, b in pairs}
        control = contrasts[f"{BASELINE}-{BASE}"]
        out["contrasts"] = {k: c.to_dict() for k, c in contrasts.items()}
        out["assay_sensitivity"] = assay_sensitivity(
            control, spec, evals[BASE], evals[BASELINE], revised
        ).to_dict()
        out["base_accuracy"] = control.baseline_accuracy
        return out

    decision, _, _ = _record_run(store, "decision", key, backend_name, "decision.json", payload)
    return decision


def arm_run(result) -> ArmRun:
    """An arm's run as the summary holds it: folder, origin, timings and training curve."""
    timings = result.run.record.provider.get("timings") or {}
    return ArmRun(
        path=str(result.run.path),
        origin=result.origin,
        timings=ArmTimings(**{k: timings.get(k) for k in ("setup_s", "train_s", "eval_s")}),
        curve=TrainingCurve.from_metrics(result.run.metrics()),
    )


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


PAIRS = ((TREATMENT, BASELINE), (BASELINE, BASE), (TREATMENT, BASE))


def seed_result(spec: GS1StudySpec, seed: int, results: Mapping[str, Any]) -> SeedResult:
    """One seed's ``SeedResult`` from its three finished runs (``run_arm`` results by arm)."""
    from rftlab.analysis.gs1 import paired_contrast

    evals = {n: results[n].run.path / "eval.jsonl" for n in (*ARMS, BASE)}
    contrasts = {f"{t}-{b}": paired_contrast(evals[t], evals[b], t, b) for t, b in PAIRS}
    accuracy = {
        TREATMENT: contrasts[f"{TREATMENT}-{BASE}"].treatment_accuracy,
        BASELINE: contrasts[f"{BASELINE}-{BASE}"].treatment_accuracy,
        BASE: contrasts[f"{BASELINE}-{BASE}"].baseline_accuracy,
    }
    return SeedResult(
        seed=int(seed),
        runs={n: arm_run(results[n]) for n in (*ARMS, BASE)},
        accuracy=accuracy,
        contrasts=contrasts,
        within_seed=decide(spec, evals[TREATMENT], evals[BASELINE]),
        eval_paths={n: str(p) for n, p in evals.items()},
    )


def same_items(paths: Sequence[str | Path]) -> bool:
    """Whether every per-item file holds the same ``correct`` value for every item."""
    from rftlab.analysis.io import load_paired_items

    first = paths[0]
    for other in paths[1:]:
        paired = load_paired_items(first, other)
        if (paired.treatment != paired.baseline).any():
            return False
    return True


def run_level(spec: GS1StudySpec, plan: RunLevelPlan, seeds: Sequence[SeedResult]) -> RunLevelResult:
    """The plan's run-level contrasts over the seeds' results, with the power at the planning and the
    observed run-to-run SD of the treatment − control difference."""
    from rftlab.analysis.gs1.seeds import run_level_power, run_level_verdict

    score = {arm: {r.seed: r.accuracy[arm] for r in seeds} for arm in (*ARMS, BASE)}
    main = run_level_verdict(score[TREATMENT], score[BASELINE], plan, TREATMENT, BASELINE)
    observed = run_level_power(plan, main.sd) if main.sd else None
    return RunLevelResult(
        plan=plan,
        seeds=tuple(seeds),
        treatment_vs_control=main,
        control_vs_base=run_level_verdict(score[BASELINE], score[BASE], plan, BASELINE, BASE),
        treatment_vs_base=run_level_verdict(score[TREATMENT], score[BASE], plan, TREATMENT, BASE),
        base_vs_control=run_level_verdict(score[BASE], score[BASELINE], plan, BASE, BASELINE),
        power_planning=run_level_power(plan, plan.planning_run_sd),
        power_observed=observed,
        base_identical_across_seeds=same_items([r.eval_paths[BASE] for r in seeds]),
    )


def study_seeds(
    backend, spec, store, plan: RunLevelPlan, bandwidth: float, seed0: Mapping[str, Any], progress
):
    """Every seed of ``plan``: seed 0's runs are the study's own (``seed0``), every other seed trains
    both arms and evaluates the base with that seed; the run-level result over all of them."""
    spec_seed = {cfg.seed for cfg in backend.arms.values()}
    if len(spec_seed) != 1:
        raise ValueError(f"the arms must share their seed to pair by seed, got {sorted(spec_seed)}")
    own = spec_seed.pop()
    out = []
    for s in plan.seeds:
        if s == own:
            results = dict(seed0)
        else:
            results = train_arms(backend, store, ARMS, bandwidth, spec, progress, seed=s)
            results[BASE] = evaluate_base(backend, store, seed=s)
        out.append(seed_result(spec, s, results))
    return run_level(spec, plan, out)


def pilot_rollouts(pilot: PilotResult, arm: str) -> list[dict[str, Any]]:
    """The pilot's logged rollouts of ``arm`` (every pilot step, in order)."""
    from rftlab.runs.store import load_run

    run = load_run(pilot.pilot_runs[arm])
    return [r for k in range(int(run.record.spec.get("steps", 0))) for r in run.rollouts(k)]


def gate_margins(pilot: PilotResult, spec: GS1StudySpec, treatment_config) -> dict[str, Any]:
    """Each numeric gate check's margin in its own units with a bootstrap interval, recomputed from the
    pilot's rollouts at the gate's bandwidth (``analysis.gs1.robustness``): effective neighbours and
    the pilot reward over rollouts, the baseline-reward correlation over prompts."""
    from rftlab.analysis.gs1.robustness import correlation_margin, mean_margin, percentile_margin
    from rftlab.training.gs1.pilot import recompute_treatment

    rows = pilot_rollouts(pilot, TREATMENT)
    if pilot.chosen_bandwidth != treatment_config.bandwidth:
        rows = recompute_treatment(
            rows, pilot.chosen_bandwidth, treatment_config.window, treatment_config.min_kernel_mass
        )
    checks = {c.metric: c for c in spec.activation_gate.checks}
    out: dict[str, Any] = {}
    ess = [r["effective_neighbors"] for r in rows if r.get("effective_neighbors") is not None]
    ess_min = checks[ESS_METRIC].min if ESS_METRIC in checks else None
    if ess_min is not None and ess:  # a check with only a maximum has no lower margin to measure
        out[ESS_METRIC] = percentile_margin(ESS_METRIC, ess, float(ess_min))
    reward = checks.get("pilot_mean_reward")
    if reward is not None:
        out["pilot_mean_reward"] = mean_margin(
            "pilot_mean_reward", [r["reward"] for r in rows], reward.min, reward.max
        )
    held = {
        (r["step"], r["prompt_id"]): (r["baseline"], r["heldout_mean_reward"])
        for r in rows
        if r.get("heldout_mean_reward") is not None
    }
    corr = checks.get("baseline_reward_corr")
    if corr is not None and corr.min is not None and len(held) >= 3:
        b, h = zip(*held.values(), strict=True)
        out["baseline_reward_corr"] = correlation_margin("baseline_reward_corr", b, h, float(corr.min))
    return out


def placebo_sweep(revised: GS1StudySpec, seed: SeedResult, seeds=None):
    """The revised rule on the untrained base as if it were the treatment, against the control of one
    training seed, at every permutation seed (``analysis.gs1.robustness``)."""
    from rftlab.analysis.gs1.robustness import PERMUTATION_SEEDS, placebo_across_permutation_seeds

    return placebo_across_permutation_seeds(
        revised,
        seed.eval_paths[BASE],
        seed.eval_paths[BASELINE],
        PERMUTATION_SEEDS if seeds is None else seeds,
    )


MARGIN_FRACTION = 0.5  # a future run's margin: half the measured GRPO − base effect


def robustness(run_level_result: RunLevelResult, revised: GS1StudySpec | None) -> dict[str, Any]:
    """The revised rule's placebo verdict across permutation seeds (at the plan's first seed) and the
    margin a future run derives from the run-level GRPO − base effect."""
    from rftlab.analysis.gs1.robustness import derived_margin

    cb = run_level_result.control_vs_base
    out: dict[str, Any] = {
        "derived_margin": derived_margin(
            cb.mean,
            cb.ci,
            MARGIN_FRACTION,
            f"run-level grpo_gs8 − base over {len(cb.seeds)} seeds, {cb.level:.0%} bootstrap interval",
        )
    }
    if revised is not None and revised.decision_rule.permutation_seed is not None:
        out["placebo"] = placebo_sweep(revised, run_level_result.seeds[0])
    return out


def run_study(
    backend,
    spec: GS1StudySpec,
    root: str | Path,
    arms=ARMS,
    despite_failed_gate: bool = False,
    progress: Callable[[dict[str, Any]], None] | None = None,
    revised: GS1StudySpec | None = None,
    store=None,
    plan: RunLevelPlan | None = None,
) -> GS1Summary:
    """Preflight → pilot gate → arms → base → decisions (see the module docstring); returns a summary.
    ``store`` defaults to ``RunStore(root)`` recording the git state of the project checkout. ``revised``
    is the revised rule's spec (``REVISED_SPEC``), reported after the registered one. ``plan`` (the
    run-level plan, ``RUN_PLAN``) adds its other seeds of every arm and the run-level result."""
    from rftlab.analysis.gs1 import ESS_METRIC, training_monitor
    from rftlab.runs.store import RunStore

    store = store if store is not None else RunStore(root, repo=PROJECT_ROOT)
    summary: dict[str, Any] = {
        "backend": backend.name,
        "spec_sha256": spec.sha256,
        "despite_failed_gate": bool(despite_failed_gate),
    }
    check_served(backend)
    pre = resolved_preflight(backend, spec, store, summary)
    if pre is None:
        return GS1Summary.model_validate(summary)
    pilot = pilot_gate(backend, spec, store, pre)
    summary["gate"] = GateBrief(passed=pilot.gate_passed, bandwidth=pilot.chosen_bandwidth)
    summary["pilot"] = pilot
    summary["gate_margins"] = gate_margins(pilot, spec, backend.arms[TREATMENT])
    if not pilot.gate_passed and not despite_failed_gate:
        summary["stopped"] = (
            "activation gate failed: the full runs need --despite-failed-gate (gates are never relaxed)"
        )
        return GS1Summary.model_validate(summary)
    results = train_arms(backend, store, arms, pilot.chosen_bandwidth, spec, progress)
    summary["runs"] = {n: arm_run(r) for n, r in results.items()}
    summary["monitor"] = training_monitor(
        {n: r.run.metrics() for n, r in results.items()}, spec.activation_gate.minimum(ESS_METRIC)
    )
    if all(name in results for name in ARMS):
        base = evaluate_base(backend, store)
        summary["runs"][BASE] = arm_run(base)
        results[BASE] = base
        evals = {n: results[n].run.path / "eval.jsonl" for n in (*ARMS, BASE)}
        ids = {n: results[n].run.run_id for n in (*ARMS, BASE)}
        record = study_decision(spec, revised, evals, ids, store, backend.name)
        summary["decision"] = StudyDecision.model_validate({**record, "gate_passed": pilot.gate_passed})
        summary["audit"] = audit_decision(spec, [results[n].run for n in ARMS])
        if plan is not None:
            summary["run_level"] = study_seeds(
                backend, spec, store, plan, pilot.chosen_bandwidth, results, progress
            )
            summary.update(robustness(summary["run_level"], revised))
    return GS1Summary.model_validate(summary)
