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
against the base and the assay-sensitivity check. A failed gate stops before the full runs unless
``despite_failed_gate`` is given (the summary records it; the decision is then not a test of the GS1
hypothesis). Bad input raises ``ValueError``.

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

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rftlab.runs.paths import PROJECT_ROOT, SPECS_DIR, display_path

DEFAULT_SPEC = SPECS_DIR / "gs1_vs_grpo.json"
REVISED_SPEC = SPECS_DIR / "gs1_vs_grpo_betting.json"  # the rule with power (docs/gs1.md §11)
ARMS = ("grpo_gs8", "gs1_kernel")
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


def load_spec(path: str | Path) -> tuple[dict[str, Any], str]:
    from rftlab.analysis.io import read_json_file
    from rftlab.runs.hashing import file_sha256

    file = Path(path)
    check_input_file(file, "spec")
    spec = read_json_file(file, "spec")  # AnalysisInputError (a ValueError) naming the file and field
    if not isinstance(spec, dict) or "arms" not in spec:
        raise ValueError(f"spec {path}: not a GS1 study spec (no 'arms')")
    return spec, file_sha256(file)


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


def same_clean_code(record_git: Mapping[str, Any] | None, current_git: Mapping[str, Any] | None) -> bool:
    """Whether a record was made by the code checked out now: the same commit, neither tree dirty."""
    a, b = dict(record_git or {}), dict(current_git or {})
    return (
        bool(a.get("commit"))
        and a.get("commit") == b.get("commit")
        and a.get("dirty") is False
        and (b.get("dirty") is False)
    )


def study_preflight(backend, spec: dict[str, Any], sha: str, store) -> tuple[dict[str, Any], Path]:
    """Run (or reuse) the correctness preflight for these arm configs on this backend.

    A finished preflight is reused only when it was made at the commit checked out now with a clean tree,
    and the tree is still clean: a preflight tests the code, so one made on other or uncommitted code is
    never reused (nor, by ``reference_completion``, accepted for the Tinker handoff)."""
    from rftlab.launch.gs1.preflight import run_preflight
    from rftlab.runs.gitinfo import git_state

    key = {
        "kind": "gs1_preflight",
        "spec_sha256": sha,
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
    report = run_preflight(
        backend.arms,
        backend.service_client,
        backend.renderer,
        backend.task,
        backend.name,
        spec,
        sha,
        send_seeds=backend.send_seeds,
        reference_client=backend.reference_client,
    )
    out = report.to_dict()
    out["wall_seconds"] = time.perf_counter() - t0
    write_json(run.path / "preflight.json", out)
    run.finish()
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
        backend.arms,
        backend.service_client,
        backend.renderer,
        backend.task,
        store,
        backend.name,
        send_seeds=backend.send_seeds,
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
    """The spec's decision rule on the two ``eval.jsonl`` files, with every other bound beside it (the
    order-dependent ones on the rule's permutation seed, or seed 0 when the rule registers none)."""
    from rftlab.analysis.decision_rules import evaluate_decision_rule_file, load_decision_rule
    from rftlab.analysis.gs1 import spec_label
    from rftlab.analysis.io import load_paired_items
    from rftlab.analysis.noninferiority import paired_noninferiority

    result = evaluate_decision_rule_file(spec_path, treatment_eval, baseline_eval)
    rule, sha = load_decision_rule(spec_path)
    crit = rule.criteria[0]
    paired = load_paired_items(treatment_eval, baseline_eval)
    seed = rule.permutation_seed if rule.permutation_seed is not None else 0
    report = paired_noninferiority(
        paired.treatment, paired.baseline, margin=-crit.margin, alpha=rule.alpha, permutation_seed=seed
    )
    return {
        "spec": Path(spec_path).name,
        "spec_sha256": sha,
        "registration": spec_label(json.loads(Path(spec_path).read_text(encoding="utf-8"))),
        "rule": result.to_dict(),
        "decision": result.decision,
        "n": int(report.n),
        "treatment_accuracy": float(paired.treatment.mean()),
        "baseline_accuracy": float(paired.baseline.mean()),
        "all_bounds": report.to_dict(),
    }


def design(
    spec_path: str | Path = DEFAULT_SPEC,
    candidates: bool = False,
    discordances=None,
    reps: int | None = None,
    seed: int | None = None,
    on_miss: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """What the spec's decision rule can decide at its n before any run (``rftlab.analysis.gs1``): the
    probability of ``noninferior`` at −margin, 0, +0.02 and +0.045 and the items for 80% power at
    equality; with ``candidates``, every finite-sample bound at the planning discordance and the one the
    design numbers choose.

    The tables are deterministic for their inputs, so they are cached in the run store
    (``rftlab.runs.cache``) under the spec's SHA-256, the options and the digest of the code that computes
    them; ``on_miss`` is called before a computation (a Monte Carlo rule's takes tens of seconds).
    ``cached`` in the result says which it was."""
    from rftlab.runs.cache import cached_json
    from rftlab.runs.codehash import closure_digest

    spec, sha = load_spec(spec_path)
    opts: dict[str, Any] = {}
    if discordances is not None:
        opts["discordances"] = [float(r) for r in discordances]
    if reps is not None:
        opts["reps"] = int(reps)
    if seed is not None:
        opts["seed"] = int(seed)
    key = {
        "spec_sha256": sha,
        "candidates": bool(candidates),
        "options": opts,
        "code": closure_digest("rftlab.analysis.gs1"),
    }
    value, hit = cached_json(
        "gs1_design", key, lambda: _design_tables(spec_path, candidates, opts), on_miss=on_miss
    )
    return {"spec": str(spec_path), "spec_sha256": sha, **value, "cached": hit}


def _design_tables(spec_path: str | Path, candidates: bool, opts: dict[str, Any]) -> dict[str, Any]:
    from rftlab.analysis import gs1 as ana
    from rftlab.analysis.decision_rules import load_decision_rule

    run_opts = {k: (tuple(v) if k == "discordances" else v) for k, v in opts.items()}
    d = ana.spec_design(spec_path, **run_opts)
    out: dict[str, Any] = {"design": d.to_dict(), "table": ana.design_table(d), "note": ana.design_note(d)}
    if candidates:
        rule, _ = load_decision_rule(spec_path)
        cand_opts = {k: v for k, v in run_opts.items() if k in ("reps", "seed")}
        designs = ana.candidate_designs(rule, d.n, **cand_opts)
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


def resolved_preflight(backend, spec, sha, store, summary: dict[str, Any]) -> dict[str, Any] | None:
    """The preflight, completed by a local reference when this backend cannot run every check; ``None``
    (with ``summary["stopped"]``) when it is unresolved."""
    from rftlab.launch.gs1.preflight import preflight_resolved

    pre, pre_path = study_preflight(backend, spec, sha, store)
    summary["preflight"] = {"status": pre["status"], "path": str(pre_path)}
    if preflight_resolved(pre):
        return pre
    completed, why = reference_completion(store, pre, pre_path)
    if completed is None:
        summary["stopped"] = (
            f"preflight is {pre['status']}: no full run starts (its record: the newest run under "
            f"{display_path(pre_path.parent.parent)}; {why})"
        )
        return None
    summary["preflight"] = {
        "status": "passed",
        "path": str(pre_path),
        "completed_by": completed["completed_by"],
    }
    return completed


def pilot_gate(backend, spec, sha, store, preflight: Mapping[str, Any]) -> dict[str, Any]:
    """The activation pilot and its gate (recorded once per configuration in ``gate.json``), with the gate
    checks that pass by construction here flagged."""
    from rftlab.analysis.gs1 import gate_construction_notes

    key = {
        "kind": "gs1_pilot_gate",
        "spec_sha256": sha,
        "arms": {k: v.to_dict() for k, v in backend.arms.items()},
    }
    gate, _, _ = _record_run(
        store,
        "activation_gate",
        key,
        backend.name,
        "gate.json",
        lambda: study_pilot(backend, spec, sha, store, preflight.get("wall_seconds")),
    )
    gate = dict(gate)
    gate["by_construction"] = gate_construction_notes(backend.arms[TREATMENT].estimator, backend.warm_start)
    return gate


def train_arms(backend, store, arms, bandwidth: float, spec, progress=None) -> dict[str, Any]:
    """Each requested arm's run (trained, or resumed, or reused) at the gate's bandwidth; ``progress``
    gets every new step's metrics with the ``arm`` and its ``alerts`` (``analysis.gs1.step_alerts``)."""
    from rftlab.analysis.gs1 import ESS_METRIC, gate_minimum, step_alerts
    from rftlab.training.gs1.rl_loop import run_arm

    configs = dict(backend.arms)
    configs[TREATMENT] = replace(configs[TREATMENT], bandwidth=float(bandwidth))
    ess_min = gate_minimum(spec, ESS_METRIC)
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
        )
    return results


def base_config(backend):
    """The untrained base as an evaluation arm: the baseline arm's configuration with 0 steps, i.e. the
    seed-0 LoRA initialisation both arms start from (preflight check (e)), evaluated the same way."""
    return replace(backend.arms[BASELINE], arm=BASE, steps=0)


def evaluate_base(backend, store):
    """Evaluate (or reuse) the untrained base on the arms' test items."""
    from rftlab.training.gs1.rl_loop import run_arm

    return run_arm(
        base_config(backend),
        backend.service_client,
        backend.renderer,
        backend.task,
        store,
        backend.name,
        send_seeds=backend.send_seeds,
    )


def study_decision(
    spec_path, revised_spec, evals: Mapping[str, Path], run_ids: Mapping[str, str], store, backend_name: str
) -> dict[str, Any]:
    """The registered decision, the revised rule's decision, the paired contrasts against the base and
    the assay-sensitivity check (recorded once per set of evaluated runs in ``decision.json``)."""
    from rftlab.analysis.gs1 import assay_sensitivity, paired_contrast
    from rftlab.runs.hashing import file_sha256

    key = {
        "kind": "gs1_decision",
        "spec_sha256": file_sha256(spec_path),
        "revised_spec_sha256": file_sha256(revised_spec) if revised_spec else None,
        **{name: run_ids[name] for name in (TREATMENT, BASELINE, BASE)},
    }

    def payload():
        out = decide(spec_path, evals[TREATMENT], evals[BASELINE])
        out["revised"] = decide(revised_spec, evals[TREATMENT], evals[BASELINE]) if revised_spec else None
        pairs = [(TREATMENT, BASELINE), (BASELINE, BASE), (TREATMENT, BASE)]
        contrasts = {f"{t}-{b}": paired_contrast(evals[t], evals[b], t, b) for t, b in pairs}
        control = contrasts[f"{BASELINE}-{BASE}"]
        out["contrasts"] = {k: c.to_dict() for k, c in contrasts.items()}
        out["assay_sensitivity"] = assay_sensitivity(
            control, spec_path, evals[BASE], evals[BASELINE], revised_spec
        )
        out["base_accuracy"] = control.baseline_accuracy
        return out

    decision, _, _ = _record_run(store, "decision", key, backend_name, "decision.json", payload)
    return decision


def run_study(
    backend,
    spec_path: str | Path,
    root: str | Path,
    arms=ARMS,
    despite_failed_gate: bool = False,
    progress: Callable[[dict[str, Any]], None] | None = None,
    revised_spec: str | Path | None = REVISED_SPEC,
    store=None,
) -> dict[str, Any]:
    """Preflight → pilot gate → arms → base → decisions (see the module docstring); returns a summary.
    ``store`` defaults to ``RunStore(root)`` recording the git state of the project checkout."""
    from rftlab.analysis.gs1 import ESS_METRIC, gate_minimum, training_monitor
    from rftlab.runs.store import RunStore

    spec, sha = load_spec(spec_path)
    store = store if store is not None else RunStore(root, repo=PROJECT_ROOT)
    summary: dict[str, Any] = {
        "backend": backend.name,
        "spec_sha256": sha,
        "despite_failed_gate": bool(despite_failed_gate),
    }
    check_served(backend)
    pre = resolved_preflight(backend, spec, sha, store, summary)
    if pre is None:
        return summary
    gate = pilot_gate(backend, spec, sha, store, pre)
    summary["gate"] = {"passed": gate["gate_passed"], "bandwidth": gate["chosen_bandwidth"]}
    summary["pilot"] = gate
    if not gate["gate_passed"] and not despite_failed_gate:
        summary["stopped"] = (
            "activation gate failed: the full runs need --despite-failed-gate (gates are never relaxed)"
        )
        return summary
    results = train_arms(backend, store, arms, gate["chosen_bandwidth"], spec, progress)
    summary["runs"] = {n: {"path": str(r.run.path), "origin": r.origin} for n, r in results.items()}
    summary["monitor"] = training_monitor(
        {n: r.run.metrics() for n, r in results.items()}, gate_minimum(spec, ESS_METRIC)
    )
    if all(name in results for name in ARMS):
        base = evaluate_base(backend, store)
        summary["runs"][BASE] = {"path": str(base.run.path), "origin": base.origin}
        results[BASE] = base
        evals = {n: results[n].run.path / "eval.jsonl" for n in (*ARMS, BASE)}
        ids = {n: results[n].run.run_id for n in (*ARMS, BASE)}
        decision = study_decision(spec_path, revised_spec, evals, ids, store, backend.name)
        decision["gate_passed"] = gate["gate_passed"]
        summary["decision"] = decision
    return summary


def decision_table(decision: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per bound: the rule's own first (registered in its spec), then every other bound, each
    labelled exploratory with its one-sided level and permutation seed (``none`` when order-free)."""
    crit = decision["rule"]["criteria"][0]
    sha = str(decision.get("spec_sha256") or "")[:12]
    rows = [
        {
            "method": crit["method"],
            "status": f"{decision.get('registration', 'registered')}: {decision.get('spec', 'spec')} {sha}",
            "one-sided level": crit["one_sided_level"],
            "permutation seed": crit["permutation_seed"] if crit["permutation_seed"] is not None else "none",
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
                "status": "exploratory",
                "one-sided level": b["one_sided_level"],
                "permutation seed": b["permutation_seed"] if b["permutation_seed"] is not None else "none",
                "lower": b["lower"],
                "upper": b["upper"],
                "decision": b["decision"],
                "validity": b["validity"],
            }
        )
    return rows
