"""Design power for the spectrum-memory study: how likely is a per-epoch slope of carry-rate or occ to be
detected at given sizes (rows × candidates × epochs × replicate runs)?

Method (a fast surrogate of full training runs, justified by checking it against the probe arm):

1. **Variance components from the simulated policy.** One epoch of rollouts (rows × candidates) of the
   simulated policy gives, by one-way ANOVA over rows, the between-band variance ``σ²_b`` (rows differ in
   band) and the within-group variance ``σ²_w`` (candidates of one band differ in their choices). With
   fresh bands every epoch, an epoch mean over R rows × K candidates has variance
   ``σ²_e = σ²_b / R + σ²_w / (R·K)``.
2. **Surrogate runs.** A run's per-epoch series is ``y_e = a + β·e + ε_e`` with independent
   ``ε_e ~ N(0, σ²_e)``, e = 0..T−1; the analysis is the one the notebook applies (OLS slope, two-sided
   95% CI; the slope counts as detected when the CI lies above zero). With several replicate runs the
   per-run slopes are pooled by inverse variance (fixed effect) and detection is the pooled 95% CI
   above zero.
3. **Check.** ``σ_e`` predicted this way is compared with the residual standard deviation of the probe
   arm's per-epoch series (a real simulated run at learning rate ≈ 0), in the notebook.

Power is the Monte-Carlo fraction of detections (``power_slope``); ``power_slope_analytic`` is the
closed form for one run (non-central t), used to test the simulation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

SEED_SIZES: dict[str, int] = {"rows": 48, "candidates": 12, "epochs": 12, "runs": 1}
# The seed's C arm: carry 0.888 -> 0.938, occ 0.403 -> 0.439 over 12 epochs. Read as first -> last epoch
# the slope is delta / 11 per epoch; read as early-half -> late-half means it is delta / 6.
SEED_C_CHANGES: dict[str, tuple[float, float]] = {"carry_rate": (0.888, 0.938), "mean_occ": (0.403, 0.439)}


# The seed's probe floor: "band-noise +-0.02" of mean occ (upstream RESULTS_memory.md).
SEED_PROBE_FLOOR = 0.02


def seed_floor_scenarios(epochs: int = 12) -> dict[str, float]:
    """The two readings of the seed's probe floor as an epoch s.d. of mean occ at the seed's sizes: a 95%
    band of one epoch's mean (``0.02/1.96``), or one s.d. of the late − early halves difference, which has
    s.d. ``σ_e·sqrt(2/(T/2))`` (``0.02/sqrt(1/6 + 1/6)`` at 12 epochs)."""
    half = epochs // 2
    return {
        "floor: 95% band": SEED_PROBE_FLOOR / 1.96,
        "floor: halves s.d.": SEED_PROBE_FLOOR / float(np.sqrt(1 / half + 1 / (epochs - half))),
    }


def seed_slopes(epochs: int = 12) -> dict[str, dict[str, float]]:
    """Per-epoch slopes implied by the seed's C-arm changes under both readings."""
    out = {}
    for metric, (a, b) in SEED_C_CHANGES.items():
        delta = b - a
        out[metric] = {"first_to_last": delta / (epochs - 1), "early_to_late_halves": delta / (epochs / 2)}
    return out


@dataclass(frozen=True)
class VarianceComponents:
    metric: str
    mean: float
    sigma2_between: float  # band-to-band (row) variance of a rollout's value
    sigma2_within: float  # candidate-to-candidate variance on one band
    groups: int
    candidates: int

    def epoch_sd(self, rows: int, candidates: int) -> float:
        """Standard deviation of an epoch mean over ``rows`` fresh bands × ``candidates``."""
        return float(np.sqrt(self.sigma2_between / rows + self.sigma2_within / (rows * candidates)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def variance_components(records: Sequence[Mapping[str, Any]], metric: str) -> VarianceComponents:
    """One-way random-effects ANOVA of ``metric`` over groups (``row_id``) of per-rollout records."""
    groups: dict[Any, list[float]] = {}
    for r in records:
        v = r.get(metric)
        if v is not None:
            groups.setdefault(r["row_id"], []).append(float(v))
    sizes = {len(v) for v in groups.values()}
    if len(groups) < 2 or len(sizes) != 1 or min(sizes) < 2:
        raise ValueError("need >= 2 groups of equal size >= 2 with the metric defined")
    y = np.array(list(groups.values()))
    g, k = y.shape
    means = y.mean(axis=1)
    msb = k * np.sum((means - y.mean()) ** 2) / (g - 1)
    msw = np.sum((y - means[:, None]) ** 2) / (g * (k - 1))
    return VarianceComponents(metric, float(y.mean()), float(max(0.0, (msb - msw) / k)), float(msw), g, k)


def inflate(comps: VarianceComponents, factor: float) -> VarianceComponents:
    """Both variance components multiplied by ``factor`` (a noisier-than-simulated scenario)."""
    return VarianceComponents(
        comps.metric,
        comps.mean,
        comps.sigma2_between * factor,
        comps.sigma2_within * factor,
        comps.groups,
        comps.candidates,
    )


def inflation_to_floor(
    comps: VarianceComponents, epoch_sd: float, rows: int = 48, candidates: int = 12
) -> float:
    """The variance factor that makes ``comps``' epoch sd at (rows, candidates) equal ``epoch_sd``."""
    return float((epoch_sd / comps.epoch_sd(rows, candidates)) ** 2)


def _detections(slope: float, sd: float, epochs: int, runs: int, nsim: int, rng: np.random.Generator):
    x = np.arange(epochs, dtype=np.float64)
    xc = x - x.mean()
    sxx = float(np.sum(xc**2))
    y = slope * x + rng.normal(0.0, sd, size=(nsim, runs, epochs))
    yc = y - y.mean(axis=2, keepdims=True)
    b = (yc @ xc) / sxx
    resid = yc - b[..., None] * xc
    s2 = np.sum(resid**2, axis=2) / (epochs - 2)
    se = np.sqrt(s2 / sxx)
    if runs == 1:
        t_crit = sps.t.ppf(0.975, epochs - 2)
        return (b[:, 0] - t_crit * se[:, 0]) > 0.0
    w = 1.0 / se**2
    pooled = np.sum(w * b, axis=1) / np.sum(w, axis=1)
    pooled_se = 1.0 / np.sqrt(np.sum(w, axis=1))
    return (pooled - 1.959963984540054 * pooled_se) > 0.0


def power_slope(
    slope: float,
    comps: VarianceComponents,
    *,
    rows: int = 48,
    candidates: int = 12,
    epochs: int = 12,
    runs: int = 1,
    nsim: int = 4000,
    seed: int = 0,
) -> float:
    """Monte-Carlo probability that the 95% CI of the (pooled) OLS slope lies above zero."""
    if epochs < 3 or rows < 1 or candidates < 1 or runs < 1:
        raise ValueError("need epochs >= 3 and rows, candidates, runs >= 1")
    rng = np.random.default_rng([seed, rows, candidates, epochs, runs])
    sd = comps.epoch_sd(rows, candidates)
    return float(np.mean(_detections(slope, sd, epochs, runs, nsim, rng)))


def power_slope_analytic(slope: float, sd: float, epochs: int) -> float:
    """One run, closed form: ``P(T' > t_crit)`` with ``T'`` non-central t (df = T−2, ncp = β·√Sxx / σ)."""
    x = np.arange(epochs, dtype=np.float64)
    sxx = float(np.sum((x - x.mean()) ** 2))
    df = epochs - 2
    ncp = slope * np.sqrt(sxx) / sd
    return float(sps.nct.sf(sps.t.ppf(0.975, df), df, ncp))


def slope_power_by_size(
    slope: float,
    comps: VarianceComponents,
    factor: str,
    values: Iterable[int],
    base: Mapping[str, int] = SEED_SIZES,
    nsim: int = 4000,
) -> list[dict[str, Any]]:
    """Power as one size factor (rows / candidates / epochs / runs) varies, the others at ``base``."""
    if factor not in SEED_SIZES:
        raise ValueError(f"factor must be one of {list(SEED_SIZES)}")
    out = []
    for v in values:
        sizes = {**base, factor: int(v)}
        out.append({factor: int(v), "power": power_slope(slope, comps, nsim=nsim, **sizes)})
    return out


def size_for_power(
    slope: float,
    comps: VarianceComponents,
    factor: str,
    grid: Sequence[int],
    target: float = 0.8,
    base: Mapping[str, int] = SEED_SIZES,
    nsim: int = 4000,
) -> int | None:
    """The smallest value of ``factor`` in ``grid`` (ascending) reaching ``target`` power, else ``None``."""
    for v in sorted(grid):
        if power_slope(slope, comps, nsim=nsim, **{**base, factor: int(v)}) >= target:
            return int(v)
    return None


@dataclass(frozen=True)
class ReplicateDesign:
    """How many replicate pairs the study's primary contrast needs (the plan's replicate rule).

    Each replicate pair gives one slope with standard error ``se_run`` (measured: the seed-0 pair's
    cluster-robust standard error) plus between-run spread ``tau2``; the pairs are pooled by random
    effects with the Hartung–Knapp interval, two-sided at ``alpha``. With equal standard errors that
    pooled test is exactly a one-sample t-test on the runs' slopes, so the power of ``n`` runs is the
    non-central t probability ``P(T'(n−1, ncp) > t_{1−α/2, n−1})``, ``ncp = effect·√n / sqrt(se_run² + tau2)``
    (``replicate_power``; a test checks it against pooling simulated runs).
    """

    effect: float
    se_run: float
    tau2: float
    alpha: float
    target: float
    powers: tuple[tuple[int, float], ...]  # (runs, power) from min to max
    runs: int  # the number to run
    met: bool  # whether ``runs`` reaches ``target``
    runs_needed: int | None  # the smallest n (searched up to 64) that reaches it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replicate_power(effect: float, se_run: float, runs: int, alpha: float, tau2: float = 0.0) -> float:
    """Power of the random-effects (Hartung–Knapp) pooled test over ``runs`` replicate slopes to find
    ``effect`` > 0 (see ``ReplicateDesign``)."""
    if runs < 2:
        raise ValueError("the pooled interval needs at least 2 runs")
    if se_run <= 0 or tau2 < 0 or not 0 < alpha < 1:
        raise ValueError("need se_run > 0, tau2 >= 0 and 0 < alpha < 1")
    df = runs - 1
    ncp = effect * np.sqrt(runs) / np.sqrt(se_run**2 + tau2)
    return float(sps.nct.sf(sps.t.ppf(1 - alpha / 2, df), df, ncp))


def replicates_for_power(
    effect: float,
    se_run: float,
    *,
    alpha: float,
    target: float,
    min_runs: int,
    max_runs: int,
    tau2: float = 0.0,
) -> ReplicateDesign:
    """The smallest ``n`` in ``[min_runs, max_runs]`` with ``replicate_power >= target`` (else ``max_runs``),
    with the power of every ``n`` in that range and the ``n`` it would take (up to 64)."""
    if not 2 <= min_runs <= max_runs:
        raise ValueError("need 2 <= min_runs <= max_runs")
    powers = tuple(
        (n, replicate_power(effect, se_run, n, alpha, tau2)) for n in range(min_runs, max_runs + 1)
    )
    needed = next(
        (n for n in range(2, 65) if replicate_power(effect, se_run, n, alpha, tau2) >= target), None
    )
    chosen = next((n for n, p in powers if p >= target), max_runs)
    return ReplicateDesign(
        effect=float(effect),
        se_run=float(se_run),
        tau2=float(tau2),
        alpha=float(alpha),
        target=float(target),
        powers=powers,
        runs=chosen,
        met=dict(powers)[chosen] >= target,
        runs_needed=needed,
    )
