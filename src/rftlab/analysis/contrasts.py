"""Paired arm contrasts over shared bands, and random-effects pooling of replicate runs
(``docs/statistics.md`` §7).

**Paired contrast.** Two arms X and Y of one study, each with per-rollout records per epoch. Within an
epoch the row (one band, all its candidates) is the unit: each arm's value of a row is the mean over its
candidates, and the k-th row of X is paired with the k-th row of Y. When the arms use the same row ids
and the same epoch salts, a pair is one band seen by both arms (``shared_bands`` says what fraction of
pairs share their band seed), so band luck cancels in the difference ``d = x − y``; when they do not,
the pairs are independent draws and the difference is still unbiased, only noisier.

``contrast_slope`` fits ``d[row, epoch] = a + b·epoch`` by OLS and gives ``b`` a cluster-robust (CR1)
standard error with the row as the cluster and ``t`` on ``G − 1`` degrees of freedom (``G`` rows): rows
are the unit, epochs of a row may be correlated (they share a band when bands are not salted), rollouts
never count as independent. The fit is statsmodels' OLS with ``cov_type="cluster"`` and ``use_t=True``
(``cluster_robust_slope``). ``slope_flatness`` (``rftlab.analysis.trends``) reads the
result for an equivalence verdict within ``±epsilon``.

**Random-effects pooling.** ``random_effects_pool`` combines one estimate per replicate run with
DerSimonian–Laird ``τ²``, Cochran's ``Q``, ``I² = max(0, (Q − (k−1))/Q)`` and a Hartung–Knapp–Sidik–
Jonkman interval (``t`` on ``k − 1`` degrees of freedom), which keeps its level with few runs where the
normal interval does not. ``k of n`` is reported beside it: how many runs' own intervals exclude 0 on the
pooled estimate's side. With few runs the Hartung–Knapp scale ``q`` can fall below 1 and make the interval
narrower than the fixed-effect one; ``truncate=True`` gives the truncated variant (``q* = max(1, q)``,
Knapp & Hartung 2003; recommended as a sensitivity analysis for small ``k``). It is written out, not
statsmodels' ``combine_effects``: with ``method_re="dl"`` that one does not floor ``τ²`` at 0 (statsmodels
0.15), so where ``Q < k − 1`` its pooled estimate is not DerSimonian–Laird's. Where ``Q ≥ k − 1`` the two
agree (``tests/analysis/test_contrasts.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

Records = Sequence[Mapping[str, Any]]
ValueFn = Callable[[Mapping[str, Any]], float | None]


def _field(metric: str) -> ValueFn:
    def value(record: Mapping[str, Any]) -> float | None:
        v = record.get(metric)
        return None if v is None else float(v)

    return value


def _row_means(records: Records, value: ValueFn) -> tuple[list[Any], dict[Any, float], dict[Any, Any]]:
    """Rows in order of first appearance, each row's mean over candidates with a defined value, and the
    row's band seed (``None`` when the records carry none or disagree)."""
    order: list[Any] = []
    sums: dict[Any, list[float]] = {}
    bands: dict[Any, Any] = {}
    for r in records:
        row = r["row_id"]
        if row not in bands:
            order.append(row)
            bands[row] = r.get("band_seed")
        elif bands[row] != r.get("band_seed"):
            bands[row] = None
        v = value(r)
        if v is not None and math.isfinite(v):
            acc = sums.setdefault(row, [0.0, 0.0])
            acc[0] += v
            acc[1] += 1.0
    return order, {row: s / n for row, (s, n) in sums.items()}, bands


@dataclass(frozen=True)
class PairedDifferences:
    """Row-level paired differences ``d = x − y`` in long form: one entry per (row pair, epoch)."""

    row: np.ndarray  # index of the row pair (the cluster)
    epoch: np.ndarray
    d: np.ndarray
    n_pairs_per_epoch: tuple[int, ...]
    shared_bands: float  # fraction of pairs whose two rows saw the same band seed

    def epoch_means(self) -> np.ndarray:
        """Mean difference per epoch (epochs 0..T−1)."""
        return np.array([self.d[self.epoch == e].mean() for e in range(len(self.n_pairs_per_epoch))])

    def epoch_half_widths(self, level: float = 0.95) -> np.ndarray:
        """Half-width of each epoch mean's two-sided ``level`` interval over its row pairs (t on n − 1
        degrees of freedom; NaN with fewer than 2 pairs), for plotting the contrast epoch by epoch."""
        out = []
        for e in range(len(self.n_pairs_per_epoch)):
            d = self.d[self.epoch == e]
            if d.size < 2:
                out.append(float("nan"))
                continue
            out.append(float(sps.t.ppf(0.5 + level / 2.0, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)))
        return np.array(out)


def paired_differences(
    x_by_epoch: Sequence[Records], y_by_epoch: Sequence[Records], metric: str | ValueFn
) -> PairedDifferences:
    """Pair the k-th row of arm X with the k-th row of arm Y in every epoch and take ``x − y`` of their
    candidate means; a pair where either row has no value of ``metric`` is left out. Both arms need the
    same number of epochs and of rows per epoch."""
    value = _field(metric) if isinstance(metric, str) else metric
    if len(x_by_epoch) != len(y_by_epoch):
        raise ValueError(f"the arms have {len(x_by_epoch)} and {len(y_by_epoch)} epochs; pair equal runs")
    rows, epochs, diffs, counts = [], [], [], []
    shared = total = 0
    for e, (xr, yr) in enumerate(zip(x_by_epoch, y_by_epoch, strict=True)):
        x_order, x_mean, x_band = _row_means(xr, value)
        y_order, y_mean, y_band = _row_means(yr, value)
        if len(x_order) != len(y_order):
            raise ValueError(f"epoch {e}: {len(x_order)} rows against {len(y_order)}; pair equal designs")
        n = 0
        for k, (rx, ry) in enumerate(zip(x_order, y_order, strict=True)):
            total += 1
            shared += int(x_band[rx] is not None and x_band[rx] == y_band[ry])
            if rx in x_mean and ry in y_mean:
                rows.append(k)
                epochs.append(e)
                diffs.append(x_mean[rx] - y_mean[ry])
                n += 1
        counts.append(n)
    if not diffs:
        raise ValueError("no row pair has a value of the metric in both arms")
    return PairedDifferences(
        row=np.asarray(rows),
        epoch=np.asarray(epochs, dtype=float),
        d=np.asarray(diffs, dtype=float),
        n_pairs_per_epoch=tuple(counts),
        shared_bands=shared / total if total else 0.0,
    )


@dataclass(frozen=True)
class ContrastFit:
    """Slope per epoch of a paired difference, with a cluster-robust CI (rows as the unit).

    The attribute names match ``rftlab.analysis.trends.TrendFit`` where they mean the same thing, so
    ``slope_flatness(fit, epsilon)`` gives the equivalence verdict.
    """

    slope: float
    slope_se: float
    slope_ci: tuple[float, float]
    p_value: float
    df_resid: float  # G − 1: the t reference of a cluster-robust slope
    level: float
    intercept: float
    n_rows: int  # clusters
    n_epochs: int
    n_obs: int
    first: float  # mean difference in the first epoch
    last: float  # ... and in the last
    early: float  # mean of the epoch means over the first half of the epochs
    late: float
    shared_bands: float
    replication_unit: str = "row (band), cluster-robust over epochs"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["slope_ci"] = list(self.slope_ci)
        return out


def cluster_robust_slope(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    level: float = 0.95,
) -> tuple[float, float, float, float, int]:
    """OLS of ``y`` on ``[1, x]`` with the CR1 cluster-robust covariance (statsmodels' ``cov_type="cluster"``):
    ``V = c·(X'X)⁻¹ (Σ_g X_g'u_g u_g'X_g) (X'X)⁻¹``, ``c = G/(G−1)·(N−1)/(N−2)``.
    Returns ``(intercept, slope, slope_se, p_value, G)``; ``p`` is two-sided on ``t(G−1)``."""
    import statsmodels.api as sm

    xv = np.asarray(x, dtype=float)
    yv = np.asarray(y, dtype=float)
    g = np.asarray(groups)
    if xv.shape != yv.shape or xv.ndim != 1 or g.shape != xv.shape:
        raise ValueError("x, y and groups must be 1-d and of the same length")
    if not (np.all(np.isfinite(xv)) and np.all(np.isfinite(yv))):
        raise ValueError("x and y must be finite")
    labels, codes = np.unique(g, return_inverse=True)
    if labels.size < 2:
        raise ValueError("need at least 2 clusters (rows) for a cluster-robust standard error")
    if np.ptp(xv) == 0:
        raise ValueError("x is constant; no slope can be fitted")
    design = np.column_stack([np.ones(xv.size), xv])
    fit = sm.OLS(yv, design).fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True)
    slope, se = float(fit.params[1]), float(fit.bse[1])
    p = float(fit.pvalues[1]) if se > 0 else (0.0 if slope != 0 else 1.0)
    return float(fit.params[0]), slope, se, p, int(labels.size)


def contrast_slope(diffs: PairedDifferences, level: float = 0.95) -> ContrastFit:
    """The per-epoch slope of a paired difference with rows as clusters (see the module docstring)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be in (0, 1)")
    intercept, slope, se, p, groups = cluster_robust_slope(diffs.epoch, diffs.d, diffs.row, level)
    half = float(sps.t.ppf(0.5 + level / 2.0, groups - 1)) * se
    means = diffs.epoch_means()
    h = means.size // 2
    return ContrastFit(
        slope=slope,
        slope_se=se,
        slope_ci=(slope - half, slope + half),
        p_value=p,
        df_resid=float(groups - 1),
        level=level,
        intercept=intercept,
        n_rows=groups,
        n_epochs=int(means.size),
        n_obs=int(diffs.d.size),
        first=float(means[0]),
        last=float(means[-1]),
        early=float(means[:h].mean()) if h else float("nan"),
        late=float(means[h:].mean()),
        shared_bands=diffs.shared_bands,
    )


def arm_rows(x_by_epoch: Sequence[Records], metric: str | ValueFn) -> PairedDifferences:
    """One arm's row values in the same long form (``d = x``; ``shared_bands`` is 1 by definition), so
    ``contrast_slope(arm_rows(...))`` is the arm's own slope with rows as clusters."""
    value = _field(metric) if isinstance(metric, str) else metric
    rows, epochs, vals, counts = [], [], [], []
    for e, xr in enumerate(x_by_epoch):
        order, means, _ = _row_means(xr, value)
        n = 0
        for k, row in enumerate(order):
            if row in means:
                rows.append(k)
                epochs.append(e)
                vals.append(means[row])
                n += 1
        counts.append(n)
    if not vals:
        raise ValueError("no row has a value of the metric")
    return PairedDifferences(
        row=np.asarray(rows),
        epoch=np.asarray(epochs, dtype=float),
        d=np.asarray(vals, dtype=float),
        n_pairs_per_epoch=tuple(counts),
        shared_bands=1.0,
    )


def paired_contrast(
    x_by_epoch: Sequence[Records], y_by_epoch: Sequence[Records], metric: str | ValueFn, level: float = 0.95
) -> ContrastFit:
    """``contrast_slope(paired_differences(x, y, metric))``: the contrast X − Y of one metric."""
    return contrast_slope(paired_differences(x_by_epoch, y_by_epoch, metric), level)


@dataclass(frozen=True)
class RandomEffectsPool:
    """One estimate per replicate run pooled with DerSimonian–Laird ``τ²`` and a Hartung–Knapp CI.

    ``k_excluding_zero`` of ``n_runs`` runs have their own ``level`` interval on the pooled estimate's
    side of 0; ``n_same_sign`` have its sign. ``fixed_estimate`` (inverse-variance, ``τ² = 0``) is kept
    for comparison only.
    """

    n_runs: int
    estimate: float
    se: float
    ci: tuple[float, float]
    p_value: float
    df: int
    level: float
    tau2: float
    q: float
    i2: float
    fixed_estimate: float
    fixed_se: float
    k_excluding_zero: int
    n_same_sign: int
    hk_q: float = 1.0  # the Hartung-Knapp scale q (its variance is q / sum of the random-effects weights)
    truncated: bool = False  # whether the interval used q* = max(1, q)
    method: str = "DerSimonian-Laird tau^2, Hartung-Knapp-Sidik-Jonkman t interval"
    replication_unit: str = "run"

    def agreement(self) -> str:
        """``"k of n runs"`` with a CI excluding 0 on the pooled side."""
        return f"{self.k_excluding_zero} of {self.n_runs} runs"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ci"] = list(self.ci)
        return out


def random_effects_pool(
    estimates: Sequence[float],
    ses: Sequence[float],
    level: float = 0.95,
    dfs: Sequence[float] | None = None,
    truncate: bool = False,
) -> RandomEffectsPool:
    """Pool per-run estimates (``ses`` their standard errors; ``dfs`` the degrees of freedom of each run's
    own interval, normal when omitted) by random effects; needs at least 2 runs. ``truncate`` floors the
    Hartung–Knapp scale at 1 (``q* = max(1, q)``), never narrower than the DerSimonian–Laird interval."""
    b = np.asarray(estimates, dtype=float)
    s = np.asarray(ses, dtype=float)
    k = b.size
    if k < 2 or s.shape != b.shape:
        raise ValueError("random-effects pooling needs one standard error per estimate and at least 2 runs")
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ValueError("estimates must be finite and standard errors positive and finite")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be in (0, 1)")
    w = 1.0 / s**2
    fixed = float(np.sum(w * b) / np.sum(w))
    q = float(np.sum(w * (b - fixed) ** 2))
    c = float(np.sum(w) - np.sum(w**2) / np.sum(w))
    tau2 = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
    i2 = max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0
    ws = 1.0 / (s**2 + tau2)
    mu = float(np.sum(ws * b) / np.sum(ws))
    hk_q = float(np.sum(ws * (b - mu) ** 2) / (k - 1))
    se = math.sqrt((max(1.0, hk_q) if truncate else hk_q) / float(np.sum(ws)))
    tq = float(sps.t.ppf(0.5 + level / 2.0, k - 1))
    p = float(2 * sps.t.sf(abs(mu) / se, k - 1)) if se > 0 else (0.0 if mu != 0 else 1.0)
    if dfs is None:
        crit = np.full(k, sps.norm.ppf(0.5 + level / 2.0))
    else:
        crit = sps.t.ppf(0.5 + level / 2.0, np.asarray(dfs, dtype=float))
    side = np.sign(mu)
    excl = int(np.sum((side * b - crit * s) > 0)) if side != 0 else 0
    return RandomEffectsPool(
        n_runs=int(k),
        estimate=mu,
        se=se,
        ci=(mu - tq * se, mu + tq * se),
        p_value=p,
        df=int(k - 1),
        level=level,
        tau2=float(tau2),
        q=q,
        i2=float(i2),
        fixed_estimate=fixed,
        fixed_se=float(1.0 / math.sqrt(np.sum(w))),
        k_excluding_zero=excl,
        n_same_sign=int(np.sum(np.sign(b) == side)) if side != 0 else 0,
        hk_q=hk_q,
        truncated=truncate,
        method="DerSimonian-Laird tau^2, Hartung-Knapp-Sidik-Jonkman t interval"
        + (", truncated q* = max(1, q)" if truncate else ""),
    )
