"""Declarative gates and pre-registered decision rules."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from pydantic import ValidationError

from rftlab.analysis.decision_rules import (
    Criterion,
    DecisionRule,
    evaluate_decision_rule,
    evaluate_decision_rule_file,
)
from rftlab.analysis.gates import GateCheck, evaluate_gate, evaluate_gate_file, parse_checks
from rftlab.analysis.io import AnalysisInputError
from rftlab.runs.hashing import spec_sha256 as canonical_sha256

CHECKS = [
    {"metric": "group_size", "measures": "rollouts per prompt", "one_of": ["1"]},
    {"metric": "pilot_mean_reward", "measures": "mean reward", "min": 0.1, "max": 0.9},
    {"metric": "neighbors_p10", "measures": "p10 of effective neighbours", "min": 8.0},
]


def test_gate_checks_pass_and_fail_with_reasons():
    checks = parse_checks({"checks": CHECKS})
    metrics = {
        "group_size": 1,
        "pilot_mean_reward": 0.95,
        "neighbors_p10": {"value": 8.0, "run_ids": ["r1"], "n": 64},
    }
    evaluation = evaluate_gate(checks, metrics, spec_sha256="abc", evidence={"experiment": "gs1"})
    by_metric = {c.metric: c for c in evaluation.checks}
    assert by_metric["group_size"].passed and by_metric["group_size"].threshold == {"one_of": ["1"]}
    assert not by_metric["pilot_mean_reward"].passed and "> max 0.9" in by_metric["pilot_mean_reward"].reason
    assert (
        by_metric["neighbors_p10"].passed and by_metric["neighbors_p10"].observed == 8.0
    )  # min is inclusive
    assert by_metric["neighbors_p10"].evidence == {"experiment": "gs1", "run_ids": ["r1"], "n": 64}
    assert not evaluation.passed and evaluation.spec_sha256 == "abc"


def test_missing_or_non_numeric_metric_fails_without_crashing():
    checks = parse_checks({"checks": CHECKS})
    evaluation = evaluate_gate(checks, {"group_size": "8", "pilot_mean_reward": "n/a"}, spec_sha256="x")
    reasons = {c.metric: c.reason for c in evaluation.checks}
    assert "is not one of" in reasons["group_size"]
    assert "not a finite number" in reasons["pilot_mean_reward"]
    assert "missing" in reasons["neighbors_p10"]
    assert not any(c.passed for c in evaluation.checks)
    nan = evaluate_gate(checks[1:2], {"pilot_mean_reward": math.nan}, spec_sha256="x")
    assert not nan.passed


def test_one_of_matches_numbers_and_strings():
    check = GateCheck(metric="g", one_of=["8"])
    for observed, expected in ((8, True), (8.0, True), ("8", True), (1, False), (True, False)):
        assert evaluate_gate([check], {"g": observed}, "x").passed is expected


def test_check_without_condition_is_rejected():
    with pytest.raises(ValidationError):
        GateCheck(metric="g")
    with pytest.raises(ValueError, match="checks"):
        parse_checks({"activation_gate": {"checks": []}})


def test_gs1_spec_gate_records_file_sha256(shared_dir):
    spec_path = shared_dir / "seeds" / "gs1_vs_grpo_spec.json"
    metrics = {
        "executed_group_size_treatment": 1,
        "executed_group_size_baseline": 8,
        "pilot_mean_reward": 0.4,
        "kernel_effective_neighbors_p10": 12.0,
        "frac_nonzero_advantage_treatment": 0.8,
        "baseline_reward_corr": 0.3,
    }
    evaluation = evaluate_gate_file(spec_path, metrics)
    assert evaluation.passed and len(evaluation.checks) == 6
    assert evaluation.spec_sha256 == hashlib.sha256(spec_path.read_bytes()).hexdigest()


def test_canonical_sha256_ignores_key_order():
    assert canonical_sha256({"a": 1, "b": [1, 2]}) == canonical_sha256({"b": [1, 2], "a": 1})


# ---------------------------------------------------------------- decision rules


def test_criterion_range_is_taken_per_sign():
    assert Criterion(
        id="p", metric="accuracy", weights={"treatment": 1, "baseline": -1}, margin=-0.03
    ).statistic_range() == (-1.0, 1.0)
    weighted = Criterion(
        id="w", metric="accuracy", weights={"treatment": 2, "baseline": -0.5}, margin=-0.1, bounds=(0, 1)
    )
    assert weighted.statistic_range() == (-0.5, 2.0)


def write_items(path, values):
    path.write_text(
        "".join(json.dumps({"item_id": i, "correct": int(v)}) + "\n" for i, v in enumerate(values))
    )
    return path


def test_gs1_decision_rule_matches_hand_computed_hoeffding(shared_dir, tmp_path):
    rng = np.random.default_rng(0)
    baseline = rng.random(1319) < 0.70
    treatment = np.where(rng.random(1319) < 0.9, baseline, ~baseline)
    t = write_items(tmp_path / "t.jsonl", treatment)
    b = write_items(tmp_path / "b.jsonl", baseline)
    result = evaluate_decision_rule_file(shared_dir / "seeds" / "gs1_vs_grpo_spec.json", t, b)
    (primary,) = result.criteria
    d = treatment.astype(float) - baseline.astype(float)
    expected = d.mean() - 2 * math.sqrt(math.log(1 / 0.05) / (2 * 1319))
    assert primary.method == "hoeffding" and primary.lower == pytest.approx(expected, abs=1e-13)
    assert primary.decision == ("noninferior" if expected > -0.03 else "inconclusive")
    assert result.spec_sha256 and primary.one_sided_level == 0.95
    assert primary.two_sided_level == pytest.approx(0.90)
    # Hoeffding does not depend on item order: no seed is used or recorded
    assert primary.permutation_seed is None and result.to_dict()["permutation_seed"] is None


def test_weighted_criterion_uses_its_own_range(tmp_path):
    rng = np.random.default_rng(1)
    t = write_items(tmp_path / "t.jsonl", rng.random(500) < 0.6)
    b = write_items(tmp_path / "b.jsonl", rng.random(500) < 0.6)
    rule = DecisionRule(
        alpha=0.05,
        method="paired_hoeffding",
        criteria=[
            {"id": "w", "metric": "accuracy", "weights": {"treatment": 2, "baseline": -0.5}, "margin": -0.4}
        ],
    )
    result = evaluate_decision_rule(rule, {"treatment": t, "baseline": b})
    tv = np.array([json.loads(line)["correct"] for line in t.read_text().splitlines()], dtype=float)
    bv = np.array([json.loads(line)["correct"] for line in b.read_text().splitlines()], dtype=float)
    s = 2 * tv - 0.5 * bv
    assert result.criteria[0].lower == pytest.approx(
        s.mean() - 2.5 * math.sqrt(math.log(20) / 1000), abs=1e-13
    )


def test_decision_rule_errors(tmp_path):
    t = write_items(tmp_path / "t.jsonl", [1, 0, 1])
    b = write_items(tmp_path / "b.jsonl", [1, 0])
    rule = DecisionRule(
        alpha=0.05,
        method="paired_hoeffding",
        criteria=[
            {"id": "p", "metric": "accuracy", "weights": {"treatment": 1, "baseline": -1}, "margin": -0.03}
        ],
    )
    with pytest.raises(AnalysisInputError, match="only in"):
        evaluate_decision_rule(rule, {"treatment": t, "baseline": b})
    with pytest.raises(AnalysisInputError, match="needs per-item files"):
        evaluate_decision_rule(rule, {"treatment": t})
    with pytest.raises(ValidationError):
        DecisionRule(alpha=0.05, method="magic", criteria=[])


# ---------------------------------------------------------------- pre-registered permutation seed


def betting_rule(**extra):
    block = {
        "alpha": 0.05,
        "method": "paired_betting",
        "criteria": [
            {"id": "p", "metric": "accuracy", "weights": {"treatment": 1, "baseline": -1}, "margin": -0.03}
        ],
    }
    block.update(extra)
    return DecisionRule.model_validate(block)


def test_order_dependent_rule_must_preregister_its_seed():
    with pytest.raises(ValidationError, match="permutation_seed"):
        betting_rule()
    for bad in (-1, 1.5, "2", True):
        with pytest.raises(ValidationError):
            betting_rule(permutation_seed=bad)
    assert betting_rule(permutation_seed=4).permutation_seed == 4


def test_decision_uses_and_records_the_spec_seed_and_refuses_another(tmp_path):
    from rftlab.analysis.decision_rules import SeedMismatchError
    from rftlab.analysis.noninferiority import bound_result

    rng = np.random.default_rng(3)
    base = rng.random(600) < 0.6
    treat = np.where(rng.random(600) < 0.9, base, ~base)
    t = write_items(tmp_path / "t.jsonl", treat)
    b = write_items(tmp_path / "b.jsonl", base)
    rule = betting_rule(permutation_seed=11)
    result = evaluate_decision_rule(rule, {"treatment": t, "baseline": b})
    (criterion,) = result.criteria
    assert result.permutation_seed == 11 and criterion.permutation_seed == 11 and criterion.order_dependent
    # independent recomputation: the differences in item-id order, permuted by default_rng(11)
    d = treat.astype(float) - base.astype(float)
    d = d[np.random.default_rng(11).permutation(d.size)]
    expected = bound_result("betting", d, 0.03, 0.05)
    assert criterion.lower == pytest.approx(expected.lower, abs=1e-12)
    assert evaluate_decision_rule(rule, {"treatment": t, "baseline": b}, permutation_seed=11) == result
    with pytest.raises(SeedMismatchError, match="differs"):
        evaluate_decision_rule(rule, {"treatment": t, "baseline": b}, permutation_seed=12)


def test_empty_criteria_is_a_bad_rule_not_a_pass():
    with pytest.raises(ValidationError, match="criteria"):
        DecisionRule(alpha=0.05, method="paired_hoeffding", criteria=[])


# ---------------------------------------------------------------- gate values and specs (issue 8 §4)


@pytest.mark.parametrize(
    "value",
    [
        math.inf,
        -math.inf,
        math.nan,
        "inf",
        "Infinity",
        "-inf",
        "1_0",
        "nan",
        " 9",
        "9 ",
        "0x10",
        "",
        True,
        10**400,
    ],
)
def test_gate_values_must_be_finite_numbers_or_strict_decimals(value):
    check = GateCheck(metric="k", min=8)
    result = evaluate_gate([check], {"k": value}, spec_sha256="x")
    assert not result.passed and "not a finite number" in result.checks[0].reason
    # the evaluation keeps the value it saw; both of its written forms are strict JSON
    from rftlab.runs.strictjson import json_output, nonfinite_as_text

    json.loads(json_output(result.to_dict()), parse_constant=lambda c: pytest.fail(f"{c} in --json output"))
    json.dumps(nonfinite_as_text(result.to_dict()), allow_nan=False)


def test_strict_decimal_strings_are_read_as_numbers():
    from rftlab.analysis.gates import parse_gate_value

    assert [parse_gate_value(v) for v in ("10", "+8.5", "-0.5", ".5", "5.", "1e1", "2E-3")] == [
        10.0,
        8.5,
        -0.5,
        0.5,
        5.0,
        10.0,
        0.002,
    ]
    assert all(parse_gate_value(v) is None for v in ("1_0", "inf", "Infinity", "NaN", "1e999", "½", "١٠"))


@pytest.mark.parametrize(
    "check",
    [
        {"metric": "m", "min": math.nan},
        {"metric": "m", "max": math.inf},
        {"metric": "m", "min": 2, "max": 1},
        {"metric": "m", "min": "8"},
        {"metric": "m", "one_of": []},
        {"metric": "m", "min": True},
    ],
)
def test_bad_thresholds_are_bad_specs(check):
    with pytest.raises(ValidationError):
        parse_checks({"checks": [check]})


def test_evidence_must_be_an_object():
    from rftlab.analysis.gates import GateInputError

    check = GateCheck(metric="m", min=1)
    for evidence in ("run-1", ["a", "b"], 3):
        with pytest.raises(GateInputError, match="evidence"):
            evaluate_gate([check], {"m": 2, "evidence": evidence}, spec_sha256="x")
        with pytest.raises(GateInputError, match="evidence"):
            evaluate_gate([check], {"metrics": {"m": 2}, "evidence": evidence}, spec_sha256="x")
