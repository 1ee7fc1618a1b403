"""Coverage (type-I error under the null) and power/planning by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rftlab.analysis.noninferiority import METHODS, batch_lower_bounds
from rftlab.analysis.power import (
    DiscordanceModel,
    coverage_table,
    hoeffding_clearing_difference,
    minimum_detectable_difference,
    null_error_rate,
    pass_rate,
    power_curve,
    required_n,
    simulate_paired_differences,
)

ALPHA, MARGIN, N = 0.05, 0.03, 1319


def mc_tolerance(reps: int, alpha: float = ALPHA) -> float:
    """Allow 3 Monte Carlo standard errors above alpha (one-sided, ~0.1% false alarm per check)."""
    return 3 * math.sqrt(alpha * (1 - alpha) / reps)


def test_discordance_model_frequencies():
    model = DiscordanceModel.from_difference(-0.03, 0.2)
    assert (model.p_plus, model.p_minus) == pytest.approx((0.085, 0.115))
    d = simulate_paired_differences(2000, model, 50, np.random.default_rng(0))
    assert d.shape == (50, 2000)
    assert np.mean(d == 1) == pytest.approx(0.085, abs=0.005) and np.mean(d == -1) == pytest.approx(
        0.115, abs=0.005
    )
    with pytest.raises(ValueError):
        DiscordanceModel.from_difference(0.3, 0.2)


@pytest.mark.parametrize("discordance", [0.06, 0.3])
def test_every_method_controls_type_one_error_at_n_1319(discordance):
    reps = 2000
    table = coverage_table(N, MARGIN, ALPHA, discordance, np.random.default_rng(1), reps=reps)
    assert set(table["method"]) == set(METHODS)
    for row in table.itertuples():
        assert row.error_rate <= ALPHA + mc_tolerance(reps), row


@pytest.mark.slow
def test_ten_thousand_rep_coverage_at_n_1319():
    reps = 10_000
    rng = np.random.default_rng(2)
    for method in METHODS:
        result = null_error_rate(method, N, MARGIN, 0.2, ALPHA, reps, rng)
        assert result.rate <= ALPHA + mc_tolerance(reps), result


@pytest.mark.parametrize(
    "method", ["hoeffding", "empirical_bernstein", "plugin_empirical_bernstein", "betting"]
)
def test_finite_sample_bounds_cover_continuous_scores(method):
    # per-item scores in [0, 1] (not 0/1); the true mean difference is 0
    rng = np.random.default_rng(3)
    reps, n = 1000, 200
    d = rng.beta(2, 5, (reps, n)) - rng.beta(2, 5, (reps, n))
    misses = np.mean(batch_lower_bounds(method, d, ALPHA) > 0.0)
    assert misses <= ALPHA + mc_tolerance(reps)


def test_hoeffding_pass_rate_matches_binomial_calculation():
    # Hoeffding passes iff d̄ > -margin + half-width; d̄ is exactly a scaled difference of multinomial counts
    model = DiscordanceModel.from_difference(0.05, 0.2)
    result = pass_rate("hoeffding", 400, model, MARGIN, ALPHA, 4000, np.random.default_rng(4))
    threshold = hoeffding_clearing_difference(400, MARGIN, ALPHA)
    mean, sd = 0.05, math.sqrt((0.2 - 0.05**2) / 400)
    expected = stats.norm.sf((threshold - mean) / sd)  # CLT approximation of the exact pass probability
    assert result.rate == pytest.approx(expected, abs=4 * result.mc_se + 0.02)


def test_hoeffding_minimum_detectable_difference_matches_normal_approximation():
    # pass iff d̄ > 0.0374; d̄ ~ N(theta, (r - theta²)/n): theta* = 0.0374 + z_0.8 sd
    r = 0.2
    mdd = minimum_detectable_difference("hoeffding", N, MARGIN, ALPHA, r, np.random.default_rng(5), reps=2000)
    clearing = hoeffding_clearing_difference(N, MARGIN, ALPHA)
    assert clearing == pytest.approx(0.0374, abs=1e-4)
    expected = clearing + stats.norm.ppf(0.8) * math.sqrt((r - 0.048**2) / N)
    assert mdd == pytest.approx(expected, abs=0.0025)


def test_required_n_matches_hoeffding_closed_form():
    # theta = 0.0, r = 0.2: need sqrt(2 ln(1/alpha)/n) + z_0.8 sqrt(r/n) < margin
    r = 0.2
    n = required_n("hoeffding", 0.0, MARGIN, ALPHA, r, np.random.default_rng(6), reps=2000)
    expected = ((math.sqrt(2 * math.log(1 / ALPHA)) + stats.norm.ppf(0.8) * math.sqrt(r)) / MARGIN) ** 2
    assert n == pytest.approx(expected, rel=0.05)


def test_power_curve_is_tidy_and_increasing():
    curve = power_curve(
        300,
        MARGIN,
        ALPHA,
        [0.2],
        [-0.03, 0.05, 0.15],
        np.random.default_rng(7),
        reps=300,
        methods=["hoeffding", "paired_t"],
    )
    assert list(curve.columns) == ["method", "discordance", "difference", "pass_rate"]
    for _, group in curve.groupby("method"):
        rates = group.sort_values("difference")["pass_rate"].to_numpy()
        assert np.all(np.diff(rates) >= 0)


@pytest.mark.parametrize("discordance", [0.04, 0.8])
@pytest.mark.parametrize(
    "method", ["hoeffding", "empirical_bernstein", "plugin_empirical_bernstein", "betting"]
)
def test_finite_sample_bounds_are_valid_at_small_n(method, discordance):
    reps = 2000
    result = null_error_rate(method, 30, MARGIN, discordance, ALPHA, reps, np.random.default_rng(8))
    assert result.rate <= ALPHA + mc_tolerance(reps)


def test_paired_t_is_not_valid_at_small_n_with_few_discordant_pairs():
    # why the asymptotic tests are labelled so and never gate: n = 30, r = 0.04
    result = null_error_rate("paired_t", 30, MARGIN, 0.04, ALPHA, 2000, np.random.default_rng(9))
    assert result.rate > 2 * ALPHA
