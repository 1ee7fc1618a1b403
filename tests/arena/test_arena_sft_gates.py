"""Promotion gates (docs/arena.md §11) on constructed summaries at, just above and just below every threshold."""

from __future__ import annotations

import copy
import json

import pytest
from scipy import stats

from rftlab.analysis.arena.gates import (
    DEFAULT_GATE_SPEC,
    evaluate_arena_gates,
    gate_metrics,
    gate_table,
    verdicts,
)
from rftlab.cli import main
from rftlab.runs.hashing import file_sha256

EPS = 1e-9
STYLES = ("balanced", "aggressive", "defensive", "balanced")


def _per_case(regrets):
    return [
        {
            "seed": 1000 + i,
            "size": 12,
            "opponent_style": STYLES[i],
            "generated_regret": r,
            "generated_reward": -r,
        }
        for i, r in enumerate(regrets)
    ]


def _summaries():
    """A base and a candidate that pass every gate comfortably (4 cases: sums of 4 equal values are exact)."""
    base = {
        "eval_version": "rftlab-arena-eval-v2",
        "arena_version": "arena-core-v1",
        "manifest_sha256": "b53bfc523043ec71cc69f851d0819511c5a9f0b4f09520898f30954bbe874b29",
        "model": "base",
        "num_cases": 4,
        "conditions": {},
        "per_case": _per_case([2.0, 2.0, 2.0, 2.0]),
        "action_order_consistency_rate": 0.5,
        "perm_regret_delta": {
            "1": {"mean": 0.5, "mean_95": [0.4, 0.6]},
            "2": {"mean": 0.0, "mean_95": [0, 0]},
        },
        "communication_effects": {},
    }
    candidate = copy.deepcopy(base)
    candidate.update(
        model="candidate",
        per_case=_per_case([1.0, 1.0, 1.0, 1.0]),
        action_order_consistency_rate=1.0,
        perm_regret_delta={"1": {"mean": 0.0, "mean_95": [0, 0]}, "2": {"mean": 0.0, "mean_95": [0, 0]}},
        communication_effects={
            name: {"cases": 4, "mean_difference": 0.5, "mean_difference_95": [0.25, 0.75]}
            for name in ("generated_minus_dropped", "generated_minus_shuffled")
        },
        validation={
            "act": {"rows": 52, "schema_valid": 1.0, "legal": 1.0, "supported": 1.0,
                    "failures": {"schema_valid": 0, "legal": 0, "supported": 0}},
            "broadcast": {"rows": 223, "schema_valid": 1.0, "legal": 1.0, "supported": 1.0,
                          "failures": {"schema_valid": 0, "legal": 0, "supported": 0}},
            "unsupported_fact_responses": 0,
        },
    )  # fmt: skip
    return base, candidate


def _verdict(base, candidate, metric):
    evaluation, labels, _ = evaluate_arena_gates(base, candidate)
    (check,) = [c for c in evaluation.checks if c.metric == metric]
    return check


def test_all_pass_baseline_and_spec_hash_is_recorded():
    base, candidate = _summaries()
    evaluation, labels, claims = evaluate_arena_gates(base, candidate)
    assert evaluation.passed, [c.reason for c in evaluation.checks if not c.passed]
    assert evaluation.spec_sha256 == file_sha256(DEFAULT_GATE_SPEC)
    assert len(evaluation.checks) == 10 and claims == ("G7",)
    assert sorted(set(labels.values())) == ["G1", "G2", "G3", "G4", "G5", "G6", "G7"]
    spec = json.loads(DEFAULT_GATE_SPEC.read_text())
    assert "0.95" in spec["definitions"]["material_permutation_degradation"]
    assert "0.10" in spec["definitions"]["material_permutation_degradation"]


def _set_validation(key, field):
    def setter(candidate, value):
        if key is None:
            candidate["validation"][field] = value
        else:
            candidate["validation"][key][field] = value

    return setter


def _set_effect(name):
    def setter(candidate, value):
        candidate["communication_effects"][name]["mean_difference_95"][0] = value

    return setter


def _set_consistency(candidate, value):
    candidate["action_order_consistency_rate"] = value


def _set_perm_delta(candidate, value):
    candidate["perm_regret_delta"]["2"]["mean"] = value


# (metric, setter, threshold, lower bound?) — a min threshold passes at and above it, a max at and below.
THRESHOLDS = [
    ("act_schema_valid", _set_validation("act", "schema_valid"), 0.995, True),
    ("broadcast_schema_valid", _set_validation("broadcast", "schema_valid"), 0.99, True),
    ("act_legal", _set_validation("act", "legal"), 0.95, True),
    ("action_order_consistency_rate", _set_consistency, 0.95, True),
    ("max_perm_regret_delta", _set_perm_delta, 0.10, False),
    ("generated_minus_dropped_ci_low", _set_effect("generated_minus_dropped"), 1e-12, True),
    ("generated_minus_shuffled_ci_low", _set_effect("generated_minus_shuffled"), 1e-12, True),
]


@pytest.mark.parametrize("metric, setter, threshold, is_min", THRESHOLDS, ids=[t[0] for t in THRESHOLDS])
def test_threshold_at_above_and_below(metric, setter, threshold, is_min):
    step = max(EPS, abs(threshold) * 1e-6) if threshold > 1e-6 else threshold / 2
    for value, expected in (
        (threshold, True),
        (threshold + step, is_min),
        (threshold - step, not is_min),
    ):
        base, candidate = _summaries()
        setter(candidate, value)
        check = _verdict(base, candidate, metric)
        assert check.observed == value
        assert check.passed is expected, (metric, value, check.reason)


def test_unsupported_facts_zero_passes_one_fails():
    for count, expected in ((0, True), (1, False), (2, False)):
        base, candidate = _summaries()
        candidate["validation"]["unsupported_fact_responses"] = count
        assert _verdict(base, candidate, "unsupported_fact_responses").passed is expected


@pytest.mark.parametrize("offset, expected", [(0.0, False), (-1e-12, True), (-2e-12, True), (1e-12, False)])
def test_regret_improvement_gate_at_and_around_zero(offset, expected):
    """G5: candidate regret = base regret + offset in every case, so the paired mean and CI equal the offset."""
    base, candidate = _summaries()
    base["per_case"] = _per_case([0.0] * 4)
    candidate["per_case"] = _per_case([offset] * 4)
    for metric in ("regret_difference_mean", "regret_difference_ci_high"):
        check = _verdict(base, candidate, metric)
        assert check.observed == offset
        assert check.passed is expected


def test_regret_gate_uses_the_paired_upper_bound():
    base, candidate = _summaries()
    candidate["per_case"] = _per_case([1.0, 1.0, 1.0, 3.0])  # mean difference −0.5 but a wide interval
    metrics = gate_metrics(base, candidate)["metrics"]
    diffs = [-1.0, -1.0, -1.0, 1.0]
    mean = sum(diffs) / 4
    sd = (sum((d - mean) ** 2 for d in diffs) / 3) ** 0.5
    assert metrics["regret_difference_mean"]["value"] == pytest.approx(mean)
    # four cases: the t quantile (3 degrees of freedom), not 1.96, bounds a mean of so few values
    assert metrics["regret_difference_ci_high"]["value"] == pytest.approx(
        mean + stats.t.ppf(0.975, 3) * sd / 2
    )
    check = _verdict(base, candidate, "regret_difference_ci_high")
    assert not check.passed and _verdict(base, candidate, "regret_difference_mean").passed


def test_mismatched_cases_or_versions_fail_the_paired_gate_with_a_reason():
    base, candidate = _summaries()
    candidate["per_case"] = candidate["per_case"][:3]
    check = _verdict(base, candidate, "regret_difference_ci_high")
    assert not check.passed and "missing" in check.reason
    assert "same cases" in check.evidence["paired_comparison"]
    base, candidate = _summaries()
    candidate["manifest_sha256"] = "0" * 64
    assert (
        "manifest_sha256 differs"
        in _verdict(base, candidate, "regret_difference_mean").evidence["paired_comparison"]
    )


def test_missing_validation_scoring_fails_g1_to_g4():
    base, candidate = _summaries()
    del candidate["validation"]
    evaluation, labels, claims = evaluate_arena_gates(base, candidate)
    failed = {labels[c.metric] for c in evaluation.checks if not c.passed}
    assert failed == {"G1", "G2", "G3", "G4"}
    assert not verdicts(evaluation, labels, claims)["promotion"]


def test_claim_gate_does_not_block_promotion():
    base, candidate = _summaries()
    _set_effect("generated_minus_shuffled")(candidate, 0.0)
    evaluation, labels, claims = evaluate_arena_gates(base, candidate)
    v = verdicts(evaluation, labels, claims)
    assert v == {"promotion": True, "communication_claim": False, "all": False}
    table = gate_table(evaluation, labels)
    assert (
        table.count("\n") == 11
        and "| G7 | `generated_minus_shuffled_ci_low` | 0 | >= 1e-12 | FAIL |" in table
    )


def test_gates_cli(tmp_path, capsys):
    base, candidate = _summaries()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "b" / "summary.json").write_text(json.dumps(base))
    (tmp_path / "c" / "summary.json").write_text(json.dumps(candidate))
    out = tmp_path / "gates.json"
    assert main(["arena", "gates", "--base", str(tmp_path / "b"), "--candidate", str(tmp_path / "c"),
                 "--output", str(out)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "promotion (every gate except G7): PASS" in text and "| G5 |" in text
    assert json.loads(out.read_text())["verdicts"]["promotion"] is True
    candidate["validation"]["act"]["legal"] = 0.9
    (tmp_path / "c" / "summary.json").write_text(json.dumps(candidate))
    assert main(["arena", "gates", "--base", str(tmp_path / "b"), "--candidate", str(tmp_path / "c")]) == 1
    (tmp_path / "c" / "summary.json").write_text("{not json")
    assert main(["arena", "gates", "--base", str(tmp_path / "b"), "--candidate", str(tmp_path / "c")]) == 2
    assert "is not JSON" in capsys.readouterr().err
    assert main(["arena", "gates", "--base", str(tmp_path / "nope"), "--candidate", str(tmp_path / "c")]) == 2


def test_a_summary_off_the_frozen_manifest_is_not_compared():
    base, candidate = _summaries()
    for summary in (base, candidate):
        summary["manifest_sha256"] = "f" * 64
    check = _verdict(base, candidate, "regret_difference_ci_high")
    assert not check.passed and "is not the frozen manifest" in check.evidence["paired_comparison"]
