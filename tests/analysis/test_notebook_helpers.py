"""Helpers the notebooks call for their tables and prose (moved out of the notebooks)."""

from __future__ import annotations

import pytest

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
