"""Bad per-item and metric inputs get clear errors naming the file, line or items."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rftlab.analysis.io import AnalysisInputError, load_item_outcomes, load_metric_series, load_paired_items


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_pairs_by_item_id_regardless_of_order(tmp_path):
    t = write_jsonl(
        tmp_path / "t.jsonl",
        [{"item_id": 2, "correct": 1}, {"item_id": 10, "correct": 0}, {"item_id": 1, "correct": True}],
    )
    b = write_jsonl(
        tmp_path / "b.jsonl",
        [{"item_id": "10", "correct": 1}, {"item_id": 1, "correct": 0}, {"item_id": 2, "score": 0.5}],
    )
    items = load_paired_items(t, b)
    assert items.item_ids == ("1", "2", "10")
    np.testing.assert_array_equal(items.differences, [1.0, 0.5, -1.0])
    assert not items.is_binary


def test_unpaired_items_are_named(tmp_path):
    t = write_jsonl(tmp_path / "t.jsonl", [{"item_id": i, "correct": 1} for i in range(5)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"item_id": i, "correct": 1} for i in range(2, 8)])
    with pytest.raises(AnalysisInputError) as err:
        load_paired_items(t, b)
    message = str(err.value)
    assert "2 item(s) only in" in message and "'0', '1'" in message and "'5', '6', '7'" in message


def test_duplicated_items_are_named(tmp_path):
    t = write_jsonl(
        tmp_path / "t.jsonl",
        [{"item_id": "a", "correct": 1}, {"item_id": "b", "correct": 1}, {"item_id": "a", "correct": 0}],
    )
    with pytest.raises(AnalysisInputError, match=r"duplicated item_id\(s\) 'a'"):
        load_item_outcomes(t)


def test_values_outside_declared_bounds(tmp_path):
    t = write_jsonl(tmp_path / "t.jsonl", [{"item_id": 1, "score": 0.3}, {"item_id": 2, "score": 1.2}])
    with pytest.raises(
        AnalysisInputError, match=r"line 2: item '2' has value 1.2 outside the declared bounds \[0.0, 1.0\]"
    ):
        load_item_outcomes(t)
    c = write_jsonl(tmp_path / "c.jsonl", [{"item_id": 1, "correct": 2}])
    with pytest.raises(AnalysisInputError, match="correct=2 must be 0 or 1"):
        load_item_outcomes(c)


def test_empty_and_blank_files(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(AnalysisInputError, match="empty"):
        load_item_outcomes(empty)
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n")
    with pytest.raises(AnalysisInputError, match="empty"):
        load_item_outcomes(blank)


def test_malformed_json_line_names_its_number(tmp_path):
    t = write_jsonl(
        tmp_path / "t.jsonl",
        [{"item_id": 1, "correct": 1}, "", '{"item_id": 2, "correct": ', {"item_id": 3, "correct": 0}],
    )
    with pytest.raises(AnalysisInputError, match=r"t.jsonl line 3: not valid JSON"):
        load_item_outcomes(t)
    arr = write_jsonl(tmp_path / "arr.jsonl", ["[1, 2]"])
    with pytest.raises(AnalysisInputError, match="line 1: expected a JSON object"):
        load_item_outcomes(arr)


def test_missing_fields_and_files(tmp_path):
    t = write_jsonl(tmp_path / "t.jsonl", [{"id": 1, "correct": 1}])
    with pytest.raises(AnalysisInputError, match="line 1: no 'item_id'"):
        load_item_outcomes(t)
    v = write_jsonl(tmp_path / "v.jsonl", [{"item_id": 1, "answer": "7"}])
    with pytest.raises(AnalysisInputError, match="needs a 'correct'"):
        load_item_outcomes(v)
    with pytest.raises(AnalysisInputError, match="file not found"):
        load_item_outcomes(tmp_path / "nope.jsonl")


def test_metric_series_averages_rows_per_epoch_and_skips_missing(tmp_path):
    rows = [
        {"step": 0, "epoch": 0, "reward": 0.1},
        {"step": 1, "epoch": 0, "reward": 0.3},
        {"step": 2, "epoch": 1, "loss": 1.0},
        {"step": 3, "epoch": 1, "reward": 0.4},
        {"step": 4, "epoch": 2, "reward": None},
        {"step": 5, "epoch": 2, "reward": 0.6},
    ]
    m = write_jsonl(tmp_path / "metrics.jsonl", rows)
    x, y, x_name, n_rows = load_metric_series(m, "reward")
    assert x_name == "epoch" and n_rows == 4
    np.testing.assert_allclose(x, [0, 1, 2])
    np.testing.assert_allclose(y, [0.2, 0.4, 0.6])
    x, _, x_name, _ = load_metric_series(m, "reward", x="step")
    assert x_name == "step" and len(x) == 4
    with pytest.raises(AnalysisInputError, match="no row has metric 'accuracy'"):
        load_metric_series(m, "accuracy")


def test_field_names_with_newlines_keep_the_error_on_one_line(tmp_path):
    """Found by hypothesis in CI: a field named "\n" made the 'fields seen' message span two lines."""
    from rftlab.analysis.io import AnalysisInputError, load_metric_series

    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 0, "\\n": 1}\n', encoding="utf-8")
    with pytest.raises(AnalysisInputError) as caught:
        load_metric_series(path, "acc")
    assert "\n" not in str(caught.value) and "'\\n'" in str(caught.value)
