"""Wilcoxon signed-rank and the equivalence reading of an interval, checked against independent code.

- ``wilcoxon_signed_rank``: ``scipy.stats.wilcoxon`` (exact and normal methods), and a brute-force
  enumeration of every sign assignment for the exact p-value;
- ``paired_t_interval`` (statsmodels' ``DescrStatsW.tconfint_mean``): the t interval written out with
  scipy's t quantile, and a constant sample's zero width;
- ``equivalence_reading``: the TOST duality (the interval lies inside ±m exactly when TOST at
  ``(1 − level)/2`` rejects at margin m).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import t as student_t
from scipy.stats import wilcoxon
from statsmodels.stats.weightstats import ttost_paired

from rftlab.analysis.paired import (
    equivalence_reading,
    paired_t_interval,
    wilcoxon_signed_rank,
)


def brute_force_exact_p(diffs: list[float]) -> float:
    """Two-sided exact p by enumerating all 2**n sign flips of the ranked magnitudes (no ties)."""
    magnitudes = sorted(abs(d) for d in diffs)
    rank = {m: i + 1 for i, m in enumerate(magnitudes)}
    observed = sum(rank[abs(d)] for d in diffs if d > 0)
    total = len(diffs) * (len(diffs) + 1) / 2
    sums = [sum(r for r, s in zip(range(1, len(diffs) + 1), signs, strict=True) if s)
            for signs in itertools.product([0, 1], repeat=len(diffs))]  # fmt: skip
    extreme = min(observed, total - observed)
    return min(1.0, 2 * sum(1 for s in sums if s <= extreme) / len(sums))


@pytest.mark.parametrize("seed", range(6))
def test_exact_p_matches_scipy_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    diffs = list(rng.normal(0.3 * (seed - 2), 1.0, size=11))
    result = wilcoxon_signed_rank(diffs)
    assert result.method == "exact" and result.ranked == 11 and result.zeros == 0
    assert result.positive_rank_sum + result.negative_rank_sum == 66
    assert result.p_value == pytest.approx(wilcoxon(diffs, method="exact").pvalue, rel=1e-12)
    assert result.p_value == pytest.approx(brute_force_exact_p(diffs), rel=1e-12)


def test_normal_approximation_with_tied_magnitudes_and_zeros_matches_scipy():
    # poker-like: whole big blinds, many ties in |d|, a few zeros, one stack-sized pot
    diffs = [1.0] * 14 + [-1.0] * 6 + [2.0] * 5 + [-2.0] * 4 + [0.0] * 7 + [100.0, -0.5, 0.5, 3.0]
    result = wilcoxon_signed_rank(diffs)
    reference = wilcoxon(diffs, zero_method="wilcox", method="approx", correction=False)
    assert result.method == "normal" and result.zeros == 7 and result.ranked == len(diffs) - 7
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-10)
    assert min(result.positive_rank_sum, result.negative_rank_sum) == pytest.approx(reference.statistic)


def test_large_untied_sample_uses_the_normal_approximation_like_scipy():
    rng = np.random.default_rng(7)
    diffs = list(rng.standard_t(2, size=80) + 0.2)  # heavy tails
    result = wilcoxon_signed_rank(diffs)
    assert result.method == "normal"
    assert result.p_value == pytest.approx(wilcoxon(diffs, method="approx").pvalue, rel=1e-10)


def test_float_rounding_of_equal_results_is_a_zero_and_a_tie():
    # 4.0 vs 4.000000000000001 is no win (the sign test's tolerance), and 0.1+0.2 ties 0.3 in rank
    diffs = [4.0 - 4.000000000000001, 0.1 + 0.2, -0.3, 1.0, 2.0, -2.5]
    result = wilcoxon_signed_rank(diffs)
    assert result.zeros == 1 and result.ranked == 5
    clean = [0.3, -0.3, 1.0, 2.0, -2.5]
    reference = wilcoxon(clean, method="approx", correction=False)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-10)


def test_all_ties_and_bad_input():
    assert wilcoxon_signed_rank([0.0, 1e-15]).p_value == 1.0
    assert wilcoxon_signed_rank([]).ranked == 0
    with pytest.raises(ValueError, match="finite"):
        wilcoxon_signed_rank([1.0, float("inf")])
    with pytest.raises(ValueError, match="tie_tolerance"):
        wilcoxon_signed_rank([1.0], tie_tolerance=-1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-6, 6), min_size=1, max_size=40))
def test_signed_rank_agrees_with_scipy_on_small_integer_samples(values):
    diffs = [float(v) for v in values]
    result = wilcoxon_signed_rank(diffs)
    nonzero = [d for d in diffs if d != 0]
    assert result.ranked == len(nonzero)
    if not nonzero:
        assert result.p_value == 1.0
        return
    method = "exact" if result.method == "exact" else "approx"
    reference = wilcoxon(nonzero, method=method, correction=False)
    if np.isnan(reference.pvalue):  # scipy gives nan when every rank ties at a zero variance
        return
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9, abs=1e-12)


def test_paired_t_interval_matches_statsmodels():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.5, 0.1, size=200), rng.normal(0.5, 0.1, size=200)
    diffs = a - b
    mean, low, high = paired_t_interval(diffs, level=0.95)
    half = student_t.ppf(0.975, diffs.size - 1) * diffs.std(ddof=1) / np.sqrt(diffs.size)
    ref_low, ref_high = diffs.mean() - half, diffs.mean() + half
    assert (low, high) == pytest.approx((ref_low, ref_high), rel=1e-12)
    assert mean == pytest.approx(diffs.mean())
    assert paired_t_interval([0.25, 0.25, 0.25]) == (0.25, 0.25, 0.25)


def test_interval_inside_the_margin_exactly_when_tost_rejects():
    rng = np.random.default_rng(11)
    diffs = rng.normal(0.01, 0.05, size=120)
    _, low, high = paired_t_interval(diffs, level=0.95)
    reading = equivalence_reading(low, high, level=0.95)
    assert reading.tost_alpha == pytest.approx(0.025)
    assert reading.resolved == pytest.approx(max(abs(low), abs(high)))
    for margin in (reading.resolved * 0.999, reading.resolved * 1.001):
        inside = reading.within(margin)
        assert inside == (margin > reading.resolved)
        tost_p = ttost_paired(diffs, np.zeros_like(diffs), -margin, margin)[0]  # statsmodels' TOST
        assert inside == (tost_p < reading.tost_alpha)


def test_equivalence_reading_bad_input():
    with pytest.raises(ValueError, match="low <= high"):
        equivalence_reading(1.0, -1.0)
    with pytest.raises(ValueError, match="level"):
        equivalence_reading(-1.0, 1.0, level=1.5)
    with pytest.raises(ValueError, match="margin"):
        equivalence_reading(-1.0, 1.0).within(0.0)
    with pytest.raises(ValueError, match="two finite"):
        paired_t_interval([1.0])
