"""``power.pass_rates``: P(noninferior) at several true differences, exact or Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from rftlab.analysis.power import DiscordanceModel, exact_pass_rate, pass_rate, pass_rates


def test_count_only_methods_are_exact():
    rows = pass_rates("hoeffding", 1319, 0.03, 0.05, (-0.03, 0.0, 0.045), 0.2)
    for row, theta in zip(rows, (-0.03, 0.0, 0.045), strict=True):
        model = DiscordanceModel.from_difference(theta, 0.2)
        assert row.rate == exact_pass_rate("hoeffding", 1319, model, 0.03, 0.05)
        assert (row.reps, row.mc_se, row.difference, row.discordance) == (0, 0.0, pytest.approx(theta), 0.2)


def test_order_dependent_methods_are_simulated_with_their_error():
    rows = pass_rates("betting", 400, 0.03, 0.05, (0.0, 0.1), 0.2, np.random.default_rng(0), reps=800)
    assert [r.reps for r in rows] == [800, 800]
    assert rows[0].rate <= rows[1].rate  # common random numbers: monotone in the difference here
    for r in rows:
        assert r.mc_se == pytest.approx(np.sqrt(r.rate * (1 - r.rate) / 800))
    # an independent estimate from the existing single-difference simulation agrees within 4 SE
    other = pass_rate("betting", 400, DiscordanceModel.from_difference(0.0, 0.2), 0.03, 0.05, 800,
                      np.random.default_rng(9))  # fmt: skip
    assert abs(other.rate - rows[0].rate) < 4 * np.hypot(other.mc_se, rows[0].mc_se)
    with pytest.raises(ValueError, match="Generator"):
        pass_rates("betting", 400, 0.03, 0.05, (0.0,), 0.2)
