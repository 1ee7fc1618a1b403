"""Coverage (type-I error under the null) and power/planning by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rftlab.analysis import power
from rftlab.analysis.noninferiority import METHODS, batch_lower_bounds
from rftlab.analysis.power import (
    DiscordanceModel,
    count_lower_bounds,
    coverage_table,
    exact_pass_rate,
    hoeffding_clearing_difference,
    mc_reps_for,
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
    mdd = minimum_detectable_difference("hoeffding", N, MARGIN, ALPHA, r).value
    clearing = hoeffding_clearing_difference(N, MARGIN, ALPHA)
    assert clearing == pytest.approx(0.0374, abs=1e-4)
    expected = clearing + stats.norm.ppf(0.8) * math.sqrt((r - 0.048**2) / N)
    assert mdd == pytest.approx(expected, abs=0.0025)


def test_required_n_matches_hoeffding_closed_form():
    # theta = 0.0, r = 0.2: need sqrt(2 ln(1/alpha)/n) + z_0.8 sqrt(r/n) < margin
    r = 0.2
    n = required_n("hoeffding", 0.0, MARGIN, ALPHA, r).value
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
    assert list(curve.columns) == ["method", "discordance", "difference", "pass_rate", "mc_se", "exact"]
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


def test_paired_t_is_not_valid_with_few_discordant_pairs_even_after_the_degeneracy_rule():
    # why the asymptotic tests are labelled so and never gate: n = 1319, r = 0.04 (~53 discordant pairs)
    model = DiscordanceModel.from_difference(-MARGIN, 0.04)
    exact = exact_pass_rate("paired_t", N, model, MARGIN, ALPHA)
    assert exact > ALPHA + 0.008  # 0.061, exactly (no Monte Carlo error)
    simulated = null_error_rate("paired_t", N, MARGIN, 0.04, ALPHA, 2000, np.random.default_rng(9))
    assert simulated.rate == pytest.approx(exact, abs=4 * simulated.mc_se)


# ---------------------------------------------------------------- exact power (issue 8 §6)


@pytest.mark.parametrize("method", ["hoeffding", "empirical_bernstein", "paired_t", "tango"])
def test_count_formulas_equal_the_batched_bounds_on_every_sample_of_size_24(method):
    n = 24
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = b + c <= n
    b, c = b[keep], c[keep]
    d = np.zeros((b.size, n))
    for row, (nb, nc) in enumerate(zip(b, c, strict=True)):
        d[row, :nb], d[row, nb : nb + nc] = 1.0, -1.0
    batched = batch_lower_bounds(method, d, ALPHA)
    counted = count_lower_bounds(method, b, c, n, ALPHA)
    assert np.array_equal(np.isnan(batched), np.isnan(counted))
    ok = ~np.isnan(batched)
    assert np.allclose(batched[ok], counted[ok], atol=1e-9)


@pytest.mark.parametrize("method", ["hoeffding", "empirical_bernstein", "paired_t", "tango"])
def test_exact_power_equals_a_brute_force_multinomial_sum(method):
    # independent computation: loop over every (#+1, #-1) with scipy's multinomial pmf and decide on a
    # representative sample with the batched decision used by simulations
    from rftlab.analysis.noninferiority import batch_noninferior

    n, model, margin = 60, DiscordanceModel.from_difference(0.05, 0.5), 0.1
    total = 0.0
    for nb in range(n + 1):
        for nc in range(n + 1 - nb):
            d = np.array([1.0] * nb + [-1.0] * nc + [0.0] * (n - nb - nc))
            if batch_noninferior(method, d[None, :], margin, ALPHA)[0]:
                total += stats.multinomial.pmf(
                    [nb, nc, n - nb - nc], n, [model.p_plus, model.p_minus, 1 - model.discordance]
                )
    assert exact_pass_rate(method, n, model, margin, ALPHA) == pytest.approx(total, abs=1e-10)


def test_exact_power_agrees_with_simulation():
    model = DiscordanceModel.from_difference(0.0, 0.2)
    for method in ("paired_t", "tango"):
        simulated = pass_rate(method, 800, model, MARGIN, ALPHA, 4000, np.random.default_rng(21))
        assert exact_pass_rate(method, 800, model, MARGIN, ALPHA) == pytest.approx(
            simulated.rate, abs=4 * simulated.mc_se
        )


def test_the_reported_paired_t_mdd_had_power_076_not_080():
    # issue 8 §6: at the old 1,000-replication MDD (+0.0109, r = 0.4) the exact power is about 0.76
    model = DiscordanceModel.from_difference(0.0109, 0.4)
    assert exact_pass_rate("paired_t", N, model, MARGIN, ALPHA) == pytest.approx(0.76, abs=0.005)
    found = minimum_detectable_difference("paired_t", N, MARGIN, ALPHA, 0.4)
    assert found.exact and found.mc_se == 0.0 and found.achieved_power >= 0.8
    just_below = DiscordanceModel.from_difference(found.value - 2e-5, 0.4)
    assert exact_pass_rate("paired_t", N, just_below, MARGIN, ALPHA) < 0.8


def test_paired_t_small_n_error_is_exactly_the_no_minus_one_probability_without_the_degeneracy_rule():
    # issue 8 §3: at n = 30, r = 0.04, theta = -0.03 the old paired t (no degeneracy rule) erred on
    # every sample without a -1 (and on a few with one -1 and several +1, 6e-6 of probability):
    # P ~ (1 - p_minus)^30 = 0.965^30
    from rftlab.analysis.power import trinomial_grid

    n, model = 30, DiscordanceModel.from_difference(-MARGIN, 0.04)
    b, c, prob = trinomial_grid(n, model)
    mean = (b - c) / n
    var = np.maximum((b + c - n * mean**2) / (n - 1), 0)
    old_lcb = mean - stats.t.ppf(0.95, n - 1) * np.sqrt(var / n)  # zero width on all-tie samples
    old_error = float(np.sum(prob * (old_lcb > -MARGIN)))
    assert old_error == pytest.approx(0.965**30, abs=1e-5)
    assert old_error >= 0.965**30 - 1e-12  # every sample without a -1 passed
    assert 0.965**30 == pytest.approx(0.343, abs=5e-4)
    all_ties = 0.96**30
    assert all_ties / old_error > 0.85  # most of it: samples with no discordant pair at all
    # with the rule (>= 10 discordant pairs) paired t claims nothing at this n and r
    assert exact_pass_rate("paired_t", n, model, MARGIN, ALPHA) < 1e-6
    from rftlab.analysis.power import degenerate_sample_anatomy

    anatomy = degenerate_sample_anatomy(n, MARGIN, ALPHA, 0.04)
    assert anatomy.unguarded_error == pytest.approx(old_error, abs=1e-12)
    assert anatomy.p_no_minus == pytest.approx(0.965**30) and anatomy.p_all_ties == pytest.approx(0.96**30)
    assert anatomy.guarded_error < 1e-6


def test_required_n_checks_its_lower_end_and_brackets_exactly():
    # a large effect passes at a small n: the old search returned 16 without checking below it
    found = required_n("hoeffding", 0.8, MARGIN, ALPHA, 0.8)
    model = DiscordanceModel.from_difference(0.8, 0.8)
    assert found.value < 16
    assert exact_pass_rate("hoeffding", found.value, model, MARGIN, ALPHA) >= 0.8
    assert exact_pass_rate("hoeffding", found.value - 1, model, MARGIN, ALPHA) < 0.8
    # n_min itself is returned when it already passes
    assert required_n("hoeffding", 0.8, MARGIN, ALPHA, 0.8, n_min=50).value == 50
    # a hint above or below the answer gives the same exact answer
    plain = required_n("paired_t", 0.02, MARGIN, ALPHA, 0.2)
    for hint in (100, 3000):
        assert required_n("paired_t", 0.02, MARGIN, ALPHA, 0.2, n_hint=hint).value == plain.value


def test_monte_carlo_searches_report_their_standard_error():
    assert mc_reps_for(0.01, 0.8) == 6400  # 2 * sqrt(0.16 / 6400) = 0.01
    found = minimum_detectable_difference(
        "plugin_empirical_bernstein", 200, MARGIN, ALPHA, 0.3, np.random.default_rng(22), reps=400, tol=2e-3
    )
    assert not found.exact and found.reps == 400 and found.achieved_power >= 0.8
    assert found.mc_se == pytest.approx(math.sqrt(found.achieved_power * (1 - found.achieved_power) / 400))
    n_found = required_n("betting", 0.05, MARGIN, ALPHA, 0.3, np.random.default_rng(23), reps=300, n_hint=200)
    assert not n_found.exact and n_found.value is not None and n_found.achieved_power >= 0.8


def test_exact_pass_rate_grid_equals_a_direct_multinomial_sum_of_the_hoeffding_rule():
    """Independent computation: enumerate every (#+1, #-1) of n = 40 paired items, weight by the
    multinomial pmf, and count those whose mean difference clears -margin + sqrt(2 ln(1/alpha)/n)."""
    from scipy.stats import multinomial

    n, margin, alpha = 40, 0.03, 0.05
    grid = power.exact_pass_rate_grid("hoeffding", n, margin, alpha, [0.0, 0.2, 0.5], [0.3, 0.6])
    assert list(zip(grid.difference, grid.discordance, strict=True)) == [(0.0, 0.3), (0.2, 0.3), (0.0, 0.6),
                                                                         (0.2, 0.6), (0.5, 0.6)]  # fmt: skip
    clear = -margin + math.sqrt(2 * math.log(1 / alpha) / n)
    for row in grid.itertuples():
        p_plus, p_minus = (row.discordance + row.difference) / 2, (row.discordance - row.difference) / 2
        direct = sum(
            multinomial.pmf([b, c, n - b - c], n, [p_plus, p_minus, 1 - p_plus - p_minus])
            for b in range(n + 1)
            for c in range(n + 1 - b)
            if (b - c) / n > clear
        )
        assert row.pass_rate == pytest.approx(direct, abs=1e-9)
    with pytest.raises(ValueError, match="order-dependent"):
        power.exact_pass_rate_grid("betting", n, margin, alpha, [0.0], [0.2])


def test_hoeffding_at_the_gs1_size_cannot_pass_two_equal_arms():
    # docs/statistics.md §3.4: at n = 1319 the rule needs an observed +0.037; equal arms reach it rarely
    grid = power.exact_pass_rate_grid("hoeffding", 1319, 0.03, 0.05, [0.0], [0.1, 0.2, 0.4])
    assert (grid.pass_rate < 0.05).all()
