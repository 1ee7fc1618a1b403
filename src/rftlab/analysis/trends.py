"""Trends over training (``docs/statistics.md`` §2): one point per epoch/step is the replication unit.

* ``early_late_halves`` — split at ``h = T // 2``: ``early = mean(y[:h])``, ``late = mean(y[h:])``.
* ``fit_trend`` — OLS ``y = a + b·x`` (statsmodels) with a 95% CI on b, p-value and R², optionally
  HAC (Newey–West) standard errors with ``use_t=True``; plus the Theil–Sen slope as a robustness check.
* ``slope_flatness`` — two facts about the slope, reported together: equivalence within a
  pre-declared band ``[-eps, +eps]`` (TOST) and whether it differs from zero; the verdict names both
  ("flat within ±eps, but rising") so neither hides the other.
* ``pooled_slope`` — fixed-effect (inverse-variance) pooled slope across runs and sign agreement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class EarlyLate:
    """Early/late halves of a series split at ``h = T // 2``; ``delta = late - early``."""

    n: int
    early: float
    late: float
    delta: float


def early_late_halves(y: Sequence[float] | np.ndarray) -> EarlyLate:
    """``early = mean(y[:T//2])``, ``late = mean(y[T//2:])`` (the same split as ``memory_gain``)."""
    values = np.asarray(y, dtype=float)
    if values.size < 2:
        raise ValueError(f"need at least 2 points for early/late halves, got {values.size}")
    h = values.size // 2
    early, late = float(np.mean(values[:h])), float(np.mean(values[h:]))
    return EarlyLate(n=int(values.size), early=early, late=late, delta=late - early)


@dataclass(frozen=True)
class TrendFit:
    """Linear trend of one per-epoch series; ``slope_ci`` is two-sided at ``level``.

    The replication unit is the epoch/step point (never rollouts). ``se_type`` is ``"OLS"`` or
    ``"HAC(maxlags=k)"`` (Newey–West, t reference distribution).
    """

    n: int
    slope: float
    slope_se: float
    slope_ci: tuple[float, float]
    p_value: float
    r2: float
    intercept: float
    df_resid: float
    early: float
    late: float
    delta: float
    theil_sen_slope: float
    theil_sen_ci: tuple[float, float]
    level: float
    se_type: str
    replication_unit: str = "epoch"

    def to_dict(self) -> dict:
        out = asdict(self)
        out["slope_ci"] = list(self.slope_ci)
        out["theil_sen_ci"] = list(self.theil_sen_ci)
        return out


def fit_trend(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    level: float = 0.95,
    hac_maxlags: int | None = None,
) -> TrendFit:
    """OLS slope of ``y`` on ``x`` with CI/p/R², early/late halves and the Theil–Sen slope.

    ``hac_maxlags`` switches to Newey–West (HAC) standard errors for autocorrelated series.
    """
    import statsmodels.api as sm

    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError("x and y must be 1-d and of the same length")
    if xs.size < 3:
        raise ValueError(f"need at least 3 points for a slope with a CI, got {xs.size}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be in (0, 1)")
    if hac_maxlags is not None and (
        isinstance(hac_maxlags, bool)
        or not isinstance(hac_maxlags, int | np.integer)
        or not 0 <= hac_maxlags < xs.size
    ):
        raise ValueError(
            f"hac_maxlags={hac_maxlags} must be an integer from 0 to {xs.size - 1} (fewer lags than the "
            f"{xs.size} points; a few lags, e.g. floor(4(n/100)^(2/9)), is the usual choice)"
        )
    if np.ptp(xs) == 0:
        raise ValueError("x is constant; no slope can be fitted")
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise ValueError("x and y must be finite")
    design = sm.add_constant(xs)
    if hac_maxlags is None:
        result, se_type = sm.OLS(ys, design).fit(), "OLS"
    else:
        result = sm.OLS(ys, design).fit(cov_type="HAC", cov_kwds={"maxlags": hac_maxlags}, use_t=True)
        se_type = f"HAC(maxlags={hac_maxlags})"
    ci = result.conf_int(alpha=1.0 - level)[1]
    # scipy's theilslopes takes the confidence *level* as its `alpha` argument
    ts_slope, _, ts_low, ts_high = np.asarray(sps.theilslopes(ys, xs, alpha=level), dtype=float)
    halves = early_late_halves(ys)
    return TrendFit(
        n=int(xs.size),
        slope=float(result.params[1]),
        slope_se=float(result.bse[1]),
        slope_ci=(float(ci[0]), float(ci[1])),
        p_value=float(result.pvalues[1]),
        r2=float(result.rsquared) if np.ptp(ys) > 0 else 0.0,
        intercept=float(result.params[0]),
        df_resid=float(result.df_resid),
        early=halves.early,
        late=halves.late,
        delta=halves.delta,
        theil_sen_slope=float(ts_slope),
        theil_sen_ci=(float(ts_low), float(ts_high)),
        level=level,
        se_type=se_type,
    )


@dataclass(frozen=True)
class Flatness:
    """Two separate facts about a slope, and a verdict that states both.

    * ``flat_within_epsilon`` — equivalence (TOST): both one-sided tests against ``-epsilon`` and
      ``+epsilon`` reject at ``(1 - level)/2``, i.e. the two-sided ``level`` CI lies inside the band;
      ``tost_p_value`` is the larger of the two one-sided p-values.
    * ``differs_from_zero`` — the two-sided ``level`` CI excludes 0 (``p_value`` < 1 - level);
      ``direction`` is ``rising``/``falling`` then, else ``none``.

    ``verdict`` is one of ``flat`` (within ±ε, not distinguishable from 0), ``flat_but_rising`` /
    ``flat_but_falling`` (within ±ε, yet clearly not zero), ``rising`` / ``falling`` (not shown to
    be within ±ε), ``inconclusive`` (CI includes 0 and reaches outside the band: absence of
    evidence, not evidence of flatness); ``label`` says it in words.
    """

    flat_within_epsilon: bool
    differs_from_zero: bool
    direction: str
    verdict: str
    label: str
    epsilon: float
    slope: float
    slope_ci: tuple[float, float]
    tost_p_value: float
    p_value: float
    level: float

    @property
    def flat(self) -> bool:
        """Equivalence within ±epsilon (whatever ``differs_from_zero`` says)."""
        return self.flat_within_epsilon

    def to_dict(self) -> dict:
        out = asdict(self)
        out["slope_ci"] = list(self.slope_ci)
        return out


class SlopeFit(Protocol):
    """What ``slope_flatness`` reads of a fitted slope (``TrendFit``, ``contrasts.ContrastFit``)."""

    @property
    def slope(self) -> float: ...
    @property
    def slope_se(self) -> float: ...
    @property
    def slope_ci(self) -> tuple[float, float]: ...
    @property
    def df_resid(self) -> float: ...
    @property
    def p_value(self) -> float: ...
    @property
    def level(self) -> float: ...


def slope_flatness(trend: SlopeFit, epsilon: float) -> Flatness:
    """Is the trend flat within ``±epsilon`` (declared before seeing data), and is it non-zero?"""
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon={epsilon} must be a finite number > 0")
    lo, hi = trend.slope_ci
    t_dist = sps.t(trend.df_resid)
    p_above_lower = t_dist.sf((trend.slope + epsilon) / trend.slope_se) if trend.slope_se > 0 else 0.0
    p_below_upper = t_dist.cdf((trend.slope - epsilon) / trend.slope_se) if trend.slope_se > 0 else 0.0
    tost_p = float(max(p_above_lower, p_below_upper))
    equivalent = -epsilon < lo and hi < epsilon
    direction = "rising" if lo > 0 else ("falling" if hi < 0 else "none")
    differs = direction != "none"
    band = f"[-{epsilon:g}, +{epsilon:g}]"
    ci = f"{trend.level:.0%} CI [{lo:+.3g}, {hi:+.3g}]"
    if equivalent and not differs:
        verdict, label = "flat", f"flat within ±{epsilon:g}: {ci} lies inside {band} and includes 0"
    elif equivalent:
        verdict = f"flat_but_{direction}"
        label = f"flat within ±{epsilon:g}, but {direction}: {ci} lies inside {band} and excludes 0"
    elif differs:
        verdict, label = direction, f"{direction}: {ci} excludes 0 and is not inside {band}"
    else:
        verdict = "inconclusive"
        label = (
            f"inconclusive: {ci} includes 0 but reaches outside {band} — absence of evidence, not "
            "evidence of flatness"
        )
    return Flatness(
        flat_within_epsilon=equivalent,
        differs_from_zero=differs,
        direction=direction,
        verdict=verdict,
        label=label,
        epsilon=float(epsilon),
        slope=trend.slope,
        slope_ci=trend.slope_ci,
        tost_p_value=tost_p,
        p_value=trend.p_value,
        level=trend.level,
    )


@dataclass(frozen=True)
class PooledSlope:
    """Fixed-effect (inverse-variance) pooled slope across runs; the replication unit is the run.

    ``sign_agreement`` is the fraction of runs whose slope has the pooled slope's sign.
    """

    n_runs: int
    slope: float
    se: float
    ci: tuple[float, float]
    level: float
    n_positive: int
    n_negative: int
    sign_agreement: float
    replication_unit: str = "run"


def pooled_slope(
    slopes: Sequence[float] | Sequence[TrendFit], ses: Sequence[float] | None = None, level: float = 0.95
) -> PooledSlope:
    """Pool per-run slopes with weights ``1/se²``: ``b = Σ w b_r / Σ w``, ``se = 1/sqrt(Σ w)``, normal CI."""
    if ses is None:
        fits = [f for f in slopes if isinstance(f, TrendFit)]
        if len(fits) != len(slopes):
            raise ValueError("without ses, every slope must be a TrendFit (its slope and standard error)")
        b = np.array([f.slope for f in fits], dtype=float)
        se = np.array([f.slope_se for f in fits], dtype=float)
    else:
        b = np.asarray(slopes, dtype=float)
        se = np.asarray(ses, dtype=float)
    if b.size == 0 or b.shape != se.shape:
        raise ValueError("need one standard error per slope and at least one run")
    if np.any(se <= 0) or not np.all(np.isfinite(se)):
        raise ValueError("standard errors must be positive and finite")
    w = 1.0 / se**2
    pooled = float(np.sum(w * b) / np.sum(w))
    pooled_se = float(1.0 / math.sqrt(np.sum(w)))
    z = float(sps.norm.ppf(0.5 + level / 2.0))
    sign = np.sign(pooled)
    agreement = float(np.mean(np.sign(b) == sign)) if sign != 0 else 0.0
    return PooledSlope(
        n_runs=int(b.size),
        slope=pooled,
        se=pooled_se,
        ci=(pooled - z * pooled_se, pooled + z * pooled_se),
        level=level,
        n_positive=int(np.sum(b > 0)),
        n_negative=int(np.sum(b < 0)),
        sign_agreement=agreement,
    )
