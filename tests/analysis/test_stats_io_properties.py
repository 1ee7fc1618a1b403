"""Property tests for the analysis file readers and gate parsers (issue 9: arbitrary bytes, arbitrary JSON).

Whatever a file holds, the readers return a documented value or raise ``AnalysisInputError`` (the
documented error type) — never another exception; gate evaluation never raises on values and its
JSON never holds NaN/Infinity.
"""

from __future__ import annotations

import json
import math
import pathlib
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rftlab.analysis.decision_rules import DecisionRule
from rftlab.analysis.gates import GateCheck, GateInputError, evaluate_gate, parse_gate_value
from rftlab.analysis.io import (
    AnalysisInputError,
    iter_jsonl,
    load_item_outcomes,
    load_metric_series,
    read_json_file,
)
from rftlab.runs.strictjson import json_ready, nonfinite_as_text

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
item_like = st.fixed_dictionaries(
    {},
    optional={
        "item_id": json_values,
        "correct": json_values,
        "score": json_values,
        "epoch": json_values,
        "step": json_values,
        "acc": json_values,
    },
)


def with_file(data: bytes, fn):
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "input.jsonl"
        path.write_bytes(data)
        return fn(path)


def only_documented_errors(fn):
    try:
        return fn()
    except AnalysisInputError as exc:
        assert "\n" not in str(exc)
        return None


def all_readers(path: pathlib.Path) -> None:
    only_documented_errors(lambda: list(iter_jsonl(path)))
    only_documented_errors(lambda: load_item_outcomes(path))
    only_documented_errors(lambda: load_item_outcomes(path, field="acc"))
    only_documented_errors(lambda: load_metric_series(path, "acc"))
    only_documented_errors(lambda: read_json_file(path, "spec"))


@SETTINGS
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_the_documented_error(data):
    with_file(data, all_readers)


@SETTINGS
@given(st.lists(item_like | json_values, max_size=6))
def test_arbitrary_json_lines_raise_only_the_documented_error(rows):
    lines = []
    for row in rows:
        try:
            lines.append(json.dumps(row))
        except ValueError:  # e.g. a circular structure cannot happen; keep the guard narrow
            continue
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    with_file(data, all_readers)


@SETTINGS
@given(st.lists(item_like, min_size=1, max_size=6))
def test_loaded_item_values_are_finite_and_within_bounds(rows):
    data = "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8", "surrogatepass")
    outcomes = with_file(data, lambda path: only_documented_errors(lambda: load_item_outcomes(path)))
    if outcomes is not None:
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in outcomes.values())


@SETTINGS
@given(json_values)
def test_gate_evaluation_never_raises_on_values_and_its_json_is_strict(metrics):
    checks = [GateCheck(metric="m", min=0.0, max=10.0), GateCheck(metric="k", one_of=["1", "x"])]
    payload = {"m": metrics, "k": metrics, "evidence": {"n": metrics} if isinstance(metrics, dict) else {}}
    for candidate in (payload, metrics, {"metrics": metrics}):
        try:
            evaluation = evaluate_gate(checks, candidate, spec_sha256="x")
        except GateInputError:
            continue
        json.dumps(json_ready(evaluation.to_dict()), allow_nan=False)  # --json output
        json.dumps(nonfinite_as_text(evaluation.to_dict()), allow_nan=False)  # a gate record
        for check in evaluation.checks:
            if check.passed and check.metric == "m":
                assert 0.0 <= parse_gate_value(metrics) <= 10.0


@SETTINGS
@given(st.text(max_size=30) | json_scalars)
def test_gate_values_parse_to_finite_floats_or_none(value):
    number = parse_gate_value(value)
    assert number is None or math.isfinite(number)
    if isinstance(value, str) and number is not None:
        assert (
            value.strip() == value
            and "_" not in value
            and value.lower().lstrip("+-")[:1] in set("0123456789.")
        )


@SETTINGS
@given(json_values)
def test_decision_rule_and_gate_specs_raise_only_validation_errors(spec):
    for model in (DecisionRule, GateCheck):
        try:
            model.model_validate(spec)
        except ValidationError:
            pass


@SETTINGS
@given(json_values)
def test_json_output_and_record_encodings_are_strict_json(value):
    json.dumps(json_ready(value), allow_nan=False)
    json.dumps(nonfinite_as_text(value), allow_nan=False)


@pytest.mark.parametrize("depth", [50_000])
def test_deeply_nested_json_is_a_documented_error(tmp_path, depth):
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * depth + "]" * depth + "\n")
    with pytest.raises(AnalysisInputError):
        list(iter_jsonl(path))
    with pytest.raises(AnalysisInputError):
        read_json_file(path, "spec")


def test_huge_integer_literal_is_a_documented_error(tmp_path):
    path = tmp_path / "huge.jsonl"
    path.write_text('{"item_id": 1, "score": ' + "9" * 5000 + "}\n")
    with pytest.raises(AnalysisInputError, match="line 1"):
        load_item_outcomes(path)
    path.write_text('{"item_id": 1, "score": ' + "9" * 400 + "}\n")  # parses, but is not a finite float
    with pytest.raises(AnalysisInputError, match="not a finite number"):
        load_item_outcomes(path)
