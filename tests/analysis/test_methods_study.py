"""The methods study's drivers (``rftlab.studies.methods``, notebook 00) on small inputs: exact numbers
against a trinomial enumeration written here, selections against the pandas code the notebook used before,
and simulations against the same calls made in the notebook's order."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rftlab.analysis import multiplicity, power
from rftlab.analysis.noninferiority import ORDER_DEPENDENT
from rftlab.studies import methods

MARGIN, ALPHA = 0.1, 0.05


def hoeffding_pass(n: int, theta: float, r: float, margin: float = MARGIN, alpha: float = ALPHA) -> float:
    """P(mean − 2·sqrt(ln(1/alpha)/(2n)) > −margin) over every count of +1 and −1 among n items."""
    p_plus, p_minus = (r + theta) / 2, (r - theta) / 2
    half = 2 * math.sqrt(math.log(1 / alpha) / (2 * n))
    total = 0.0
    for b in range(n + 1):
        for c in range(n - b + 1):
            if (b - c) / n - half > -margin:
                ways = math.comb(n, b) * math.comb(n - b, c)
                total += ways * p_plus**b * p_minus**c * (1 - r) ** (n - b - c)
    return total


def test_the_hoeffding_rule_is_the_closed_form():
    rule = methods.hoeffding_rule(1319, 0.03, 0.05)
    assert rule.half_width == pytest.approx(math.sqrt(2 * math.log(20) / 1319))
    assert rule.clearing == pytest.approx(-0.03 + math.sqrt(2 * math.log(20) / 1319))
    assert rule.strict_clearing == pytest.approx(-0.03 + math.sqrt(2 * math.log(40) / 1319))
    assert round(rule.clearing, 3) == 0.037  # the number the GS1 spec's docs quote


def test_the_consequence_grid_is_the_trinomial_sum():
    n, rates = 40, [0.2, 0.4]
    out = methods.hoeffding_consequence(n, MARGIN, ALPHA, [0.0, 0.1, 0.3], rates)
    assert out.equal_arms == pytest.approx(tuple(hoeffding_pass(n, 0.0, r) for r in rates), abs=1e-10)
    table = out.table
    assert list(table.columns) == ["true difference θ", "P(pass), r = 0.2", "P(pass), r = 0.4"]
    assert list(table["true difference θ"]) == ["+0.00 points", "+10.00 points", "+30.00 points"]
    assert table.iloc[2, 1] == "– (θ > r)"  # θ = 0.3 > r = 0.2: not a model
    assert table.iloc[1, 2] == power.exact_probability_text(hoeffding_pass(n, 0.1, 0.4))
    assert out.equal_range_text.endswith(f" to {max(out.equal_arms):.4f}")


def test_coverage_grids_are_exact_for_count_only_bounds_and_pick_the_worst_cell():
    rng = np.random.default_rng(1)
    grid = methods.coverage_by_size([20, 30], MARGIN, ALPHA, 0.3, rng, reps=30)
    cells = grid.cells.set_index(["method", "n"])
    for n in (20, 30):
        assert cells.loc[("hoeffding", n), "error_rate"] == pytest.approx(
            hoeffding_pass(n, -MARGIN, 0.3), abs=1e-10
        )
        assert cells.loc[("hoeffding", n), "cell"].endswith("(exact)")
    # the notebook's former pandas selection of the worst finite-sample cell
    valid = grid.cells[grid.cells["method"].isin(["hoeffding", "empirical_bernstein", *ORDER_DEPENDENT])]
    row = valid.loc[valid["error_rate"].idxmax()]
    worst = grid.worst()
    assert (worst.method, worst.error_rate, worst.at) == (row["method"], row["error_rate"], row["n"])
    assert grid.largest_mc_se == grid.cells.loc[~grid.cells["exact"], "mc_se"].max()
    table = grid.table("error rate, n = ")
    assert list(table.columns) == ["bound", "error rate, n = 20", "error rate, n = 30"]
    assert list(table["bound"]) == [methods.LABELS[m] for m in methods.METHODS]


def test_paired_t_guard_decomposes_the_error():
    guard = methods.paired_t_guard(30, 200, MARGIN, ALPHA, 0.2)
    a = guard.anatomy
    assert a.p_minus == pytest.approx((0.2 + MARGIN) / 2)
    assert a.p_no_minus == pytest.approx((1 - a.p_minus) ** 30) and a.p_all_ties == pytest.approx(0.8**30)
    assert a.guarded_error <= a.unguarded_error and guard.large_n == 200
    assert 0.0 <= guard.large_n_error <= 1.0


def test_power_curves_gap_matches_the_pandas_pivot():
    curves = methods.power_curves(
        30, MARGIN, ALPHA, [0.2, 0.4], [0.0, 0.1], np.random.default_rng(2), reps=20
    )
    both = curves.curves.pivot_table(
        index=["discordance", "difference"], columns="method", values="pass_rate"
    )
    expected = (both["paired_t"] - both["tango"]).abs().groupby(level="discordance").max()
    assert curves.t_tango_gap == pytest.approx(expected.to_dict())
    assert curves.largest_mc_se == curves.curves["mc_se"].max()


@pytest.fixture(scope="module")
def mdd():
    return methods.detectable_differences(
        60, MARGIN, ALPHA, [0.05, 0.3], np.random.default_rng(3), 0.8, 40, 0.05, 0.3
    )


def test_detectable_differences_read_as_the_notebook_read_them(mdd):
    cells = mdd.cells
    valid = cells[cells["method"].isin(["hoeffding", "empirical_bernstein", *sorted(ORDER_DEPENDENT)])]
    for method in methods.METHODS:
        smallest = valid.loc[valid.groupby("discordance")["mdd"].idxmin(), "method"]
        assert mdd.smallest_is(method) == bool((smallest == method).all())
        unreached_last = cells.assign(mdd=cells["mdd"].astype(float).fillna(np.inf))
        largest = unreached_last.loc[unreached_last.groupby("discordance")["mdd"].idxmax(), "method"]
        assert mdd.largest_is(method) == bool((largest == method).all())
    series = cells[cells["method"] == "hoeffding"].set_index("discordance")["mdd"].astype(float)
    reach = mdd.reach("hoeffding")
    assert reach.reached == series.dropna().to_dict()
    assert reach.unreached == tuple(r for r in series.index if pd.isna(series[r]))
    assert mdd.mc_reps == 40
    model = power.DiscordanceModel.from_difference(0.05, 0.3)
    assert mdd.previous_power == power.exact_pass_rate("paired_t", 60, model, MARGIN, ALPHA)


def test_hoeffding_at_its_mdd_reaches_the_target(mdd):
    for r, theta in mdd.reach("hoeffding").reached.items():
        assert hoeffding_pass(60, theta, r) >= 0.8 - 1e-9


@pytest.fixture(scope="module")
def plan():
    return methods.planning([0.0, 0.05], 0.2, ALPHA, 0.2, np.random.default_rng(4), 0.8, 40)


def test_planning_and_readings_agree_with_exact_power(plan):
    readings = methods.hoeffding_readings([0.0, 0.05], [0.2], 0.2, ALPHA, 0.8, 400, plan)
    for theta in (0.0, 0.05):
        first = readings.at(theta, 0.2).first_n
        assert first is not None
        assert hoeffding_pass(first, theta, 0.2, margin=0.2) >= 0.8
        assert all(hoeffding_pass(n, theta, 0.2, margin=0.2) < 0.8 for n in range(max(2, first - 3), first))
        size = plan.items("hoeffding", theta)
        assert size is not None and hoeffding_pass(size, theta, 0.2, margin=0.2) >= 0.8
    assert readings.path_agrees == all(
        plan.items("hoeffding", t) == readings.at(t, 0.2).first_n for t in (0.0, 0.05)
    )
    assert list(readings.table["search path (table above)"]) == [
        f"{plan.items('hoeffding', t):,}" for t in (0.0, 0.05)
    ]
    assert list(plan.table["bound"]) == [methods.LABELS[m] for m in methods.METHODS]


def test_repeated_looks_and_seed_shopping_draw_as_the_notebook_did():
    looks = methods.repeated_looks(
        "betting", 50, MARGIN, ALPHA, 0.2, 3, 20, np.random.default_rng(5), [1.0, 0.3]
    )
    shopping = methods.seed_shopping(
        "betting", 50, (6, 4), MARGIN, ALPHA, 0.2, 3, 20, np.random.default_rng(6)
    )
    rng = np.random.default_rng(5)
    sims = [multiplicity.simulate_repeated_looks("betting", 50, MARGIN, ALPHA, 0.2, 3, 20, rng, redraw_fraction=f)
            for f in (1.0, 0.3)]  # fmt: skip
    assert (looks.independent, looks.correlated) == tuple(sims)
    assert looks.largest_split_rate == max(s.split_rate for s in sims)
    assert list(looks.table.columns) == ["checkpoints", "one look at alpha", "naive: 3 looks at alpha",
                                         "valid: 3 looks at alpha/3"]  # fmt: skip
    assert list(looks.table["checkpoints"]) == ["independent", "30% of items redrawn per epoch"]
    assert shopping.example_mean == pytest.approx((6 - 4) / 50)
    example = np.array([1.0] * 6 + [-1.0] * 4 + [0.0] * 40)
    decisions = multiplicity.seeds_passing(example, "betting", MARGIN, ALPHA, range(3))
    assert shopping.passing == tuple(s for s, d in decisions.items() if d == "noninferior")
    shop = multiplicity.seed_shopping_error_rate(
        "betting", 50, MARGIN, ALPHA, 0.2, 3, 20, np.random.default_rng(6)
    )
    assert shopping.shop == shop and shopping.shop.one_seed_rate <= shopping.shop.any_seed_rate


def test_the_recommendation_counts_the_cells_as_the_notebook_did(mdd):
    rng = np.random.default_rng(7)
    a = methods.coverage_by_discordance(40, MARGIN, ALPHA, [0.2, 0.4], rng, reps=20)
    b = methods.coverage_by_size([20], MARGIN, ALPHA, 0.2, rng, reps=20)
    advice = methods.recommendation([a, b], mdd, ALPHA)
    cells = pd.concat([a.cells, b.cells], ignore_index=True)
    betting = cells[cells["method"] == "betting"]
    assert advice.betting_worst.error_rate == betting["error_rate"].max()
    assert advice.betting_worst.mc_se == betting.loc[betting["error_rate"].idxmax(), "mc_se"]
    asymptotic = cells[cells["method"].isin(["paired_t", "tango"])]
    assert advice.asymptotic_cells == 2 * 3
    assert advice.asymptotic_over == int((asymptotic["error_rate"] > ALPHA).sum())
    assert advice.asymptotic_worst == asymptotic["error_rate"].max()
    assert (advice.betting_smallest, advice.hoeffding_largest) == (
        mdd.smallest_is("betting"),
        mdd.largest_is("hoeffding"),
    )


def test_the_bound_table_lists_every_method():
    table = methods.bound_table()
    assert list(table["method key"]) == list(methods.METHODS)
    assert set(table["power computed"]) == {"exact (counts only)", "Monte Carlo (order-dependent)"}
