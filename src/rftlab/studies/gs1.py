"""The GS1 kernel-baseline vs GRPO study (``data/specs/gs1_vs_grpo.json``): the driver the notebook
(``notebooks/03_gs1.py``) and the CLI (``rftlab gs1``) both call.

``run_study`` does, in order and reusing whatever the run store already holds for the same
configuration: the correctness preflight (no arm trains while it is unresolved), the 2-step activation
pilot with its gate (``rftlab.analysis.gates``) and the pre-registered bandwidth calibration, the arms
(40 steps each, greedy evaluation into each run's ``eval.jsonl``) and, with both arms evaluated, the
spec's decision rule (paired Hoeffding, margin -0.03, one-sided alpha 0.05) with tighter bounds beside
it. A failed gate stops before the full runs unless ``despite_failed_gate`` is given (the study then
records that the decision is not a test of the GS1 hypothesis). Bad input raises ``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- envs: ``rftlab.envs.gs1`` (the GSM8K-style task and its grader)
- training: ``rftlab.training.gs1`` (advantage estimators, the client-side RL loop, the activation pilot,
  the local warm start)
- launch: ``rftlab.launch.gs1`` (backend composition, correctness preflight)
- studies: ``rftlab.studies.gs1``
- cli: ``rftlab.cli.gs1``
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rftlab.runs.paths import SPECS_DIR, display_path

DEFAULT_SPEC = SPECS_DIR / "gs1_vs_grpo.json"
ARMS = ("grpo_gs8", "gs1_kernel")
TREATMENT, BASELINE = "gs1_kernel", "grpo_gs8"


def load_spec(path: str | Path) -> tuple[dict[str, Any], str]:
    from rftlab.runs.hashing import file_sha256

    file = Path(path)
    if not file.is_file():
        raise ValueError(f"spec {path}: file not found")
    try:
        spec = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"spec {path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(spec, dict) or "arms" not in spec:
        raise ValueError(f"spec {path}: not a GS1 study spec (no 'arms')")
    return spec, file_sha256(file)


def write_json(path: Path, obj: Any) -> Path:
    from rftlab.runs.store import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=2, default=str) + "\n")
    return path


def _record_run(
    store, arm: str, spec: dict[str, Any], backend: str, filename: str, payload_fn, reusable=None
):
    """A bookkeeping run (preflight, gate, decision) holding one JSON file; reused when finished (and,
    with ``reusable``, only when ``reusable(run)`` holds; otherwise it is made again)."""
    run, origin = store.start_or_reuse("gs1_vs_grpo", arm, spec, backend=backend)
    if origin == "reused" and reusable is not None and not reusable(run):
        run, origin = store.start_or_reuse("gs1_vs_grpo", arm, spec, backend=backend, force=True)
    path = run.path / filename
    if origin == "reused" and path.exists():
        return json.loads(path.read_text(encoding="utf-8")), run, origin
    payload = payload_fn()
    write_json(path, payload)
    run.finish()
    return payload, run, origin


def get_backend(backend: str | None, spec: dict[str, Any], root: str | Path, quick: bool):
    """The study's backend (``local`` or ``tinker``; ``None``: tinker when ``TINKER_API_KEY`` is set);
    ``ValueError`` when it cannot be built here."""
    from rftlab.launch.gs1.backend import BackendUnavailable, default_backend, make_gs1_backend

    try:
        return make_gs1_backend(backend or default_backend(), spec, root=str(root), quick=quick)
    except BackendUnavailable as exc:
        raise ValueError(str(exc)) from None


# ---------------------------------------------------------------------------------- study functions


def study_preflight(backend, spec: dict[str, Any], sha: str, store) -> tuple[dict[str, Any], Path]:
    """Run (or reuse) the correctness preflight for these arm configs on this backend."""
    from rftlab.launch.gs1.preflight import run_preflight

    key = {
        "kind": "gs1_preflight",
        "spec_sha256": sha,
        "arms": {k: v.to_dict() for k, v in backend.arms.items()},
    }

    def payload():
        t0 = time.perf_counter()
        report = run_preflight(
            backend.arms, backend.service_client, backend.renderer, backend.task, backend.name, spec, sha
        )
        out = report.to_dict()
        out["wall_seconds"] = time.perf_counter() - t0
        return out

    pre, run, _ = _record_run(
        store, "preflight", key, backend.name, "preflight.json", payload, reusable=_same_clean_code
    )
    return pre, run.path / "preflight.json"


def _same_clean_code(run) -> bool:
    """A preflight is reused only when it was made by this committed code: the same git commit as now and
    neither tree dirty. A preflight from a dirty tree or another commit can never serve as the reference
    of a Tinker run (``complete_with_reference``), so reusing it would block that run for good."""
    from rftlab.runs.gitinfo import git_state
    from rftlab.runs.paths import PROJECT_ROOT

    then, now = run.record.git or {}, git_state(PROJECT_ROOT)
    return (
        bool(now.get("commit"))
        and then.get("commit") == now.get("commit")
        and then.get("dirty") is False
        and now.get("dirty") is False
    )


def reference_completion(store, pre: dict[str, Any], pre_path: Path) -> tuple[dict[str, Any] | None, str]:
    """Complete a preflight whose gradient/weight checks this backend cannot run with the newest passed
    preflight of the same spec on another backend in the store, made by the same committed code
    (``training.gs1_preflight.complete_with_reference``)."""
    from rftlab.launch.gs1.preflight import complete_with_reference, load_preflight, preflight_resolved
    from rftlab.runs import load_run

    own = load_run(pre_path.parent).record
    best, reason = None, "no passed preflight of this spec on a backend that exposes gradients"
    for run in sorted(
        store.runs("gs1_vs_grpo", "preflight"), key=lambda r: r.record.created_at, reverse=True
    ):
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


def gate_evaluator(spec: dict[str, Any], sha: str):
    from rftlab.analysis.gates import evaluate_gate, parse_checks

    checks = parse_checks(spec)
    return lambda metrics: evaluate_gate(checks, metrics, sha)


def study_pilot(
    backend, spec: dict[str, Any], sha: str, store, preflight_s: float | None = None
) -> dict[str, Any]:
    """The 2-step pilot, its gate at the pre-registered bandwidth (and the calibration), feasibility."""
    from rftlab.training.gs1.pilot import calibrate_bandwidth, feasibility, run_pilot

    pilot = run_pilot(
        backend.arms, backend.service_client, backend.renderer, backend.task, store, backend.name
    )
    calib = calibrate_bandwidth(pilot.metrics_by_bandwidth, gate_evaluator(spec, sha))
    gate = calib.evaluations[calib.chosen_bandwidth]
    source = ", ".join(f"{k}:{r.run.run_id}" for k, r in pilot.runs.items())
    feas = feasibility(backend.arms, pilot.timings, spec.get("budget", {}), source, preflight_s=preflight_s)
    return {
        "gate": gate.to_dict(),
        "gate_passed": gate.passed,
        "evaluations": {str(h): e.to_dict() for h, e in calib.evaluations.items()},
        "chosen_bandwidth": calib.chosen_bandwidth,
        "calibration_reason": calib.reason,
        "metrics_by_bandwidth": {str(h): m for h, m in pilot.metrics_by_bandwidth.items()},
        "recompute_max_abs_diff": pilot.recompute_max_abs_diff,
        "pilot_runs": {k: str(r.run.path) for k, r in pilot.runs.items()},
        "feasibility": feas,
    }


def decide(spec_path: str | Path, treatment_eval: str | Path, baseline_eval: str | Path) -> dict[str, Any]:
    """The spec's decision rule on the two ``eval.jsonl`` files, with every tighter bound beside it."""
    from rftlab.analysis.decision_rules import evaluate_decision_rule_file, load_decision_rule
    from rftlab.analysis.io import load_paired_items
    from rftlab.analysis.noninferiority import paired_noninferiority

    result = evaluate_decision_rule_file(spec_path, treatment_eval, baseline_eval)
    rule, _ = load_decision_rule(spec_path)
    crit = rule.criteria[0]
    paired = load_paired_items(treatment_eval, baseline_eval)
    report = paired_noninferiority(paired.treatment, paired.baseline, margin=-crit.margin, alpha=rule.alpha)
    return {
        "rule": result.to_dict(),
        "decision": result.decision,
        "n": int(report.n),
        "treatment_accuracy": float(paired.treatment.mean()),
        "baseline_accuracy": float(paired.baseline.mean()),
        "all_bounds": report.to_dict(),
    }


def run_study(
    backend,
    spec_path: str | Path,
    root: str | Path,
    arms=ARMS,
    despite_failed_gate: bool = False,
    progress=None,
) -> dict[str, Any]:
    """Preflight → pilot gate → arms → decision (see the module docstring); returns a summary."""
    from rftlab.launch.gs1.preflight import preflight_resolved
    from rftlab.runs.store import RunStore
    from rftlab.training.gs1.rl_loop import check_model_served, run_arm, service_capabilities

    spec, sha = load_spec(spec_path)
    store = RunStore(root)
    summary: dict[str, Any] = {"backend": backend.name, "spec_sha256": sha}
    capabilities = service_capabilities(backend.service_client)
    for cfg in backend.arms.values():
        check_model_served(capabilities, cfg.base_model)  # a clear error before anything is paid for
    pre, pre_path = study_preflight(backend, spec, sha, store)
    summary["preflight"] = {"status": pre["status"], "path": str(pre_path)}
    if not preflight_resolved(pre):
        completed, why = reference_completion(store, pre, pre_path)
        if completed is None:
            summary["stopped"] = (
                f"preflight is {pre['status']}: no full run starts (its record: the newest run under "
                f"{display_path(pre_path.parent.parent)}; {why})"
            )
            return summary
        pre = completed
        summary["preflight"] = {
            "status": "passed",
            "path": str(pre_path),
            "completed_by": completed["completed_by"],
        }
    pilot_key = {
        "kind": "gs1_pilot_gate",
        "spec_sha256": sha,
        "arms": {k: v.to_dict() for k, v in backend.arms.items()},
    }
    gate, _, _ = _record_run(
        store,
        "activation_gate",
        pilot_key,
        backend.name,
        "gate.json",
        lambda: study_pilot(backend, spec, sha, store, pre.get("wall_seconds")),
    )
    summary["gate"] = {"passed": gate["gate_passed"], "bandwidth": gate["chosen_bandwidth"]}
    summary["pilot"] = gate
    if not gate["gate_passed"] and not despite_failed_gate:
        summary["stopped"] = (
            "activation gate failed: the full runs need --despite-failed-gate (gates are never relaxed)"
        )
        return summary
    configs = dict(backend.arms)
    configs[TREATMENT] = replace(configs[TREATMENT], bandwidth=float(gate["chosen_bandwidth"]))
    results = {}
    for name in arms:
        res = run_arm(
            configs[name],
            backend.service_client,
            backend.renderer,
            backend.task,
            store,
            backend.name,
            progress=progress,
        )
        results[name] = res
        summary.setdefault("runs", {})[name] = {"path": str(res.run.path), "origin": res.origin}
    if all(name in results for name in ARMS):
        t_eval, b_eval = results[TREATMENT].run.path / "eval.jsonl", results[BASELINE].run.path / "eval.jsonl"
        key = {
            "kind": "gs1_decision",
            "spec_sha256": sha,
            "treatment": results[TREATMENT].run.run_id,
            "baseline": results[BASELINE].run.run_id,
        }
        decision, _, _ = _record_run(
            store, "decision", key, backend.name, "decision.json", lambda: decide(spec_path, t_eval, b_eval)
        )
        decision["gate_passed"] = gate["gate_passed"]
        summary["decision"] = decision
    return summary


def decision_table(decision: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per bound: the pre-registered rule first, then the tighter and asymptotic ones."""
    crit = decision["rule"]["criteria"][0]
    rows = [
        {
            "method": f"{crit['method']} (pre-registered)",
            "lower": crit["lower"],
            "upper": crit["upper"],
            "decision": crit["decision"],
            "validity": "finite-sample",
        }
    ]
    for name, b in decision["all_bounds"]["bounds"].items():
        if name == crit["method"]:
            continue
        rows.append(
            {
                "method": name,
                "lower": b["lower"],
                "upper": b["upper"],
                "decision": b["decision"],
                "validity": b["validity"],
            }
        )
    return rows
