"""Analysis of the GS1 vs GRPO study (``docs/gs1.md`` §7 and §11): what a decision rule can decide before
any run, paired contrasts against the untrained base, assay sensitivity, gate checks that pass by
construction, per-step monitoring of the full runs, and the labelled table of bounds.

* **Design** (``rule_design``): a rule's probability of a ``noninferior`` verdict at true differences
  −margin, 0, +0.02 and +0.045 at the spec's n, and the items it needs for 80% power at equality, for a few
  discordance rates (the share of items on which the two arms disagree). Count-only bounds are exact; the
  order-dependent ones are Monte Carlo with their standard error (``rftlab.analysis.power``).
  ``choose_method`` picks, among the finite-sample bounds whose error at −margin stays within α, the one
  with the most power at equality at the planning discordance: that is how the revised spec's rule was
  chosen.
* **Contrasts** (``paired_contrast``): one arm minus another on the same items: the mean difference,
  items gained and lost, and Hoeffding and empirical-Bernstein bounds (exploratory, one-sided 1 − α each;
  neither depends on the item order).
* **Assay sensitivity** (``assay_sensitivity``): a noninferiority verdict against an active control means
  something only if the control beats the untrained base by more than the margin; the placebo decision
  applies the registered rule to the base itself.
* **Gates by construction** (``gate_construction_notes``) and **monitoring** (``training_monitor``,
  ``step_alerts``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rftlab.analysis.decision_rules import METHOD_ALIASES, DecisionRule, evaluate_decision_rule
from rftlab.analysis.display import format_rate
from rftlab.analysis.gs1.results import (
    ArmMonitor,
    AssaySensitivity,
    Contrast,
    Interval,
    RuleDecision,
    StudyDecision,
)
from rftlab.analysis.gs1.robustness import DerivedMargin, PermutationSweep
from rftlab.analysis.gs1.seeds import RunLevelBrief, control_effect_bullet, run_level_bullets
from rftlab.analysis.gs1.spec import ActivationGate, GS1StudySpec, parse_study_spec
from rftlab.analysis.io import load_paired_items
from rftlab.analysis.noninferiority import COUNT_ONLY, ORDER_DEPENDENT, bound_result
from rftlab.analysis.power import pass_rates, required_n
from rftlab.launch.gs1.spec import MAX_EVAL_ITEMS

if TYPE_CHECKING:  # the warm start imports torch
    from rftlab.training.gs1.warm_start import WarmStartResult

__all__ = [
    "ActivationGate",
    "ArmMonitor",
    "AssaySensitivity",
    "Contrast",
    "GS1StudySpec",
    "Interval",
    "RuleDecision",
    "StudyDecision",
    "format_rate",
    "parse_study_spec",
]

DESIGN_POWER = 0.8
DESIGN_DISCORDANCE = (0.05, 0.1, 0.2)
PLANNING_DISCORDANCE = 0.1
"""The discordance rate the revised rule was chosen at: two checkpoints of one base disagreeing on one item
in ten (the local runs disagree on fewer; ``docs/gs1.md`` §11)."""
DESIGN_SEED = 20  # the Monte Carlo generator of the design numbers (order-dependent bounds only)
DESIGN_REPS = 6400  # mc_reps_for(0.01, 0.8): a rate near 0.8 within ±0.01 at two standard errors
MAX_DESIGN_ITEMS = MAX_EVAL_ITEMS  # the items-for-power search stops there too
MAX_DESIGN_REPS = 1_000_000
MAX_DESIGN_CELLS = 1 << 27  # reps x items of one Monte Carlo draw: about 1 GiB of float64 uniforms
FINITE_SAMPLE = ("hoeffding", "empirical_bernstein", "plugin_empirical_bernstein", "betting")


def design_differences(margin: float) -> tuple[float, ...]:
    """The true differences the design reports: the null boundary −margin, equality, +0.02 and +0.045
    (about where the pre-registered Hoeffding rule reaches 80% power at n = 1319)."""
    return (-float(margin), 0.0, 0.02, 0.045)


@dataclass(frozen=True)
class RuleDesign:
    """A decision rule's operating characteristics at the spec's n (``rule_design``)."""

    label: str
    method: str
    alpha: float
    margin: float  # δ > 0: the rule claims noninferiority when its lower bound exceeds −δ
    n: int
    permutation_seed: int | None
    exact: bool
    rows: tuple[dict[str, Any], ...]  # discordance, difference, p_noninferior, mc_se, reps
    items_for_power: tuple[dict[str, Any], ...]  # discordance, difference 0, n, achieved_power, mc_se, reps
    power: float = DESIGN_POWER
    seed: int | None = None

    def p(self, difference: float, discordance: float) -> dict[str, Any]:
        """The row at ``difference`` and ``discordance``."""
        for row in self.rows:
            if math.isclose(row["difference"], difference) and math.isclose(row["discordance"], discordance):
                return row
        raise KeyError(f"no design row at difference {difference}, discordance {discordance}")

    def items(self, discordance: float) -> dict[str, Any]:
        for row in self.items_for_power:
            if math.isclose(row["discordance"], discordance):
                return row
        raise KeyError(f"no items-for-power row at discordance {discordance}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rows"], out["items_for_power"] = list(self.rows), list(self.items_for_power)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RuleDesign:
        """The inverse of ``to_dict``."""
        return cls(**{**data, "rows": tuple(data["rows"]), "items_for_power": tuple(data["items_for_power"])})


def _paired_binary_margin(rule: DecisionRule) -> float:
    crit = rule.criteria[0]
    if len(rule.criteria) != 1 or crit.statistic_range() != (-1.0, 1.0):
        raise ValueError(
            "the design model covers one criterion on a paired difference of 0/1 outcomes (range [-1, 1])"
        )
    return -float(crit.margin)


DESIGN_STREAMS = ("pass_rates", "items_for_power")


def design_rng(seed: int, discordance: float, stream: str) -> np.random.Generator:
    """The Monte Carlo generator of one design cell: ``default_rng([seed, discordance in millionths,
    stream])``. Each discordance rate and each use has its own stream, so a cell's numbers do not depend
    on which other cells were computed before it (common random numbers across tables: the candidate
    table's betting row at the planning discordance is the design table's row, not a second draw)."""
    return np.random.default_rng(
        [int(seed), int(round(discordance * 1_000_000)), DESIGN_STREAMS.index(stream)]
    )


def rule_design(
    rule: DecisionRule,
    n: int,
    label: str,
    discordances: Sequence[float] = DESIGN_DISCORDANCE,
    differences: Sequence[float] | None = None,
    seed: int = DESIGN_SEED,
    reps: int = DESIGN_REPS,
    power: float = DESIGN_POWER,
    items_for_power: bool = True,
) -> RuleDesign:
    """P(``noninferior``) of ``rule`` at each true difference and discordance rate at ``n`` items, and the
    items it needs for ``power`` at equality (exact for count-only bounds; else Monte Carlo from
    ``design_rng(seed, discordance, ...)`` with ``reps`` replications and its standard error)."""
    if n < 2:
        raise ValueError(f"n={n} must be at least 2")
    method = METHOD_ALIASES[rule.method]
    margin = _paired_binary_margin(rule)
    differences = tuple(design_differences(margin) if differences is None else differences)
    exact = method in COUNT_ONLY
    rows, items = [], []
    for r in discordances:
        feasible = [d for d in differences if abs(d) <= r + 1e-12]
        rng = design_rng(seed, r, "pass_rates")
        for pr in pass_rates(method, n, margin, rule.alpha, feasible, r, rng, reps):
            rows.append(
                {
                    "discordance": r,
                    "difference": pr.difference,
                    "p_noninferior": pr.rate,
                    "mc_se": pr.mc_se,
                    "reps": pr.reps,
                }
            )
        if items_for_power:
            rng = design_rng(seed, r, "items_for_power")
            found = required_n(method, 0.0, margin, rule.alpha, r, rng, power, reps, n_hint=n)
            items.append(
                {
                    "discordance": r,
                    "difference": 0.0,
                    "n": found.value,
                    "achieved_power": found.achieved_power,
                    "mc_se": found.mc_se,
                    "reps": found.reps,
                }
            )
    return RuleDesign(
        label=label,
        method=method,
        alpha=rule.alpha,
        margin=margin,
        n=int(n),
        permutation_seed=rule.permutation_seed,
        exact=exact,
        rows=tuple(rows),
        items_for_power=tuple(items),
        power=power,
        seed=None if exact else seed,
    )


def spec_design(spec: GS1StudySpec, **kwargs: Any) -> RuleDesign:
    """``rule_design`` of the spec's ``decision_rule`` at its ``eval.n_examples`` items."""
    n = spec.eval.n_examples
    check_design_size(n, kwargs.get("reps", DESIGN_REPS))
    return rule_design(spec.decision_rule, n, spec.registration, **kwargs)


def check_design_size(n: int, reps: int) -> None:
    """Refuse, before any draw, a Monte Carlo design of more than ``MAX_DESIGN_CELLS`` simulated items."""
    if reps * n > MAX_DESIGN_CELLS:
        raise ValueError(
            f"--reps {reps} x {n} items is more than {MAX_DESIGN_CELLS} simulated items; "
            f"use --reps {max(1, MAX_DESIGN_CELLS // n)} or fewer"
        )


def candidate_designs(
    rule: DecisionRule,
    n: int,
    discordance: float = PLANNING_DISCORDANCE,
    methods: Sequence[str] = FINITE_SAMPLE,
    seed: int = DESIGN_SEED,
    reps: int = DESIGN_REPS,
) -> list[RuleDesign]:
    """The rule with each finite-sample bound in turn (same α, margin, n), at one discordance rate:
    P(noninferior) at −margin and at equality, and the items for 80% power at equality."""
    margin = _paired_binary_margin(rule)
    out = []
    for method in methods:
        block = rule.model_dump()
        block["method"] = method
        if method in ORDER_DEPENDENT and block.get("permutation_seed") is None:
            block["permutation_seed"] = 0  # any fixed seed: the power does not depend on it
        variant = DecisionRule.model_validate(block)
        out.append(rule_design(variant, n, method, (discordance,), (-margin, 0.0), seed=seed, reps=reps))
    return out


def choose_method(designs: Sequence[RuleDesign], discordance: float = PLANNING_DISCORDANCE) -> str:
    """The method with the most power at equality among the designs whose rate at −margin (the error)
    stays within α up to two Monte Carlo standard errors; ties go to the earlier design."""
    best, best_power = None, -1.0
    for d in designs:
        null = d.p(-d.margin, discordance)
        if null["p_noninferior"] > d.alpha + 2 * null["mc_se"]:
            continue
        at_zero = d.p(0.0, discordance)["p_noninferior"]
        if at_zero > best_power:
            best, best_power = d.method, at_zero
    if best is None:
        raise ValueError("no design keeps its error at the null boundary within alpha")
    return best


def design_table(design: RuleDesign) -> list[dict[str, Any]]:
    """One row per discordance rate: P(noninferior) at each difference (± its MC standard error) and the
    items for 80% power at equality: the rows ``rftlab gs1 design`` prints."""
    out = []
    for r in sorted({row["discordance"] for row in design.rows}):
        row: dict[str, Any] = {"discordance": r}
        for cell in (c for c in design.rows if c["discordance"] == r):
            row[f"P(noninferior) at {cell['difference']:+.3f}"] = format_rate(cell)
        if design.items_for_power:
            it = design.items(r)
            if it["n"] is None:
                items = "more than 200000"
            elif it["reps"]:
                items = f"{it['n']} (power there {it['achieved_power']:.3f} ± {it['mc_se']:.3f})"
            else:
                items = str(it["n"])
            row[f"items for {design.power:.0%} power at 0"] = items
        out.append(row)
    return out


def design_note(design: RuleDesign) -> str:
    """How the numbers were obtained, for a table caption."""
    if design.exact:
        how = "exact (a sum over the trinomial distribution of the paired counts)"
    else:
        how = (
            f"Monte Carlo, {design.rows[0]['reps']} replications per cell from "
            f"numpy.random.default_rng([{design.seed}, discordance in millionths, stream]) (± one standard "
            "error; the differences of one discordance share their draws, the items-for-power search has "
            "its own stream, and every table shows the same draws for the same cell)"
        )
    return (
        f"{design.method}, one-sided α = {design.alpha:g}, margin {design.margin:g}, "
        f"n = {design.n} paired items; model: each item's difference is +1, −1 or 0, the discordance rate "
        f"is the share of items the arms disagree on; {how}."
    )


# ------------------------------------------------------------------------------------------ contrasts


def paired_contrast(
    treatment_path: str | Path,
    baseline_path: str | Path,
    treatment: str,
    baseline: str,
    alpha: float = 0.05,
    methods: Sequence[str] = ("hoeffding", "empirical_bernstein"),
) -> Contrast:
    """The paired contrast of two per-item files (``item_id`` and ``correct``): difference, items gained
    and lost, and each method's one-sided lower and upper bounds at 1 − ``alpha``."""
    paired = load_paired_items(treatment_path, baseline_path)
    t, b = np.asarray(paired.treatment, float), np.asarray(paired.baseline, float)
    d = t - b
    bounds = {}
    for method in methods:
        if method in ORDER_DEPENDENT:
            raise ValueError(f"{method} depends on the item order; contrasts use order-free bounds")
        res = bound_result(method, d, 0.0, alpha)
        bounds[method] = Interval(lower=res.lower, upper=res.upper)
    return Contrast(
        treatment=treatment,
        baseline=baseline,
        n=int(d.size),
        treatment_accuracy=float(t.mean()),
        baseline_accuracy=float(b.mean()),
        mean_difference=float(d.mean()),
        gained=int(np.sum(d > 0)),
        lost=int(np.sum(d < 0)),
        alpha=alpha,
        bounds=bounds,
    )


def rule_verdict(spec: GS1StudySpec, treatment_eval: str | Path, baseline_eval: str | Path):
    """The spec's decision rule on a treatment and a baseline per-item file (``DecisionRuleResult``)."""
    files: dict[str, str | Path] = {"treatment": treatment_eval, "baseline": baseline_eval}
    return evaluate_decision_rule(spec.decision_rule, files, spec_sha256=spec.sha256)


def assay_sensitivity(
    control_vs_base: Contrast,
    spec: GS1StudySpec,
    base_eval: str | Path,
    control_eval: str | Path,
    revised: GS1StudySpec | None = None,
) -> AssaySensitivity:
    """Does the active control beat the untrained base by more than the margin?

    ``established`` when the control-minus-base Hoeffding lower bound (one-sided 1 − α, the registered
    rule's own kind of bound) exceeds the margin. ``placebo_decision`` is the registered rule applied to
    the base as if it were the treatment. ``noninferior`` there means the rule cannot tell the untrained
    base from the control, so a ``noninferior`` verdict for the treatment would not show it learned
    anything. ``revised_placebo_*`` is the same for the ``revised`` spec's rule."""
    margin = _paired_binary_margin(spec.decision_rule)
    lower = control_vs_base.bounds["hoeffding"].lower
    placebo = rule_verdict(spec, base_eval, control_eval)
    again = rule_verdict(revised, base_eval, control_eval) if revised is not None else None
    bernstein = control_vs_base.bounds.get("empirical_bernstein")
    return AssaySensitivity(
        revised_placebo_decision=again.decision if again else None,
        revised_placebo_method=again.method if again else None,
        revised_placebo_lower=again.criteria[0].lower if again else None,
        control=control_vs_base.treatment,
        margin=margin,
        control_minus_base=control_vs_base.mean_difference,
        hoeffding_lower=lower,
        empirical_bernstein_lower=bernstein.lower if bernstein is not None else None,
        one_sided_level=1.0 - control_vs_base.alpha,
        established=bool(lower is not None and lower > margin),
        placebo_decision=placebo.decision,
        placebo_lower=placebo.criteria[0].lower,
    )


def assay_sentence(assay: AssaySensitivity) -> str:
    """The decision section's assay-sensitivity line."""
    verdict = "yes" if assay.established else "no"
    text = (
        f"**Assay sensitivity:** does {assay.control} beat the untrained base by more than the "
        f"{assay.margin:g} margin? **{verdict}** ({assay.control} − base {assay.control_minus_base:+.4f}; "
        f"one-sided {assay.one_sided_level:.0%} Hoeffding lower bound {assay.hoeffding_lower:+.4f}"
    )
    if assay.empirical_bernstein_lower is not None:
        text += f", empirical Bernstein {assay.empirical_bernstein_lower:+.4f}"
    text += ", exploratory)."
    if assay.established:
        return text + " A noninferiority verdict against it therefore excludes the untrained base."
    text += (
        " The pre-registered rule applied to the untrained base as if it were the treatment says "
        f"**{assay.placebo_decision}** (lower bound {assay.placebo_lower:+.4f})"
    )
    if assay.revised_placebo_decision:
        text += (
            f", the revised {assay.revised_placebo_method} rule **{assay.revised_placebo_decision}** "
            f"(lower bound {assay.revised_placebo_lower:+.4f})"
        )
    return text + (
        ": a noninferiority verdict against this control cannot, on its own, tell a trained treatment "
        "from no training."
    )


# ------------------------------------------------------------------------------ gates and monitoring


def gate_construction_notes(
    treatment_estimator: str, warm_start: WarmStartResult | None = None
) -> dict[str, str]:
    """Gate checks that pass by construction in this configuration, with the reason (an empty dict when
    every check can fail)."""
    notes = {}
    if treatment_estimator == "kernel_baseline":
        notes["frac_nonzero_advantage_treatment"] = (
            "passes by construction: a kernel baseline is a weighted mean of other prompts' rewards, so "
            "|A| ≤ 1e-6 needs every weighted neighbour to share the rollout's reward; it can fail only "
            "when rewards barely vary, which pilot_mean_reward already tests"
        )
    if warm_start is not None and warm_start.reached_target:
        target = warm_start.config.get("target_reward")
        notes["pilot_mean_reward"] = (
            "passes by construction here: the local warm start trains the base until its sampled train "
            f"reward reaches {target if target is not None else 'its target'} (it reached "
            f"{warm_start.final_reward:.3f}), inside the gate's window"
        )
    return notes


ESS_METRIC = "kernel_effective_neighbors_p10"


def step_alerts(metrics: Mapping[str, Any], ess_min: float | None) -> list[str]:
    """What a training step's metrics say is wrong: effective neighbours below the gate's minimum, a
    group holding a duplicate that independent sampling makes implausible."""
    alerts = []
    ess = metrics.get(ESS_METRIC)
    if ess_min is not None and ess is not None and ess < ess_min:
        alerts.append(f"{ESS_METRIC} {ess:.3g} < {ess_min:g} (the gate's minimum)")
    bad = metrics.get("groups_implausible_duplicates")
    if bad:
        alerts.append(f"{bad} group(s) with an implausible duplicate sample (collapsed groups)")
    return alerts


def training_monitor(
    metrics_by_arm: Mapping[str, Sequence[Mapping[str, Any]]], ess_min: float | None
) -> dict[str, ArmMonitor]:
    """Per arm, over every logged training step: effective neighbours (minimum, its step, the steps
    below ``ess_min``), distinct samples per group, collapsed-group steps and the sampler-vs-trainer KL."""
    out = {}
    for arm, rows in metrics_by_arm.items():
        rows = sorted(rows, key=lambda m: m["step"])
        info: dict[str, Any] = {"steps": len(rows)}
        ess = [(m["step"], m[ESS_METRIC]) for m in rows if m.get(ESS_METRIC) is not None]
        if ess:
            step, low = min(ess, key=lambda x: x[1])
            info.update(
                ess_p10_min=low,
                ess_p10_min_step=step,
                ess_p10_median=float(np.median([v for _, v in ess])),
                ess_min=ess_min,
                steps_below_ess_min=[s for s, v in ess if ess_min is not None and v < ess_min],
            )
        distinct = [
            m["distinct_samples_per_group_min"] for m in rows if m.get("distinct_samples_per_group_min")
        ]
        if distinct:
            info["distinct_samples_per_group_min"] = int(min(distinct))
            info["distinct_samples_per_group_mean"] = float(
                np.mean(
                    [
                        m["distinct_samples_per_group_mean"]
                        for m in rows
                        if m.get("distinct_samples_per_group_mean")
                    ]
                )
            )
        info["steps_with_collapsed_groups"] = [
            m["step"] for m in rows if m.get("groups_implausible_duplicates")
        ]
        kl = [m["kl_sample_train_v1"] for m in rows if m.get("kl_sample_train_v1") is not None]
        if kl:
            info["kl_sample_train_v1_max_abs"] = float(np.max(np.abs(kl)))
            info["kl_sample_train_v2_max"] = float(
                np.max([m["kl_sample_train_v2"] for m in rows if m.get("kl_sample_train_v2") is not None])
            )
        out[arm] = ArmMonitor.model_validate(info)
    return out


def monitor_sentences(monitor: Mapping[str, ArmMonitor]) -> list[str]:
    """One line per arm for the report."""
    lines = []
    for arm, info in monitor.items():
        parts = []
        if info.ess_p10_min is not None:
            below = info.steps_below_ess_min
            parts.append(
                f"effective neighbours (10th percentile per step) min {info.ess_p10_min:.2f} at step "
                f"{info.ess_p10_min_step}, median {info.ess_p10_median:.2f}; "
                + (
                    f"**below the gate's minimum {info.ess_min:g} at {len(below)} of {info.steps} steps** "
                    f"(step{'s' if len(below) > 1 else ''} {', '.join(map(str, below[:10]))}"
                    f"{'…' if len(below) > 10 else ''})"
                    if below
                    else f"never below the gate's minimum {info.ess_min:g}"
                )
            )
        if info.distinct_samples_per_group_min is not None:
            parts.append(
                f"distinct samples per group mean {info.distinct_samples_per_group_mean:.2f}, min "
                f"{info.distinct_samples_per_group_min}"
            )
        collapsed = list(info.steps_with_collapsed_groups)
        parts.append(
            f"collapsed groups at steps {collapsed}"
            if collapsed
            else "no group with an implausible duplicate"
        )
        if info.kl_sample_train_v1_max_abs is not None:
            parts.append(
                f"sampler-vs-trainer KL max |v1| {info.kl_sample_train_v1_max_abs:.2e}, max v2 "
                f"{info.kl_sample_train_v2_max:.2e}"
            )
        lines.append(f"{arm} ({info.steps} steps): " + "; ".join(parts) + ".")
    return lines


# ------------------------------------------------------------------------------------------- summary


def _p(row: Mapping[str, Any]) -> str:
    return format_rate(row)


def design_sentence(design: RuleDesign, discordance: float = PLANNING_DISCORDANCE) -> str:
    """What a rule can decide at its n, in one sentence (at the planning discordance)."""
    m = design.margin
    at = {d: design.p(d, discordance) for d in design_differences(m)}
    items = design.items(discordance) if design.items_for_power else None
    seed = f", permutation seed {design.permutation_seed}" if design.permutation_seed is not None else ""
    text = (
        f"the {design.label} {design.method} rule{seed} (n = {design.n}, one-sided α = {design.alpha:g}, "
        f"margin {m:g}) says noninferior with probability {_p(at[-m])} at a true difference of {-m:+.3f}, "
        f"{_p(at[0.0])} when the arms are equal, {_p(at[0.02])} at +0.020 and {_p(at[0.045])} at +0.045"
    )
    if items is not None:
        need = "more than 200000" if items["n"] is None else f"{items['n']}"
        text += f"; {design.power:.0%} power at equality needs {need} items"
    return text + f" (discordance {discordance:g}{'' if design.exact else ', Monte Carlo ± 1 SE'})"


def _decision_sentence(dec: RuleDecision, gate_passed: bool, tag: str, local: bool) -> str:
    """One decision (the registered or the revised rule) with its bound, threshold and caveats."""
    crit = dec.rule.primary
    seed = f", permutation seed {crit.permutation_seed}" if crit.permutation_seed is not None else ""
    text = (
        f"**Decision ({dec.registration} rule, {crit.method}{seed}) for these "
        f"seed-0 checkpoints{tag}: {dec.decision}.** GS1 − GRPO {crit.statistic_mean:+.4f} over "
        f"{crit.n} paired items; one-sided {crit.one_sided_level:.0%} lower bound "
        f"{crit.lower:+.4f} against the threshold {crit.margin:+.2f}"
    )
    if not gate_passed:
        text += "; the activation gate failed, so this is not a test of the GS1 hypothesis"
    text += "."
    if local and dec.registration == "revised":
        text += " Exploratory here: the revised spec was written after earlier local results were seen."
    return text


def _accuracy_sentence(contrasts: Mapping[str, Contrast], tag: str) -> str:
    """Base, GRPO and GS1 accuracy with each arm's paired change against the base."""
    gb, tb = contrasts["grpo_gs8-base"], contrasts["gs1_kernel-base"]
    return (
        f"**Accuracy{tag}:** untrained base {gb.baseline_accuracy:.4f}; GRPO {gb.treatment_accuracy:.4f} "
        f"({gb.mean_difference:+.4f} vs base: {gb.gained} items gained, {gb.lost} lost); GS1 "
        f"{tb.treatment_accuracy:.4f} ({tb.mean_difference:+.4f} vs base: {tb.gained} gained, "
        f"{tb.lost} lost); n = {gb.n} items each, paired contrasts (exploratory) in section 5."
    )


def _monitoring_alerts(monitor: Mapping[str, ArmMonitor]) -> list[str]:
    """What the training monitor flagged per arm: effective neighbours under the gate's minimum,
    collapsed sample groups."""
    alerts = []
    for arm, info in monitor.items():
        below = info.steps_below_ess_min
        if below:
            alerts.append(
                f"{arm}'s effective neighbours fell below the gate's minimum {info.ess_min:g} at "
                f"{len(below)} of {info.steps} training steps (lowest {info.ess_p10_min:.2f})"
            )
        if info.steps_with_collapsed_groups:
            alerts.append(
                f"{arm} had collapsed sample groups at steps {list(info.steps_with_collapsed_groups)}"
            )
    return alerts


@dataclass(frozen=True)
class StudyOutcome:
    """What the summary bullets need from a study run (``rftlab.studies.gs1.GS1Summary`` gives it)."""

    decision: StudyDecision | None
    monitor: Mapping[str, ArmMonitor]
    gate_passed: bool | None  # None: the gate was not reached
    despite_failed_gate: bool
    stopped: str | None
    run_level: RunLevelBrief | None = None  # the run-level plan's result (several seeds per arm)
    placebo: PermutationSweep | None = None  # the revised rule on the base at every permutation seed
    derived_margin: DerivedMargin | None = None  # a future run's margin from the control − base effect


def _unit_bullet(outcome: StudyOutcome, local_detail: str | None, local_model: str | None) -> str:
    """What the verdicts are about and at what unit: the summary's first line."""
    about = (
        f"a stand-in: {local_detail or local_model} on a synthetic GSM8K-style task, not GS1 on "
        "Qwen3.5-2B / GSM8K"
        if local_model
        else "the method on the served model"
    )
    runs = outcome.run_level
    unit = (
        "the pre-registered decision's unit is the item of two seed-0 checkpoints (it bounds item sampling "
        "only); the run-level decision's unit is the training run, over "
        f"{len(runs.treatment_vs_control.seeds)} seeds per arm (added after review, exploratory)"
        if runs is not None
        else "the unit is the item of two fixed seed-0 checkpoints: run-to-run variation is not covered"
    )
    return f"**What the verdicts are about:** {about}; {unit}."


def report_summary(
    outcome: StudyOutcome,
    designs: Sequence[RuleDesign],
    local_model: str | None = None,
    local_detail: str | None = None,
) -> list[str]:
    """The opening bullets of ``RESULTS_gs1.md``: any gate override first, then what the verdicts are
    about (stand-in or method) and their unit, assay sensitivity and whether GRPO's effect over the base
    is real, the question, the design numbers (the pre-registered rule's before any run; a revised
    rule's labelled as written after the earlier local results), the decisions (the pre-registered one
    first) on the seed-0 checkpoints, the run-level decision and power, the revised rule's placebo verdict
    across permutation seeds, base/GRPO/GS1 with paired contrasts, the margin a future run derives,
    monitoring alerts and what the result does not show. ``local_model`` names the simulation the numbers
    come from next to each of them (``None`` on the Tinker service)."""
    out = []
    tag = f" ({local_model})" if local_model else ""
    if outcome.despite_failed_gate:
        gate = outcome.gate_passed
        state = "passed" if gate else "**failed**" if gate is not None else "not reached"
        out.append(
            "**Override: DESPITE_FAILED_GATE = True.** The full runs and the decision go ahead even if the "
            f"activation gate fails (the gate {state}); the spec says gates are never relaxed."
        )
    out.append(_unit_bullet(outcome, local_detail, local_model))
    decision = outcome.decision
    if decision is not None:  # what a noninferiority verdict at this margin can tell, before the verdicts
        out.append(assay_sentence(decision.assay_sensitivity))
        gb = decision.control_vs_base
        out.append(control_effect_bullet(gb.gained, gb.lost, outcome.run_level))
    out.append(
        "**Question.** At an equal rollout budget, is GS1 (kernel cross-prompt baseline, 64 prompts × 1 "
        "sample) no worse than GRPO (8 prompts × 8 samples, group-mean baseline) by more than 3 points of "
        "exact-match accuracy?"
    )
    for k, d in enumerate(designs):
        label = (
            "Design, before any run"
            if k == 0
            else "Design of the revised rule, written after the earlier local results were seen"
        )
        out.append(f"**{label}:** {design_sentence(d)}.")
    if decision is None:
        out.append(f"**No decision:** {outcome.stopped or 'both arms must be trained and evaluated'}.")
    else:
        for dec in decision.decisions():
            out.append(_decision_sentence(dec, bool(decision.gate_passed), tag, bool(local_model)))
        if outcome.run_level is not None:
            out.extend(run_level_bullets(outcome.run_level, tag))
        if outcome.placebo is not None:
            out.append(
                f"**The revised rule's placebo verdict across item orders (exploratory):** at seed 0, "
                f"{outcome.placebo.sentence('the untrained base (as if it were the treatment, against GRPO)')}."
            )
        out.append(_accuracy_sentence(decision.contrasts, tag))
    if outcome.derived_margin is not None:
        dm = outcome.derived_margin
        out.append(
            "**Margin for a future Tinker run:** "
            + (
                f"{dm.margin:.4f} ({dm.reason}; {dm.source})."
                if dm.established
                else f"none derived ({dm.reason}; {dm.source}). A Tinker run must first measure GRPO − "
                "base on its own model, then register half of it."
            )
        )
    alerts = _monitoring_alerts(outcome.monitor)
    if alerts:
        out.append("**Monitoring during training:** " + "; ".join(alerts) + ".")
    out.append(_limits_bullet(outcome, local_detail, local_model))
    return out


def _limits_bullet(outcome: StudyOutcome, local_detail: str | None, local_model: str | None) -> str:
    runs = outcome.run_level
    seeds = (
        f"{len(runs.treatment_vs_control.seeds)} training seeds per arm cover the training seed's "
        "variation (LoRA initialisation, prompt order, sampling) but not the warm start's, the task's or "
        "the hyperparameters'; with so few runs the bootstrap interval is rough and the exact tests sit near "
        "their floors"
        if runs is not None
        else "one seed per arm, so the unit is the item of two fixed checkpoints and seed-to-seed variation "
        "is not covered"
    )
    where = (
        f"every number comes from {local_detail or local_model} on a synthetic task, a test of the "
        "machinery and not of GS1 on Qwen3.5-2B / GSM8K."
        if local_model
        else "one model, one task and one learning rate."
    )
    return f"**What this does not show:** {seeds}; {where}"
