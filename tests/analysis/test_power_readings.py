"""Items needed for 80% power, read two ways (first n, and from then on), and power searches at a
discordance rate below the margin.

``hoeffding_power_by_size`` is checked against the trinomial grid sum of ``exact_pass_rate`` (a different
computation of the same probability); ``sizes_reaching_power`` against hand-made saw-tooth scans; the
scan's first n against ``required_n``'s search path."""

from __future__ import annotations

import numpy as np
import pytest

from rftlab.analysis import power


@pytest.mark.parametrize(("theta", "r", "sizes"), [(0.0, 0.2, [50, 1319, 8837]), (0.02, 0.02, [10, 700, 2630]),
                                                    (-0.01, 0.4, [3, 400, 5000])])  # fmt: skip
def test_hoeffding_power_by_size_equals_the_trinomial_grid_sum(theta, r, sizes):
    model = power.DiscordanceModel.from_difference(theta, r)
    fast = power.hoeffding_power_by_size(sizes, model, 0.03, 0.05)
    grid = [power.exact_pass_rate("hoeffding", n, model, 0.03, 0.05) for n in sizes]
    assert fast == pytest.approx(grid, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("p_plus", "p_minus"), [(0.1, 0.1), (0.05, 0.12), (0.0, 0.2), (0.3, 0.0)])
def test_hoeffding_power_by_size_equals_the_per_size_sum_bit_for_bit(p_plus, p_minus):
    """All sizes at once give exactly the docstring's sum computed one size at a time."""
    from scipy import stats

    model = power.DiscordanceModel(p_minus=p_minus, p_plus=p_plus)
    sizes = [1, 2, 3, *range(40, 400, 13), 1319, 8000]
    q = min(p_minus / (1.0 - p_plus), 1.0)
    expected = []
    for n in sizes:
        b_lo, b_hi = (int(v) for v in stats.binom.ppf([power.EXACT_TAIL, 1.0 - power.EXACT_TAIL], n, p_plus))
        b = np.arange(max(b_lo - 1, 0), b_hi + 1)
        need = b - n * power.hoeffding_clearing_difference(n, 0.03, 0.05)
        terms = stats.binom.pmf(b, n, p_plus) * stats.binom.cdf(np.ceil(need) - 1, n - b, q)
        expected.append(float(np.sum(terms)))
    assert power.hoeffding_power_by_size(sizes, model, 0.03, 0.05).tolist() == expected
    assert power.hoeffding_power_by_size([], model, 0.03, 0.05).tolist() == []
    with pytest.raises(ValueError, match="sizes must be >= 1, got 0"):
        power.hoeffding_power_by_size([5, 0, -1], model, 0.03, 0.05)


def test_the_two_readings_of_a_saw_tooth():
    sizes = list(range(10, 20))
    powers = [0.5, 0.79, 0.81, 0.79, 0.80, 0.85, 0.79, 0.9, 0.95, 0.97]
    out = power.sizes_reaching_power(sizes, powers, 0.8)
    assert (out.first_n, out.from_then_on_n, out.dips) == (12, 17, 2)
    assert (out.power_first, out.power_from_then_on) == (0.81, 0.9)
    never = power.sizes_reaching_power(sizes, [0.1] * 10, 0.8)
    assert never.first_n is None and never.from_then_on_n is None
    falls_back = power.sizes_reaching_power(sizes, [0.9] * 9 + [0.7], 0.8)
    assert falls_back.first_n == 10 and falls_back.from_then_on_n is None
    with pytest.raises(ValueError, match="consecutive"):
        power.sizes_reaching_power([1, 3], [0.9, 0.9])


def test_hoeffding_first_n_is_the_search_path_answer_and_power_stays_above():
    scan = power.hoeffding_required_n_readings(0.0, 0.03, 0.05, 0.2, n_max=9_500)
    path = power.required_n("hoeffding", 0.0, 0.03, 0.05, 0.2)
    assert scan.first_n == path.value == 8837
    assert scan.from_then_on_n == 8837 and scan.dips == 0
    assert scan.power_first == pytest.approx(path.achieved_power, rel=1e-9)


def test_power_searches_work_below_the_margin():
    """At r = 0.02 < margin 0.03 no theta below −0.02 exists: the search starts there instead of failing."""
    rng = np.random.default_rng(0)
    hoeffding = power.minimum_detectable_difference("hoeffding", 1319, 0.03, 0.05, 0.02)
    assert hoeffding.value is None and hoeffding.achieved_power < 0.8  # even theta = r is not enough
    t = power.minimum_detectable_difference("paired_t", 1319, 0.03, 0.05, 0.02)
    assert t.value is not None and -0.02 <= t.value <= 0.02 and t.achieved_power >= 0.8
    model = power.DiscordanceModel.from_difference(t.value, 0.02)
    assert power.exact_pass_rate("paired_t", 1319, model, 0.03, 0.05) >= 0.8
    betting = power.minimum_detectable_difference("betting", 1319, 0.03, 0.05, 0.02, rng, reps=200)
    assert betting.value is None or -0.02 <= betting.value <= 0.02


def test_exact_probability_text_never_prints_a_left_out_mass_as_zero():
    at_equality = power.exact_pass_rate(
        "hoeffding", 1319, power.DiscordanceModel.from_difference(0.0, 0.02), 0.03, 0.05
    )
    assert power.exact_probability_text(at_equality) == "< 4e-13"  # below the grid's left-out mass
    assert power.exact_probability_text(0.0011591) == "0.00116"
    assert power.exact_probability_text(8.7e-06) == "8.7e-06"
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        power.exact_probability_text(1.5)
