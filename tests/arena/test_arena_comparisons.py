"""``analysis.comparisons`` on hand-made vectors and on the frozen cases (docs/arena.md §10.3, §10.4, gate G5)."""

from __future__ import annotations

import math
import statistics

import pytest

from rftlab.analysis.arena.comparisons import (
    neighbour_comparisons,
    optimal_rate_table,
    paired_comparison,
    rate_frame,
)
from rftlab.policies.arena.scripted import evaluate_baselines


def test_paired_comparison_by_hand():
    left = [1.0, 2.0, 3.0, 4.0, 0.5]
    right = [1.0, 3.0, 2.0, 6.0, 0.5]
    c = paired_comparison(left, right, names=("a", "b"))
    diff = [0.0, -1.0, 1.0, -2.0, 0.0]
    mean = statistics.fmean(diff)
    half = 1.96 * statistics.stdev(diff) / math.sqrt(5)
    assert (c.left, c.right, c.n) == ("a", "b", 5)
    assert (
        c.mean == pytest.approx(mean)
        and c.low == pytest.approx(mean - half)
        and c.high == pytest.approx(mean + half)
    )
    assert c.half_width == pytest.approx(half)
    assert (c.left_lower, c.ties, c.right_lower) == (2, 2, 1)
    assert not c.excludes_zero and not c.below_zero
    lower = paired_comparison([0.0, 0.1, 0.0], [1.0, 1.2, 0.9])
    assert lower.excludes_zero and lower.below_zero and lower.left_lower == 3
    with pytest.raises(ValueError, match="same cases"):
        paired_comparison([1.0], [1.0, 2.0])


def test_rate_table_reproduces_the_spec_oracle_vectors_and_slices():
    outcomes = evaluate_baselines(["oracle", "wait"])
    rows = optimal_rate_table(
        outcomes, slices=[("all", lambda o: True), ("first half", lambda o: o.case_index < 30)]
    )
    by = {(r.slice, r.policy): r for r in rows}
    oracle = by["all", "oracle"]
    # docs/arena.md §10.4: 60/60 optimal, Wilson [0.93983, 1.0], mean reward 2.645
    assert (oracle.n, oracle.optimal, oracle.optimal_rate) == (60, 60, 1.0)
    assert round(oracle.wilson_low, 5) == 0.93983 and oracle.wilson_high == pytest.approx(1.0)
    assert round(oracle.mean_reward, 3) == 2.645 and oracle.mean_regret == pytest.approx(0.0, abs=1e-9)
    wait = [o for o in outcomes if o.policy == "wait" and o.case_index < 30]
    assert by["first half", "wait"].n == 30
    assert by["first half", "wait"].mean_regret == pytest.approx(statistics.fmean(o.regret for o in wait))


def test_neighbour_comparisons_pair_each_policy_with_the_next():
    per_case = {"a": [1.0, 2.0], "b": [1.0, 1.0], "c": [0.0, 0.0]}
    got = neighbour_comparisons(per_case, ["a", "b", "c"])
    assert list(got) == [("a", "b"), ("b", "c")]
    assert got["a", "b"].ties == 1 and got["a", "b"].right_lower == 1 and got["b", "c"].right_lower == 2


def test_rate_frame_labels_policies_and_writes_counts_and_intervals():
    rows = optimal_rate_table(evaluate_baselines(["oracle", "wait"]))
    frame = rate_frame(rows, {"oracle": "oracle (optimum)", "wait": "all WAIT"})
    assert list(frame.columns) == [
        "policy", "n", "mean reward", "mean regret", "optimal", "optimal rate", "Wilson 95%"
    ]  # fmt: skip
    oracle = frame.iloc[0]
    assert (oracle["policy"], oracle["optimal"], oracle["Wilson 95%"]) == (
        "oracle (optimum)",
        "60/60",
        "[0.940, 1.000]",
    )
    assert list(rate_frame(rows, {"oracle": "o", "wait": "w"}, with_slice=True)["slice"]) == ["all", "all"]
    with pytest.raises(KeyError):
        rate_frame(rows, {"oracle": "o"})  # every policy needs a label


def test_paired_comparison_counts_float_rounding_as_a_tie():
    """Equal regrets summed in another order (1.15 vs 1.1500000000000001) tie; a 0.05 difference does not."""
    left = [0.1 + 0.45 + 0.6, 1.0, 2.0]
    right = [0.6 + 0.45 + 0.1, 1.05, 1.95]
    assert left[0] != right[0]
    c = paired_comparison(left, right)
    assert (c.left_lower, c.ties, c.right_lower) == (1, 1, 1)  # case 1 lower, case 0 tied, case 2 higher
