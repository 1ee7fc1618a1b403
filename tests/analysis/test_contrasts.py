"""Paired arm contrasts and random-effects pooling (docs/statistics.md §7), against statsmodels and on
constructed data whose contrast is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.meta_analysis import combine_effects

from rftlab.analysis.contrasts import (
    cluster_robust_slope,
    contrast_slope,
    paired_contrast,
    paired_differences,
    random_effects_pool,
)
from rftlab.analysis.trends import slope_flatness


def _arm(values: np.ndarray, bands: np.ndarray | None = None, prefix: str = "r") -> list[list[dict]]:
    """Per-epoch rollout records from an array ``values[epoch, row, candidate]``."""
    epochs, rows, cands = values.shape
    out = []
    for e in range(epochs):
        recs = []
        for r in range(rows):
            band = int(bands[e, r]) if bands is not None else e * 1000 + r
            for c in range(cands):
                recs.append(
                    {"row_id": f"{prefix}_{r}", "band_seed": band, "candidate": c, "m": values[e, r, c]}
                )
        out.append(recs)
    return out


def test_cluster_robust_slope_equals_statsmodels_cluster_ols():
    rng = np.random.default_rng(1)
    rows, epochs = 30, 12
    row_effect = rng.normal(0, 0.05, rows)
    x = np.tile(np.arange(epochs, dtype=float), rows)
    g = np.repeat(np.arange(rows), epochs)
    y = 0.1 + 0.003 * x + row_effect[g] + rng.normal(0, 0.02, x.size) * (1 + (g % 3))
    intercept, slope, se, p, groups = cluster_robust_slope(x, y, g)
    ref = sm.OLS(y, sm.add_constant(x)).fit(cov_type="cluster", cov_kwds={"groups": g}, use_t=True)
    assert groups == rows
    assert intercept == pytest.approx(ref.params[0], rel=1e-10)
    assert slope == pytest.approx(ref.params[1], rel=1e-10)
    assert se == pytest.approx(ref.bse[1], rel=1e-10)
    assert p == pytest.approx(ref.pvalues[1], rel=1e-8)
    lo, hi = ref.conf_int(alpha=0.05)[1]
    fit = contrast_slope(
        paired_differences(
            _arm(y.reshape(rows, epochs).T[:, :, None]), _arm(np.zeros((epochs, rows, 1))), "m"
        )
    )
    assert fit.slope_ci == pytest.approx((lo, hi), rel=1e-9)
    assert fit.df_resid == rows - 1


def _cr1_by_hand(x, y, g):
    """The CR1 sandwich written out (the project's formula before it called statsmodels): the
    regression check that statsmodels' estimator is still the one the docs describe."""
    codes = np.unique(g, return_inverse=True)[1]
    n_groups, n = codes.max() + 1, x.size
    design = np.column_stack([np.ones(n), x])
    bread = np.linalg.inv(design.T @ design)
    coef = bread @ design.T @ y
    scores = np.zeros((n_groups, 2))
    np.add.at(scores, codes, design * (y - design @ coef)[:, None])
    cov = n_groups / (n_groups - 1) * (n - 1) / (n - 2) * bread @ (scores.T @ scores) @ bread
    se = math.sqrt(cov[1, 1])
    from scipy import stats as sps

    return coef[0], coef[1], se, 2 * sps.t.sf(abs(coef[1]) / se, n_groups - 1)


def test_cluster_robust_slope_equals_the_cr1_sandwich_written_out():
    rng = np.random.default_rng(11)
    x = np.tile(np.arange(6, dtype=float), 7)
    g = np.repeat([f"row{i}" for i in range(7)], 6)  # labels, not codes
    y = 0.02 * x + rng.normal(0, 0.1, x.size) + np.repeat(rng.normal(0, 0.2, 7), 6)
    got = cluster_robust_slope(x, y, g)
    assert got[:4] == pytest.approx(_cr1_by_hand(x, y, g), rel=1e-10)
    assert got[4] == 7


def test_known_contrast_is_recovered_and_band_luck_cancels_when_bands_are_shared():
    rng = np.random.default_rng(7)
    epochs, rows, cands = 12, 48, 12
    band_luck = rng.normal(0, 0.1, (epochs, rows, 1))  # large, shared by both arms on a shared band
    e = np.arange(epochs)[:, None, None]
    y = 0.40 + 0.001 * e + band_luck + rng.normal(0, 0.01, (epochs, rows, cands))
    x = 0.40 + 0.004 * e + band_luck + rng.normal(0, 0.01, (epochs, rows, cands))
    bands = rng.integers(0, 2**40, (epochs, rows))
    paired = paired_contrast(_arm(x, bands), _arm(y, bands), "m")
    assert paired.shared_bands == 1.0
    assert paired.slope_ci[0] < 0.003 < paired.slope_ci[1]
    assert paired.slope_se < 0.0002  # band luck cancels
    # other bands for the control: the same contrast, no cancellation
    other = (
        0.40 + 0.001 * e + rng.normal(0, 0.1, (epochs, rows, 1)) + rng.normal(0, 0.01, (epochs, rows, cands))
    )
    unpaired = paired_contrast(_arm(x, bands), _arm(other, bands + 1), "m")
    assert unpaired.shared_bands == 0.0
    assert unpaired.slope_se > 5 * paired.slope_se
    assert unpaired.slope_ci[0] < 0.003 < unpaired.slope_ci[1]


def test_exact_linear_contrast_has_zero_standard_error_and_the_right_halves():
    epochs, rows = 6, 4
    e = np.arange(epochs)[:, None, None] * np.ones((1, rows, 2))
    fit = paired_contrast(_arm(0.5 + 0.01 * e), _arm(0.5 + 0.0 * e), "m")
    assert fit.slope == pytest.approx(0.01)
    assert fit.slope_se == pytest.approx(0.0, abs=1e-12)
    assert (fit.first, fit.last) == pytest.approx((0.0, 0.05))
    assert (fit.early, fit.late) == pytest.approx((0.01, 0.04))


def test_coverage_of_the_row_clustered_interval_on_constructed_data():
    """Rows correlated across epochs (unsalted bands): the clustered 95% CI covers the true slope about
    95% of the time; an interval that ignored the clustering would not."""
    rng = np.random.default_rng(11)
    rows, epochs, reps, true = 24, 12, 400, 0.002
    x = np.tile(np.arange(epochs, dtype=float), rows)
    g = np.repeat(np.arange(rows), epochs)
    hit = naive_hit = 0
    for _ in range(reps):
        # each row has its own random slope deviation: the epochs of a row are not independent
        dev = rng.normal(0, 0.003, rows)
        y = true * x + dev[g] * x + rng.normal(0, 0.01, x.size)
        _, slope, se, _, _ = cluster_robust_slope(x, y, g)
        half = 2.069 * se  # t(23) 0.975
        hit += abs(slope - true) <= half
        naive = sm.OLS(y, sm.add_constant(x)).fit()
        naive_hit += abs(naive.params[1] - true) <= 1.96 * naive.bse[1]
    assert 0.92 <= hit / reps <= 0.98
    assert naive_hit / reps < 0.85  # about 0.72 here: too narrow


def test_equivalence_verdict_reads_a_contrast():
    epochs, rows = 12, 10
    rng = np.random.default_rng(3)
    e = np.arange(epochs)[:, None, None]
    x = 0.3 + 0.00005 * e + rng.normal(0, 0.001, (epochs, rows, 3))
    fit = paired_contrast(_arm(x), _arm(np.full((epochs, rows, 3), 0.3)), "m")
    assert slope_flatness(fit, 0.001).flat
    assert not slope_flatness(fit, 0.00001).flat


def test_pairs_missing_a_value_are_left_out_and_bad_designs_refused():
    x = _arm(np.ones((3, 4, 2)))
    y = _arm(np.zeros((3, 4, 2)))
    for rec in y[1]:
        if rec["row_id"] == "r_2":
            rec["m"] = None
    d = paired_differences(x, y, "m")
    assert d.n_pairs_per_epoch == (4, 3, 4)
    with pytest.raises(ValueError, match="epochs"):
        paired_differences(x, y[:2], "m")
    with pytest.raises(ValueError, match="rows"):
        paired_differences(x, _arm(np.zeros((3, 5, 2))), "m")
    with pytest.raises(ValueError, match="no row pair"):
        paired_differences(x, _arm(np.full((3, 4, 2), np.nan)), "m")


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.InvalidTestWarning")
def test_random_effects_pool_equals_statsmodels_dersimonian_laird_with_hartung_knapp():
    b = np.array([0.0022, 0.0010, 0.0035, 0.0019])
    se = np.array([0.0004, 0.0005, 0.0006, 0.0003])
    pool = random_effects_pool(b, se)
    ref = combine_effects(b, se**2, method_re="chi2", use_t=True)
    frame = ref.summary_frame()
    assert ref.tau2 > 0
    assert pool.tau2 == pytest.approx(ref.tau2, rel=1e-9)
    assert pool.q == pytest.approx(ref.q, rel=1e-9)
    assert pool.i2 == pytest.approx(ref.i2, rel=1e-9)
    assert pool.estimate == pytest.approx(frame.loc["random effect wls", "eff"], rel=1e-9)
    assert pool.se == pytest.approx(frame.loc["random effect wls", "sd_eff"], rel=1e-9)
    assert pool.ci == pytest.approx(
        (frame.loc["random effect wls", "ci_low"], frame.loc["random effect wls", "ci_upp"]), rel=1e-9
    )
    assert pool.fixed_estimate == pytest.approx(frame.loc["fixed effect", "eff"], rel=1e-9)
    assert pool.df == 3


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.InvalidTestWarning")
@pytest.mark.parametrize(
    "b, se, rows",
    [
        # Q < k - 1: tau^2 = 0, so the random-effects rows equal the fixed-effect ones (statsmodels' chi2
        # estimator does not floor tau^2 at 0, hence its fixed rows); q < 1 and truncation widens
        ([0.0020, 0.0021, 0.0019, 0.0020], [0.0004, 0.0005, 0.0006, 0.0003], "fixed effect"),
        ([0.0022, 0.0010, 0.0035, 0.0019], [0.0004, 0.0005, 0.0006, 0.0003], "random effect"),
    ],
)
def test_truncated_hartung_knapp_is_the_wider_of_the_hk_and_the_plain_random_effects_interval(b, se, rows):
    """Knapp & Hartung's q* = max(1, q): statsmodels gives both the HK ("wls") and the plain standard
    error of the pooled estimate; the truncated one is the larger of the two."""
    b, se = np.array(b), np.array(se)
    plain, truncated = random_effects_pool(b, se), random_effects_pool(b, se, truncate=True)
    ref = combine_effects(b, se**2, method_re="chi2", use_t=True)
    frame = ref.summary_frame()
    hk_se, re_se = frame.loc[f"{rows} wls", "sd_eff"], frame.loc[rows, "sd_eff"]
    assert plain.hk_q == pytest.approx(ref.scale_hksj_fe if rows == "fixed effect" else ref.scale_hksj_re)
    assert plain.se == pytest.approx(hk_se, rel=1e-9)
    assert truncated.se == pytest.approx(max(hk_se, re_se), rel=1e-9)
    assert truncated.estimate == plain.estimate and truncated.p_value >= plain.p_value
    assert (truncated.se > plain.se) == (plain.hk_q < 1)
    assert truncated.truncated and "max(1, q)" in truncated.method and not plain.truncated


def test_random_effects_pool_without_heterogeneity_and_its_agreement_count():
    # identical estimates: Q = 0, tau2 = 0, I2 = 0; every run excludes 0 on the positive side
    pool = random_effects_pool([0.002, 0.002, 0.002], [0.0005, 0.0005, 0.0005])
    assert (pool.tau2, pool.i2, pool.q) == (0.0, 0.0, 0.0)
    assert pool.agreement() == "3 of 3 runs"
    # one run whose own CI includes 0, one of the other sign
    pool = random_effects_pool([0.003, 0.0005, -0.0002], [0.0005, 0.0005, 0.0005])
    assert pool.k_excluding_zero == 1
    assert pool.n_same_sign == 2
    with pytest.raises(ValueError, match="at least 2"):
        random_effects_pool([0.1], [0.01])
    with pytest.raises(ValueError, match="positive"):
        random_effects_pool([0.1, 0.2], [0.01, 0.0])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-1, 1), st.floats(1e-3, 1)),
        min_size=2,
        max_size=8,
    )
)
def test_random_effects_pool_properties(runs):
    b = np.array([r[0] for r in runs])
    se = np.array([r[1] for r in runs])
    pool = random_effects_pool(b, se)
    assert pool.tau2 >= 0 and 0 <= pool.i2 < 1
    assert b.min() - 1e-12 <= pool.estimate <= b.max() + 1e-12
    assert pool.ci[0] <= pool.estimate <= pool.ci[1]
    assert math.isfinite(pool.p_value) and 0 <= pool.p_value <= 1


def test_epoch_half_widths_are_t_intervals_over_row_pairs():
    from scipy import stats

    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (3, 7, 2))
    d = paired_differences(_arm(x), _arm(np.zeros((3, 7, 2))), "m")
    rows0 = x[0].mean(axis=1)
    expected = stats.t.ppf(0.975, 6) * rows0.std(ddof=1) / np.sqrt(7)
    assert d.epoch_half_widths()[0] == pytest.approx(expected)
    assert d.epoch_means()[0] == pytest.approx(rows0.mean())
