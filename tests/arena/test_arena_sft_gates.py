"""Stage-1 gates (docs/arena.md §11) with the validated v2 spec: rate gates decide on the declared rule with
their operating characteristic, too few replies say INSUFFICIENT N, G5/G7 read the §10.6 comparison, and
bad specs or summaries give one line (issue 24 class 4)."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.analysis.arena.gates import (
    DEFAULT_GATE_SPEC,
    INSUFFICIENT,
    MISSING,
    GateSpecError,
    SummaryError,
    evaluate_arena_gates,
    gate_table,
    license_rows,
    load_gate_spec,
    parse_gate_spec,
    selection_eligibility,
    validate_summary,
)
from rftlab.analysis.rate_gates import min_successes_to_pass
from rftlab.cli import main
from rftlab.runs.hashing import file_sha256

SPEC = json.loads(DEFAULT_GATE_SPEC.read_text())


def _validation(act_rows=52, bc_rows=223, act_fail=0, bc_fail=0, legal_fail=0, unsupported=0):
    return {
        "rows": act_rows + bc_rows,
        "act": {"rows": act_rows, "schema_valid": 1.0, "legal": 1.0, "supported": 1.0, "exact": 1.0,
                "failures": {"schema_valid": act_fail, "legal": legal_fail, "supported": legal_fail}},
        "broadcast": {"rows": bc_rows, "schema_valid": 1.0, "legal": 1.0, "supported": 1.0, "exact": 1.0,
                      "failures": {"schema_valid": bc_fail, "legal": 0, "supported": 0}},
        "unsupported_fact_responses": unsupported,
        "selection_score": 1.0,
    }  # fmt: skip


def _candidate(act_n=1680, act_ok=1680, legal=1680, bc_n=240, bc_ok=240, cases=60, consistency=1.0):
    return {
        "eval_version": "rftlab-arena-eval-v3",
        "arena_version": "arena-core-v1",
        "manifest_sha256": "b53bfc523043ec71cc69f851d0819511c5a9f0b4f09520898f30954bbe874b29",
        "model": "candidate",
        "num_cases": cases,
        "message_strict_rate": 1.0,
        "action_order_consistency_rate": consistency,
        "conditions": {},
        "per_case": [{"seed": 1}],
        "perm_regret_delta": {"1": {"mean": 0.0, "mean_95": [0.0, 0.0]}, "2": {"mean": 0.05, "mean_95": [0.0, 0.1]}},
        "replies": {"act": {"n": act_n, "schema_valid": act_ok, "legal": legal},
                    "broadcast": {"n": bc_n, "schema_valid": bc_ok, "valid": bc_ok}},
        "validation": _validation(),
    }  # fmt: skip


def _endpoint(mean, low, high, cases=60):
    return {"cases": cases, "mean_difference": mean, "mean_difference_95": [low, high],
            "randomization_p_two_sided": 0.01, "sign_test": {"positive": 1, "negative": 0, "zero": 0, "p_two_sided": 1.0}}  # fmt: skip


def _comparison(cases=60):
    return {
        "endpoints": {
            "primary": _endpoint(-0.5, -0.8, -0.2, cases),
            "supporting": _endpoint(0.5, 0.2, 0.8, cases),
            "generated_minus_dropped": _endpoint(0.3, 0.1, 0.5, cases),
            "generated_minus_shuffled": _endpoint(0.3, 0.1, 0.5, cases),
        },
        "rftlab_additions": {
            "endpoints": {"generated_minus_shuffled_within": _endpoint(0.2, 0.05, 0.35, cases)}
        },
        "complete_manifest": cases == 60,
    }


def test_default_spec_is_valid_and_hashed():
    spec, sha = load_gate_spec()
    assert sha == file_sha256(DEFAULT_GATE_SPEC) and spec.name == "arena-stage1-sft-promotion-v2"
    assert spec.claim_gates == ["G7"] and len(spec.checks) == 11 and len(spec.selection.checks) == 4
    assert {c.gate for c in spec.checks} == {"G1", "G2", "G3", "G4", "G5", "G6", "G7"}
    evaluation = evaluate_arena_gates(_candidate(), _comparison())
    assert evaluation.passed, [(c.metric, c.reason) for c in evaluation.checks if not c.passed]
    assert evaluation.verdicts() == {"promotion": True, "communication_claim": True, "all": True}
    assert [r["gate"] for r in license_rows(evaluation)] == ["G1", "G2", "G3", "G4", "G5", "G6", "G7"]


def test_g1_decides_on_the_wilson_lower_bound_of_every_frozen_reply():
    k_min = min_successes_to_pass(1680, 0.995, "lower_bound")
    for k, passed in ((1680, True), (k_min, True), (k_min - 1, False)):
        check = evaluate_arena_gates(_candidate(act_ok=k), _comparison()).check("act_schema_valid")
        assert check.passed is passed and check.n == 1680
        assert check.evidence["k_min"] == k_min
        # a model exactly at the threshold almost never establishes it
        assert check.evidence["pass_probability_at_threshold"] < 0.05


def test_too_few_replies_say_insufficient_n_never_pass():
    # a strided smoke evaluation: 12 cases, every reply valid
    small = _candidate(act_n=336, act_ok=336, legal=336, bc_n=48, bc_ok=48, cases=12)
    evaluation = evaluate_arena_gates(small, _comparison(cases=12))
    for check in evaluation.checks:
        if check.data != "validation":
            assert check.verdict == INSUFFICIENT, (check.metric, check.verdict)
            assert "insufficient n" in check.reason
    assert not evaluation.verdicts()["promotion"]
    assert "INSUFFICIENT N (insufficient n: 336 < 1440)" in gate_table(evaluation)


def test_g2_point_rule_and_its_operating_characteristic():
    for ok, passed in ((240, True), (238, True), (237, False)):  # 0.99 * 240 = 237.6 -> at most 2 failures
        check = evaluate_arena_gates(_candidate(bc_ok=ok), _comparison()).check("broadcast_schema_valid")
        assert check.passed is passed
    assert 0.5 < check.evidence["pass_probability_at_threshold"] < 0.6


def test_g3_counts_unsupported_facts_on_validation():
    for count, passed in ((0, True), (1, False)):
        c = _candidate()
        c["validation"]["unsupported_fact_responses"] = count
        assert evaluate_arena_gates(c, _comparison()).check("unsupported_fact_responses").passed is passed
    c = _candidate()
    del c["validation"]
    check = evaluate_arena_gates(c, _comparison()).check("unsupported_fact_responses")
    assert check.verdict == MISSING and "validation" in check.reason


def test_g5_and_g7_read_the_comparison_and_a_refused_one_is_missing():
    comparison = _comparison()
    comparison["endpoints"]["primary"]["mean_difference_95"][1] = 0.0
    evaluation = evaluate_arena_gates(_candidate(), comparison)
    assert not evaluation.check("regret_difference_ci_high").passed
    assert evaluation.check("regret_difference_mean").passed
    comparison = _comparison()
    comparison["rftlab_additions"]["endpoints"]["generated_minus_shuffled_within"]["mean_difference_95"][
        0
    ] = -0.1
    evaluation = evaluate_arena_gates(_candidate(), comparison)
    assert evaluation.verdicts() == {"promotion": True, "communication_claim": False, "all": False}
    refused = evaluate_arena_gates(_candidate(), "refused: the case sets differ")
    for metric in ("regret_difference_mean", "generated_minus_dropped_ci_low"):
        check = refused.check(metric)
        assert check.verdict == MISSING and "the case sets differ" in check.reason
    assert not refused.verdicts()["promotion"]


def test_selection_eligibility_uses_validation_only():
    assert selection_eligibility(_validation()).passed
    assert not selection_eligibility(_validation(act_fail=1)).passed  # 51/52 < 0.995
    assert selection_eligibility(_validation(bc_fail=2)).passed  # 221/223 >= 0.99
    short = selection_eligibility(_validation(act_rows=8, bc_rows=16))
    assert {c.verdict for c in short.checks} == {INSUFFICIENT}


# ------------------------------------------------------------------- spec validation (issue 24 class 4)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda s: s.update(claim_gates="G7"), "claim_gates"),
        (lambda s: s.update(claim_gates=["G8"]), "claim_gates"),
        (lambda s: s.update(claim_gates=[]), "claim_gates"),
        (lambda s: s["checks"][0].update(gate="G2"), "belongs to gate G1"),
        (lambda s: s["checks"][0].update(metric="act_schema_validity"), "unknown metric"),
        (lambda s: s["checks"][0].update(min=float("nan")), "min"),
        (lambda s: s["checks"][0].update(min="0.995"), "min"),
        (lambda s: s["checks"][0].update(min=1.5), "in [0, 1]"),
        (lambda s: s["checks"][0].update(min_n=True), "min_n"),
        (lambda s: s["checks"][0].update(min_n=0), "min_n"),
        (lambda s: s["checks"][0].update(rule="median"), "rule"),
        (lambda s: s["checks"][2].update(max=0.5), "integer 'max'"),
        (lambda s: s["checks"][4].update(data="frozen"), "reads paired"),
        (lambda s: s["checks"].append(dict(s["checks"][0])), "checked twice"),
        (lambda s: s.update(extra_field=1), "extra_field"),
        (lambda s: s["licenses"].pop("G5"), "licenses"),
        (lambda s: s["selection"]["checks"][0].update(data="frozen"), "selection checks"),
        (lambda s: s.update(checks=[c for c in s["checks"] if c["gate"] == "G7"]), "nothing would decide"),
    ],
)
def test_bad_specs_are_refused_with_one_line(mutate, message, tmp_path, capsys):
    spec = copy.deepcopy(SPEC)
    mutate(spec)
    with pytest.raises(GateSpecError) as info:
        parse_gate_spec(spec)
    assert message in str(info.value) and "\n" not in str(info.value)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert (
        main(["arena", "gates", "--base", str(tmp_path), "--candidate", str(tmp_path), "--spec", str(path)])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.just("G7"),
)  # fmt: skip
json_values = st.recursive(json_leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)  # fmt: skip


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _replace(value, path, new):
    if not path:
        return new
    value = copy.deepcopy(value)
    target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return value


SPEC_PATHS = [p for p in _paths(SPEC)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(SPEC_PATHS), new=json_values)
def test_any_one_field_replaced_gives_a_valid_spec_or_one_line(path, new):
    mutated = _replace(SPEC, path, new)
    try:
        spec = parse_gate_spec(mutated)
    except GateSpecError as exc:
        assert "\n" not in str(exc)
        return
    # accepted: the claim gates are a list of known gate names and every threshold is finite
    assert isinstance(spec.claim_gates, list) and set(spec.claim_gates) <= {
        "G1",
        "G2",
        "G3",
        "G4",
        "G5",
        "G6",
        "G7",
    }
    for check in spec.checks:
        assert all(v is None or v == v and abs(v) != float("inf") for v in (check.min, check.max))


CANDIDATE = _candidate()
SUMMARY_PATHS = [p for p in _paths(CANDIDATE) if p[:1] != ("conditions",)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(SUMMARY_PATHS), new=json_values)
def test_malformed_summaries_give_one_line_or_evaluate(path, new):
    mutated = _replace(CANDIDATE, path, new)
    try:
        validate_summary(mutated)
    except SummaryError as exc:
        assert "\n" not in str(exc)
        return
    evaluation = evaluate_arena_gates(mutated, _comparison())  # never raises on an accepted summary
    assert len(evaluation.checks) == 11


def test_gates_cli_on_malformed_summary_files(tmp_path, capsys):
    for text in (
        "{not json",
        "[1, 2]",
        json.dumps({**CANDIDATE, "num_cases": "60"}),
        '{"conditions": {}, "per_case": NaN}',
    ):
        (tmp_path / "summary.json").write_text(text)
        (tmp_path / "rows.jsonl").write_text("")
        assert main(["arena", "gates", "--base", str(tmp_path), "--candidate", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err


def test_a_check_is_found_by_its_metric_and_each_metric_is_checked_once():
    evaluation = evaluate_arena_gates(_candidate(), _comparison())
    metrics = [c.metric for c in evaluation.checks]
    assert len(metrics) == len(set(metrics))
    assert all(evaluation.check(m) is c for m, c in zip(metrics, evaluation.checks, strict=True))
    with pytest.raises(KeyError, match="no check of 'nope'; the checks are act_schema_valid"):
        evaluation.check("nope")


def test_a_case_count_too_large_for_exact_float_counts_is_refused_in_one_line():
    """Hypothesis found it: num_cases 16155014862186352 (> 2**53) passed validation, then the order-
    consistency count rounded to n + 1 and the clustered bound raised."""
    for n in (16155014862186352, 2**64):
        with pytest.raises(SummaryError) as exc:
            validate_summary({**CANDIDATE, "num_cases": n})
        assert "\n" not in str(exc.value) and "num_cases" in str(exc.value)
