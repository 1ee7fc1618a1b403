"""``rftlab gs1``: the GS1 kernel-baseline vs GRPO study (``data/specs/gs1_vs_grpo.json``).

    rftlab gs1 advantages --input BATCH.json --estimator group_mean|kernel_baseline [--bandwidth H] --json
    rftlab gs1 preflight [--backend local|tinker] [--root runs] [--out preflight.json] [--quick]
    rftlab gs1 run --arm grpo_gs8|gs1_kernel|both [--backend local|tinker] [--root runs] [--quick]
    rftlab gs1 decide --treatment GS1/eval.jsonl --baseline GRPO/eval.jsonl [--spec SPEC] [--json]

``run`` does, in order and reusing whatever the run store already holds for the same configuration:
the correctness preflight (no arm trains while it is unresolved), the 2-step activation pilot with its
gate (``rftlab.analysis.gates``) and the pre-registered bandwidth calibration, the arms (40 steps each,
greedy evaluation into each run's ``eval.jsonl``) and, with both arms evaluated, the spec's decision rule
(paired Hoeffding, margin -0.03, one-sided alpha 0.05) with tighter bounds beside it. A failed gate stops
before the full runs unless ``--despite-failed-gate`` is given (the study then records that the decision
is not a test of the GS1 hypothesis). Backend default: ``tinker`` when ``TINKER_API_KEY`` is set, else
``local``. These functions are also the study's library (the notebook calls them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rftlab.cli import UsageError

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SPEC = REPO_ROOT / "data" / "specs" / "gs1_vs_grpo.json"
ARMS = ("grpo_gs8", "gs1_kernel")
TREATMENT, BASELINE = "gs1_kernel", "grpo_gs8"


def register(subparsers: argparse._SubParsersAction) -> None:
    gs1 = subparsers.add_parser(
        "gs1", help="GS1 kernel baseline vs GRPO: estimators, preflight, runs, decision"
    )
    sub = gs1.add_subparsers(dest="gs1_command", metavar="GS1_COMMAND")
    sub.required = True

    adv = sub.add_parser("advantages", help="per-rollout advantages of a batch file")
    adv.add_argument("--input", required=True, help="JSON list of {prompt_id, reward, phi: [x, y], step}")
    adv.add_argument("--estimator", required=True, choices=("group_mean", "kernel_baseline"))
    adv.add_argument("--bandwidth", type=float, default=0.5, help="kernel bandwidth h (default 0.5)")
    adv.add_argument("--window", type=int, default=256, help="sliding window in rollouts (default 256)")
    adv.add_argument("--json", action="store_true", help="print JSON (the default is a table)")
    adv.set_defaults(func=advantages_command)

    for name, helptext in (
        ("preflight", "correctness preflight (a)-(e); writes preflight.json"),
        ("run", "preflight, pilot gate, the arms, evaluation and the decision"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--backend", choices=("local", "tinker"), default=None)
        p.add_argument("--spec", default=str(DEFAULT_SPEC))
        p.add_argument("--root", default="runs", help="run store root (default: runs)")
        p.add_argument("--quick", action="store_true", help="smoke sizes (2 steps, 16 eval items)")
        p.add_argument("--json", action="store_true")
        if name == "preflight":
            p.add_argument("--out", help="also copy preflight.json here")
            p.set_defaults(func=preflight_command)
        else:
            p.add_argument("--arm", choices=(*ARMS, "both"), default="both")
            p.add_argument("--despite-failed-gate", action="store_true")
            p.set_defaults(func=run_command)

    dec = sub.add_parser("decide", help="the spec's decision rule on two eval.jsonl files")
    dec.add_argument("--treatment", required=True)
    dec.add_argument("--baseline", required=True)
    dec.add_argument("--spec", default=str(DEFAULT_SPEC))
    dec.add_argument("--json", action="store_true")
    dec.set_defaults(func=decide_command)


# ------------------------------------------------------------------------------------------ helpers


def load_spec(path: str | Path) -> tuple[dict[str, Any], str]:
    from rftlab.runs.hashing import file_sha256

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"spec {path}: file not found")
    try:
        spec = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"spec {path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(spec, dict) or "arms" not in spec:
        raise UsageError(f"spec {path}: not a GS1 study spec (no 'arms')")
    return spec, file_sha256(file)


def _write_json(path: Path, obj: Any) -> Path:
    from rftlab.runs.store import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=2, default=str) + "\n")
    return path


def _record_run(store, arm: str, spec: dict[str, Any], backend: str, filename: str, payload_fn):
    """A bookkeeping run (preflight, gate, decision) holding one JSON file; reused when finished."""
    run, origin = store.start_or_reuse("gs1_vs_grpo", arm, spec, backend=backend)
    path = run.path / filename
    if origin == "reused" and path.exists():
        return json.loads(path.read_text(encoding="utf-8")), run, origin
    payload = payload_fn()
    _write_json(path, payload)
    run.finish()
    return payload, run, origin


def get_backend(args_backend: str | None, spec: dict[str, Any], root: str, quick: bool):
    from rftlab.launch.tinker import BackendUnavailable, default_backend, make_gs1_backend

    name = args_backend or default_backend()
    try:
        return make_gs1_backend(name, spec, root=root, quick=quick)
    except BackendUnavailable as exc:
        raise UsageError(str(exc)) from None


# ---------------------------------------------------------------------------------- study functions


def study_preflight(backend, spec: dict[str, Any], sha: str, store) -> tuple[dict[str, Any], Path]:
    """Run (or reuse) the correctness preflight for these arm configs on this backend."""
    from rftlab.training.gs1_preflight import run_preflight

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

    pre, run, _ = _record_run(store, "preflight", key, backend.name, "preflight.json", payload)
    return pre, run.path / "preflight.json"


def reference_completion(store, pre: dict[str, Any], pre_path: Path) -> tuple[dict[str, Any] | None, str]:
    """Complete a preflight whose gradient/weight checks this backend cannot run with the newest passed
    preflight of the same spec on another backend in the store, made by the same committed code
    (``training.gs1_preflight.complete_with_reference``)."""
    from rftlab.runs import load_run
    from rftlab.training.gs1_preflight import complete_with_reference, load_preflight, preflight_resolved

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
    from rftlab.training.gs1_pilot import calibrate_bandwidth, feasibility, run_pilot

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
    from rftlab.runs.store import RunStore
    from rftlab.training.gs1_preflight import preflight_resolved
    from rftlab.training.rl_loop import check_model_served, run_arm, service_capabilities

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
            summary["stopped"] = f"preflight is {pre['status']}: no full run starts ({pre_path}; {why})"
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


# ---------------------------------------------------------------------------------------- commands


def advantages_command(args: argparse.Namespace) -> int:
    from rftlab.training.advantages import advantages_for_rows, parse_batch_rows

    path = Path(args.input)
    if not path.is_file():
        raise UsageError(f"batch {args.input}: file not found")
    try:
        rows = parse_batch_rows(json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as exc:
        raise UsageError(f"batch {args.input}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except ValueError as exc:
        raise UsageError(f"batch {args.input}: {exc}") from None
    if not args.bandwidth > 0 or args.window < 1:
        raise UsageError("--bandwidth must be > 0 and --window >= 1")
    out = advantages_for_rows(rows, args.estimator, bandwidth=args.bandwidth, window=args.window)
    if args.json:
        print(
            json.dumps(
                {
                    "estimator": args.estimator,
                    "bandwidth": args.bandwidth,
                    "window": args.window,
                    "rows": out,
                },
                indent=2,
            )
        )
        return 0
    print(f"{'step':>4} {'prompt_id':<16} {'reward':>7} {'baseline':>9} {'advantage':>10} {'eff_nb':>7}")
    for r in out:
        ess = "" if r["effective_neighbors"] is None else f"{r['effective_neighbors']:.2f}"
        print(
            f"{r['step']:>4} {str(r['prompt_id']):<16} {r['reward']:>7.3f} {r['baseline']:>9.4f} "
            f"{r['advantage']:>10.4f} {ess:>7}"
        )
    return 0


def preflight_command(args: argparse.Namespace) -> int:
    from rftlab.runs.store import RunStore
    from rftlab.training.rl_loop import ModelNotServedError, check_model_served, service_capabilities

    spec, sha = load_spec(args.spec)
    backend = get_backend(args.backend, spec, args.root, args.quick)
    try:
        for cfg in backend.arms.values():
            check_model_served(service_capabilities(backend.service_client), cfg.base_model)
    except ModelNotServedError as exc:
        raise UsageError(str(exc)) from None
    pre, path = study_preflight(backend, spec, sha, RunStore(args.root))
    if args.out:
        _write_json(Path(args.out), pre)
    if args.json:
        print(json.dumps(pre, indent=2, default=str))
    else:
        for c in pre["checks"]:
            print(f"  {c['status'].upper():<8} {c['id']:<28} {c['detail']}")
        print(f"preflight {pre['status']} on {pre['backend']}: {path}")
    return 0 if pre["status"] == "passed" else 1


def run_command(args: argparse.Namespace) -> int:
    spec, _ = load_spec(args.spec)
    backend = get_backend(args.backend, spec, args.root, args.quick)
    arms = ARMS if args.arm == "both" else (args.arm,)

    def progress(m):
        print(
            f"  {m['arm']} step {m['step']}: reward {m['reward_mean']:.3f}, datums {m['n_datums']}",
            file=sys.stderr,
        )

    from rftlab.training.rl_loop import ModelNotServedError, ResumeError

    try:
        summary = run_study(backend, args.spec, args.root, arms, args.despite_failed_gate, progress=progress)
    except (ModelNotServedError, ResumeError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(f"preflight: {summary['preflight']['status']} ({summary['preflight']['path']})")
        if "gate" in summary:
            print(
                f"activation gate: {'passed' if summary['gate']['passed'] else 'FAILED'} "
                f"(bandwidth {summary['gate']['bandwidth']})"
            )
        for name, r in summary.get("runs", {}).items():
            print(f"{name}: {r['path']} ({r['origin']})")
        if "decision" in summary:
            d = summary["decision"]
            crit = d["rule"]["criteria"][0]
            print(
                f"decision: {d['decision']} (mean diff {crit['statistic_mean']:+.4f}, "
                f"Hoeffding LCB {crit['lower']:+.4f} vs margin {crit['margin']})"
            )
        if "stopped" in summary:
            print(f"stopped: {summary['stopped']}")
    return 0 if "stopped" not in summary else 1


def decide_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.io import AnalysisInputError

    load_spec(args.spec)
    for p in (args.treatment, args.baseline):
        if not Path(p).is_file():
            raise UsageError(f"{p}: file not found")
    try:
        out = decide(args.spec, args.treatment, args.baseline)
    except (AnalysisInputError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    for row in decision_table(out):
        print("  ".join(f"{k}={v}" for k, v in row.items()))
    print(f"decision: {out['decision']}")
    return 0


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
