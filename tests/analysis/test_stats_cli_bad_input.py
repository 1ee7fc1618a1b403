"""Bad input, seeds, labels and gate values at the `rftlab stats` / `rftlab gates` command line.

Issue 8 §2 (seed in the decision spec), §4 (gate values), §5 (sidedness labels), §7 (trend verdicts),
and issue 9 §1-2 for stats/gates: every user error is one line naming the file/flag/field, exit 2;
`gates check` exits 1 only for a failing gate; no --json output holds NaN or Infinity.
"""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest
from option_errors import refused_option

from rftlab.cli import main


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def strict_json(text: str):
    """Parse JSON refusing the non-standard NaN/Infinity literals."""

    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name} in output")

    return json.loads(text, parse_constant=refuse)


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("rftlab: error: ")
    assert "Traceback" not in err
    return lines[0]


def write_items(path, values, field="correct"):
    path.write_text("".join(json.dumps({"item_id": i, field: v}) + "\n" for i, v in enumerate(values)))
    return path


@pytest.fixture
def arms(tmp_path):
    rng = np.random.default_rng(5)
    baseline = (rng.random(1319) < 0.7).astype(int)
    treatment = np.where(rng.random(1319) < 0.9, baseline, 1 - baseline)
    return write_items(tmp_path / "t.jsonl", treatment.tolist()), write_items(
        tmp_path / "b.jsonl", baseline.tolist()
    )


def ni(arms, *extra):
    t, b = arms
    return ["stats", "noninferiority", "--treatment", t, "--baseline", b, *extra]


# ---------------------------------------------------------------- stats noninferiority


@pytest.mark.parametrize("margin", ["1.5", "1", "inf", "nan", "-0.1", "0", "-inf"])
def test_noninferiority_refuses_margins_outside_the_range(arms, capsys, margin):
    refused_option([*ni(arms), f"--margin={margin}"], capsys, "--margin", "in (0, 1)", f"got '{margin}'")


@pytest.mark.parametrize("alpha", ["nan", "inf", "0", "0.5", "-0.1"])
def test_noninferiority_refuses_bad_alpha(arms, capsys, alpha):
    argv = [*ni(arms), "--margin", "0.03", f"--alpha={alpha}"]
    refused_option(argv, capsys, "--alpha", "in (0, 0.5)", f"got '{alpha}'")


def test_negative_seed_names_the_flag(arms, capsys):
    refused_option([*ni(arms), "--margin", "0.03", "--seed", "-1"], capsys, "--seed", "non-negative", "'-1'")


def test_noninferiority_labels_sidedness_in_json_and_table(arms, capsys):
    code, out, _ = run([*ni(arms), "--margin", "0.03", "--alpha", "0.05", "--json"], capsys)
    report = strict_json(out)
    assert code == 0
    assert report["one_sided_level"] == 0.95 and report["two_sided_level"] == pytest.approx(0.9)
    for bound in report["bounds"].values():
        assert bound["one_sided_level"] == 0.95 and bound["two_sided_level"] == pytest.approx(0.9)
        assert "level" not in bound  # the ambiguous single label is gone
    code, out, _ = run([*ni(arms), "--margin", "0.03"], capsys)
    assert "each a one-sided 0.95 bound" in out and "two-sided 0.9 interval" in out
    assert "lower(1s 0.95)" in out


def test_default_seed_is_not_exploratory_and_another_seed_is_labelled(arms, capsys):
    _, out, _ = run([*ni(arms), "--margin", "0.03", "--json"], capsys)
    default = strict_json(out)
    assert default["exploratory"] is False and default["permutation_seed"] == 0
    assert default["bounds"]["betting"]["permutation_seed"] == 0
    assert default["bounds"]["hoeffding"]["permutation_seed"] is None
    code, out, _ = run([*ni(arms), "--margin", "0.03", "--seed", "7", "--json"], capsys)
    shopped = strict_json(out)
    assert code == 0 and shopped["exploratory"] is True and "exploratory" in shopped["seed_note"]
    assert shopped["bounds"]["betting"]["permutation_seed"] == 7
    code, out, _ = run([*ni(arms), "--margin", "0.03", "--seed", "7"], capsys)
    assert "EXPLORATORY" in out


def test_all_tie_sample_is_inconclusive_for_paired_t_at_the_cli(tmp_path, capsys):
    # issue 8 §3: n = 50, every item tied; paired t used to print "noninferior"
    t = write_items(tmp_path / "t.jsonl", [1] * 50)
    b = write_items(tmp_path / "b.jsonl", [1] * 50)
    code, out, _ = run(
        ["stats", "noninferiority", "--treatment", t, "--baseline", b, "--margin", "0.03", "--json"], capsys
    )
    bounds = strict_json(out)["bounds"]
    assert code == 0
    for method in ("paired_t", "tango"):
        assert bounds[method]["decision"] == "inconclusive" and bounds[method]["lower"] is None
        assert "degenerate" in bounds[method]["note"]


def test_unreadable_input_file_is_a_one_line_error(arms, capsys):
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their permissions")
    t, _ = arms
    t.chmod(0)
    try:
        code, _, err = run([*ni(arms), "--margin", "0.03"], capsys)
    finally:
        t.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert code == 2 and "permission denied" in one_line_error(err) and str(t) in err


def test_unreadable_input_file_even_as_root(arms, capsys, monkeypatch):
    # the suite may run as root, which reads mode-000 files: simulate the permission error itself
    import pathlib

    t, _ = arms
    real_open = pathlib.Path.open

    def guarded(self, *args, **kwargs):
        if self == t:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", guarded)
    code, _, err = run([*ni(arms), "--margin", "0.03"], capsys)
    assert code == 2 and "permission denied" in one_line_error(err) and str(t) in err


def test_unreadable_input_via_a_directory_is_a_one_line_error(arms, tmp_path, capsys):
    _, b = arms
    code, _, err = run(
        ["stats", "noninferiority", "--treatment", tmp_path, "--baseline", b, "--margin", "0.03"], capsys
    )
    assert code == 2 and "is a folder, not a file" in one_line_error(err)


def test_non_utf8_byte_names_file_and_line(arms, capsys):
    t, _ = arms
    lines = t.read_bytes().splitlines(keepends=True)
    lines[4] = b'{"item_id": 4, "correct": 1, "note": "\xff"}\n'
    t.write_bytes(b"".join(lines))
    code, _, err = run([*ni(arms), "--margin", "0.03"], capsys)
    line = one_line_error(err)
    assert code == 2 and str(t) in line and "line 5" in line and "UTF-8" in line


# ---------------------------------------------------------------- stats trend


@pytest.fixture
def metrics_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rng = np.random.default_rng(1)
    path.write_text(
        "".join(
            json.dumps({"epoch": e, "acc": 0.5 + 0.025 * e + rng.normal(0, 0.002)}) + "\n" for e in range(8)
        )
    )
    return path


@pytest.mark.parametrize(("lags", "needle"), [("8", "smaller than the 8 points"), ("10000", "smaller")])
def test_trend_refuses_bad_hac_lags(metrics_file, capsys, lags, needle):
    code, _, err = run(
        ["stats", "trend", "--metrics", metrics_file, "--metric", "acc", "--hac-maxlags", lags], capsys
    )
    line = one_line_error(err)
    assert code == 2 and "--hac-maxlags" in line and needle in line


def test_trend_refuses_negative_hac_lags(metrics_file, capsys):
    argv = ["stats", "trend", "--metrics", metrics_file, "--metric", "acc", "--hac-maxlags", "-1"]
    refused_option(argv, capsys, "--hac-maxlags", "non-negative", "got '-1'")


@pytest.mark.parametrize("epsilon", ["nan", "inf", "0", "-0.1"])
def test_trend_refuses_bad_epsilon(metrics_file, capsys, epsilon):
    argv = ["stats", "trend", "--metrics", metrics_file, "--metric", "acc", "--epsilon", epsilon]
    refused_option(argv, capsys, "--epsilon", "a finite number > 0", f"got '{epsilon}'")


def test_trend_verdict_says_flat_but_rising(metrics_file, capsys):
    # slope ~0.025 with a tight CI inside ±0.05 that excludes 0: the old label said just "flat"
    code, out, _ = run(
        ["stats", "trend", "--metrics", metrics_file, "--metric", "acc", "--epsilon", "0.05", "--json"],
        capsys,
    )
    flat = strict_json(out)["flatness"]
    assert code == 0
    assert flat["flat_within_epsilon"] and flat["differs_from_zero"] and flat["direction"] == "rising"
    assert flat["verdict"] == "flat_but_rising" and "but rising" in flat["label"]
    _, out, _ = run(
        ["stats", "trend", "--metrics", metrics_file, "--metric", "acc", "--epsilon", "0.05"], capsys
    )
    assert "flat within ±0.05, but rising" in out


def test_trend_json_is_strict_even_for_a_perfect_fit(tmp_path, capsys):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"epoch": e, "acc": 0.5}) + "\n" for e in range(6)))
    code, out, _ = run(
        ["stats", "trend", "--metrics", path, "--metric", "acc", "--json", "--epsilon", "0.1"], capsys
    )
    assert code == 0
    strict_json(out)


def test_trend_unreadable_and_non_utf8(metrics_file, capsys):
    metrics_file.write_bytes(metrics_file.read_bytes() + b'{"epoch": 9, "acc": 0.7, "x": "\xc3"}\n')
    code, _, err = run(["stats", "trend", "--metrics", metrics_file, "--metric", "acc"], capsys)
    assert code == 2 and "line 9" in one_line_error(err)


# ---------------------------------------------------------------- stats decision-rule


def rule_spec(tmp_path, name="spec.json", **rule):
    block = {
        "alpha": 0.05,
        "method": "paired_betting",
        "permutation_seed": 3,
        "criteria": [
            {
                "id": "primary",
                "metric": "accuracy",
                "weights": {"treatment": 1, "baseline": -1},
                "margin": -0.03,
            }
        ],
    }
    block.update(rule)
    path = tmp_path / name
    path.write_text(json.dumps({"decision_rule": block}))
    return path


def dr(spec, arms, *extra):
    t, b = arms
    return ["stats", "decision-rule", "--spec", spec, "--treatment", t, "--baseline", b, *extra]


def test_decision_rule_records_the_preregistered_seed_and_spec_hash(tmp_path, arms, capsys):
    import hashlib

    spec = rule_spec(tmp_path)
    code, out, _ = run([*dr(spec, arms), "--json"], capsys)
    result = strict_json(out)
    assert code == 0
    assert result["spec_sha256"] == hashlib.sha256(spec.read_bytes()).hexdigest()
    assert result["permutation_seed"] == 3 and result["order_dependent"] is True
    (criterion,) = result["criteria"]
    assert criterion["permutation_seed"] == 3 and criterion["one_sided_level"] == 0.95
    assert criterion["two_sided_level"] == pytest.approx(0.9)
    # the same seed on the command line is accepted and gives the same result
    code, again, _ = run([*dr(spec, arms), "--seed", "3", "--json"], capsys)
    assert code == 0 and strict_json(again) == result
    code, table, _ = run(dr(spec, arms), capsys)
    assert "permutation seed 3 (pre-registered in the spec)" in table and result["spec_sha256"] in table


def test_decision_rule_seed_changes_the_hash(tmp_path, arms, capsys):
    a = rule_spec(tmp_path, "a.json", permutation_seed=3)
    b = rule_spec(tmp_path, "b.json", permutation_seed=4)
    _, out_a, _ = run([*dr(a, arms), "--json"], capsys)
    _, out_b, _ = run([*dr(b, arms), "--json"], capsys)
    assert strict_json(out_a)["spec_sha256"] != strict_json(out_b)["spec_sha256"]


def test_decision_rule_refuses_a_different_seed(tmp_path, arms, capsys):
    code, out, err = run([*dr(rule_spec(tmp_path), arms), "--seed", "4"], capsys)
    line = one_line_error(err)
    assert code == 2 and out == ""
    assert "--seed 4" in line and "permutation_seed 3" in line


def test_decision_rule_refuses_any_seed_when_the_spec_has_none(shared_dir, arms, capsys):
    spec = shared_dir / "seeds" / "gs1_vs_grpo_spec.json"  # Hoeffding: no seed pre-registered
    code, _, err = run([*dr(spec, arms), "--seed", "0"], capsys)
    assert code == 2 and "pre-registers no permutation_seed" in one_line_error(err)
    code, out, _ = run([*dr(spec, arms), "--json"], capsys)
    assert code == 0 and strict_json(out)["permutation_seed"] is None


@pytest.mark.parametrize(
    ("rule", "needle"),
    [
        ({"permutation_seed": None}, "permutation_seed"),
        ({"permutation_seed": -2}, "permutation_seed"),
        ({"permutation_seed": 1.5}, "permutation_seed"),
        ({"permutation_seed": "3"}, "permutation_seed"),
        ({"criteria": []}, "criteria"),
        ({"alpha": 0.7}, "alpha"),
        ({"method": "magic"}, "method"),
    ],
)
def test_decision_rule_bad_specs_exit_2_naming_the_field(tmp_path, arms, capsys, rule, needle):
    spec = rule_spec(tmp_path, **rule)
    if rule.get("permutation_seed", 0) is None:
        data = json.loads(spec.read_text())
        del data["decision_rule"]["permutation_seed"]
        spec.write_text(json.dumps(data))
    code, out, err = run(dr(spec, arms), capsys)
    line = one_line_error(err)
    assert code == 2 and out == "" and needle in line and str(spec) in line


@pytest.mark.parametrize("margin", [1.5, -1.0, -5, 0.1])
def test_decision_rule_refuses_margins_outside_the_statistic_range(tmp_path, arms, capsys, margin):
    criteria = [
        {"id": "p", "metric": "accuracy", "weights": {"treatment": 1, "baseline": -1}, "margin": margin}
    ]
    code, _, err = run(dr(rule_spec(tmp_path, criteria=criteria), arms), capsys)
    assert code == 2 and "margin" in one_line_error(err)


def test_decision_rule_refuses_nan_margin(tmp_path, arms, capsys):
    spec = tmp_path / "nan.json"
    spec.write_text(
        '{"decision_rule": {"alpha": 0.05, "method": "paired_hoeffding", "criteria": [{"id": "p", '
        '"metric": "accuracy", "weights": {"treatment": 1, "baseline": -1}, "margin": NaN}]}}'
    )
    code, _, err = run(dr(spec, arms), capsys)
    assert code == 2 and "margin" in one_line_error(err)


def test_decision_rule_unreadable_spec(tmp_path, arms, capsys):
    spec = tmp_path / "spec.json"
    spec.write_bytes(b'{"decision_rule": {"alpha": 0.05, "estimand": "\xfe"}}')
    code, _, err = run(dr(spec, arms), capsys)
    assert code == 2 and "UTF-8" in one_line_error(err) and str(spec) in err
    code, _, err = run(dr(tmp_path / "none.json", arms), capsys)
    assert code == 2 and "not found" in one_line_error(err)


# ---------------------------------------------------------------- gates check


@pytest.fixture
def gate_spec(tmp_path):
    path = tmp_path / "gate.json"
    path.write_text(json.dumps({"checks": [{"metric": "kernel_effective_neighbors_p10", "min": 8}]}))
    return path


def write_metrics(tmp_path, text, name="metrics.json"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "value",
    [
        "Infinity",
        "-Infinity",
        "NaN",
        '"inf"',
        '"Infinity"',
        '"1_0"',
        '"nan"',
        '" 10"',
        "true",
        "[10]",
        '{"n": 3}',
        "1e999",
    ],
)
def test_non_finite_or_loose_gate_values_fail_with_a_reason(tmp_path, gate_spec, capsys, value):
    metrics = write_metrics(tmp_path, '{"kernel_effective_neighbors_p10": VALUE}'.replace("VALUE", value))
    code, out, _ = run(["gates", "check", gate_spec, metrics, "--json"], capsys)
    evaluation = strict_json(out)
    (check,) = evaluation["checks"]
    assert code == 1 and not evaluation["passed"]
    assert "not a finite number" in check["reason"]


@pytest.mark.parametrize("value", ["10", "8", '"10"', '"1e1"', '"8.0"', "12.5"])
def test_finite_numbers_and_strict_decimal_strings_pass(tmp_path, gate_spec, capsys, value):
    metrics = write_metrics(tmp_path, '{"kernel_effective_neighbors_p10": VALUE}'.replace("VALUE", value))
    code, out, _ = run(["gates", "check", gate_spec, metrics, "--json"], capsys)
    assert code == 0 and strict_json(out)["passed"]


@pytest.mark.parametrize(
    "check",
    [
        '{"metric": "m", "min": NaN}',
        '{"metric": "m", "max": Infinity}',
        '{"metric": "m", "min": 2, "max": 1}',
        '{"metric": "m", "min": "5"}',
        '{"metric": "m", "one_of": []}',
        '{"metric": "m"}',
        '"m >= 3"',
    ],
)
def test_bad_gate_specs_exit_2_not_1(tmp_path, capsys, check):
    spec = write_metrics(tmp_path, '{"checks": [CHECK]}'.replace("CHECK", check), "spec.json")
    metrics = write_metrics(tmp_path, '{"m": 3}')
    code, out, err = run(["gates", "check", spec, metrics], capsys)
    assert code == 2 and out == "" and str(spec) in one_line_error(err)


@pytest.mark.parametrize("evidence", ['"run-1"', '["run-1", "run-2"]', "3"])
def test_evidence_that_is_not_an_object_exits_2(tmp_path, gate_spec, capsys, evidence):
    for text in (
        '{"kernel_effective_neighbors_p10": 9, "evidence": EV}'.replace("EV", evidence),
        '{"metrics": {"kernel_effective_neighbors_p10": 9}, "evidence": EV}'.replace("EV", evidence),
    ):
        metrics = write_metrics(tmp_path, text)
        code, _, err = run(["gates", "check", gate_spec, metrics], capsys)
        line = one_line_error(err)
        assert code == 2 and "evidence" in line and str(metrics) in line


def test_metrics_wrapper_that_is_not_an_object_exits_2(tmp_path, gate_spec, capsys):
    metrics = write_metrics(tmp_path, '{"metrics": [1, 2]}')
    code, _, err = run(["gates", "check", gate_spec, metrics], capsys)
    assert code == 2 and "'metrics'" in one_line_error(err)


def test_gates_unreadable_and_non_utf8_files_exit_2(tmp_path, gate_spec, capsys):
    metrics = tmp_path / "m.json"
    metrics.write_bytes(b'{"kernel_effective_neighbors_p10": 9,\n "x": "\xff"}')
    code, _, err = run(["gates", "check", gate_spec, metrics], capsys)
    line = one_line_error(err)
    assert code == 2 and "line 2" in line and "UTF-8" in line and str(metrics) in line
    code, _, err = run(["gates", "check", gate_spec, tmp_path], capsys)
    assert code == 2 and "is a folder, not a file" in one_line_error(err)
    if os.geteuid() != 0:
        gate_spec.chmod(0)
        try:
            code, _, err = run(["gates", "check", gate_spec, metrics], capsys)
        finally:
            gate_spec.chmod(stat.S_IRUSR | stat.S_IWUSR)
        assert code == 2 and "permission denied" in one_line_error(err)


def test_gate_json_holds_no_non_finite_literals_even_in_evidence(tmp_path, gate_spec, capsys):
    metrics = write_metrics(
        tmp_path,
        '{"kernel_effective_neighbors_p10": {"value": Infinity, "n": NaN}, "evidence": {"loss": -Infinity}}',
    )
    code, out, _ = run(["gates", "check", gate_spec, metrics, "--json"], capsys)
    (check,) = strict_json(out)["checks"]
    # --json prints every non-finite number as null (docs/statistics.md, the one rule of every --json)
    assert code == 1 and check["observed"] is None and check["evidence"]["n"] is None
    assert check["evidence"]["loss"] is None


def test_help_states_what_anytime_validity_covers(capsys):
    with pytest.raises(SystemExit):
        main(["stats", "noninferiority", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "anytime-valid over the items of this one comparison only" in text
    assert "new checkpoint every epoch is a new test" in text


def test_gates_permission_error_even_as_root(tmp_path, gate_spec, capsys, monkeypatch):
    import pathlib

    metrics = write_metrics(tmp_path, '{"kernel_effective_neighbors_p10": 9}')
    real = pathlib.Path.read_bytes

    def guarded(self):
        if self == metrics:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(pathlib.Path, "read_bytes", guarded)
    code, _, err = run(["gates", "check", gate_spec, metrics], capsys)
    line = one_line_error(err)
    assert code == 2 and "permission denied" in line and str(metrics) in line
