"""Design-power library: variance components, Monte-Carlo power vs the closed form, size search."""

from __future__ import annotations

import numpy as np
import pytest

from rftlab.analysis.spectrum.power import (
    VarianceComponents,
    inflate,
    inflation_to_floor,
    power_slope,
    power_slope_analytic,
    seed_slopes,
    size_for_power,
    slope_power_by_size,
    variance_components,
)


def test_variance_components_recover_known_values():
    rng = np.random.default_rng(0)
    g, k, sb, sw = 3000, 6, 0.3, 0.5
    effects = rng.normal(0, sb, g)
    records = [{"row_id": i, "m": 1.0 + effects[i] + rng.normal(0, sw)} for i in range(g) for _ in range(k)]
    comps = variance_components(records, "m")
    assert comps.sigma2_between == pytest.approx(sb**2, rel=0.08)
    assert comps.sigma2_within == pytest.approx(sw**2, rel=0.03)
    assert comps.epoch_sd(10, 4) == pytest.approx(np.sqrt(sb**2 / 10 + sw**2 / 40), rel=0.05)
    with pytest.raises(ValueError):
        variance_components(records[:1], "m")


@pytest.mark.parametrize("slope", [0.0015, 0.003])
def test_monte_carlo_power_matches_the_noncentral_t(slope):
    comps = VarianceComponents("m", 0.5, 4e-3, 4e-3, 48, 12)
    sd = comps.epoch_sd(48, 12)
    mc = power_slope(slope, comps, nsim=20000)
    exact = power_slope_analytic(slope, sd, 12)
    assert 0.05 < exact < 0.999
    assert mc == pytest.approx(exact, abs=0.015)


def test_power_grows_with_sizes_and_replicates():
    comps = VarianceComponents("m", 0.5, 2e-3, 4e-3, 48, 12)
    slope = 0.002
    for factor, values in (("rows", [12, 48, 192]), ("epochs", [6, 12, 24]), ("runs", [1, 2, 4])):
        powers = [r["power"] for r in slope_power_by_size(slope, comps, factor, values, nsim=3000)]
        assert powers[0] < powers[1] < powers[2], (factor, powers)
    # candidates only shrink the within-band part: with no within-band noise they do not help at all
    between_only = VarianceComponents("m", 0.5, 2e-3, 0.0, 48, 12)
    flat = [r["power"] for r in slope_power_by_size(slope, between_only, "candidates", [2, 48], nsim=3000)]
    assert between_only.epoch_sd(48, 2) == between_only.epoch_sd(48, 48)
    assert flat[0] == pytest.approx(flat[1], abs=0.03)  # equal up to Monte-Carlo error


def test_size_for_power_and_floor_inflation():
    comps = VarianceComponents("m", 0.5, 2e-3, 4e-3, 48, 12)
    n = size_for_power(0.002, comps, "rows", [12, 24, 48, 96, 192, 384], nsim=3000)
    assert n is not None
    assert power_slope(0.002, comps, rows=n, nsim=3000) >= 0.8
    factor = inflation_to_floor(comps, 0.02)
    assert inflate(comps, factor).epoch_sd(48, 12) == pytest.approx(0.02)
    assert size_for_power(1e-6, comps, "runs", [1, 2], nsim=500) is None


def test_seed_slopes_readings():
    s = seed_slopes()
    assert s["carry_rate"]["first_to_last"] == pytest.approx(0.05 / 11)
    assert s["mean_occ"]["early_to_late_halves"] == pytest.approx(0.036 / 6)


def test_replicate_power_equals_pooling_simulated_runs():
    """The closed form against what ``random_effects_pool`` (DerSimonian–Laird + Hartung–Knapp) decides on
    simulated replicate slopes."""
    from rftlab.analysis.contrasts import random_effects_pool
    from rftlab.analysis.spectrum.power import replicate_power

    rng = np.random.default_rng(4)
    effect, se, alpha, tau2 = 0.0012, 0.0006, 0.01, 0.0004**2
    for runs in (3, 4):
        hits = 0
        nsim = 1500
        for _ in range(nsim):
            b = effect + rng.normal(0, np.sqrt(se**2 + tau2), runs)
            pool = random_effects_pool(b, np.full(runs, se), level=1 - alpha)
            hits += pool.ci[0] > 0
        analytic = replicate_power(effect, se, runs, alpha, tau2)
        assert abs(hits / nsim - analytic) < 4 * np.sqrt(analytic * (1 - analytic) / nsim) + 0.005


def test_replicates_for_power_picks_the_smallest_sufficient_count():
    from rftlab.analysis.spectrum.power import replicate_power, replicates_for_power

    design = replicates_for_power(0.0033, 0.0003, alpha=0.01, target=0.8, min_runs=3, max_runs=4)
    assert design.runs == 3 and design.met
    assert design.powers[0] == (3, pytest.approx(replicate_power(0.0033, 0.0003, 3, 0.01)))
    weak = replicates_for_power(0.0005, 0.0005, alpha=0.01, target=0.8, min_runs=3, max_runs=4)
    assert weak.runs == 4 and not weak.met
    assert weak.runs_needed is not None and weak.runs_needed > 4
    assert (
        replicate_power(0.0005, 0.0005, weak.runs_needed, 0.01)
        >= 0.8
        > replicate_power(0.0005, 0.0005, weak.runs_needed - 1, 0.01)
    )
    with pytest.raises(ValueError):
        replicates_for_power(0.001, 0.001, alpha=0.01, target=0.8, min_runs=4, max_runs=3)
