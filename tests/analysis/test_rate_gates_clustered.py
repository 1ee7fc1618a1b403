"""Clustered rate gates (agent-case as the unit) against independent computations: statsmodels'
cluster-robust variance, scipy's binomial, closed forms and a brute-force simulated clustered binomial."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from rftlab.analysis.rate_gates import (
    cluster_robust_rate,
    clustered_lower_bound,
    clustered_pass_probability,
    effective_wilson_lower,
    max_failures_to_pass,
    min_clusters_to_pass,
    pass_probability,
    wilson_lower_bound,
)


def test_robust_variance_equals_statsmodels_cluster_covariance():
    import statsmodels.api as sm

    rng = np.random.default_rng(3)
    sizes = rng.integers(3, 9, size=40)
    successes = [int(rng.binomial(m, rng.beta(8, 1))) for m in sizes]
    y = np.concatenate([[1.0] * k + [0.0] * (m - k) for k, m in zip(successes, sizes, strict=True)])
    groups = np.repeat(np.arange(len(sizes)), sizes)
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    est = cluster_robust_rate(successes, sizes.tolist())
    assert est.rate == pytest.approx(fit.params[0], rel=1e-12)
    # statsmodels: G/(G-1) * (N-1)/(N-K) with K = 1 regressor, i.e. G/(G-1), as in cluster_robust_rate
    assert est.robust_variance == pytest.approx(fit.bse[0] ** 2, rel=1e-9)
    assert est.design_effect == pytest.approx(
        fit.bse[0] ** 2 / (est.rate * (1 - est.rate) / len(y)), rel=1e-9
    )


def test_design_effect_is_the_cluster_size_when_clusters_are_all_or_nothing():
    # 10 clusters of 7: two fail entirely; hand-worked: p = 56/70 = 0.8, residuals ±7*(0.2|0.8)
    est = cluster_robust_rate([7] * 8 + [0] * 2, [7] * 10)
    robust = 10 / 9 * (8 * (7 - 5.6) ** 2 + 2 * 5.6**2) / 70**2
    assert est.robust_variance == pytest.approx(robust)
    assert est.design_effect == pytest.approx(robust / (0.8 * 0.2 / 70))
    assert est.design_effect == pytest.approx(7 * 10 / 9)  # deff = m * G/(G-1) for all-or-nothing clusters
    assert cluster_robust_rate([7] * 10, [7] * 10).design_effect is None  # no failure: not estimable


def test_worst_case_bound_is_wilson_over_the_clusters():
    low, n_eff = clustered_lower_bound([7] * 240, [7] * 240)
    assert n_eff == 240
    assert low == pytest.approx(wilson_lower_bound(240, 240))
    assert low == pytest.approx(240 / (240 + 1.959963984540054**2))  # Wilson at k = n: n/(n + z²)
    low1, n1 = clustered_lower_bound([7] * 240, [7] * 240, design_effect=0.5)  # floored at 1
    assert n1 == 1680 and low1 == pytest.approx(wilson_lower_bound(1680, 1680))


@given(st.floats(0.5, 0.999), st.integers(1, 400))
@settings(max_examples=60, deadline=None)
def test_min_clusters_is_the_first_passing_cluster_count(threshold, _):
    g = min_clusters_to_pass(threshold)
    assert effective_wilson_lower(1.0, g) >= threshold
    assert g == 1 or effective_wilson_lower(1.0, g - 1) < threshold


def test_named_cluster_counts():
    assert min_clusters_to_pass(0.995) == 765
    assert min_clusters_to_pass(0.95) == 73
    assert max_failures_to_pass(240, 7, 0.995, "cluster_lower_bound") is None  # G1 cannot pass at 240


def test_independent_replies_reduce_to_the_binomial_tail():
    for threshold, p in ((0.995, 0.995), (0.95, 0.95), (0.95, 0.97)):
        assert clustered_pass_probability(
            240, 7, p, 0.0, threshold, "independent_lower_bound"
        ) == pytest.approx(pass_probability(1680, p, threshold, "lower_bound"), rel=1e-9)


def test_all_or_nothing_clusters_reduce_to_a_binomial_over_clusters():
    # failures come in blocks of 7: the rule passes iff the failed clusters j satisfy 7j <= f_max
    f_max = max_failures_to_pass(240, 7, 0.995, "independent_lower_bound")
    expected = binom.cdf(f_max // 7, 240, 0.005)
    assert clustered_pass_probability(240, 7, 0.995, 1.0, 0.995, "independent_lower_bound") == pytest.approx(
        expected
    )
    assert expected == pytest.approx(0.995**240)  # f_max = 2 < 7: no failing cluster at all
    assert (
        round(expected, 2) == 0.30 and round(pass_probability(1680, 0.995, 0.995, "lower_bound"), 2) == 0.01
    )


def _simulated_pass_rate(g, m, p, icc, threshold, rule, reps, rng):
    """Brute force: draw each cluster's failure probability from the beta, its failures from the binomial."""
    mu = 1 - p
    if icc == 1.0:
        failures = (rng.random((reps, g)) < mu) * m
    else:
        a, b = mu * (1 - icc) / icc, (1 - mu) * (1 - icc) / icc
        failures = rng.binomial(m, rng.beta(a, b, size=(reps, g)))
    totals = failures.sum(axis=1)
    n = g * m
    if rule == "independent_lower_bound":
        ok = [wilson_lower_bound(n - int(t), n) >= threshold for t in totals]
    else:
        ok = [effective_wilson_lower(1 - t / n, g) >= threshold for t in totals]
    return float(np.mean(ok))


@pytest.mark.parametrize(
    ("p", "icc", "threshold", "rule"),
    [
        (0.995, 0.3, 0.995, "independent_lower_bound"),
        (0.999, 0.6, 0.995, "independent_lower_bound"),
        (0.95, 0.3, 0.95, "cluster_lower_bound"),
        (0.98, 1.0, 0.95, "cluster_lower_bound"),
        (0.97, 0.5, 0.95, "independent_lower_bound"),
    ],
)
def test_exact_operating_characteristic_matches_a_simulated_clustered_binomial(p, icc, threshold, rule):
    reps = 4000
    sim = _simulated_pass_rate(240, 7, p, icc, threshold, rule, reps, np.random.default_rng(11))
    exact = clustered_pass_probability(240, 7, p, icc, threshold, rule)
    se = math.sqrt(max(exact * (1 - exact), 1e-4) / reps)
    assert abs(sim - exact) < 4.5 * se, (sim, exact)


def test_clustering_raises_the_registered_rule_type_one_error():
    ps = [
        clustered_pass_probability(240, 7, 0.995, icc, 0.995, "independent_lower_bound")
        for icc in (0, 0.2, 1)
    ]
    assert ps[0] < ps[1] < ps[2]


@pytest.mark.parametrize(
    "bad",
    [
        lambda: cluster_robust_rate([1], [1]),
        lambda: cluster_robust_rate([3, 8], [7, 7]),
        lambda: cluster_robust_rate([1, 2], [3]),
        lambda: effective_wilson_lower(1.2, 10),
        lambda: clustered_pass_probability(240, 7, 1.5, 0.0, 0.95, "cluster_lower_bound"),
        lambda: clustered_pass_probability(240, 7, 0.99, 0.0, 0.95, "median"),
        lambda: min_clusters_to_pass(1.0),
    ],
)
def test_bad_input_is_one_value_error(bad):
    with pytest.raises(ValueError):
        bad()
