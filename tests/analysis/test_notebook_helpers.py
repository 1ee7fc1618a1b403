"""Helpers the notebooks call for their tables and prose (moved out of the notebooks)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.analysis.display import rate_with_error, relation
from rftlab.analysis.spectrum.summaries import bench90_row, policy_table_rows


def test_rate_with_error_and_relation():
    assert rate_with_error(0.80123, 0.00498, exact=False) == "0.8012 ± 0.0050"
    assert rate_with_error(0.75912, None, exact=True) == "0.7591 (exact)"
    assert [relation(1, 2), relation(2, 1), relation(1, 1)] == ["below", "above", "equal to"]


def test_bench90_row_means_the_defined_gains_only():
    result = {
        "mean_available_iou": 0.4,
        "mean_occupied_iou": 0.7,
        "baseline": {"mean_available_iou": 0.2, "mean_occupied_iou": 0.3},
        "runs": [
            {"mean_available_iou": 0.35, "normalized_gain": 0.1},
            {"mean_available_iou": 0.45, "normalized_gain": None},
            {"mean_available_iou": 0.40, "normalized_gain": 0.3},
        ],
    }
    row = bench90_row("acc", result)
    assert row["available-IoU range over runs"] == "0.350–0.450"
    assert row["normalized_gain"] == pytest.approx(0.2)
    result["runs"] = [{"mean_available_iou": 0.4, "normalized_gain": None}]
    assert bench90_row("acc", result)["normalized_gain"] is None


def test_policy_table_rows():
    s = {"reward": 1.0, "mean_occ": 0.3, "early_occ": 0.2, "late_occ": 0.4, "memory_gain": 0.2,
         "memory_gain_se": 0.01, "mean_avail": 0.5, "carry_rate": None, "report_size": 3.0}  # fmt: skip
    (row,) = policy_table_rows({"acc": s}, {"acc": "accumulates"})
    assert row["memory_gain ± 1 s.e."] == "+0.200 ± 0.010" and row["carry_rate"] == "–"
    assert row["what it does"] == "accumulates" and row["late_occ"] == 0.4


def test_interval_never_prints_a_negative_zero():
    from rftlab.analysis.display import interval, number
    from rftlab.analysis.intervals import wilson_interval

    low, high = wilson_interval(0, 60)
    assert low <= 0.0  # the Wilson formula lands a hair below zero for 0 successes
    assert interval(low, high) == "[0.000, 0.060]"
    assert interval(-0.0004, 0.5, signed=True) == "[+0.000, +0.500]"
    assert interval(-0.0006, 0.5, signed=True, digits=3) == "[-0.001, +0.500]"
    assert number(-1e-17) == "0.000" and number(-0.04, digits=1, signed=True) == "+0.0"
    assert number(float("nan")) == "–" and number(20.0, digits=0) == "20"


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.booleans(),
    st.integers(0, 6),
)
def test_interval_text_has_no_negative_zero_and_matches_rounding(low, high, signed, digits):
    import re

    from rftlab.analysis.display import interval

    text = interval(low, high, signed=signed, digits=digits)
    assert not re.search(r"-0(\.0*)?(?![0-9.])", text.replace("[", " ").replace(",", " ").replace("]", " "))
    left, right = text[1:-1].split(", ")
    assert float(left) == pytest.approx(round(low, digits), abs=10**-digits)
    assert float(right) == pytest.approx(round(high, digits), abs=10**-digits)


def test_one_row_finds_exactly_one_or_says_how_many():
    from rftlab.analysis.display import one_row

    rows = [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}]
    assert one_row(rows, a=1, b="y") == {"a": 1, "b": "y"}
    with pytest.raises(ValueError, match="2 rows match"):
        one_row(rows, a=1)
    with pytest.raises(ValueError, match="0 rows match"):
        one_row(rows, a=3)
