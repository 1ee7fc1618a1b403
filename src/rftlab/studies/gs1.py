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
- studies: ``rftlab.studies.gs1`` (this driver), ``rftlab.studies.gs1_results`` (its typed results),
  ``rftlab.studies.gs1_decision`` (the decision rule's design and verdict), ``rftlab.studies.gs1_run_level``
  (the result over seeds, the robustness numbers)
- cli: ``rftlab.cli.gs1``
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rftlab.analysis.gs1 import ESS_METRIC, GS1StudySpec, StudyDecision
from rftlab.analysis.gs1.seeds import RunLevelPlan
from rftlab.launch.gs1 import ARMS, DEFAULT_SPEC, REVISED_SPEC, RUN_PLAN
from rftlab.runs.parallel import map_processes
from rftlab.runs.paths import PROJECT_ROOT, display_path, notebook_runs_root
from rftlab.studies.gs1_decision import decide, decision_record, design
from rftlab.studies.gs1_results import (
    BASE,
    BASELINE,
    TREATMENT,
    GateBrief,
    GS1Summary,
    PilotResult,
    PreflightRecord,
    PreflightSummary,
    RegistrationAudit,
    RunLevelResult,
    arm_run,
)
from rftlab.studies.gs1_run_level import gate_margins, robustness, run_level, seed_result
from rftlab.training.sessions import closing_session

# what notebook 03 and the CLI take from here besides the driver's own functions (``decide``, ``design``
# and the typed results live in ``gs1_decision`` and ``gs1_results``)
__all__ = [
    "ARMS",
    "DEFAULT_SPEC",
    "ESS_METRIC",
    "REVISED_SPEC",
    "RUN_PLAN",
    "GS1StudySpec",
    "GS1Summary",
    "RunLevelResult",
    "closing_session",
    "decide",
    "design",
    "notebook_runs_root",
]


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


def audit_decision(spec: GS1StudySpec, runs: Sequence[Any]) -> RegistrationAudit:
    """Audit the registered decision over ``runs`` (the two arms' runs) against the spec file it was
    read from (``rftlab.runs.plan_audit.audit_decision``); a spec that matches no registered version is
    exploratory, never refused."""
    from rftlab.runs.plan_audit import audit_decision as audit_registered

    return RegistrationAudit.model_validate(dataclasses.asdict(audit_registered(spec.path, runs)))


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


def study_seeds(
    backend, spec, store, plan: RunLevelPlan, bandwidth: float, seed0: Mapping[str, Any], progress
):
    """Every seed of ``plan``: seed 0's runs are the study's own (``seed0``), every other seed trains
    both arms and evaluates the base with that seed; the run-level result over all of them."""
    spec_seed = {cfg.seed for cfg in backend.arms.values()}
    if len(spec_seed) != 1:
        raise ValueError(f"the arms must share their seed to pair by seed, got {sorted(spec_seed)}")
    own = spec_seed.pop()
    others = [s for s in plan.seeds if s != own]
    # the seeds are independent: in worker processes, each building the backend from the recipe
    # make_gs1_backend recorded; a backend built by hand, or a progress callback, keeps them here
    recipe = getattr(backend, "recipe", None)
    parallel = recipe is not None and progress is None
    source = recipe if parallel else backend
    jobs = [(source, store, bandwidth, spec, s, progress) for s in others]
    trained = dict(zip(others, map_processes(_seed_runs, jobs, workers=None if parallel else 1), strict=True))
    out = [seed_result(spec, s, dict(seed0) if s == own else trained[s]) for s in plan.seeds]
    return run_level(spec, plan, out)


_BUILT: dict[str, Any] = {}
"""In a worker process: the backend each recipe built there, by ``BackendRecipe.key``."""


def _seed_runs(job: tuple[Any, Any, float, GS1StudySpec, int, Any]) -> dict[str, Any]:
    """One seed of ``study_seeds``: both arms trained with that seed and the base evaluated with it, on
    the backend given, or on the one its recipe builds (once per process)."""
    from rftlab.launch.gs1.backend import BackendRecipe

    source, store, bandwidth, spec, seed, progress = job
    backend = source
    if isinstance(source, BackendRecipe):
        key = source.key()
        backend = _BUILT.get(key)
        if backend is None:
            backend = _BUILT[key] = source.build()
    results = train_arms(backend, store, ARMS, bandwidth, spec, progress, seed=seed)
    results[BASE] = evaluate_base(backend, store, seed=seed)
    return results


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
