"""Summaries of the spectrum-memory study's runs (the numbers ``notebooks/02_memory.py`` shows).

Inside an epoch the band (row) is the unit (``docs/statistics.md`` §1 and §6): per-epoch standard errors
are taken over the rows' group means, slopes are fitted to row values with rows as clusters
(``rftlab.analysis.contrasts``), and ``compare_epochs`` repeats the seed's epoch-0 vs final-epoch
comparison on per-row means, never on rollouts (the candidates of a row share a band, so a per-rollout
test counts one band twelve times). ``study_contrasts`` computes every contrast of the study's
pre-registered plan (``rftlab.analysis.spectrum.plan``); ``seed_comparison`` sets the seed's published
first → last readings beside the same readings of the simulated runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from rftlab.analysis.contrasts import (
    ContrastFit,
    RandomEffectsPool,
    arm_rows,
    contrast_slope,
    paired_contrast,
    random_effects_pool,
)
from rftlab.analysis.display import interval, number
from rftlab.analysis.multiplicity import holm_adjust
from rftlab.analysis.runlevel import sign_flip_exact_p
from rftlab.analysis.spectrum.plan import METRIC_LABELS, PlannedContrast, StudyPlan
from rftlab.analysis.trends import slope_flatness


def carry_of(record: Mapping[str, Any]) -> float | None:
    """A rollout's carry-rate: the env's (echo arms), else the policy's carry of its notepad list."""
    value = record.get("carry_rate")
    if value is None:
        value = record.get("memory_carry_rate")
    return None if value is None else float(value)


def _value(record: Mapping[str, Any], metric: str) -> float | None:
    if metric == "carry":
        return carry_of(record)
    v = record.get(metric)
    return None if v is None else float(v)


def row_means(records: Sequence[Mapping[str, Any]], metric: str) -> np.ndarray:
    """Per-row (band) means of ``metric`` over the row's candidates, rows with no defined value skipped."""
    groups: dict[Any, list[float]] = {}
    for r in records:
        v = _value(r, metric)
        if v is not None:
            groups.setdefault(r["row_id"], []).append(v)
    return np.array([np.mean(v) for v in groups.values()], dtype=np.float64)


def epoch_point(records: Sequence[Mapping[str, Any]], metric: str) -> tuple[float, float]:
    """``(mean, s.e.)`` of an epoch's metric; the s.e. is over row means."""
    m = row_means(records, metric)
    if m.size == 0:
        return float("nan"), float("nan")
    se = float(m.std(ddof=1) / np.sqrt(m.size)) if m.size > 1 else float("nan")
    return float(m.mean()), se


def epoch_series(rollouts_by_epoch: Sequence[Sequence[Mapping[str, Any]]], metrics: Sequence[str]) -> dict:
    """``{metric: {"mean": [...], "se": [...]}}`` over epochs (0, 1, ...)."""
    out: dict[str, dict[str, list[float]]] = {}
    for metric in metrics:
        points = [epoch_point(recs, metric) for recs in rollouts_by_epoch]
        out[metric] = {"mean": [p[0] for p in points], "se": [p[1] for p in points]}
    return out


def residual_sd(values: Sequence[float]) -> float:
    """Standard deviation of a per-epoch series around its OLS line (ddof = 2)."""
    y = np.asarray(values, dtype=np.float64)
    x = np.arange(y.size, dtype=np.float64)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    return float(np.sqrt(np.sum(resid**2) / (y.size - 2)))


def compare_epochs(
    first: Sequence[Mapping[str, Any]], last: Sequence[Mapping[str, Any]], metric: str
) -> dict[str, Any] | None:
    """Epoch-0 vs final-epoch comparison of a metric on per-row means (the independent unit: the
    candidates of a row share a band; with epoch salts the two epochs' rows are different bands, so the
    comparison is two-sample): Welch's t and the Mann–Whitney U test, two-sided. ``None`` with fewer than
    two rows in either epoch."""
    x, y = row_means(first, metric), row_means(last, metric)
    if x.size < 2 or y.size < 2:
        return None
    welch = sps.ttest_ind(y, x, equal_var=False)
    # scipy makes TtestResult's fields with `_make_tuple_bunch`, which pyright cannot see through
    welch_t: float = welch.statistic  # pyright: ignore[reportAttributeAccessIssue]
    welch_p: float = welch.pvalue  # pyright: ignore[reportAttributeAccessIssue]
    both_constant = np.ptp(np.concatenate([x, y])) == 0
    mwu_p = 1.0 if both_constant else float(sps.mannwhitneyu(y, x, alternative="two-sided").pvalue)
    return {
        "metric": metric,
        "n_first": int(x.size),
        "n_last": int(y.size),
        "mean_first": float(x.mean()),
        "mean_last": float(y.mean()),
        "diff": float(y.mean() - x.mean()),
        "welch_t": float(welch_t) if np.isfinite(welch_t) else 0.0,
        "welch_p": float(welch_p) if np.isfinite(welch_p) else 1.0,
        "mannwhitney_p": mwu_p,
    }


# ------------------------------------------------------------------ contrasts of the study plan


@dataclass(frozen=True)
class ContrastResult:
    """One planned contrast, computed (docs/spectrum.md, "The analysis plan").

    ``fits`` holds one row-paired fit per replicate pair (seed, treatment run, control run, fit); with two
    or more pairs ``pooled`` is their random-effects pool and the estimate is the pooled one. ``p_difference``
    is two-sided for slope ≠ 0; ``p_equivalence`` is twice the larger TOST p-value, so that ``< alpha``
    means the two-sided ``1 − alpha`` interval lies inside ``±epsilon`` (docs/statistics.md §2).
    ``p_family`` is the p-value of the planned hypothesis, Holm-adjusted (``p_adjusted``) across the
    confirmatory family; exploratory contrasts keep it unadjusted.
    """

    planned: PlannedContrast
    fits: tuple[tuple[int, str, str, ContrastFit], ...]
    pooled: RandomEffectsPool | None
    estimate: float
    se: float
    ci: tuple[float, float]
    df: float
    epsilon: float | None
    p_difference: float
    p_equivalence: float | None
    p_adjusted: float
    alpha: float
    epochs: int

    @property
    def id(self) -> str:
        return self.planned.id

    @property
    def p_family(self) -> float:
        if self.planned.hypothesis == "equivalence":
            assert self.p_equivalence is not None
            return self.p_equivalence
        return self.p_difference

    @property
    def shared_bands(self) -> float:
        return float(np.mean([f.shared_bands for *_, f in self.fits]))

    @property
    def within_epsilon(self) -> bool | None:
        if self.epsilon is None:
            return None
        return -self.epsilon < self.ci[0] and self.ci[1] < self.epsilon

    @property
    def claim(self) -> bool:
        """Whether the planned hypothesis is supported at ``alpha`` (Holm-adjusted when confirmatory)."""
        return self.p_adjusted < self.alpha

    def sentence(self, source: str) -> str:
        """The estimate as report text: slope per epoch with its CI, the change over the run, the unit, the
        replicate agreement and ``source`` (what produced the numbers, e.g. ``"simulated policy"``)."""
        runs = f"{len(self.fits)} seed-matched pairs, {self.agreement()}" if self.pooled else "1 run"
        return (
            f"{number(self.estimate, 4, signed=True)} per epoch, {1.0 - self.alpha:.0%} CI "
            f"{interval(*self.ci, signed=True, digits=4)} "
            f"({number(self.estimate * (self.epochs - 1), 3, signed=True)} over the run; rows = bands, {runs}; "
            f"{source})"
        )

    def agreement(self) -> str:
        """``k of n runs`` whose own CI excludes 0 on the estimate's side (a single run: ``1 run``)."""
        if self.pooled is None:
            return "1 run"
        return self.pooled.agreement()

    def verdict(self) -> str:
        """The planned hypothesis's verdict in words, with the other fact beside it."""
        eps = self.epsilon
        band = f"±{eps:.2g}/epoch" if eps is not None else None
        excludes0 = self.ci[0] > 0 or self.ci[1] < 0
        if self.planned.hypothesis == "equivalence":
            if self.claim:
                return f"equivalent within {band}" + (" (yet the CI excludes 0)" if excludes0 else "")
            return f"not shown equivalent within {band}" + (
                "; differs from 0" if excludes0 else "; CI includes 0"
            )
        if self.claim:
            side = "higher" if self.estimate > 0 else "lower"
            words = f"{self.planned.treatment}'s slope is {side}"
            return words + (f" (but within {band})" if self.within_epsilon else "")
        if self.within_epsilon:
            return f"no difference shown; within {band}"
        return "no difference shown (absence of evidence)"

    def row(self) -> dict[str, Any]:
        """The contrast-table row (arm pair, metric, slope, CI, verdict …)."""
        label = "confirmatory (Holm)" if self.planned.family == "confirmatory" else "exploratory"
        return {
            "contrast": f"{self.planned.treatment} − {self.planned.control}",
            "metric": METRIC_LABELS[self.planned.metric],
            "test": f"{self.planned.hypothesis}, {label}",
            "bands shared": f"{self.shared_bands:.0%}",
            "runs": self.agreement(),
            "slope / epoch": self.estimate,
            f"{1 - self.alpha:.0%} CI": (self.ci[0], self.ci[1]),
            "over the run": self.estimate * (self.epochs - 1),
            "ε / epoch": self.epsilon,
            "p": self.p_family,
            "p (Holm)": self.p_adjusted if self.planned.family == "confirmatory" else None,
            "verdict": self.verdict(),
        }


def _tost_p(estimate: float, se: float, df: float, epsilon: float) -> float:
    if se <= 0:
        return 0.0 if abs(estimate) < epsilon else 1.0
    t = sps.t(df)
    return float(min(1.0, 2 * max(t.sf((estimate + epsilon) / se), t.cdf((estimate - epsilon) / se))))


def replicate_pairs(
    plan: StudyPlan, contrast: PlannedContrast, available: Iterable[str]
) -> list[tuple[int, str, str]]:
    """``(seed, treatment arm, control arm)`` pairs of a contrast: every seed both replicated arms have
    when the contrast is between the plan's two replicated arms, else the seed-0 pair alone."""
    have = set(available)
    if {contrast.treatment, contrast.control} == set(plan.replicates.arms):
        pairs = []
        for seed in range(plan.replicates.max_runs):
            t = plan.replicate_name(contrast.treatment, seed)
            c = plan.replicate_name(contrast.control, seed)
            if t in have and c in have:
                pairs.append((seed, t, c))
        return pairs
    return (
        [(0, contrast.treatment, contrast.control)] if {contrast.treatment, contrast.control} <= have else []
    )


def metric_value(metric: str):
    """The per-rollout value of a plan metric (``carry`` is the env's carry-rate, or the notepad carry)."""
    return carry_of if metric == "carry" else (lambda r: None if r.get(metric) is None else float(r[metric]))


def contrast_fits(
    plan: StudyPlan,
    contrast: PlannedContrast,
    rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
) -> tuple[tuple[int, str, str, ContrastFit], ...]:
    """The row-paired fit of every replicate pair of ``contrast``, ``(seed, treatment, control, fit)``."""
    pairs = replicate_pairs(plan, contrast, rollouts)
    if not pairs:
        raise ValueError(f"contrast {contrast.id}: no runs of {contrast.treatment} and {contrast.control}")
    value = metric_value(contrast.metric)
    return tuple(
        (seed, t, c, paired_contrast(rollouts[t], rollouts[c], value, plan.interval_level))
        for seed, t, c in pairs
    )


def unestimable_contrasts(
    plan: StudyPlan, rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]]
) -> dict[str, str]:
    """Contrast id → why, for every contrast with a pair that has no interval: the metric has no value in
    some epoch of both arms (e.g. no scored scan), or the paired difference never varied (e.g. a carry-rate
    that stayed 0 in both arms), so its slope has no standard error. A contrast whose arms have no runs is
    an error, as in ``compute_contrast``."""
    out: dict[str, str] = {}
    for contrast in plan.contrasts:
        pairs = replicate_pairs(plan, contrast, rollouts)
        if not pairs:
            raise ValueError(
                f"contrast {contrast.id}: no runs of {contrast.treatment} and {contrast.control}"
            )
        value = metric_value(contrast.metric)
        for seed, t, c in pairs:
            try:
                fit = paired_contrast(rollouts[t], rollouts[c], value, plan.interval_level)
            except ValueError as exc:
                out[contrast.id] = f"{t} − {c} (seed {seed}): {exc}"
                break
            if not (np.isfinite(fit.slope_se) and fit.slope_se > 0):
                out[contrast.id] = (
                    f"{t} − {c} (seed {seed}): the paired {contrast.metric} difference never varied"
                )
                break
    return out


def compute_contrast(
    plan: StudyPlan,
    contrast: PlannedContrast,
    rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
    truncated_hk: bool = False,
) -> tuple[tuple[tuple[int, str, str, ContrastFit], ...], RandomEffectsPool | None]:
    """The row-paired fit of every replicate pair of ``contrast`` and, with two or more, their pool
    (``truncated_hk``: the truncated Hartung–Knapp interval, a sensitivity analysis)."""
    fits = contrast_fits(plan, contrast, rollouts)
    pooled = None
    if len(fits) >= 2:
        pooled = random_effects_pool(
            [f.slope for *_, f in fits],
            [f.slope_se for *_, f in fits],
            plan.interval_level,
            dfs=[f.df_resid for *_, f in fits],
            truncate=truncated_hk,
        )
    return fits, pooled


def study_contrasts(
    plan: StudyPlan, rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], truncated_hk: bool = False
) -> list[ContrastResult]:
    """Every contrast of the plan on the runs given (arm name -> per-epoch rollout records), with Holm's
    adjustment across the confirmatory family. A contrast whose arms have no runs is refused.

    ``truncated_hk`` pools replicate pairs with the truncated Hartung–Knapp interval (``q* = max(1, q)``):
    the small-``k`` sensitivity analysis, reported beside the plan's own (plain) analysis, never instead."""
    partial = []
    for contrast in plan.contrasts:
        fits, pooled = compute_contrast(plan, contrast, rollouts, truncated_hk)
        if pooled is not None:
            est, se, ci, df, p = pooled.estimate, pooled.se, pooled.ci, float(pooled.df), pooled.p_value
        else:
            f = fits[0][3]
            est, se, ci, df, p = f.slope, f.slope_se, f.slope_ci, f.df_resid, f.p_value
        eps = plan.epsilon(contrast.metric)
        p_eq = None if eps is None else _tost_p(est, se, df, eps)
        partial.append((contrast, fits, pooled, est, se, ci, df, eps, p, p_eq))
    family = [i for i, item in enumerate(partial) if item[0].family == "confirmatory"]
    family_p = [partial[i][9] if partial[i][0].hypothesis == "equivalence" else partial[i][8] for i in family]
    adjusted = dict(zip(family, holm_adjust(family_p), strict=True)) if family else {}
    out = []
    for i, (contrast, fits, pooled, est, se, ci, df, eps, p, p_eq) in enumerate(partial):
        own = p_eq if contrast.hypothesis == "equivalence" else p
        out.append(
            ContrastResult(
                planned=contrast,
                fits=fits,
                pooled=pooled,
                estimate=est,
                se=se,
                ci=(float(ci[0]), float(ci[1])),
                df=df,
                epsilon=eps,
                p_difference=p,
                p_equivalence=p_eq,
                p_adjusted=float(adjusted.get(i, own)),
                alpha=plan.alpha,
                epochs=plan.epochs,
            )
        )
    return out


def small_k_sensitivity(
    plan: StudyPlan,
    rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
    contrasts: Sequence[ContrastResult],
) -> list[dict[str, Any]]:
    """The plan's confirmatory contrasts that pool seed-matched pairs, under two small-``k`` sensitivity
    analyses beside the plan's own: the truncated Hartung–Knapp interval (``q* = max(1, q)``, Holm
    over the same family) and the exact sign-flip test over the pairs' own slopes (the pair of runs as
    the unit; difference hypotheses only). Neither replaces the registered analysis; both are reported."""
    truncated = {c.id: c for c in study_contrasts(plan, rollouts, truncated_hk=True)}
    rows = []
    for c in contrasts:
        if c.planned.family != "confirmatory" or c.pooled is None:
            continue
        t = truncated[c.id]
        slopes = [f.slope for *_, f in c.fits]
        exact = sign_flip_exact_p(slopes) if c.planned.hypothesis == "difference" else None
        rows.append(
            {
                "id": c.id,
                "contrast": f"{c.planned.treatment} − {c.planned.control}",
                "metric": METRIC_LABELS[c.planned.metric],
                "pairs": len(c.fits),
                "HK scale q": c.pooled.hk_q,
                "CI, plan (HK)": c.ci,
                "CI, truncated HK": t.ci,
                "p (Holm), plan": c.p_adjusted,
                "p (Holm), truncated HK": t.p_adjusted,
                "verdict, truncated HK": t.verdict(),
                "sign-flip p over pairs": exact,
                "smallest attainable": min(1.0, 2.0 / 2 ** len(slopes)) if exact is not None else None,
            }
        )
    return rows


def margin_against_arms(contrast: ContrastResult, slope_of: Mapping[tuple[str, str], Any]) -> str:
    """An equivalence contrast's margin read against the compared arms' own slopes: ``slope_of`` maps
    ``(arm, metric label)`` to that arm's trend fit (``arm_trend_rows``' ``fit``, with ``.slope``)."""
    metric, eps = contrast.planned.metric, contrast.epsilon
    if eps is None:
        raise ValueError(f"contrast {contrast.id}: its metric {metric} has no equivalence margin")
    arms = (contrast.planned.treatment, contrast.planned.control)
    slopes = {a: slope_of[a, METRIC_LABELS[metric]].slope for a in arms}
    text = ", ".join(f"{a} {slopes[a]:+.4f}" for a in arms)
    inside = [a for a in arms if abs(slopes[a]) < eps]
    if len(inside) == 2:
        return (
            f"Its margin (±{eps:.4f}/epoch) is wider than either arm's own slope ({text} per epoch), so "
            "equivalence within it cannot tell either trend from a flat one."
        )
    if inside:
        return f"Its margin (±{eps:.4f}/epoch) is wider than {inside[0]}'s own slope ({text} per epoch)."
    return f"Both arms' own slopes ({text} per epoch) exceed its margin (±{eps:.4f}/epoch)."


@dataclass(frozen=True)
class TruthCheck:
    """A confirmatory contrast's interval against the simulator's own expected contrast.

    ``truth`` is the mean slope over ``n_pairs`` independent seed-matched pairs run only to estimate it
    (seeds the study never used), ``truth_se`` its Monte Carlo standard error (pair slopes' s.d. / √n);
    ``covers`` whether the study's interval holds ``truth``, ``covers_truncated`` the same for the
    truncated-HK interval."""

    contrast: ContrastResult
    truth: float
    truth_se: float
    n_pairs: int
    covers: bool
    covers_truncated: bool

    @property
    def truth_interval(self) -> tuple[float, float]:
        return (self.truth - 1.96 * self.truth_se, self.truth + 1.96 * self.truth_se)

    def row(self) -> dict[str, Any]:
        c = self.contrast
        return {
            "contrast": f"{c.planned.treatment} − {c.planned.control}",
            "metric": METRIC_LABELS[c.planned.metric],
            "study estimate": c.estimate,
            "study CI (plan)": c.ci,
            "true slope (simulator)": self.truth,
            "± MC s.e.": self.truth_se,
            "truth pairs": self.n_pairs,
            "CI covers truth": "yes" if self.covers else "no",
            "truncated CI covers": "yes" if self.covers_truncated else "no",
            "verdict": c.verdict(),
        }


def truth_checks(
    plan: StudyPlan,
    contrasts: Sequence[ContrastResult],
    truncated: Sequence[ContrastResult],
    truth_rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
    pairs: Sequence[Mapping[str, str]],
) -> list[TruthCheck]:
    """For each confirmatory contrast between the plan's replicated arms: the simulator's expected slope,
    estimated from the row-paired slopes of the independent truth ``pairs`` (each maps an arm of the plan
    to the name of its truth run in ``truth_rollouts``), and whether the study's intervals cover it."""
    if len(pairs) < 2:
        raise ValueError("the simulation truth needs at least 2 independent pairs")
    by_id = {c.id: c for c in truncated}
    out = []
    for c in contrasts:
        arms = {c.planned.treatment, c.planned.control}
        if c.planned.family != "confirmatory" or arms != set(plan.replicates.arms):
            continue
        value = metric_value(c.planned.metric)
        slopes = np.array(
            [
                paired_contrast(
                    truth_rollouts[pair[c.planned.treatment]], truth_rollouts[pair[c.planned.control]], value
                ).slope
                for pair in pairs
            ],
            dtype=float,
        )
        truth, se = float(slopes.mean()), float(slopes.std(ddof=1) / np.sqrt(slopes.size))
        t_ci = by_id[c.id].ci
        out.append(
            TruthCheck(
                contrast=c,
                truth=truth,
                truth_se=se,
                n_pairs=int(slopes.size),
                covers=bool(c.ci[0] <= truth <= c.ci[1]),
                covers_truncated=bool(t_ci[0] <= truth <= t_ci[1]),
            )
        )
    return out


# ------------------------------------------------------------------ single arms, replicates, the seed


def arm_slope(
    by_epoch: Sequence[Sequence[Mapping[str, Any]]], metric: str, level: float = 0.95
) -> ContrastFit:
    """An arm's own slope per epoch of ``metric``, rows as clusters (``arm_rows``)."""
    return contrast_slope(arm_rows(by_epoch, metric_value(metric)), level)


def arm_trend_rows(
    plan: StudyPlan,
    rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
    arms: Sequence[str],
    metrics: Sequence[str],
) -> list[dict[str, Any]]:
    """Per arm and metric: first and last epoch, early and late halves, the row-clustered slope with its
    CI and the plan's equivalence verdict (exploratory: a single arm's trend is not a contrast)."""
    out = []
    for arm in arms:
        for metric in metrics:
            try:
                fit = arm_slope(rollouts[arm], metric, plan.interval_level)
            except ValueError:  # no value of the metric in this arm (e.g. an echo carry in a notepad arm)
                continue
            eps = plan.epsilon(metric)
            out.append(
                {
                    "arm": arm,
                    "metric": METRIC_LABELS[metric],
                    "first": fit.first,
                    "last": fit.last,
                    "early": fit.early,
                    "late": fit.late,
                    "slope / epoch": fit.slope,
                    "ci": fit.slope_ci,
                    "over the run": fit.slope * (plan.epochs - 1),
                    "within ±ε": None if eps is None else slope_flatness(fit, eps).verdict,
                    "fit": fit,
                }
            )
    return out


def replicate_pool(
    plan: StudyPlan, rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], arm: str, metric: str
) -> tuple[list[tuple[str, ContrastFit]], RandomEffectsPool | None]:
    """The row-clustered slope of every replicate of ``arm`` that was run, and their random-effects pool."""
    fits = []
    for seed in range(plan.replicates.max_runs):
        name = plan.replicate_name(arm, seed)
        if name in rollouts:
            fits.append((name, arm_slope(rollouts[name], metric, plan.interval_level)))
    if len(fits) < 2:
        return fits, None
    return fits, random_effects_pool(
        [f.slope for _, f in fits],
        [f.slope_se for _, f in fits],
        plan.interval_level,
        dfs=[f.df_resid for _, f in fits],
    )


# The seed's published readings (upstream RESULTS_memory.md and MEMO_memory_training.html, Qwen3-1.7B on
# Fireworks): first → last epoch where it gives them, and the direction it reports.
SEED_READINGS: tuple[dict[str, Any], ...] = (
    {
        "arm": "A",
        "metric": "mean_occ",
        "first": None,
        "last": None,
        "direction": "flat",
        "note": "0.472, flat",
    },
    {
        "arm": "A",
        "metric": "carry",
        "first": 0.967,
        "last": 0.972,
        "direction": "up",
        "note": "0.967 → 0.972",
    },
    {
        "arm": "B",
        "metric": "mean_occ",
        "first": None,
        "last": None,
        "direction": "flat",
        "note": "0.356, flat",
    },
    {
        "arm": "B",
        "metric": "memory_gain",
        "first": None,
        "last": None,
        "direction": "flat",
        "note": "gain flat",
    },
    {
        "arm": "C",
        "metric": "mean_occ",
        "first": 0.403,
        "last": 0.439,
        "direction": "up",
        "note": "0.403 → 0.439",
    },
    {
        "arm": "C",
        "metric": "carry",
        "first": 0.888,
        "last": 0.938,
        "direction": "up",
        "note": "0.888 → 0.938",
    },
    {
        "arm": "C",
        "metric": "memory_gain",
        "first": None,
        "last": None,
        "direction": "up",
        "note": "rose (no numbers)",
    },
    {
        "arm": "C_prime",
        "metric": "mean_occ",
        "first": 0.401,
        "last": 0.425,
        "direction": "up",
        "note": "0.401 → 0.425",
    },
    {
        "arm": "C_prime",
        "metric": "carry",
        "first": 0.900,
        "last": 0.935,
        "direction": "up",
        "note": "0.900 → 0.935",
    },
    {
        "arm": "C_prime",
        "metric": "memory_gain",
        "first": None,
        "last": None,
        "direction": "flat",
        "note": "did not rise (did not replicate C)",
    },
    {
        "arm": "D",
        "metric": "memory_gain",
        "first": 0.055,
        "last": -0.008,
        "direction": "down",
        "note": "+0.055 → −0.008 over 20 epochs (notepad erodes)",
    },
)


def _direction(fit: ContrastFit, epsilon: float | None) -> str:
    lo, hi = fit.slope_ci
    if lo > 0:
        return "up"
    if hi < 0:
        return "down"
    if epsilon is not None and -epsilon < lo and hi < epsilon:
        return "flat"
    return "unclear"


def seed_comparison(
    plan: StudyPlan,
    rollouts: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
    readings: Sequence[Mapping[str, Any]] = SEED_READINGS,
) -> list[dict[str, Any]]:
    """The seed's reading (first → last epoch) beside ours (first → last epoch, early → late halves, the
    row-clustered slope) and whether the directions agree. Ours is "flat" only when the slope's CI lies
    inside the plan's ``±ε``, "unclear" when it includes 0 but reaches outside."""
    out = []
    for r in readings:
        if r["arm"] not in rollouts:
            continue
        fit = arm_slope(rollouts[r["arm"]], r["metric"], plan.interval_level)
        ours = _direction(fit, plan.epsilon(r["metric"]))
        seed_change = None if r["first"] is None else r["last"] - r["first"]
        out.append(
            {
                "arm": r["arm"],
                "metric": METRIC_LABELS[r["metric"]],
                "seed: first → last": r["note"],
                "seed change": seed_change,
                "ours: first → last": (fit.first, fit.last),
                "our change": fit.last - fit.first,
                "ours: early → late": (fit.early, fit.late),
                "our slope / epoch": fit.slope,
                "ci": fit.slope_ci,
                "seed direction": r["direction"],
                "our direction": ours,
                "agree": ours == r["direction"],
            }
        )
    return out
