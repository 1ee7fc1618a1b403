"""``regret_share``: a ratio of mean regrets over the same cases with a paired percentile bootstrap,
checked against the exact bootstrap distribution of a small sample (every resample enumerated) and
against ``scipy.stats.bootstrap`` (paired, percentile)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import bootstrap

from rftlab.analysis.arena.comparisons import regret_share


def exact_bootstrap_quantile(left, right, q):
    """The q-quantile (inverted CDF) of the ratio over every resample of the cases, with its probability."""
    n = len(left)
    mass: Counter[float] = Counter()
    for combo in itertools.combinations_with_replacement(range(n), n):
        counts = Counter(combo)
        ways = math.factorial(n)
        for c in counts.values():
            ways //= math.factorial(c)
        den = sum(right[i] * c for i, c in counts.items())
        if den > 0:
            mass[sum(left[i] * c for i, c in counts.items()) / den] += ways
    total = sum(mass.values())
    cumulative = 0.0
    for value in sorted(mass):
        cumulative += mass[value] / total
        if cumulative >= q:
            return value
    raise AssertionError("unreachable")


def test_share_is_the_ratio_of_means_and_its_interval_the_exact_bootstrap():
    left, right = [1.0, 0.0, 2.0, 4.0, 1.0], [2.0, 1.0, 3.0, 5.0, 4.0]
    out = regret_share("seq", left, "wait", right, reps=100_000, seed=1)
    assert out.share == pytest.approx(8 / 15)
    assert (out.n, out.reps, out.seed, out.policy, out.baseline) == (5, 100_000, 1, "seq", "wait")
    assert out.low == pytest.approx(exact_bootstrap_quantile(left, right, 0.025), abs=0.01)
    assert out.high == pytest.approx(exact_bootstrap_quantile(left, right, 0.975), abs=0.01)


def test_interval_agrees_with_scipy_paired_percentile_bootstrap():
    rng = np.random.default_rng(5)
    right = rng.gamma(2.0, 2.5, size=60)
    left = right * rng.uniform(0.3, 0.9, size=60)
    out = regret_share("seq", left, "wait", right, reps=20_000, seed=0)
    ref = bootstrap((left, right), lambda a, b, axis=-1: a.mean(axis=axis) / b.mean(axis=axis), paired=True,
                    vectorized=True, n_resamples=20_000, method="percentile", random_state=3)  # fmt: skip
    assert out.low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert out.high == pytest.approx(ref.confidence_interval.high, abs=0.01)
    assert out.low < out.share < out.high


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no regret"):
        regret_share("a", [0.0, 0.0], "wait", [0.0, 0.0])
    with pytest.raises(ValueError, match="one regret per case"):
        regret_share("a", [1.0], "wait", [1.0, 2.0])
    with pytest.raises(ValueError, match="non-negative"):
        regret_share("a", [-1.0, 1.0], "wait", [1.0, 2.0])
