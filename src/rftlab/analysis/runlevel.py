"""Inference with the training run as the unit (``docs/statistics.md`` §5).

Run-to-run variation is the dominant source of variance in RL fine-tuning results, so a claim about a
*method* is made over independent runs (seeds), not over the items or rollouts inside one run. Two
summaries, in the style of rliable (Agarwal et al., NeurIPS 2021), with an explicit
``numpy.random.Generator`` so every interval is reproducible from its seed:

- ``interquartile_mean``: the mean of the middle 50% of the run scores (``scipy.stats.trim_mean`` with
  25% cut from each end, over all runs of all tasks together), robust to one diverged run;
- ``stratified_bootstrap``: a percentile interval of a run-level statistic (IQM or mean) whose
  replications resample runs with replacement *within* each task (stratum), keeping each task's number
  of runs, as the study was run.

Where two arms share their seeds, runs pair by seed and the question is the per-seed difference
(``paired_by_seed``): its mean, a percentile bootstrap interval over seeds, and the exact two-sided
sign-flip (randomisation) test that enumerates every sign pattern. With ``n`` pairs its smallest
attainable p-value is ``2 / 2**n`` (0.0625 with 5 seeds): the result says so, since an interval from five
runs that excludes 0 and a test that cannot reach 0.05 are both true at once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

STATISTICS = ("iqm", "mean")
MAX_EXACT_PAIRS = 20  # 2**20 sign patterns; beyond it the sign-flip test is refused, not approximated


def interquartile_mean(values: Sequence[float] | np.ndarray) -> float:
    """Mean of the middle 50%: ``floor(n/4)`` values cut from each end of the sorted scores."""
    x = np.sort(np.asarray(values, dtype=float).ravel())
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("the interquartile mean needs at least one score, every one finite")
    cut = int(0.25 * x.size)
    return float(x[cut : x.size - cut].mean())


def _statistic_rows(samples: np.ndarray, statistic: str) -> np.ndarray:
    """The statistic of each row of ``samples`` (replications × runs)."""
    if statistic == "mean":
        return samples.mean(axis=1)
    ordered = np.sort(samples, axis=1)
    cut = int(0.25 * samples.shape[1])
    return ordered[:, cut : samples.shape[1] - cut].mean(axis=1)


@dataclass(frozen=True)
class RunLevelEstimate:
    """A run-level statistic with its stratified-bootstrap percentile interval."""

    statistic: str
    estimate: float
    ci: tuple[float, float]
    level: float
    n_runs: int
    n_tasks: int
    reps: int
    seed: int
    unit: str = "run"


def _strata(scores: Mapping[str, Sequence[float]] | Sequence[float] | np.ndarray) -> list[np.ndarray]:
    groups = scores.values() if isinstance(scores, Mapping) else [scores]
    out = [np.asarray(list(group), dtype=float) for group in groups]
    if not out or any(group.size == 0 for group in out):
        raise ValueError("every task needs at least one run score")
    if not all(np.all(np.isfinite(group)) for group in out):
        raise ValueError("run scores must be finite")
    return out


def _check(statistic: str, reps: int, level: float) -> None:
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, not {statistic!r}")
    if not 100 <= reps <= 1_000_000:
        raise ValueError(f"reps={reps} must be between 100 and 1,000,000")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be in (0, 1)")


def stratified_bootstrap(
    scores: Mapping[str, Sequence[float]] | Sequence[float] | np.ndarray,
    statistic: str = "iqm",
    reps: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> RunLevelEstimate:
    """``statistic`` ("iqm" or "mean") over every run of every task, with a percentile interval from
    ``reps`` stratified bootstrap replications (runs drawn with replacement within their task; task keys
    in the order given). ``scores`` is task → run scores, or one sequence for a single task."""
    _check(statistic, reps, level)
    groups = _strata(scores)
    rng = np.random.default_rng(seed)
    resampled = [group[rng.integers(0, group.size, size=(reps, group.size))] for group in groups]
    values = _statistic_rows(np.concatenate(resampled, axis=1), statistic)
    everything = np.concatenate(groups)
    estimate = interquartile_mean(everything) if statistic == "iqm" else float(everything.mean())
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return RunLevelEstimate(
        statistic=statistic,
        estimate=estimate,
        ci=(float(low), float(high)),
        level=level,
        n_runs=int(everything.size),
        n_tasks=len(groups),
        reps=reps,
        seed=seed,
    )


def sign_flip_exact_p(differences: Sequence[float] | np.ndarray) -> float:
    """Two-sided exact randomisation p-value of the mean of paired differences: the share of all
    ``2**n`` sign patterns whose |mean| is at least the observed one (1 when the mean is 0).

    Sums are compared up to float rounding, ``1e-12 × Σ|d|``: ``[0, 1.8, -0.6, -1.2]`` sums to -2.2e-16 in
    one order and 0 in another, and its mean is 0 (p = 1), not a tiny effect that three of four sign
    patterns fall short of (the old relative tolerance gave 0.75)."""
    d = np.asarray(differences, dtype=float)
    if d.size == 0 or d.size > MAX_EXACT_PAIRS or not np.all(np.isfinite(d)):
        raise ValueError(f"the exact sign-flip test needs 1 to {MAX_EXACT_PAIRS} finite differences")
    tol = 1e-12 * float(np.abs(d).sum())
    observed = abs(float(d.sum()))
    if observed <= tol:
        return 1.0
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    totals = np.abs(signs @ d)
    return float(np.mean(totals >= observed - tol))


@dataclass(frozen=True)
class PairedRunContrast:
    """Treatment − control over runs paired by seed: one difference per shared seed."""

    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    mean: float
    ci: tuple[float, float]
    level: float
    p_value: float
    smallest_p: float
    better: int
    worse: int
    ties: int
    reps: int
    bootstrap_seed: int
    unit: str = "seed-matched pair of runs"

    @property
    def n_pairs(self) -> int:
        return len(self.seeds)

    def sentence(self, units: str = "") -> str:
        """Report text: the mean difference with its interval, the pairs and the exact test's floor."""
        u = f" {units}" if units else ""
        return (
            f"{self.mean:+.4g}{u}, {self.level:.0%} bootstrap CI [{self.ci[0]:+.4g}, {self.ci[1]:+.4g}] over "
            f"{self.n_pairs} seed-matched pairs ({self.better} better, {self.worse} worse, {self.ties} tied); "
            f"exact sign-flip p = {self.p_value:.3g} (the smallest attainable with {self.n_pairs} pairs is "
            f"{self.smallest_p:.3g})"
        )


def paired_by_seed(
    treatment: Mapping[int, float],
    control: Mapping[int, float],
    reps: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedRunContrast:
    """Treatment − control of a run-level score over the seeds both arms ran (seed → score each), with a
    percentile bootstrap interval of the mean difference over seeds and the exact sign-flip test."""
    _check("mean", reps, level)
    shared = sorted(set(treatment) & set(control))
    if len(shared) < 2:
        raise ValueError(f"paired_by_seed needs at least 2 seeds both arms ran, got {len(shared)}")
    d = np.array([float(treatment[s]) - float(control[s]) for s in shared])
    if not np.all(np.isfinite(d)):
        raise ValueError("run scores must be finite")
    boot = stratified_bootstrap(d, "mean", reps=reps, seed=seed, level=level)
    return PairedRunContrast(
        seeds=tuple(int(s) for s in shared),
        differences=tuple(float(x) for x in d),
        mean=float(d.mean()),
        ci=boot.ci,
        level=level,
        p_value=sign_flip_exact_p(d),
        smallest_p=min(1.0, 2.0 / 2 ** len(d)),
        better=int(np.sum(d > 0)),
        worse=int(np.sum(d < 0)),
        ties=int(np.sum(d == 0)),
        reps=reps,
        bootstrap_seed=seed,
    )


def runs_needed_for_exact_level(alpha: float) -> int:
    """The fewest seed pairs with which the two-sided exact sign-flip test can reach ``p < alpha``."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha={alpha} must be in (0, 1)")
    return max(1, math.ceil(math.log2(2.0 / alpha) + 1e-12))
