"""Trend statistics against closed-form OLS, brute-force Theil–Sen and hand-written Newey–West."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rftlab.analysis.trends import early_late_halves, fit_trend, pooled_slope, slope_flatness


def series(n: int, slope: float, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.arange(n, dtype=float)
    return x, 0.3 + slope * x + noise * rng.standard_normal(n)


def test_early_late_halves_split_at_n_over_2():
    halves = early_late_halves([1, 2, 3, 4, 5])  # h = 2: early [1, 2], late [3, 4, 5]
    assert (halves.early, halves.late, halves.delta) == (1.5, 4.0, 2.5)
    assert early_late_halves([1, 3]).delta == 2.0


def test_ols_slope_ci_p_r2_match_closed_form():
    x, y = series(12, 0.02, 0.05, seed=1)
    fit = fit_trend(x, y)
    n = x.size
    sxx = np.sum((x - x.mean()) ** 2)
    b = np.sum((x - x.mean()) * (y - y.mean())) / sxx
    a = y.mean() - b * x.mean()
    resid = y - a - b * x
    se = math.sqrt(np.sum(resid**2) / (n - 2) / sxx)
    t_crit = stats.t.ppf(0.975, n - 2)
    assert fit.slope == pytest.approx(b, rel=1e-10)
    assert fit.slope_ci[0] == pytest.approx(b - t_crit * se, rel=1e-9)
    assert fit.slope_ci[1] == pytest.approx(b + t_crit * se, rel=1e-9)
    assert fit.p_value == pytest.approx(2 * stats.t.sf(abs(b / se), n - 2), rel=1e-8)
    assert fit.r2 == pytest.approx(1 - np.sum(resid**2) / np.sum((y - y.mean()) ** 2), rel=1e-10)
    assert fit.n == n and fit.replication_unit == "epoch" and fit.se_type == "OLS"


def test_theil_sen_is_median_of_pairwise_slopes():
    x, y = series(15, -0.01, 0.05, seed=2)
    y[3] += 2.0  # an outlier Theil–Sen should shrug off
    fit = fit_trend(x, y)
    pairwise = [(y[j] - y[i]) / (x[j] - x[i]) for i in range(len(x)) for j in range(i + 1, len(x))]
    assert fit.theil_sen_slope == pytest.approx(float(np.median(pairwise)))
    assert fit.theil_sen_ci[0] <= fit.theil_sen_slope <= fit.theil_sen_ci[1]


def test_hac_standard_error_matches_hand_written_newey_west():
    x, y = series(30, 0.01, 0.05, seed=3)
    maxlags = 2
    fit = fit_trend(x, y, hac_maxlags=maxlags)
    X = np.column_stack([np.ones_like(x), x])
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    u = y - X @ beta
    scores = X * u[:, None]
    meat = scores.T @ scores
    for lag in range(1, maxlags + 1):
        weight = 1 - lag / (maxlags + 1)
        gamma = scores[lag:].T @ scores[:-lag]
        meat += weight * (gamma + gamma.T)
    bread = np.linalg.inv(X.T @ X)
    cov = bread @ meat @ bread
    assert fit.slope_se == pytest.approx(math.sqrt(cov[1, 1]), rel=1e-8)
    t_crit = stats.t.ppf(0.975, x.size - 2)  # use_t=True
    assert fit.slope_ci[1] - fit.slope == pytest.approx(t_crit * math.sqrt(cov[1, 1]), rel=1e-8)
    assert fit.se_type == "HAC(maxlags=2)"


def test_flatness_labels():
    x, y = series(40, 0.0, 0.001, seed=4)
    flat = slope_flatness(fit_trend(x, y), epsilon=0.001)
    assert flat.flat and flat.label.startswith("flat") and flat.tost_p_value < 0.025
    x, y = series(6, 0.0, 0.2, seed=5)
    noisy = slope_flatness(fit_trend(x, y), epsilon=0.001)
    assert not noisy.flat and "absence of evidence" in noisy.label
    x, y = series(10, 0.05, 0.01, seed=6)
    assert slope_flatness(fit_trend(x, y), epsilon=0.001).label.startswith("rising")


def test_pooled_slope_is_inverse_variance_weighted():
    slopes, ses = np.array([0.02, 0.03, -0.005]), np.array([0.01, 0.02, 0.01])
    w = 1 / ses**2
    pooled = pooled_slope(slopes, ses)
    assert pooled.slope == pytest.approx(np.sum(w * slopes) / np.sum(w))
    assert pooled.se == pytest.approx(1 / math.sqrt(np.sum(w)))
    assert pooled.ci[0] == pytest.approx(pooled.slope - 1.959963984540054 * pooled.se)
    assert (pooled.n_positive, pooled.n_negative) == (2, 1)
    assert pooled.sign_agreement == pytest.approx(2 / 3)
    fits = [fit_trend(*series(10, 0.02, 0.02, seed=s)) for s in range(3)]
    from_fits = pooled_slope(fits)
    assert from_fits.n_runs == 3 and from_fits.sign_agreement == 1.0


def test_trend_input_errors():
    with pytest.raises(ValueError, match="at least 3"):
        fit_trend([0, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="constant"):
        fit_trend([1, 1, 1], [0.1, 0.2, 0.3])


def _trend(slope, lo, hi, df=8.0):
    from rftlab.analysis.trends import TrendFit

    se = (hi - lo) / 2 / stats.t.ppf(0.975, df)
    return TrendFit(
        n=int(df) + 2,
        slope=slope,
        slope_se=se,
        slope_ci=(lo, hi),
        p_value=0.0,
        r2=0.9,
        intercept=0.0,
        df_resid=df,
        early=0.0,
        late=0.0,
        delta=0.0,
        theil_sen_slope=slope,
        theil_sen_ci=(lo, hi),
        level=0.95,
        se_type="OLS",
    )


@pytest.mark.parametrize(
    ("slope", "ci", "verdict", "equivalent", "differs"),
    [
        (0.025, (0.019, 0.031), "flat_but_rising", True, True),  # issue 8 §7: used to say just "flat"
        (-0.025, (-0.031, -0.019), "flat_but_falling", True, True),
        (0.001, (-0.01, 0.012), "flat", True, False),
        (0.08, (0.06, 0.10), "rising", False, True),
        (0.04, (0.01, 0.07), "rising", False, True),
        (0.0, (-0.2, 0.2), "inconclusive", False, False),
    ],
)
def test_flatness_verdict_states_equivalence_and_direction(slope, ci, verdict, equivalent, differs):
    result = slope_flatness(_trend(slope, *ci), epsilon=0.05)
    assert result.verdict == verdict
    assert result.flat_within_epsilon is equivalent and result.differs_from_zero is differs
    if verdict == "flat_but_rising":
        assert "flat within ±0.05, but rising" in result.label
    if verdict == "inconclusive":
        assert "absence of evidence" in result.label
    # TOST p < 0.025 exactly when the 95% CI lies inside the band
    assert (result.tost_p_value < 0.025) == equivalent


def test_flatness_refuses_non_finite_epsilon():
    x, y = series(10, 0.01, 0.01, seed=7)
    fit = fit_trend(x, y)
    for bad in (float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(ValueError, match="epsilon"):
            slope_flatness(fit, bad)


def test_hac_lags_must_be_fewer_than_the_points():
    x, y = series(8, 0.01, 0.01, seed=8)
    for bad in (-1, 8, 10_000):
        with pytest.raises(ValueError, match="hac_maxlags"):
            fit_trend(x, y, hac_maxlags=bad)
    assert fit_trend(x, y, hac_maxlags=7).se_type == "HAC(maxlags=7)"
