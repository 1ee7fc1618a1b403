"""Repeated looks at checkpoints and seed shopping (issue 8 §1, §2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rftlab.analysis.multiplicity import (
    look_alphas,
    repeated_looks_gate,
    seed_shopping_error_rate,
    seeds_passing,
    simulate_repeated_looks,
)
from rftlab.analysis.noninferiority import VALIDITY, betting_confidence_sequence, hoeffding_half_width
from rftlab.analysis.power import DiscordanceModel, exact_pass_rate

ALPHA, MARGIN = 0.05, 0.03


def counts_sample(n: int, n_plus: int, n_minus: int) -> np.ndarray:
    return np.array([1.0] * n_plus + [-1.0] * n_minus + [0.0] * (n - n_plus - n_minus))


def test_look_alphas_split_alpha_and_validate():
    assert look_alphas(0.05, 10) == pytest.approx(np.full(10, 0.005))
    weighted = look_alphas(0.05, 4, [0, 1, 1, 2])
    assert weighted.sum() == pytest.approx(0.05) and weighted[0] == 0 and weighted[3] == pytest.approx(0.025)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n_looks"):
            look_alphas(0.05, bad)
    with pytest.raises(ValueError, match="weights"):
        look_alphas(0.05, 3, [1, float("nan"), 1])
    with pytest.raises(ValueError, match="weights"):
        look_alphas(0.05, 3, [1, 1])


def test_repeated_looks_gate_tests_each_look_at_alpha_over_k():
    n, k = 1319, 5
    half = hoeffding_half_width(n, ALPHA / k)  # Hoeffding at alpha/K, by hand
    looks = [counts_sample(n, 100, 100), counts_sample(n, 160, 100), counts_sample(n, 200, 100)]
    gate = repeated_looks_gate(looks, MARGIN, ALPHA, n_looks=k)
    for look, d in zip(gate.looks, looks, strict=True):
        assert look.alpha == pytest.approx(ALPHA / k)
        assert look.lower == pytest.approx(d.mean() - half, abs=1e-12)
    # look 2 (mean +0.045) clears -0.03 at alpha (half-width 0.0674) but not at alpha/5 (0.0836)
    assert looks[1].mean() - hoeffding_half_width(n, ALPHA) > -MARGIN
    assert gate.looks[1].decision == "inconclusive"
    assert gate.first_pass == 2 and gate.passed and gate.decision == "noninferior"
    assert gate.to_dict()["look_alphas"] == pytest.approx([0.01] * 5)
    with pytest.raises(ValueError, match="only 2 were declared"):
        repeated_looks_gate(looks, MARGIN, ALPHA, n_looks=2)


def test_repeated_looks_gate_records_the_seed_of_order_dependent_methods():
    d = counts_sample(400, 60, 40)
    gate = repeated_looks_gate([d, d], MARGIN, ALPHA, n_looks=3, method="betting", permutation_seed=7)
    assert all(look.permutation_seed == 7 and look.order_dependent for look in gate.looks)
    assert gate.looks_taken == 2 and gate.n_looks == 3


def test_naive_rechecking_inflates_the_error_and_the_split_holds_alpha():
    # Tango at n = 400, r = 0.2: each look errs with probability p (exact); 10 independent looks at the
    # full alpha err with probability 1 - (1 - p)^10. The split procedure stays at or below alpha.
    n, looks, reps = 400, 10, 2000
    sim = simulate_repeated_looks("tango", n, MARGIN, ALPHA, 0.2, looks, reps, np.random.default_rng(1))
    p = exact_pass_rate("tango", n, DiscordanceModel.from_difference(-MARGIN, 0.2), MARGIN, ALPHA)
    expected_naive = 1 - (1 - p) ** looks
    assert expected_naive > 0.35
    assert sim.naive_rate == pytest.approx(expected_naive, abs=4 * sim.se(expected_naive))
    assert sim.single_rate == pytest.approx(p, abs=4 * sim.se(p))
    assert sim.split_rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
    # correlated checkpoints (30% of items change per epoch) inflate less, but still far above alpha
    corr = simulate_repeated_looks(
        "tango", n, MARGIN, ALPHA, 0.2, looks, reps, np.random.default_rng(2), redraw_fraction=0.3
    )
    assert 2 * ALPHA < corr.naive_rate < sim.naive_rate
    assert corr.split_rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)


@pytest.mark.slow
def test_betting_rechecked_after_every_epoch_reproduces_the_audit():
    # issue 8 §1: ~27% (independent) and ~21% (30% redrawn) at 10 looks, n = 1319
    reps = 3000
    indep = simulate_repeated_looks("betting", 1319, MARGIN, ALPHA, 0.2, 10, reps, np.random.default_rng(3))
    assert 0.2 < indep.naive_rate < 0.33
    assert indep.split_rate <= ALPHA + 3 * indep.se(ALPHA)


def test_the_validity_label_no_longer_claims_validity_across_epochs():
    assert "not over checkpoints" in VALIDITY["betting"]
    doc = betting_confidence_sequence.__doc__ or ""
    assert "new checkpoint" in doc and "repeated_looks_gate" in doc
    assert "every item or epoch" not in doc  # the old claim


def test_seed_shopping_inflates_the_error_rate():
    reps = 600
    sim = seed_shopping_error_rate("betting", 300, 0.1, ALPHA, 0.4, 10, reps, np.random.default_rng(4))
    tol = 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert sim.one_seed_rate <= ALPHA + tol
    assert sim.any_seed_rate > sim.one_seed_rate + 0.04
    with pytest.raises(ValueError, match="does not depend on the item order"):
        seed_shopping_error_rate("hoeffding", 100, 0.1, ALPHA, 0.4, 3, 10, np.random.default_rng(0))


def test_one_data_set_can_pass_or_not_depending_on_the_seed():
    # n = 1319, mean difference -0.0084 (as in the audit): the betting decision moves with the seed
    decisions = seeds_passing(counts_sample(1319, 100, 111), "betting", MARGIN, ALPHA, range(10))
    assert set(decisions.values()) == {"noninferior", "inconclusive"}
    # an order-independent method gives one decision for every seed
    assert (
        len(set(seeds_passing(counts_sample(1319, 100, 111), "hoeffding", MARGIN, ALPHA, range(5)).values()))
        == 1
    )


def test_holm_adjust_on_a_hand_case():
    from rftlab.analysis.multiplicity import holm_adjust

    # sorted 0.01, 0.03, 0.04 -> 3·0.01, 2·0.03, 1·0.04 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], rel=1e-12)
    assert holm_adjust([0.6, 0.5]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_holm_adjust_equals_statsmodels_multipletests():
    from statsmodels.stats.multitest import multipletests

    from rftlab.analysis.multiplicity import holm_adjust

    rng = np.random.default_rng(5)
    for m in (1, 2, 5, 12):
        p = rng.uniform(0, 0.2, m)
        p[0] = p[-1]  # a tie
        reject, adjusted, _, _ = multipletests(p, alpha=0.05, method="holm")
        assert holm_adjust(p) == pytest.approx(adjusted, rel=1e-12)
        assert list(holm_adjust(p) < 0.05) == list(reject)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm_adjust([0.1, 1.5])
    with pytest.raises(ValueError, match="non-empty"):
        holm_adjust([])
