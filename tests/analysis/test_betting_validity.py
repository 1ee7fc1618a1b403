"""The conditions under which the betting confidence sequence is valid (Ville's inequality), each checked
as ``noninferiority.BETTING_VALIDITY_CONDITIONS`` says: bounded observations at run time, predictable bets
and nonnegative capital by tests on random data."""

from __future__ import annotations

import numpy as np
import pytest

from rftlab.analysis import noninferiority as ni


def test_every_condition_says_how_it_is_checked():
    kinds = ("checked at run time", "by construction", "assumed, not checkable")
    assert len(ni.BETTING_VALIDITY_CONDITIONS) == 4
    for condition, how in ni.BETTING_VALIDITY_CONDITIONS:
        assert condition and how.startswith(kinds), how
        # what is built in is also tested below; only the null itself is an assumption
        assert how.startswith("assumed") or "checked at run time" in how or "tested" in how


def test_out_of_range_differences_are_refused():
    with pytest.raises(ValueError, match="outside the declared range"):
        ni.betting_lower_bound(np.array([0.0, 1.0, 1.5]), 0.05)
    with pytest.raises(ValueError, match="outside the declared range"):
        ni.betting_confidence_sequence(np.array([-2.0, 0.0]), 0.05)


@pytest.mark.parametrize("seed", range(5))
def test_bets_are_predictable(seed):
    rng = np.random.default_rng(seed)
    x = rng.random((1, 60))
    lam, mu = ni._plugin_lambdas(x, 0.05, None)
    for t in (0, 1, 17, 59):
        changed = x.copy()
        changed[0, t:] = rng.random(60 - t)  # items t+1..n (0-based t..n-1) rewritten
        lam2, mu2 = ni._plugin_lambdas(changed, 0.05, 60)
        # the bet on item t+1 (index t) uses items 1..t only
        assert np.array_equal(lam[0, : t + 1], lam2[0, : t + 1]) and np.array_equal(
            mu[0, : t + 1], mu2[0, : t + 1]
        )


@pytest.mark.parametrize("seed", range(5))
def test_capital_factors_stay_at_least_one_half(seed):
    rng = np.random.default_rng(seed)
    x = rng.choice([0.0, 0.5, 1.0], size=(20, 200))
    lam_dot, _ = ni._plugin_lambdas(x, 0.05, None)
    assert np.all(lam_dot >= 0)
    for m in (1e-6, 0.01, 0.3, 0.5, 0.99, 1.0):
        lam = np.minimum(lam_dot, ni.BET_TRUNCATION / m)
        factors = 1.0 + lam * (x - m)
        assert np.all(factors >= 1.0 - ni.BET_TRUNCATION - 1e-12)
