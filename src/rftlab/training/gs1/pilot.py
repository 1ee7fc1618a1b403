"""The 2-step activation pilot of the GS1 study, its gate metrics, the bandwidth calibration and the
feasibility estimate.

Pilot (the spec's activation-failure plan (b)): each arm runs its first ``steps`` (2) steps as its own
run in the experiment ``gs1_vs_grpo_pilot`` — the treatment with ``heldout_group_size`` (8) extra
samples per prompt on its last pilot step, graded but never trained on — and a short greedy evaluation
of train items (from the end of the prompt order, which the pilot's steps never reach) that times
evaluation: the pilot never decodes a test item. Failed pilots stay in the run store.

Gate metrics (the spec's ``activation_gate.checks``):

* ``executed_group_size_treatment`` / ``_baseline`` — rollouts per distinct prompt in the logged batches
  (their single value when every step agrees, else the mean);
* ``pilot_mean_reward`` — mean training reward over the treatment's pilot steps;
* ``kernel_effective_neighbors_p10`` — 10th percentile over the treatment's pilot rollouts of
  ``(Σw)²/Σw²``;
* ``frac_nonzero_advantage_treatment`` — fraction of treatment rollouts with ``|A| > 1e-6``;
* ``baseline_reward_corr`` — Pearson correlation of ``b_i`` with the held-out 8-sample mean reward of
  the same prompt, over the prompts of the held-out step (64 at the spec's size).

Bandwidth calibration (plan (c)): the metrics are recomputed from the logged pilot rollouts (rewards,
φ, prompt ids, in step order) at each pre-registered bandwidth; 1.0 replaces 0.5 only if the gate's
``kernel_effective_neighbors`` check fails at 0.5 and passes at 1.0. This uses pilot training prompts
only, never test items, and adds no pilot steps. The recomputation at 0.5 must reproduce the logged
advantages (checked). Gates are evaluated by the caller (``rftlab.analysis.gates``), never relaxed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from rftlab.envs.gs1.task import MathTask
from rftlab.runs.store import Run, RunStore
from rftlab.training.group_stats import pearson
from rftlab.training.gs1.advantages import BANDWIDTHS, advantages_for_rows
from rftlab.training.gs1.rl_loop import ArmRunResult, GS1ArmConfig, run_arm

if TYPE_CHECKING:
    from tinker_cookbook.renderers import Renderer

PILOT_EXPERIMENT = "gs1_vs_grpo_pilot"
PILOT_STEPS = 2
HELDOUT_GROUP_SIZE = 8
PILOT_EVAL_ITEMS = 64
ESS_METRIC = "kernel_effective_neighbors_p10"


def pilot_config(
    config: GS1ArmConfig, steps: int = PILOT_STEPS, n_eval: int = PILOT_EVAL_ITEMS
) -> GS1ArmConfig:
    """The arm's pilot: its first ``steps`` steps, a short eval on train items (it only times evaluation;
    test items are for the final checkpoints alone); the treatment gets the held-out samples."""
    heldout = config.estimator == "kernel_baseline"
    return replace(
        config,
        experiment=PILOT_EXPERIMENT,
        steps=steps,
        n_eval=min(n_eval, config.n_eval),
        eval_split="train",
        heldout_group_size=HELDOUT_GROUP_SIZE if heldout else 0,
        heldout_steps=(steps - 1,) if heldout else (),
    )


@dataclass
class PilotResult:
    runs: dict[str, ArmRunResult]
    rollouts: dict[str, list[dict[str, Any]]]
    metrics_by_bandwidth: dict[float, dict[str, Any]]
    logged_bandwidth: float
    recompute_max_abs_diff: float
    timings: dict[str, dict[str, float]] = field(default_factory=dict)


def run_pilot(
    arms: Mapping[str, GS1ArmConfig],
    service_client: Any,
    renderer: Renderer,
    task: MathTask,
    store: RunStore,
    backend: str,
    treatment: str = "gs1_kernel",
    baseline: str = "grpo_gs8",
    steps: int = PILOT_STEPS,
    n_eval: int = PILOT_EVAL_ITEMS,
    send_seeds: bool = True,
) -> PilotResult:
    """Run (or reuse) both arms' pilots and compute the gate metrics at every pre-registered bandwidth."""
    runs, rollouts, timings = {}, {}, {}
    for name in (treatment, baseline):
        cfg = pilot_config(arms[name], steps, n_eval)
        res = run_arm(cfg, service_client, renderer, task, store, backend, send_seeds=send_seeds)
        runs[name] = res
        rollouts[name] = [r for k in range(cfg.steps) for r in res.run.rollouts(k)]
        timings[name] = run_timings(res.run)
    t_cfg = arms[treatment]
    by_bw, max_diff = {}, 0.0
    for h in BANDWIDTHS:
        recomputed = recompute_treatment(rollouts[treatment], h, t_cfg.window, t_cfg.min_kernel_mass)
        if h == t_cfg.bandwidth:
            max_diff = max(
                (
                    abs(a["advantage"] - b["advantage"])
                    for a, b in zip(rollouts[treatment], recomputed, strict=True)
                ),
                default=0.0,
            )
        by_bw[h] = gate_metrics(recomputed, rollouts[baseline])
        by_bw[h]["bandwidth"] = h
    return PilotResult(runs, rollouts, by_bw, t_cfg.bandwidth, max_diff, timings)


def recompute_treatment(rows: Sequence[Mapping[str, Any]], bandwidth: float, window: int, min_mass: float):
    """The treatment's pilot rollouts with the kernel baseline recomputed at ``bandwidth``."""
    batch = [
        {"prompt_id": r["prompt_id"], "reward": r["reward"], "phi": r["phi"], "step": r["step"]} for r in rows
    ]
    out = advantages_for_rows(batch, "kernel_baseline", bandwidth, window, min_mass)
    return [
        {**dict(r), **{k: o[k] for k in ("advantage", "baseline", "effective_neighbors")}}
        for r, o in zip(rows, out, strict=True)
    ]


def _group_size(rows: Sequence[Mapping[str, Any]]) -> float | int | None:
    sizes = []
    for step in sorted({r["step"] for r in rows}):
        members = [r for r in rows if r["step"] == step]
        sizes.append(len(members) / len({r["prompt_id"] for r in members}))
    if not sizes:
        return None
    if len(set(sizes)) == 1 and float(sizes[0]).is_integer():
        return int(sizes[0])
    return float(np.mean(sizes))


def gate_metrics(
    treatment: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The activation gate's metrics from pilot rollouts (see the module docstring)."""
    ess = [r["effective_neighbors"] for r in treatment if r.get("effective_neighbors") is not None]
    held = {}
    for r in treatment:
        if r.get("heldout_mean_reward") is not None:
            held[(r["step"], r["prompt_id"])] = (r["baseline"], r["heldout_mean_reward"])
    adv = np.array([r["advantage"] for r in treatment], dtype=np.float64)
    return {
        "executed_group_size_treatment": _group_size(treatment),
        "executed_group_size_baseline": _group_size(baseline),
        "pilot_mean_reward": float(np.mean([r["reward"] for r in treatment])) if treatment else None,
        "kernel_effective_neighbors_p10": float(np.percentile(ess, 10)) if ess else None,
        "frac_nonzero_advantage_treatment": float(np.mean(np.abs(adv) > 1e-6)) if adv.size else None,
        "baseline_reward_corr": pearson([b for b, _ in held.values()], [h for _, h in held.values()]),
        "n_treatment_rollouts": len(treatment),
        "n_baseline_rollouts": len(baseline),
        "n_corr_prompts": len(held),
    }


@dataclass
class Calibration:
    chosen_bandwidth: float
    reason: str
    evaluations: dict[float, Any]


def calibrate_bandwidth(
    metrics_by_bandwidth: Mapping[float, Mapping[str, Any]],
    evaluate: Callable[[Mapping[str, Any]], Any],
    preregistered: float = BANDWIDTHS[0],
    alternative: float = BANDWIDTHS[1],
) -> Calibration:
    """The single pre-registered calibration: keep ``preregistered`` unless the gate's
    ``kernel_effective_neighbors_p10`` check fails there and passes at ``alternative``.

    ``evaluate(metrics)`` returns a gate evaluation with ``checks`` (each with ``metric``, ``passed``)."""
    first = evaluate(metrics_by_bandwidth[preregistered])
    evaluations = {preregistered: first}
    if _check_passed(first, ESS_METRIC):
        return Calibration(preregistered, f"{ESS_METRIC} passes at h={preregistered}: kept", evaluations)
    second = evaluate(metrics_by_bandwidth[alternative])
    evaluations[alternative] = second
    if _check_passed(second, ESS_METRIC):
        return Calibration(
            alternative,
            f"{ESS_METRIC} fails at h={preregistered} and passes at h={alternative}: calibrated to {alternative}",
            evaluations,
        )
    return Calibration(
        preregistered,
        f"{ESS_METRIC} fails at both h={preregistered} and h={alternative}: kept {preregistered}, gate fails",
        evaluations,
    )


def _check_passed(evaluation: Any, metric: str) -> bool:
    return any(c.metric == metric and c.passed for c in evaluation.checks)


# ----------------------------------------------------------------------------------- feasibility


def run_timings(run: Run) -> dict[str, float]:
    """Setup, per-step and evaluation timings recorded by ``run_arm`` in a finished run (the mean step
    leaves out a pilot step that also drew the held-out samples, when another step exists)."""
    timings = dict(run.record.provider.get("timings") or {})
    rows = [m for m in run.metrics() if m.get("time_step_s") is not None]
    plain = [m for m in rows if m.get("baseline_reward_corr") is None]  # without the held-out samples
    steps = [m["time_step_s"] for m in (plain or rows)]
    n_eval = len(run.eval_items())
    return {
        "setup_s": float(timings.get("setup_s", math.nan)),
        "step_s_mean": float(np.mean(steps)) if steps else math.nan,
        "n_steps": len(steps),
        "eval_s": float(timings.get("eval_s", math.nan)),
        "n_eval": n_eval,
        "eval_s_per_item": float(timings.get("eval_s", math.nan)) / n_eval if n_eval else math.nan,
    }


def feasibility(
    arms: Mapping[str, GS1ArmConfig],
    pilot_timings: Mapping[str, Mapping[str, float]],
    budget_wall_minutes: float | None,
    source: str,
    preflight_s: float | None = None,
) -> dict[str, Any]:
    """Estimate the full study's wall time from the pilot's timings, against the spec's budget
    (``budget.max_wall_minutes``; ``None``: no limit)."""
    phases, total = {}, 0.0
    for name, cfg in arms.items():
        t = pilot_timings[name]
        setup, train, ev = t["setup_s"], cfg.steps * t["step_s_mean"], cfg.n_eval * t["eval_s_per_item"]
        phases[name] = {"setup_s": setup, "train_s": train, "eval_s": ev}
        total += setup + train + ev
    if preflight_s:
        phases["preflight"] = {"wall_s": preflight_s}
        total += preflight_s
    budget_s = float(math.inf if budget_wall_minutes is None else budget_wall_minutes) * 60.0
    problems = []
    if not math.isfinite(total):
        problems.append("a pilot timing is missing")
    elif total > budget_s:
        problems.append(f"estimated {total / 60:.1f} min exceeds the {budget_s / 60:.0f} min budget")
    first = next(iter(arms.values()))
    return {
        "status": "ok" if not problems else "over_budget_or_incomplete",
        "problems": problems,
        "effective_config": {
            "base_model": first.base_model,
            "arms": list(arms),
            "steps": first.steps,
            "batch_size": first.rollouts_per_step,
            "max_tokens": first.max_tokens,
            "n_eval": first.n_eval,
            "renderer_name": first.renderer_name,
            "task": first.task,
        },
        "source": source,
        "measurements": {name: dict(t) for name, t in pilot_timings.items()},
        "phases": phases,
        "wall_seconds": total,
        "budget_wall_seconds": budget_s,
        "recovery_reserve_seconds": budget_s - total if math.isfinite(total) else None,
        "gpu_hours": None,
    }
