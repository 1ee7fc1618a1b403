"""Lineage-level inference and coverage (``rftlab.analysis.arena.lineages``) against statsmodels and
hand-worked cases."""

from __future__ import annotations

import pytest
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

from rftlab.analysis.arena.lineages import ENDPOINTS, coverage_rows, method_level


def _summary(regret, ci, act_ok=1680, legal=1680, bc=240, consistent=1.0):
    return {
        "conditions": {"generated": {"mean_oracle_regret": regret, "mean_oracle_regret_95": ci}},
        "replies": {
            "act": {"n": 1680, "schema_valid": act_ok, "legal": legal},
            "broadcast": {"n": 240, "schema_valid": bc},
        },
        "num_cases": 60,
        "action_order_consistency_rate": consistent,
    }


def _truth(regret, rate):
    return {
        "mean_regret": {"generated": regret},
        "act_schema_valid": rate,
        "act_legal": rate,
        "broadcast_schema_valid": rate,
        "action_order_consistency_rate": rate,
    }


def test_coverage_rows_by_hand():
    comparison = {
        "endpoints": {e: {"mean_difference": 0.1, "mean_difference_95": [0.0, 0.2]} for e in ENDPOINTS}
    }
    truths = dict.fromkeys(ENDPOINTS, 0.15) | {"primary": 0.3}
    rows = coverage_rows(
        _summary(3.8, [3.0, 4.6]),
        _summary(3.0, [2.3, 3.7], act_ok=1670),
        comparison,
        _truth(3.8154, 0.8),
        _truth(3.9, 0.9995),
        truths,
    )
    by = {r["quantity"]: r for r in rows}
    assert by["base: mean regret, generated"]["covered"]
    assert not by["SFT: mean regret, generated"]["covered"]  # 3.9 > 3.7
    low, high = proportion_confint(1670, 1680, method="wilson")
    assert by["SFT: act_schema_valid"]["95% low"] == pytest.approx(low)
    assert by["SFT: act_schema_valid"]["95% high"] == pytest.approx(high)
    assert not by["SFT: act_schema_valid"]["covered"]  # 0.9995 above the Wilson upper end of 1670/1680
    assert by["SFT: act_legal"]["covered"]
    assert not by["paired: primary"]["covered"] and by["paired: generated_minus_dropped"]["covered"]


def test_method_level_with_three_lineages():
    sft = {0: 3.0658, 1: 3.0658, 2: 3.0658}
    base = {0: 3.7567, 1: 3.6158, 2: 3.6525}
    out = method_level(sft, base, dict.fromkeys(sft, -0.748))
    diffs = [sft[s] - base[s] for s in sorted(sft)]
    assert out["contrast"].mean == pytest.approx(sum(diffs) / 3)
    assert out["smallest_p"] == 0.25 and out["contrast"].p_value == 0.25  # all three negative: 2/2^3
    low, high = DescrStatsW(diffs).tconfint_mean(0.05)
    assert out["t_ci"] == pytest.approx((low, high))
    assert out["t_covered"] and not out["covered"]  # the bootstrap cannot leave the observed range
    assert min(diffs) <= out["contrast"].ci[0] and out["contrast"].ci[1] <= max(diffs)


def test_method_level_needs_every_truth():
    with pytest.raises(ValueError, match="seeds without both"):
        method_level({0: 1.0, 1: 2.0}, {0: 0.0, 1: 0.0}, {0: 1.0})


def test_validation_series_with_wilson_intervals():
    from rftlab.analysis.arena.lineages import validation_series

    v = {
        "act": {"rows": 52, "failures": {"schema_valid": 2, "legal": 5}},
        "broadcast": {"rows": 223, "failures": {"schema_valid": 3, "legal": 9}},
        "unsupported_fact_responses": 4,
    }
    series = validation_series([{"step": 40, "validation": v}])
    g3 = series["BROADCAST without an unsupported fact (G3: none allowed)"][0]
    assert g3["rate"] == pytest.approx(219 / 223)
    assert (g3["low"], g3["high"]) == pytest.approx(proportion_confint(219, 223, method="wilson"))
    legal = series["ACT legal (G4 ≥ 0.95)"][0]
    assert legal["rate"] == pytest.approx(47 / 52) and legal["step"] == 40
