"""The sign-flip randomisation test and the exact sign test against independent computations."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.analysis.paired import sign_flip_p_value, sign_test


def literal_sign_flip(diffs, trials, seed=0, tolerance=1e-12):
    """docs/arena.md §10.6 word for word: one Random(seed), getrandbits(1) per value in order per trial."""
    rng = random.Random(seed)
    observed = sum(diffs) / len(diffs)
    if observed == 0:
        return 1.0
    count = 0
    for _ in range(trials):
        randomised = [d if rng.getrandbits(1) else -d for d in diffs]
        if abs(sum(randomised) / len(randomised)) >= abs(observed) - tolerance:
            count += 1
    return (count + 1) / (trials + 1)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-6, 6).map(lambda k: k * 0.05), min_size=1, max_size=70))
def test_fast_sign_flip_equals_the_literal_loop(diffs):
    assert sign_flip_p_value(diffs, trials=300) == literal_sign_flip(diffs, 300)


def test_sign_flip_converges_to_the_exact_enumeration():
    diffs = [0.3, 0.1, -0.05, 0.25, 0.0, 0.15, 0.4, -0.1, 0.2, 0.05]
    observed = abs(sum(diffs) / len(diffs))
    patterns = list(itertools.product((1, -1), repeat=len(diffs)))
    exact = sum(abs(sum(s * d for s, d in zip(p, diffs, strict=True)) / len(diffs)) >= observed - 1e-12
                for p in patterns) / len(patterns)  # fmt: skip
    p = sign_flip_p_value(diffs)
    assert abs(p - exact) < 4 * math.sqrt(exact * (1 - exact) / 100_000)


def test_zero_mean_gives_one_and_bad_input_is_refused():
    assert sign_flip_p_value([0.1, -0.1]) == 1.0
    with pytest.raises(ValueError):
        sign_flip_p_value([])
    with pytest.raises(ValueError):
        sign_flip_p_value([float("nan")])


def test_sign_test_of_ten_better_seven_worse_many_ties():
    result = sign_test([0.05] * 10 + [-0.05] * 7 + [0.0] * 43)
    assert (result.positive, result.negative, result.ties) == (10, 7, 43)
    assert result.p_value == pytest.approx(0.6291, abs=1e-4)
    from scipy.stats import binomtest

    for pos, neg in ((0, 0), (5, 0), (12, 3), (30, 31)):
        expected = 1.0 if pos + neg == 0 else binomtest(pos, pos + neg, 0.5).pvalue
        assert sign_test([1.0] * pos + [-1.0] * neg).p_value == pytest.approx(expected)


def test_format_p():
    from rftlab.analysis.paired import format_p

    assert format_p(0.02454) == "0.0245" and format_p(2e-5) == "2.0e-05"
    assert format_p(1 / 100_001, 100_000) == "≤ 1e-05"
