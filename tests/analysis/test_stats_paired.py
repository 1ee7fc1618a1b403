"""Sign test and seeded bootstrap over shared units, checked against independent computations.

- sign test: scipy's ``binomtest`` and a direct sum of binomial coefficients;
- bootstrap: the *exact* bootstrap distribution of the mean (every resample of a small sample enumerated
  with its multinomial probability), and the closed-form bootstrap variance ``σ̂²/n`` (``σ̂²`` with
  divisor n), stratified: ``Σ_h (n_h/n)² σ̂²_h / n_h``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from rftlab.analysis.paired import bootstrap_mean_interval, sign_test


def direct_sign_p(positive: int, negative: int) -> float:
    n = positive + negative
    k = min(positive, negative)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def test_sign_test_on_the_arena_split_of_10_better_7_worse_43_tied():
    diffs = [-1.0] * 10 + [1.0] * 7 + [0.0] * 43
    result = sign_test(diffs)
    assert (result.positive, result.negative, result.ties, result.n, result.untied) == (7, 10, 43, 60, 17)
    assert result.p_value == pytest.approx(binomtest(7, 17, 0.5).pvalue, abs=1e-12)
    assert result.p_value == pytest.approx(direct_sign_p(7, 10), abs=1e-12)
    assert round(result.p_value, 2) == 0.63


@pytest.mark.parametrize(("pos", "neg"), [(0, 1), (1, 0), (5, 5), (0, 12), (30, 9), (100, 90)])
def test_sign_test_matches_scipy_binomtest(pos, neg):
    diffs = [2.5] * pos + [-0.1] * neg + [0.0] * 3
    result = sign_test(diffs)
    assert result.p_value == pytest.approx(binomtest(pos, pos + neg, 0.5).pvalue, rel=1e-9, abs=1e-15)
    assert result.p_value == pytest.approx(direct_sign_p(pos, neg), rel=1e-9, abs=1e-15)


def test_sign_test_all_ties_and_bad_input():
    assert sign_test([0.0, 0.0]).p_value == 1.0
    assert sign_test([]).p_value == 1.0
    with pytest.raises(ValueError, match="finite"):
        sign_test([1.0, float("nan")])


def exact_bootstrap_distribution(x: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct resample of ``x`` (a multiset of indices) with its multinomial probability."""
    n = len(x)
    means: Counter[float] = Counter()
    for combo in itertools.combinations_with_replacement(range(n), n):
        counts = Counter(combo)
        ways = math.factorial(n)
        for c in counts.values():
            ways //= math.factorial(c)
        means[round(sum(x[i] for i in combo) / n, 12)] += ways / n**n
    support = np.array(sorted(means))
    return support, np.array([means[m] for m in support])


def test_bootstrap_quantiles_match_the_exact_bootstrap_distribution():
    x = [-3.0, 0.5, 1.0, 2.0, 40.0, -7.5]  # heavy-tailed, distinct sums
    support, prob = exact_bootstrap_distribution(x)
    assert prob.sum() == pytest.approx(1.0)
    cdf = np.cumsum(prob)
    result = bootstrap_mean_interval(x, reps=400_000, seed=3)
    for value, level in ((result.low, 0.025), (result.high, 0.975)):
        below = prob[support < value - 1e-9].sum()  # P(mean < value)
        at_or_below = prob[support <= value + 1e-9].sum()
        # the Monte Carlo quantile sits at the exact one up to its sampling error (~0.0005 in probability)
        assert below <= level + 0.002 and at_or_below >= level - 0.002
    # the bootstrap standard error is the standard deviation of the exact distribution
    exact_sd = math.sqrt(float(np.sum(prob * support**2) - np.sum(prob * support) ** 2))
    assert result.se == pytest.approx(exact_sd, rel=0.01)
    assert cdf[-1] == pytest.approx(1.0)


def test_bootstrap_standard_error_matches_the_closed_form_plain_and_stratified():
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.standard_t(2, 40) * 5, rng.normal(0, 0.3, 25)])
    labels = ["tom"] * 40 + ["adam"] * 25
    n = len(x)
    plain = bootstrap_mean_interval(x, reps=100_000, seed=1)
    assert plain.se == pytest.approx(math.sqrt(np.var(x) / n), rel=0.01)
    strat = bootstrap_mean_interval(x, reps=100_000, seed=1, strata=labels)
    expected = math.sqrt(sum((len(g) / n) ** 2 * np.var(g) / len(g) for g in (x[:40], x[40:])))
    assert strat.se == pytest.approx(expected, rel=0.01) and strat.strata == 2
    assert plain.mean == strat.mean == pytest.approx(float(x.mean()))


def test_bootstrap_is_seeded():
    x = [1.0, -2.0, 30.0, 0.0, 4.0, -1.0, 2.0]
    a = bootstrap_mean_interval(x, reps=2000, seed=7)
    assert a == bootstrap_mean_interval(x, reps=2000, seed=7)
    assert a.se != bootstrap_mean_interval(x, reps=2000, seed=8).se  # another seed, other draws
    assert a.seed == 7 and a.reps == 2000 and a.n == 7


def test_bootstrap_refuses_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_mean_interval([])
    with pytest.raises(ValueError, match="finite"):
        bootstrap_mean_interval([1.0, float("inf")])
    with pytest.raises(ValueError, match="one label per value"):
        bootstrap_mean_interval([1.0, 2.0], strata=["a"])
    with pytest.raises(ValueError, match="reps"):
        bootstrap_mean_interval([1.0, 2.0], reps=1)
    with pytest.raises(ValueError, match="level"):
        bootstrap_mean_interval([1.0, 2.0], level=1.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=30),
    st.integers(0, 2**32 - 1),
)
def test_bootstrap_interval_lies_within_the_data_and_is_ordered(values, seed):
    result = bootstrap_mean_interval(values, reps=200, seed=seed)
    span = 1e-9 * max(1.0, max(abs(v) for v in values))
    assert min(values) - span <= result.low <= result.high <= max(values) + span
    assert result.se >= 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-2.0, -0.5, 0.0, 0.0, 1.0, 3.0]), max_size=40))
def test_sign_test_counts_and_p_value_are_consistent(diffs):
    result = sign_test(diffs)
    assert result.n == len(diffs)
    assert 0.0 < result.p_value <= 1.0
    flipped = sign_test([-d for d in diffs])
    assert (flipped.positive, flipped.negative) == (result.negative, result.positive)
    assert flipped.p_value == pytest.approx(result.p_value)


def test_sign_test_counts_float_rounding_of_equal_results_as_ties():
    """arena_env case 6: regrets 4.0 and 4.000000000000001 are equal results summed in another order. The
    signs are counted here from exact rational sums of the rewards (multiples of 0.05), independently."""
    from fractions import Fraction

    rewards = [0.05 * k for k in range(1, 81)]
    left = [sum(rewards[i : i + 3]) for i in range(0, 60)]  # summed left to right
    right = [rewards[i + 2] + rewards[i + 1] + rewards[i] for i in range(0, 60)]  # the other order
    right[:7] = [x + 0.05 for x in right[:7]]
    right[7:10] = [x - 0.1 for x in right[7:10]]
    diffs = [a - b for a, b in zip(left, right, strict=True)]
    assert sum(1 for d in diffs if d != 0.0) > 10  # the rounding is there to be ignored

    def exact(i: int) -> Fraction:
        base = sum(Fraction(k + 1 + j, 20) for j, k in enumerate([i, i, i]))
        other = base + (Fraction(1, 20) if i < 7 else Fraction(-1, 10) if i < 10 else 0)
        return base - other

    truth = [exact(i) for i in range(60)]
    result = sign_test(diffs)
    assert (
        (result.positive, result.negative, result.ties)
        == (
            sum(t > 0 for t in truth),
            sum(t < 0 for t in truth),
            sum(t == 0 for t in truth),
        )
        == (3, 7, 50)
    )
    assert result.p_value == pytest.approx(direct_sign_p(3, 7), abs=1e-12)
    assert sign_test(diffs, tie_tolerance=0.0).ties < 50  # the old rule counted rounding as signs
    with pytest.raises(ValueError, match="tie_tolerance"):
        sign_test(diffs, tie_tolerance=-1.0)
