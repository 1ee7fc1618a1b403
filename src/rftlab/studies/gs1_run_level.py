"""The run-level side of the GS1 study (``rftlab.studies.gs1``): one seed's result from its three runs,
the run-level contrasts over the plan's seeds, and the robustness numbers: the gate's margins from the
pilot's rollouts, the revised rule's placebo across permutation seeds and the margin a future run derives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rftlab.analysis.gs1 import ESS_METRIC, GS1StudySpec
from rftlab.analysis.gs1.seeds import RunLevelPlan
from rftlab.launch.gs1 import ARMS
from rftlab.studies.gs1_decision import decide
from rftlab.studies.gs1_results import (
    BASE,
    BASELINE,
    TREATMENT,
    PilotResult,
    RunLevelResult,
    SeedResult,
    arm_run,
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
