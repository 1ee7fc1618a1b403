"""Run-level inference (``rftlab.analysis.runlevel``) against independent computations: scipy's trimmed
mean, the exact bootstrap distribution of a small sample, brute-force sign patterns."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rftlab.analysis.runlevel import (
    interquartile_mean,
    paired_by_seed,
    runs_needed_for_exact_level,
    sign_flip_exact_p,
    stratified_bootstrap,
)


def test_the_interquartile_mean_drops_a_quarter_from_each_end():
    assert interquartile_mean([1.0, 2.0, 3.0, 4.0, 100.0]) == 3.0  # one diverged run does not carry it
    assert interquartile_mean([5.0]) == 5.0
    with pytest.raises(ValueError, match="finite"):
        interquartile_mean([1.0, math.nan])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40))
def test_the_interquartile_mean_equals_scipys_trimmed_mean(values):
    assert interquartile_mean(values) == pytest.approx(stats.trim_mean(values, 0.25), rel=1e-9, abs=1e-9)


def test_the_bootstrap_resamples_runs_within_their_task():
    # task a always scores 0, task b always 1, two runs each: every stratified resample has mean 1/2
    # (a resampler that mixed tasks would draw all-0 and all-1 samples)
    result = stratified_bootstrap({"a": [0.0, 0.0], "b": [1.0, 1.0]}, "mean", reps=2000, seed=3)
    assert result.ci == (0.5, 0.5) and result.estimate == 0.5
    assert (result.n_runs, result.n_tasks, result.unit) == (4, 2, "run")


def test_the_bootstrap_mean_matches_the_exact_bootstrap_distribution_of_a_small_sample():
    x = np.array([0.1, 0.4, 0.45, 0.9])
    # every one of the 4**4 ordered resamples is equally likely: the exact bootstrap distribution
    means = np.array([x[list(idx)].mean() for idx in itertools.product(range(4), repeat=4)])
    result = stratified_bootstrap(x, "mean", reps=200_000, seed=1)
    exact = np.quantile(means, [0.025, 0.975])
    assert result.ci == pytest.approx(tuple(exact), abs=0.01)
    assert result.estimate == pytest.approx(x.mean())


def test_the_bootstrap_is_reproducible_from_its_seed_and_iqm_is_robust():
    scores = {"t1": [0.50, 0.52, 0.49, 0.51, 0.05], "t2": [0.70, 0.71, 0.69, 0.72, 0.70]}
    a = stratified_bootstrap(scores, "iqm", reps=5000, seed=7)
    assert a == stratified_bootstrap(scores, "iqm", reps=5000, seed=7)
    assert a != stratified_bootstrap(scores, "iqm", reps=5000, seed=8)
    assert a.estimate == pytest.approx(stats.trim_mean(np.concatenate(list(scores.values())), 0.25))
    assert a.ci[0] <= a.estimate <= a.ci[1]


@pytest.mark.parametrize(
    "kwargs, match",
    [({"statistic": "median"}, "statistic"), ({"reps": 10}, "reps"), ({"level": 1.0}, "level")],
)
def test_bootstrap_settings_out_of_range_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        stratified_bootstrap([1.0, 2.0], **kwargs)


def _brute_force_sign_flip(d):
    observed = abs(sum(d))
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12
        for signs in itertools.product((1, -1), repeat=len(d))
    )
    return hits / 2 ** len(d)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-20, 20).map(lambda k: k / 10), min_size=1, max_size=8))
def test_the_exact_sign_flip_test_equals_brute_force(d):
    expected = 1.0 if sum(d) == 0 else _brute_force_sign_flip(d)
    assert sign_flip_exact_p(d) == pytest.approx(expected)


def test_a_mean_of_zero_up_to_rounding_gives_one():
    """Hypothesis found it: these differences sum to -2.2e-16 in Python's order; the mean is 0."""
    assert sign_flip_exact_p([0.0, 1.8, -0.6, -1.2]) == 1.0 == _brute_force_sign_flip([0.0, 1.8, -0.6, -1.2])


def test_five_seeds_cannot_reach_five_percent_and_six_can():
    five = paired_by_seed({s: 0.6 + 0.01 * s for s in range(5)}, {s: 0.5 for s in range(5)}, reps=2000)
    assert (five.better, five.worse, five.ties, five.n_pairs) == (5, 0, 0, 5)
    assert five.p_value == five.smallest_p == 2 / 32
    assert five.ci[0] > 0  # the bootstrap interval excludes 0 while the exact test cannot reach 0.05
    assert "smallest attainable with 5 pairs is 0.0625" in five.sentence()
    assert runs_needed_for_exact_level(0.05) == 6
    assert 2 / 2**6 < 0.05 <= 2 / 2**5


def test_pairs_are_made_by_seed_and_unshared_seeds_are_left_out():
    result = paired_by_seed({1: 0.3, 2: 0.5, 9: 0.9}, {2: 0.4, 1: 0.4, 7: 0.0}, reps=1000)
    assert result.seeds == (1, 2)
    assert result.differences == pytest.approx((-0.1, 0.1))
    assert result.p_value == 1.0 and result.mean == pytest.approx(0.0)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        paired_by_seed({1: 0.1}, {1: 0.2})
