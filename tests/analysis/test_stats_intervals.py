"""Wilson and normal-mean intervals: statsmodels agreement and the arena spec's oracle vectors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm, t
from statsmodels.stats.proportion import proportion_confint

from rftlab.analysis.intervals import normal_mean_interval, wilson_interval


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (37, 60), (1, 960), (500, 1319)])
def test_wilson_matches_statsmodels_at_the_exact_quantile(k, n):
    low, high = wilson_interval(k, n, z=norm.ppf(0.975))
    ref_low, ref_high = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(ref_low, abs=1e-12) and high == pytest.approx(ref_high, abs=1e-12)


def test_wilson_spec_vector_for_a_perfect_oracle():
    # docs/arena.md §10.4: the oracle's optimal rate 60/60 has Wilson interval [0.93983, 1.0] at z = 1.96
    low, high = wilson_interval(60, 60)
    assert round(low, 5) == 0.93983 and high == pytest.approx(1.0, abs=1e-12)


def test_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError):
        wilson_interval(1, 0)
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def test_normal_mean_interval_on_the_oracle_rewards_of_the_frozen_cases():
    from rftlab.policies.arena.scripted import evaluate_baselines

    rewards = [row.reward for row in evaluate_baselines(["oracle"])]
    assert len(rewards) == 60
    mean, low, high = normal_mean_interval(rewards)
    # docs/arena.md §10.4: mean reward 2.645 with 95% interval [2.02854, 3.26146]
    assert round(mean, 3) == 2.645 and round(low, 5) == 2.02854 and round(high, 5) == 3.26146


def test_normal_mean_interval_small_samples():
    assert normal_mean_interval([0.5]) == (0.5, 0.5, 0.5)
    mean, low, high = normal_mean_interval([0.0, 1.0], z=1.96)  # an explicit z is used as given
    assert mean == 0.5 and high - mean == pytest.approx(1.96 * (0.5**0.5) / 2**0.5)
    mean, low, high = normal_mean_interval([0.0, 1.0])  # default below 30 values: Student's t, df = 1
    assert high - mean == pytest.approx(t.ppf(0.975, 1) * (0.5**0.5) / 2**0.5)
    with pytest.raises(ValueError):
        normal_mean_interval([])


def test_normal_mean_interval_uses_t_below_30_values_and_keeps_the_spec_quantile_from_30():
    from rftlab.analysis.intervals import mean_interval_quantile

    assert mean_interval_quantile(5) == (pytest.approx(t.ppf(0.975, 4)), "t, df=4")
    assert mean_interval_quantile(29)[1] == "t, df=28"
    assert mean_interval_quantile(30) == (1.96, "normal z=1.96")
    assert mean_interval_quantile(5, z=1.96) == (1.96, "normal z=1.96")
    # coverage at n = 5 on normal data: t holds ~95%, the old z = 1.96 only ~88%
    rng = np.random.default_rng(0)
    samples = rng.normal(0.0, 1.0, (4000, 5))
    covered_t = covered_z = 0
    for row in samples:
        _, lo, hi = normal_mean_interval(list(row))
        covered_t += lo <= 0.0 <= hi
        _, lo, hi = normal_mean_interval(list(row), z=1.96)
        covered_z += lo <= 0.0 <= hi
    assert covered_t / 4000 == pytest.approx(0.95, abs=0.015)
    assert covered_z / 4000 == pytest.approx(0.878, abs=0.02)
