"""Every noninferiority bound against an independent computation from the formulas in docs/statistics.md."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from rftlab.analysis.noninferiority import (
    METHODS,
    batch_lower_bounds,
    batch_noninferior,
    bound_result,
    decide,
    hoeffding_half_width,
    hoeffding_lower_bound,
    hoeffding_p_value,
    paired_noninferiority,
)


def binary_differences(n: int, p_plus: float, p_minus: float, seed: int) -> np.ndarray:
    u = np.random.default_rng(seed).random(n)
    return (u < p_plus).astype(float) - (u >= 1 - p_minus).astype(float)


# ---------------------------------------------------------------- Hoeffding


def test_spec_sanity_vector_half_width_and_clearing_difference():
    # docs/statistics.md §3.1: half-width 0.0674 at n = 1319, alpha = 0.05 for 0/1 items
    assert hoeffding_half_width(1319, 0.05) == pytest.approx(math.sqrt(2 * math.log(20) / 1319))
    assert round(hoeffding_half_width(1319, 0.05), 4) == 0.0674
    # "Hoeffding at n = 1319 needs d̄ ≳ +0.037 to clear delta = 0.03"
    needed = -0.03 + math.sqrt(2 * math.log(1 / 0.05) / 1319)
    assert round(needed, 3) == 0.037
    d_just_above = np.full(1319, 0.0)
    d_just_above[:50] = 1.0  # d̄ = 50/1319 = 0.0379
    d_just_below = np.full(1319, 0.0)
    d_just_below[:49] = 1.0  # d̄ = 0.0371
    assert hoeffding_lower_bound(d_just_above, 0.05) > -0.03
    assert hoeffding_lower_bound(d_just_below, 0.05) < -0.03


def test_hoeffding_one_and_two_sided_match_formula():
    d = binary_differences(500, 0.15, 0.1, seed=1)
    n = d.size
    assert hoeffding_lower_bound(d, 0.05) == pytest.approx(
        d.mean() - 2 * math.sqrt(math.log(1 / 0.05) / (2 * n)), abs=1e-15
    )
    assert hoeffding_lower_bound(d, 0.05, two_sided=True) == pytest.approx(
        d.mean() - 2 * math.sqrt(math.log(2 / 0.05) / (2 * n)), abs=1e-15
    )
    # a general range [a, b]
    s = np.random.default_rng(2).uniform(-0.5, 2.0, 300)
    assert hoeffding_lower_bound(s, 0.1, -0.5, 2.0) == pytest.approx(
        s.mean() - 2.5 * math.sqrt(math.log(10) / 600), abs=1e-14
    )


def test_hoeffding_equal_weight_and_weighted_forms_agree():
    d = binary_differences(1319, 0.12, 0.1, seed=3)
    n = d.size
    equal = hoeffding_lower_bound(d, 0.05)
    weighted = hoeffding_lower_bound(d, 0.05, item_weights=np.full(n, 1.0 / n))
    assert weighted == pytest.approx(equal, rel=0, abs=1e-14)
    # the weighted form itself: d̄_w - (b - a) sqrt(ln(1/alpha) Σ w² / 2)
    w = np.random.default_rng(4).random(n)
    w /= w.sum()
    expected = float(np.dot(w, d)) - 2.0 * math.sqrt(math.log(20) * float(np.sum(w**2)) / 2)
    assert hoeffding_lower_bound(d, 0.05, item_weights=w) == pytest.approx(expected, abs=1e-14)


def test_hoeffding_p_value_formula_and_consistency_with_bound():
    d = binary_differences(1319, 0.14, 0.1, seed=5)
    delta = 0.03
    expected = math.exp(-2 * d.size * (d.mean() + delta) ** 2 / 4)
    assert hoeffding_p_value(d, delta) == pytest.approx(expected, rel=1e-12)
    assert (hoeffding_p_value(d, delta) < 0.05) == (hoeffding_lower_bound(d, 0.05) > -delta)
    assert hoeffding_p_value(np.full(100, -0.5), delta) == 1.0


# ---------------------------------------------------------------- empirical Bernstein (Maurer & Pontil 2009, Thm 4)


def test_empirical_bernstein_matches_maurer_pontil_theorem_4():
    d = binary_differences(800, 0.2, 0.1, seed=6)
    x = (d + 1) / 2
    n, alpha = x.size, 0.05
    var = np.sum((x - x.mean()) ** 2) / (n - 1)
    lcb_x = x.mean() - math.sqrt(2 * var * math.log(2 / alpha) / n) - 7 * math.log(2 / alpha) / (3 * (n - 1))
    got = batch_lower_bounds("empirical_bernstein", d, alpha)[0]
    assert got == pytest.approx(-1 + 2 * lcb_x, abs=1e-13)


# ---------------------------------------------------------------- predictable plug-in empirical Bernstein


def plugin_eb_reference(x: np.ndarray, alpha: float) -> float:
    """Loop transcription of Waudby-Smith & Ramdas' PrPl-EB bound as written in the spec."""
    n = len(x)
    mu_prev, sigma2_prev = 0.5, 0.25
    running_sum, running_sq = 0.0, 0.0
    num, den, penalty = 0.0, 0.0, 0.0
    for t in range(1, n + 1):
        lam = min(math.sqrt(2 * math.log(1 / alpha) / (n * sigma2_prev)), 0.5)
        v = 4 * (x[t - 1] - mu_prev) ** 2
        psi = (-math.log(1 - lam) - lam) / 4
        num += lam * x[t - 1]
        den += lam
        penalty += v * psi
        running_sum += x[t - 1]
        mu_t = (0.5 + running_sum) / (t + 1)
        running_sq += (x[t - 1] - mu_t) ** 2
        sigma2_prev = (0.25 + running_sq) / (t + 1)
        mu_prev = mu_t
    return (num - math.log(1 / alpha) - penalty) / den


@pytest.mark.parametrize("seed", [7, 8])
def test_plugin_empirical_bernstein_matches_loop_reference(seed):
    rng = np.random.default_rng(seed)
    scores_b, scores_a = rng.beta(2, 3, 400), rng.beta(2, 3, 400)
    d = scores_b - scores_a
    x = (d + 1) / 2
    expected = -1 + 2 * max(plugin_eb_reference(x, 0.05), 0.0)
    assert batch_lower_bounds("plugin_empirical_bernstein", d, 0.05)[0] == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- betting confidence sequence


def max_log_capital_reference(x: np.ndarray, m: float, alpha: float) -> float:
    """sup_t log K_t(m), K_t(m) = Π (1 + min(λ̇_i, c/m)(x_i - m)), computed with a plain loop."""
    n = len(x)
    mu_prev, sigma2_prev = 0.5, 0.25
    running_sum, running_sq, log_k, best = 0.0, 0.0, 0.0, 0.0
    for t in range(1, n + 1):
        lam_dot = math.sqrt(2 * math.log(1 / alpha) / (n * sigma2_prev))
        lam = min(lam_dot, 0.5 / m) if m > 0 else lam_dot
        log_k += math.log(1 + lam * (x[t - 1] - m))
        best = max(best, log_k)
        running_sum += x[t - 1]
        mu_t = (0.5 + running_sum) / (t + 1)
        running_sq += (x[t - 1] - mu_t) ** 2
        sigma2_prev = (0.25 + running_sq) / (t + 1)
        mu_prev = mu_t  # noqa: F841  (kept to mirror the plug-in recursion)
    return best


@pytest.mark.parametrize("seed", [9, 10, 11])
def test_betting_lower_bound_is_the_boundary_of_the_rejected_set(seed):
    d = binary_differences(150, 0.3, 0.1, seed=seed)
    x = (d + 1) / 2
    alpha = 0.05
    lower = batch_lower_bounds("betting", d, alpha)[0]
    m = (lower + 1) / 2
    threshold = math.log(1 / alpha)
    if m > 0:
        assert max_log_capital_reference(x, m, alpha) >= threshold  # the reported m is rejected
    assert max_log_capital_reference(x, m + 1e-9, alpha) < threshold  # just above it is not
    # the rejected set is an interval [0, m]: every grid point below is rejected, above is not
    grid = np.linspace(0.01, 0.99, 50)
    rejected = np.array([max_log_capital_reference(x, g, alpha) >= threshold for g in grid])
    assert np.all(rejected[grid < m]) and not np.any(rejected[grid > m + 1e-9])


def test_betting_decision_agrees_with_bound():
    d = binary_differences(1319, 0.12, 0.1, seed=12)
    for delta in (0.0, 0.01, 0.02, 0.03, 0.05):
        lower = batch_lower_bounds("betting", d, 0.05)[0]
        assert bool(batch_noninferior("betting", d, delta, 0.05)[0]) == (lower > -delta)


# ---------------------------------------------------------------- asymptotic references


def test_paired_t_matches_scipy():
    d = binary_differences(1319, 0.13, 0.1, seed=13)
    n, delta, alpha = d.size, 0.03, 0.05
    result = bound_result("paired_t", d, delta, alpha)
    se = d.std(ddof=1) / math.sqrt(n)
    assert result.lower == pytest.approx(d.mean() - stats.t.ppf(1 - alpha, n - 1) * se, abs=1e-12)
    expected_p = stats.ttest_1samp(d, -delta, alternative="greater").pvalue
    assert result.p_value == pytest.approx(expected_p, rel=1e-9)
    # the batched core used by simulations agrees with statsmodels
    assert batch_lower_bounds("paired_t", d, alpha)[0] == pytest.approx(result.lower, abs=1e-12)
    assert result.validity == "asymptotic"


def tango_z_reference(b: int, c: int, n: int, delta0: float) -> float:
    """Tango (1998): restricted MLE of q21 by solving the likelihood equation numerically."""

    def score(q: float) -> float:  # d/dq of the restricted multinomial log-likelihood
        return b / (q + delta0) + c / q - 2 * (n - b - c) / (1 - 2 * q - delta0)

    lo = max(0.0, -delta0) + 1e-12
    hi = (1 - delta0) / 2 - 1e-12
    q = optimize.brentq(score, lo, hi, xtol=1e-15)
    return (b - c - n * delta0) / math.sqrt(n * (2 * q + delta0 * (1 - delta0)))


def test_tango_matches_restricted_mle_and_inverts_the_score_test():
    d = binary_differences(1319, 0.11, 0.1, seed=14)
    b, c, n = int((d == 1).sum()), int((d == -1).sum()), d.size
    delta, alpha = 0.03, 0.05
    result = bound_result("tango", d, delta, alpha)
    z = tango_z_reference(b, c, n, -delta)
    assert result.p_value == pytest.approx(stats.norm.sf(z), rel=1e-8)
    # the lower bound is where the score statistic equals z_{1-alpha}
    root = optimize.brentq(
        lambda t: tango_z_reference(b, c, n, t) - stats.norm.ppf(1 - alpha), -0.5, (b - c) / n - 1e-9
    )
    assert result.lower == pytest.approx(root, abs=1e-9)
    assert result.validity.startswith("asymptotic")


def test_tango_not_applicable_to_continuous_scores():
    d = np.random.default_rng(15).uniform(-0.5, 0.5, 200)
    result = bound_result("tango", d, 0.03, 0.05)
    assert result.lower is None and result.decision == "not_applicable"


# ---------------------------------------------------------------- decisions and the report


def test_decision_rule_definitions():
    assert decide(-0.02, 0.05, 0.03) == "noninferior"
    assert decide(-0.10, -0.04, 0.03) == "inferior"
    assert decide(-0.05, 0.01, 0.03) == "inconclusive"
    assert decide(None, None, 0.03) == "not_applicable"


@pytest.mark.parametrize(
    ("p_plus", "p_minus", "expected"),
    [(0.2, 0.1, "noninferior"), (0.1, 0.1, "inconclusive"), (0.05, 0.2, "inferior")],
)
def test_hoeffding_report_decisions(p_plus, p_minus, expected):
    d = binary_differences(1319, p_plus, p_minus, seed=16)
    treatment, baseline = (d == 1).astype(float), (d == -1).astype(float)
    report = paired_noninferiority(treatment, baseline, margin=0.03, alpha=0.05)
    assert report.decision == expected
    assert set(report.bounds) == set(METHODS)
    hoeffding = report.bounds["hoeffding"]
    assert hoeffding.lower == pytest.approx(d.mean() - math.sqrt(2 * math.log(20) / 1319), abs=1e-14)
    assert hoeffding.upper == pytest.approx(d.mean() + math.sqrt(2 * math.log(20) / 1319), abs=1e-14)
    for bound in report.bounds.values():
        assert bound.lower <= report.mean_difference + 1e-12 or bound.method == "betting"
        assert bound.one_sided_level == 0.95 and bound.two_sided_level == pytest.approx(0.9)
        assert bound.replication_unit == "item"


def test_order_independent_bounds_ignore_the_permutation_seed():
    d = binary_differences(400, 0.15, 0.1, seed=17)
    treatment, baseline = (d == 1).astype(float), (d == -1).astype(float)
    r0 = paired_noninferiority(treatment, baseline, 0.03, permutation_seed=0)
    r1 = paired_noninferiority(treatment, baseline, 0.03, permutation_seed=1)
    for method in ("hoeffding", "empirical_bernstein", "paired_t", "tango"):
        assert r0.bounds[method].lower == pytest.approx(r1.bounds[method].lower, abs=1e-12)
    assert r0.to_dict()["permutation_seed"] == 0


def test_tighter_bounds_are_tighter_than_hoeffding_on_binary_data():
    d = binary_differences(1319, 0.12, 0.1, seed=18)
    hoeffding = batch_lower_bounds("hoeffding", d, 0.05)[0]
    for method in ("empirical_bernstein", "plugin_empirical_bernstein", "betting"):
        assert batch_lower_bounds(method, d, 0.05)[0] > hoeffding


def test_values_outside_declared_range_are_rejected():
    with pytest.raises(ValueError, match="outside the declared range"):
        hoeffding_lower_bound(np.array([0.5, 1.5]), 0.05)
    with pytest.raises(ValueError, match="alpha"):
        hoeffding_lower_bound(np.array([0.5]), 0.7)


def test_public_single_sample_wrappers_and_confidence_sequence():
    from rftlab.analysis.noninferiority import (
        betting_confidence_sequence,
        betting_lower_bound,
        empirical_bernstein_lower_bound,
        paired_t_lower_bound,
        plugin_empirical_bernstein_lower_bound,
        tango_lower_bound,
    )

    d = binary_differences(300, 0.2, 0.1, seed=19)
    for name, fn in (
        ("empirical_bernstein", empirical_bernstein_lower_bound),
        ("plugin_empirical_bernstein", plugin_empirical_bernstein_lower_bound),
        ("betting", betting_lower_bound),
        ("paired_t", paired_t_lower_bound),
        ("tango", tango_lower_bound),
    ):
        assert fn(d, 0.05) == pytest.approx(batch_lower_bounds(name, d, 0.05)[0], abs=1e-12)
    sequence = betting_confidence_sequence(d, 0.05)
    assert sequence.shape == (300,)
    assert np.all(np.diff(sequence) >= -1e-12)  # running intersection never loosens
    assert sequence[-1] == pytest.approx(betting_lower_bound(d, 0.05), abs=1e-9)
    # L_t only uses the first t items: it equals the bound on the prefix with the same horizon
    assert sequence[99] == pytest.approx(
        batch_lower_bounds("betting", d[:100], 0.05, horizon=300)[0], abs=1e-9
    )


def test_tiny_and_degenerate_samples_do_not_crash():
    one = np.array([0.0])
    assert hoeffding_lower_bound(one, 0.05) == -1.0  # clipped to the range
    result = bound_result("paired_t", one, 0.03, 0.05)
    assert result.lower is None and result.decision == "inconclusive"
    ties = np.zeros(3)
    report = paired_noninferiority(ties, ties, margin=0.03)
    assert report.decision == "inconclusive"
    assert "zero variance" in report.bounds["paired_t"].note
    for bound in report.bounds.values():
        assert bound.lower is None or -1.0 <= bound.lower <= 0.0


def test_asymptotic_methods_claim_nothing_from_an_all_tie_sample():
    # issue 8 §3: n = 50, every item tied; the t interval has zero width and used to say "noninferior"
    ties = np.zeros(50)
    for method in ("paired_t", "tango"):
        result = bound_result(method, ties, 0.03, 0.05)
        assert result.decision == "inconclusive", method
        assert result.lower is None and result.upper is None
        assert result.note.startswith("degenerate sample")
        assert np.isnan(batch_lower_bounds(method, ties, 0.05)[0])
        assert not batch_noninferior(method, ties[None, :], 0.03, 0.05)[0]
    # constant non-zero continuous differences: zero variance is degenerate for paired t
    const = np.full(40, 0.25)
    assert bound_result("paired_t", const, 0.03, 0.05).decision == "inconclusive"
    assert "zero variance" in bound_result("paired_t", const, 0.03, 0.05).note
    # the finite-sample bounds still decide on the same all-tie sample (Hoeffding cannot at n = 50)
    assert bound_result("hoeffding", ties, 0.03, 0.05).decision == "inconclusive"


def test_asymptotic_methods_need_ten_discordant_pairs():
    # 9 discordant pairs (all +1) among 400 items: paired t would claim, but the count is too small
    d = np.zeros(400)
    d[:9] = 1.0
    for method in ("paired_t", "tango"):
        result = bound_result(method, d, 0.03, 0.05)
        assert result.decision == "inconclusive" and "9 discordant" in result.note
    d[9] = 1.0  # 10 discordant pairs: both apply and claim noninferiority
    for method in ("paired_t", "tango"):
        assert bound_result(method, d, 0.03, 0.05).decision == "noninferior"
        assert bool(batch_noninferior(method, d[None, :], 0.03, 0.05)[0])


def test_two_sided_convention_equals_one_sided_half_alpha():
    # docs/statistics.md §3.1: the lower end of a two-sided 95% interval is the one-sided 0.025 bound
    d = binary_differences(1319, 0.12, 0.1, seed=20)
    assert hoeffding_lower_bound(d, 0.05, two_sided=True) == pytest.approx(
        hoeffding_lower_bound(d, 0.025), abs=1e-15
    )
