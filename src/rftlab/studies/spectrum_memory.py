"""What notebook ``02_memory`` reads of the spectrum memory study (part of the spectrum family, whose
driver is ``rftlab.studies.spectrum``).

``run_memory_report`` runs the memory study once (``run_memory_study``) with its audit, the simulator's
truth, the extra pairs and the tiny-language-model study, and returns a ``MemoryReport``. The other
functions read a report: the tables of each section (preflight, replicates, parameters, groups, first
against last epoch), the primary contrast epoch by epoch, the design-power tables. ``calibration_rows``
and ``ceilings`` need no study. Results are frozen dataclasses; table rows are plain dicts, one per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rftlab.analysis.compare import compare_runs, contrast_table
from rftlab.analysis.contrasts import ContrastFit, RandomEffectsPool, paired_differences
from rftlab.analysis.display import interval
from rftlab.analysis.spectrum.plan import METRIC_LABELS
from rftlab.analysis.spectrum.power import (
    SEED_SIZES,
    VarianceComponents,
    inflate,
    inflation_to_floor,
    power_slope,
    seed_floor_scenarios,
    seed_slopes,
    size_for_power,
    slope_power_by_size,
    variance_components,
)
from rftlab.analysis.spectrum.study import (
    ContrastResult,
    TruthCheck,
    arm_trend_rows,
    compare_epochs,
    epoch_series,
    margin_against_arms,
    metric_value,
    replicate_pool,
    residual_sd,
    seed_comparison,
    small_k_sensitivity,
)
from rftlab.launch.spectrum.preflight import spectrum_preflight
from rftlab.policies.spectrum.simulated import PARAM_NAMES
from rftlab.rollout.spectrum.ceilings import (
    SEED_CEILING_SOURCE,
    SEED_CEILINGS,
    ceiling_table,
    naive_ceiling_search,
)
from rftlab.runs.paths import SPECS_DIR, notebook_runs_root
from rftlab.studies.spectrum import (
    AuditStatement,
    MemoryStudy,
    MorePairs,
    audit_statement,
    more_pairs,
    run_memory_study,
    simulation_truth,
)
from rftlab.studies.spectrum_tiny_lm import TinyLMDesign, TinyLMStudy, run_tiny_lm_study
from rftlab.training.spectrum.calibration import calibration_check
from rftlab.training.spectrum.grpo import final_theta

__all__ = [
    "METRICS",
    "METRIC_LABELS",
    "POWER_GRIDS",
    "SEED_CEILINGS",
    "SEED_CEILING_SOURCE",
    "SEED_SIZES",
    "SPECS_DIR",
    "Ceilings",
    "DesignPower",
    "MemoryReport",
    "PairEpochs",
    "TinyLMDesign",
    "calibration_rows",
    "ceilings",
    "design_power",
    "first_last_rows",
    "group_rows",
    "notebook_runs_root",
    "parameter_rows",
    "preflight_rows",
    "primary_epochs",
    "replicate_rows",
    "run_memory_report",
    "tiny_side_by_side",
]

METRICS = ("memory_gain", "mean_occ", "carry")
Pools = tuple[list[tuple[str, ContrastFit]], RandomEffectsPool | None]


@dataclass(frozen=True)
class MemoryReport:
    """The memory study as notebook 02 reads it: the study, its audit statement, the seed comparison,
    the small-``k`` sensitivity, the simulator's truth, the extra pairs, the tiny-LM study (the last
    three local only), every arm's trend, per-epoch series and C's replicate pools."""

    study: MemoryStudy
    backend: str
    statement: AuditStatement
    seed_rows: list[dict[str, Any]]
    sensitivity: list[dict[str, Any]]
    truth: list[TruthCheck]
    more: MorePairs | None
    tiny: TinyLMStudy | None
    trend_rows: list[dict[str, Any]]
    series: dict[str, dict[str, dict[str, list[float]]]]  # arm → metric → mean / se per epoch
    c_replicates: dict[str, Pools]  # metric → C's replicate fits and pool

    @property
    def slope_of(self) -> dict[tuple[str, str], Any]:
        """``(arm, metric label)`` → that arm's trend fit (``arm_trend_rows``)."""
        return {(r["arm"], r["metric"]): r["fit"] for r in self.trend_rows}

    def margin_reading(self, contrast: ContrastResult) -> str:
        """An equivalence contrast's margin against the compared arms' own slopes."""
        return margin_against_arms(contrast, self.slope_of)

    def sensitivity_of(self, contrast_id: str) -> dict[str, Any]:
        return next(r for r in self.sensitivity if r["id"] == contrast_id)

    def more_pairs_of(self, contrast_id: str) -> dict[str, Any] | None:
        """The extra-pairs row of a contrast (``None`` without extra pairs)."""
        return None if self.more is None else next(r for r in self.more.rows if r["id"] == contrast_id)

    @property
    def disagreements(self) -> list[dict[str, Any]]:
        """The seed-comparison rows where the simulation's direction disagrees with the seed's."""
        return [r for r in self.seed_rows if not r["agree"]]


def run_memory_report(
    plan_path: str | Path,
    spec_dir: str | Path,
    backend: str = "local",
    root: str | Path | None = None,
    size_overrides: Mapping[str, Any] | None = None,
    truth_pairs: int = 8,
    pairs: int | None = None,
    tiny_lm: Mapping[str, Any] | None = None,
) -> MemoryReport:
    """Run (or reuse) the memory study and everything notebook 02 reports of it. On the local backend
    also the simulator's truth (``truth_pairs`` pairs), the extra pairs (``pairs`` in all; ``None``: the
    plan's pairs + 1) and, unless ``tiny_lm`` is ``None``, the tiny-LM study (``tiny_lm``: the
    ``TinyLMDesign`` fields that differ from its defaults)."""
    study = run_memory_study(plan_path, spec_dir, backend, root, size_overrides)
    plan, rollouts = study.plan.plan, study.rollouts
    local = backend == "local"
    truth = simulation_truth(study, truth_pairs, backend, root) if local else []
    more = more_pairs(study, pairs or len(study.primary.fits) + 1, truth, backend, root) if local else None
    run_tiny = local and tiny_lm is not None
    tiny = run_tiny_lm_study(plan_path, spec_dir, TinyLMDesign(**(tiny_lm or {})), root) if run_tiny else None
    series = {
        arm: epoch_series(rolls, ["mean_occ", "carry", "memory_gain"]) for arm, rolls in rollouts.items()
    }
    return MemoryReport(
        study=study,
        backend=backend,
        statement=audit_statement(study),
        seed_rows=seed_comparison(plan, rollouts),
        sensitivity=small_k_sensitivity(plan, rollouts, study.contrasts),
        truth=truth,
        more=more,
        tiny=tiny,
        trend_rows=arm_trend_rows(plan, rollouts, list(study.specs), METRICS),
        series=series,
        c_replicates={m: replicate_pool(plan, rollouts, "C", m) for m in METRICS},
    )


def calibration_rows(rows: int) -> list[dict[str, Any]]:
    """The prompt variants' untrained carry-rate against its target, on ``rows`` rows of the bisection
    sample and of a held-out one (``calibration_check``)."""
    return calibration_check(rows=rows)


def preflight_rows(report: MemoryReport, bands: int) -> list[dict[str, str]]:
    """One row per arm of the plan: whether its preflight passed, and each check (``spectrum_preflight``
    on 2 rows and ``bands`` bands)."""
    rows = []
    for arm in report.study.plan.plan.arms:
        rep = spectrum_preflight(report.study.specs[arm], rows=2, bands=bands)
        rows.append(
            {"arm": arm, "passed": "yes" if rep.passed else "NO"}
            | {c["name"]: "ok" if c["passed"] else "FAIL" for c in rep.checks}
        )
    return rows


@dataclass(frozen=True)
class PairEpochs:
    """One seed-matched pair of the primary contrast epoch by epoch: the mean row-paired difference and
    the half width of its interval in each epoch, and the pair's fitted slope."""

    seed: int
    treatment: str
    control: str
    fit: ContrastFit
    means: np.ndarray
    half_widths: np.ndarray


def primary_epochs(report: MemoryReport) -> list[PairEpochs]:
    """The primary contrast's row-paired memory_gain differences per epoch, one entry per pair."""
    study, level = report.study, report.study.plan.plan.interval_level
    out = []
    for seed, t_arm, c_arm, fit in study.primary.fits:
        d = paired_differences(study.rollouts[t_arm], study.rollouts[c_arm], metric_value("memory_gain"))
        out.append(PairEpochs(seed, t_arm, c_arm, fit, d.epoch_means(), d.epoch_half_widths(level)))
    return out


def _interval(ci: Sequence[float]) -> str:
    return interval(*ci, signed=True, digits=4)


def _replicate_row(
    label: str, metric: str, fits: Sequence[tuple[str, ContrastFit]], p: RandomEffectsPool | None
):
    return {
        "what": label,
        "metric": METRIC_LABELS[metric],
        "per-run slopes": ", ".join(f"{f.slope:+.4f}" for _, f in fits),
        "k of n": p.agreement() if p else "1 run",
        "pooled slope": p.estimate if p else fits[0][1].slope,
        "95% CI (HK)": _interval(p.ci) if p else _interval(fits[0][1].slope_ci),
        "τ²": p.tau2 if p else None,
        "I²": p.i2 if p else None,
        "Q": p.q if p else None,
        "fixed-effect slope": p.fixed_estimate if p else None,
        "fixed-effect 95% CI": _interval(
            (p.fixed_estimate - 1.96 * p.fixed_se, p.fixed_estimate + 1.96 * p.fixed_se)
        )
        if p
        else None,
    }


def replicate_rows(report: MemoryReport) -> list[dict[str, Any]]:
    """For each metric, C's own replicate slopes and their pool, then the C − B′ pairs and their pool."""
    rows = []
    for metric in METRICS:
        fits, pool = report.c_replicates[metric]
        cc = report.study.contrast(f"C-B_prime.{metric}")
        rows.append(_replicate_row("C alone", metric, fits, pool))
        rows.append(_replicate_row("C − B′", metric, [(f"{t}−{c}", f) for _, t, c, f in cc.fits], cc.pooled))
    return rows


def parameter_rows(report: MemoryReport) -> list[dict[str, str]]:
    """Each arm's simulated-policy parameters before the first epoch → after the last."""
    rows = []
    for arm in report.study.specs:
        run = report.study.runs[arm]
        first, last_theta = run.metrics()[0], final_theta(run)
        if last_theta is None:
            raise ValueError(f"arm {arm} has no complete epoch on record")
        row = {"arm": arm}
        for i, name in enumerate(PARAM_NAMES):
            row[name] = f"{first[f'theta.{name}']:+.2f} → {last_theta[i]:+.2f}"
        rows.append(row)
    return rows


def group_rows(report: MemoryReport) -> list[dict[str, Any]]:
    """Per arm: the within-group correlation of carry with reward (epoch 0, mean over epochs), the
    within-group reward s.d. and the share of zero-variance groups (means over epochs)."""
    rows = []
    for arm in report.study.specs:
        mets = report.study.runs[arm].metrics()
        corr = [
            m["within_group_corr_carry_reward"]
            for m in mets
            if m["within_group_corr_carry_reward"] is not None
        ]
        rows.append(
            {
                "arm": arm,
                "corr(carry, reward), epoch 0": mets[0]["within_group_corr_carry_reward"],
                "corr, mean over epochs": float(np.mean(corr)) if corr else None,
                "within-group reward sd": float(np.mean([m["within_group_reward_sd"] for m in mets])),
                "zero-variance groups": float(np.mean([m["frac_zero_variance_groups"] for m in mets])),
            }
        )
    return rows


def first_last_rows(report: MemoryReport) -> list[dict[str, Any]]:
    """Epoch 0 against the final epoch per arm on per-row means (``compare_epochs``), labelled with the
    plan's family of each test."""
    plan, rows = report.study.plan.plan, []
    for arm in report.study.specs:
        rolls = report.study.rollouts[arm]
        for metric in ("memory_gain", "carry"):
            u = compare_epochs(rolls[0], rolls[-1], metric)
            if u is None:
                continue
            rows.append(
                {
                    "arm": arm,
                    "metric": METRIC_LABELS[metric],
                    "test": f"{plan.family_of(f'first-vs-last.{arm}.{metric}')} (rows {u['n_first']}/{u['n_last']})",
                    "epoch 0": u["mean_first"],
                    "final": u["mean_last"],
                    "diff": u["diff"],
                    "Welch t": u["welch_t"],
                    "Welch p": u["welch_p"],
                    "Mann–Whitney p": u["mannwhitney_p"],
                }
            )
    return rows


@dataclass(frozen=True)
class Ceilings:
    """The occupied-IoU ceilings on bands ``bl0_0 ..`` (``ceiling_table``) and every reading of the naive
    ceiling tried (``naive_ceiling_search``), one row per policy or scheme."""

    bands: int
    table: list[dict[str, Any]]
    search: list[dict[str, Any]]

    def _row(self, policy: str) -> dict[str, Any]:
        return next(r for r in self.table if r["policy"] == policy)

    def mean_occ(self, policy: str) -> float:
        return self._row(policy)["mean_occ"]

    def se(self, policy: str) -> float:
        """The standard error of ``policy``'s mean occupied-IoU over bands."""
        return self._row(policy)["mean_occ_se"]

    def gap(self, policy: str, rung: str) -> float:
        """How many standard errors ``policy``'s mean lies from the seed's published ceiling ``rung``."""
        return (self.mean_occ(policy) - SEED_CEILINGS[rung]) / self.se(policy)


def ceilings(bands: int) -> Ceilings:
    """The ceiling table and the naive-ceiling search on rows ``bl0_<i>`` (unsalted: notebook 01's bands)."""
    rows = [f"bl0_{i}" for i in range(bands)]
    return Ceilings(bands, ceiling_table(rows), naive_ceiling_search(rows))


POWER_GRIDS: dict[str, list[int]] = {
    "rows": [4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384],
    "candidates": [2, 4, 6, 8, 12, 16, 24, 32, 48, 64],
    "epochs": [4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48],
    "runs": [1, 2, 3, 4, 5, 6, 8, 10],
}
_COMPONENT_KEY = {"mean_occ": "mean_occ", "carry": "carry_rate"}


@dataclass(frozen=True)
class DesignPower:
    """Design power of the seed's sizes (§12): the surrogate checked on the probe (``check_rows``), the
    variance factors of the seed-floor scenarios (``factors``, with the ``floors`` they match), the power
    at the seed's sizes (``power_rows``), the sizes for 80% (``need_rows``) and power curves
    (``curve_rows``)."""

    check_rows: list[dict[str, Any]]
    floors: dict[str, float]
    factors: dict[str, float]
    power_rows: list[dict[str, Any]]
    need_rows: list[dict[str, Any]]
    curve_rows: list[dict[str, Any]]


def _components(rollouts: Sequence[Mapping[str, Any]]) -> dict[str, VarianceComponents]:
    return {m: variance_components(rollouts, key) for m, key in _COMPONENT_KEY.items()}


def _probe_check(report: MemoryReport, probe: Mapping[str, VarianceComponents]) -> list[dict[str, Any]]:
    spec = report.study.specs["probe"]
    rows = []
    for m in _COMPONENT_KEY:
        predicted = probe[m].epoch_sd(spec.rows, spec.response_candidates)
        observed = residual_sd(report.series["probe"][m]["mean"])
        rows.append(
            {
                "metric": METRIC_LABELS[m],
                "σ²_b (probe, epoch 0)": probe[m].sigma2_between,
                "σ²_w (probe, epoch 0)": probe[m].sigma2_within,
                "predicted epoch sd (probe sizes)": predicted,
                "observed probe residual sd": observed,
                "ratio": observed / predicted,
            }
        )
    return rows


def _power_rows(scenarios, slopes, nsim: int) -> list[dict[str, Any]]:
    rows = []
    for scen, cc in scenarios.items():
        for m in ("carry", "mean_occ"):
            for reading, slope in slopes[_COMPONENT_KEY[m]].items():
                rows.append(
                    {
                        "noise": scen,
                        "metric": METRIC_LABELS[m],
                        "slope reading": reading,
                        "slope / epoch": slope,
                        "epoch sd at seed sizes": cc[m].epoch_sd(
                            SEED_SIZES["rows"], SEED_SIZES["candidates"]
                        ),
                        "power (48×12×12, 1 run)": power_slope(slope, cc[m], nsim=nsim, **SEED_SIZES),
                    }
                )
    return rows


def _size_rows(scenarios, slopes, nsim: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    need_rows, curve_rows = [], []
    for scen, cc in scenarios.items():
        for m in ("carry", "mean_occ"):
            slope = slopes[_COMPONENT_KEY[m]]["first_to_last"]
            row: dict[str, Any] = {"noise": scen, "metric": METRIC_LABELS[m], "slope / epoch": slope}
            for factor_name, grid in POWER_GRIDS.items():
                n = size_for_power(slope, cc[m], factor_name, grid, nsim=nsim)
                row[f"{factor_name} for 80%"] = n if n is not None else f">{grid[-1]}"
            need_rows.append(row)
            for factor_name, grid in POWER_GRIDS.items():
                for r in slope_power_by_size(slope, cc[m], factor_name, grid[::2], nsim=nsim):
                    curve_rows.append(
                        {
                            "noise": scen,
                            "metric": METRIC_LABELS[m],
                            "factor": factor_name,
                            "value": r[factor_name],
                            "power": r["power"],
                        }
                    )
    return need_rows, curve_rows


def design_power(report: MemoryReport, nsim: int) -> DesignPower:
    """The design-power tables of §12 with ``nsim`` simulations per point: variance components from arm
    C's and the probe's epoch 0, the simulation and the two seed-floor noise scenarios."""
    comps = _components(report.study.rollouts["C"][0])
    probe = _components(report.study.rollouts["probe"][0])
    slopes = seed_slopes(SEED_SIZES["epochs"])
    floors = seed_floor_scenarios(SEED_SIZES["epochs"])
    scenarios = {"simulation": comps}
    factors = {}
    for name, floor_sd in floors.items():
        factors[name] = inflation_to_floor(
            comps["mean_occ"], floor_sd, SEED_SIZES["rows"], SEED_SIZES["candidates"]
        )
        scenarios[name] = {m: inflate(c, factors[name]) for m, c in comps.items()}
    power_rows = _power_rows(scenarios, slopes, nsim)  # before the size search, as the notebook did
    need_rows, curve_rows = _size_rows(scenarios, slopes, nsim)
    return DesignPower(
        check_rows=_probe_check(report, probe),
        floors=floors,
        factors=factors,
        power_rows=power_rows,
        need_rows=need_rows,
        curve_rows=curve_rows,
    )


def tiny_side_by_side(tiny: TinyLMStudy) -> list[dict[str, Any]]:
    """The tiny-LM study's C and B′ of seed 0 compared by ``rftlab runs compare``'s function, one row
    per contrast (per-rollout reward, paired by row and band)."""
    return contrast_table(compare_runs([tiny.runs["C"], tiny.runs["B_prime"]], metric="reward"))
