"""Rate gates and their operating characteristics against exact binomial sums (docs/statistics.md §4.1)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.analysis.rate_gates import (
    INSUFFICIENT,
    exact_lower_bound,
    min_successes_to_pass,
    pass_probability,
    rate_gate,
    wilson_lower_bound,
)


def exact_tail(k_min: int, n: int, p: Fraction) -> Fraction:
    """P(K >= k_min) for K ~ Binomial(n, p), summed in exact rational arithmetic."""
    return sum((math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(k_min, n + 1)), Fraction(0))


def brute_k_min(n: int, threshold: float, rule: str) -> int | None:
    """The smallest passing k found by trying every k (independent of the bisection)."""
    for k in range(n + 1):
        if rule == "point" and Fraction(k, n) >= Fraction(str(threshold)):
            return k
        if rule == "lower_bound":
            z = 1.96
            p = k / n
            d = 1 + z * z / n
            low = (p + z * z / (2 * n)) / d - z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
            if low >= threshold:
                return k
    return None


def test_the_issue_numbers_for_g1_and_g2_at_validation_size():
    # "The Wilson lower bound for 52/52 is 0.931; a model at exactly 99.5% passes this gate 77% of the time
    # and one at 97% still passes 21% of the time. G2 (n = 223) passes a 99% model only ~62% of the time."
    assert wilson_lower_bound(52, 52) == pytest.approx(52 / (52 + 1.96**2))  # k = n: n / (n + z²)
    assert round(wilson_lower_bound(52, 52), 3) == 0.931
    g1 = rate_gate(52, 52, 0.995, "point", min_n=52, true_rates=(0.97,))
    assert g1.verdict == "PASS" and g1.k_min == 52
    assert g1.pass_probability_at_threshold == pytest.approx(0.995**52)
    assert round(g1.pass_probability_at_threshold, 2) == 0.77
    assert round(g1.pass_probability["0.97"], 2) == 0.21
    g2 = rate_gate(223, 223, 0.99, "point", min_n=200)
    assert g2.k_min == 221  # at most 2 failures
    assert abs(g2.pass_probability_at_threshold - 0.62) < 0.01  # "~62%"
    # The lower-bound rule cannot pass at all at n = 52 (k_min is None) and says so with probability 0.
    strict = rate_gate(52, 52, 0.995, "lower_bound", min_n=52)
    assert strict.verdict == "FAIL" and strict.k_min is None and strict.pass_probability_at_threshold == 0


@pytest.mark.parametrize("n", [1, 7, 52, 223, 240, 1440])
@pytest.mark.parametrize("threshold", [0.5, 0.95, 0.99, 0.995])
@pytest.mark.parametrize("rule", ["point", "lower_bound"])
def test_k_min_and_pass_probability_equal_exact_binomial_sums(n, threshold, rule):
    k_min = min_successes_to_pass(n, threshold, rule)
    assert k_min == brute_k_min(n, threshold, rule)
    for p in (Fraction(9, 10), Fraction(97, 100), Fraction(str(threshold)), Fraction(999, 1000)):
        expected = 0.0 if k_min is None else float(exact_tail(k_min, n, p))
        assert pass_probability(n, float(p), threshold, rule) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_insufficient_n_never_passes():
    result = rate_gate(50, 50, 0.9, "point", min_n=51)
    assert result.verdict == INSUFFICIENT and not result.passed
    assert rate_gate(51, 51, 0.9, "point", min_n=51).passed


def test_exact_lower_bound_matches_the_closed_form_at_k_equals_n():
    # Clopper–Pearson at k = n: (alpha/2)^(1/n)
    for n in (5, 52, 240):
        assert exact_lower_bound(n, n) == pytest.approx(0.025 ** (1 / n), rel=1e-9)
    assert exact_lower_bound(0, 10) == 0.0


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 400),
    data=st.data(),
    threshold=st.floats(0.0, 1.0),
    rule=st.sampled_from(["point", "lower_bound"]),
)
def test_verdict_is_k_at_least_k_min(n, data, threshold, rule):
    k = data.draw(st.integers(0, n))
    result = rate_gate(k, n, threshold, rule)
    assert result.passed == (result.k_min is not None and k >= result.k_min)
    assert 0.0 <= result.wilson_lower <= result.point <= 1.0
    assert 0.0 <= result.pass_probability_at_threshold <= 1.0


@pytest.mark.parametrize("bad", [(-1, 5), (6, 5), (1, 0), (True, 5), (1.0, 5)])
def test_bad_counts_are_refused(bad):
    with pytest.raises(ValueError):
        rate_gate(bad[0], bad[1], 0.9)
    with pytest.raises(ValueError):
        rate_gate(1, 5, 1.5)
    with pytest.raises(ValueError):
        rate_gate(1, 5, 0.5, rule="median")
