"""The `rftlab stats` and `rftlab gates` contract: JSON keys and exit codes."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from option_errors import refused_option

from rftlab.cli import main

BOUND_KEYS = {
    "hoeffding",
    "empirical_bernstein",
    "plugin_empirical_bernstein",
    "betting",
    "paired_t",
    "tango",
}


@pytest.fixture
def item_files(tmp_path):
    rng = np.random.default_rng(0)
    baseline = rng.random(1319) < 0.7
    treatment = np.where(rng.random(1319) < 0.92, baseline, ~baseline)
    paths = []
    for name, values in (("t", treatment), ("b", baseline)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(
            "".join(json.dumps({"item_id": f"q{i}", "correct": int(v)}) + "\n" for i, v in enumerate(values))
        )
        paths.append(path)
    return paths[0], paths[1], treatment.astype(float) - baseline.astype(float)


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_noninferiority_json_contract(item_files, capsys):
    t, b, d = item_files
    code, out, _ = run(
        [
            "stats",
            "noninferiority",
            "--treatment",
            t,
            "--baseline",
            b,
            "--margin",
            0.03,
            "--alpha",
            0.05,
            "--json",
        ],
        capsys,
    )
    assert code == 0
    result = json.loads(out)
    assert result["n"] == 1319 and result["alpha"] == 0.05 and result["margin"] == 0.03
    assert result["mean_difference"] == pytest.approx(d.mean())
    assert set(result["bounds"]) == BOUND_KEYS
    for bound in result["bounds"].values():
        assert {"lower", "decision"} <= set(bound)
    assert result["decision"] == result["bounds"]["hoeffding"]["decision"]
    assert result["bounds"]["hoeffding"]["lower"] == pytest.approx(
        d.mean() - math.sqrt(2 * math.log(20) / 1319)
    )


def test_noninferiority_exits_zero_when_inconclusive_and_prints_table(item_files, capsys):
    t, b, _ = item_files
    code, out, _ = run(
        ["stats", "noninferiority", "--treatment", t, "--baseline", b, "--margin", 0.001], capsys
    )
    assert code == 0 and "hoeffding" in out and "decision (pre-registered, hoeffding)" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty"),
        ('{"item_id": 1, "correct": 1}\nnot json\n', "line 2: not valid JSON"),
        ('{"item_id": 1, "score": 1.5}\n', "outside the declared bounds"),
        ('{"item_id": 1, "correct": 1}\n{"item_id": 1, "correct": 0}\n', "duplicated"),
    ],
)
def test_noninferiority_bad_input_exits_2(item_files, tmp_path, capsys, content, message):
    _, b, _ = item_files
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    code, out, err = run(
        ["stats", "noninferiority", "--treatment", bad, "--baseline", b, "--margin", 0.03], capsys
    )
    assert code == 2 and message in err and err.startswith("rftlab: error:")


def test_noninferiority_unpaired_and_bad_margin_exit_2(item_files, tmp_path, capsys):
    t, _, _ = item_files
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"item_id": "zzz", "correct": 1}) + "\n")
    code, _, err = run(
        ["stats", "noninferiority", "--treatment", t, "--baseline", other, "--margin", 0.03], capsys
    )
    assert code == 2 and "only in" in err and "'zzz'" in err
    argv = ["stats", "noninferiority", "--treatment", t, "--baseline", t, "--margin", -0.03]
    refused_option(argv, capsys, "--margin", "in (0, 1)", "got '-0.03'")


def test_trend_json_contract(tmp_path, capsys):
    metrics = tmp_path / "metrics.jsonl"
    ys = [0.30, 0.34, 0.33, 0.38, 0.41, 0.40, 0.45, 0.47]
    metrics.write_text(
        "".join(json.dumps({"step": 10 * e, "epoch": e, "reward": y}) + "\n" for e, y in enumerate(ys))
    )
    code, out, _ = run(["stats", "trend", "--metrics", metrics, "--metric", "reward", "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    assert {"n", "slope", "slope_ci", "p_value", "r2", "early", "late", "delta", "theil_sen_slope"} <= set(
        result
    )
    assert result["n"] == 8 and len(result["slope_ci"]) == 2
    assert result["slope"] == pytest.approx(np.polyfit(np.arange(8), ys, 1)[0])
    assert result["early"] == pytest.approx(np.mean(ys[:4])) and result["delta"] == pytest.approx(
        np.mean(ys[4:]) - np.mean(ys[:4])
    )
    code, out, _ = run(["stats", "trend", "--metrics", metrics, "--metric", "reward", "--x", "step"], capsys)
    assert code == 0 and "over step" in out
    code, _, err = run(["stats", "trend", "--metrics", metrics, "--metric", "nope"], capsys)
    assert code == 2 and "no row has metric 'nope'" in err


def test_gates_check_exit_codes(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps({"activation_gate": {"checks": [{"metric": "m", "measures": "x", "min": 0.5}]}})
    )
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"m": 0.7}))
    bad.write_text(json.dumps({"m": 0.2}))
    code, out, _ = run(["gates", "check", spec, good, "--json"], capsys)
    assert code == 0 and json.loads(out)["passed"] is True and len(json.loads(out)["spec_sha256"]) == 64
    code, out, _ = run(["gates", "check", spec, bad], capsys)
    assert code == 1 and "FAIL" in out
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"checks": [{"metric": "m", "min": 0.5}]}))
    assert run(["gates", "check", bare, good], capsys)[0] == 0
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, _, err = run(["gates", "check", broken, good], capsys)
    assert code == 2 and "not valid JSON" in err
    code, _, err = run(["gates", "check", spec, tmp_path / "missing.json"], capsys)
    assert code == 2 and "not found" in err
    nochecks = tmp_path / "nochecks.json"
    nochecks.write_text(json.dumps({"title": "x"}))
    assert run(["gates", "check", nochecks, good], capsys)[0] == 2


def test_console_script_entry_point(item_files):
    t, b, _ = item_files
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rftlab.cli",
            "stats",
            "noninferiority",
            "--treatment",
            str(t),
            "--baseline",
            str(b),
            "--margin",
            "0.03",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n"] == 1319


def test_decision_rule_command_on_gs1_spec(shared_dir, item_files, capsys):
    t, b, d = item_files
    spec = shared_dir / "seeds" / "gs1_vs_grpo_spec.json"
    code, out, _ = run(
        ["stats", "decision-rule", "--spec", spec, "--treatment", t, "--baseline", b, "--json"], capsys
    )
    assert code == 0
    result = json.loads(out)
    (primary,) = result["criteria"]
    assert primary["id"] == "primary" and primary["margin"] == -0.03
    assert primary["lower"] == pytest.approx(d.mean() - math.sqrt(2 * math.log(20) / 1319))
    assert len(result["spec_sha256"]) == 64


def test_gates_check_on_gs1_spec_names_the_missing_metric(shared_dir, tmp_path, capsys):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"executed_group_size_treatment": 1, "executed_group_size_baseline": 8}))
    spec = shared_dir / "seeds" / "gs1_vs_grpo_spec.json"
    code, out, _ = run(["gates", "check", spec, metrics, "--json"], capsys)
    assert code == 1
    checks = {c["metric"]: c for c in json.loads(out)["checks"]}
    assert checks["executed_group_size_treatment"]["passed"]
    assert not checks["pilot_mean_reward"]["passed"] and "missing" in checks["pilot_mean_reward"]["reason"]
