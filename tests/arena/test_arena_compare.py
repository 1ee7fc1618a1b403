"""`rftlab arena compare` (docs/arena.md §10.6) on two real evaluations, against an independent computation
read straight from the rows files, and its refusals of inputs that cannot be compared."""

from __future__ import annotations

import json
import random
import shutil
import statistics

import pytest

from rftlab.analysis.arena.compare import (
    COMPARE_VERSION,
    CompareError,
    NotComparableError,
    compare_evaluations,
    compare_markdown,
    load_evaluation,
    named_endpoints,
)
from rftlab.cli import main
from rftlab.policies.arena.providers import ScriptedProvider
from rftlab.rollout.arena.sft_data import STAGE1_CONFIG, build_rows
from rftlab.studies.arena import evaluate_frozen, write_evaluation

TRIALS = 20_000


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The scripted policy without (base) and with (candidate) reading its inbox: two real evaluations."""
    root = tmp_path_factory.mktemp("evals")
    validation = build_rows(STAGE1_CONFIG).split_rows("validation")  # 223 BROADCAST + 52 ACT rows
    write_evaluation(
        root / "base", evaluate_frozen(ScriptedProvider(use_inbox=False), validation_rows=validation)
    )
    write_evaluation(root / "sft", evaluate_frozen(ScriptedProvider(), validation_rows=validation))
    write_evaluation(root / "stride", evaluate_frozen(ScriptedProvider(), cases=range(0, 60, 2)))
    return root


def independent(rows_base, rows_sft, trials):
    """§10.6 computed from the raw JSON rows with the standard library, one getrandbits(1) at a time."""

    def value(record, condition, key):
        (row,) = [r for r in record["conditions"] if r["condition"] == condition and r["permutation"] == 0]
        return row[key]

    sft_by_key = {(r["seed"], r["size"], r["opponent_style"]): r for r in rows_sft}
    pairs = [(b, sft_by_key[(b["seed"], b["size"], b["opponent_style"])]) for b in rows_base]
    series = {
        "primary": [value(s, "generated", "regret") - value(b, "generated", "regret") for b, s in pairs],
        "supporting": [
            value(s, "generated", "environment_reward") - value(b, "generated", "environment_reward")
            for b, s in pairs
        ],
        "generated_minus_dropped": [
            value(s, "generated", "environment_reward") - value(s, "dropped", "environment_reward")
            for _, s in pairs
        ],
        "generated_minus_shuffled": [
            value(s, "generated", "environment_reward") - value(s, "shuffled", "environment_reward")
            for _, s in pairs
        ],
    }
    out = {}
    for name, d in series.items():
        mean = statistics.fmean(d)
        half = 1.96 * statistics.stdev(d) / len(d) ** 0.5
        rng = random.Random(0)
        count = 0
        for _ in range(trials):
            flipped = [x if rng.getrandbits(1) else -x for x in d]
            if abs(sum(flipped) / len(flipped)) >= abs(mean) - 1e-12:
                count += 1
        out[name] = {
            "cases": len(d),
            "mean": mean,
            "ci": [mean - half, mean + half],
            # rewards are multiples of 0.05: the sign of a difference is that of its whole number of 0.05s
            "positive": sum(round(x * 20) > 0 for x in d) / len(d),
            "zero": sum(round(x * 20) == 0 for x in d) / len(d),
            "p": 1.0 if mean == 0 else (count + 1) / (trials + 1),
        }
    return out


def _rows(folder):
    return [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_compare_equals_an_independent_computation_on_two_real_evaluations(runs):
    comparison = compare_evaluations(
        load_evaluation(runs / "base"), load_evaluation(runs / "sft"), trials=TRIALS
    )
    expected = independent(_rows(runs / "base"), _rows(runs / "sft"), TRIALS)
    assert comparison["compare_version"] == COMPARE_VERSION and comparison["cases"] == 60
    assert comparison["complete_manifest"] is True
    assert list(comparison["endpoints"]) == list(expected)
    for name, e in comparison["endpoints"].items():
        x = expected[name]
        assert e["cases"] == x["cases"]
        assert e["mean_difference"] == pytest.approx(x["mean"], abs=1e-12)
        assert e["mean_difference_95"] == pytest.approx(x["ci"], abs=1e-12)
        assert e["positive_case_rate"] == x["positive"] and e["zero_case_rate"] == x["zero"]
        assert e["randomization_p_two_sided"] == x["p"]
    # the inbox-reading policy beats its inbox-blind self in 10 cases, loses 6 and ties 44 (one case, 4.0
    # against 4.000000000000001, ties: the same regret summed in another order)
    primary = comparison["endpoints"]["primary"]
    assert primary["sign_test"] == {
        "positive": 6,
        "negative": 10,
        "ties": 44,
        "p_value": pytest.approx(0.4545, abs=1e-4),
    }
    claims = comparison["claim_gates"]
    assert claims["lower_oracle_regret_95_excludes_zero"] == (primary["mean_difference_95"][1] < 0)
    assert claims["coordination_improvement_supported"] == all(
        claims[k] for k in claims if k != "coordination_improvement_supported"
    )
    assert comparison["sft"]["message_strict_rate"] == 1.0
    assert "generated_minus_shuffled_within" in comparison["rftlab_additions"]["endpoints"]


@pytest.mark.slow
def test_full_size_randomisation_p_equals_the_literal_loop(runs):
    comparison = compare_evaluations(load_evaluation(runs / "base"), load_evaluation(runs / "sft"))
    expected = independent(_rows(runs / "base"), _rows(runs / "sft"), 100_000)
    for name in ("primary", "generated_minus_shuffled"):
        assert comparison["endpoints"][name]["randomization_p_two_sided"] == expected[name]["p"]


def test_identical_runs_give_zero_differences_and_p_one(runs):
    same = compare_evaluations(load_evaluation(runs / "sft"), load_evaluation(runs / "sft"), trials=100)
    assert same["endpoints"]["primary"]["mean_difference"] == 0.0
    assert same["endpoints"]["primary"]["randomization_p_two_sided"] == 1.0


def _copy(runs, tmp_path, name="copy"):
    dest = tmp_path / name
    shutil.copytree(runs / "sft", dest)
    return dest


def _edit_rows(folder, edit):
    rows = _rows(folder)
    rows = edit(rows)
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _edit_summary(folder, **fields):
    summary = json.loads((folder / "summary.json").read_text())
    summary.update(fields)
    (folder / "summary.json").write_text(json.dumps(summary))


def test_preconditions_refuse_mismatched_inputs(runs, tmp_path):
    base = load_evaluation(runs / "base")
    with pytest.raises(NotComparableError, match="case sets differ"):
        compare_evaluations(base, load_evaluation(runs / "stride"))
    dup = _copy(runs, tmp_path, "dup")
    _edit_rows(dup, lambda rows: rows[:-1] + [rows[0]])
    with pytest.raises(NotComparableError, match="more than once"):
        compare_evaluations(base, load_evaluation(dup))
    for key, value in (
        ("eval_version", "rftlab-arena-eval-v2"),
        ("arena_version", "arena-core-v0"),
        ("manifest_sha256", "0" * 64),
    ):
        other = _copy(runs, tmp_path, key)
        _edit_summary(other, **{key: value})
        _edit_rows(other, lambda rows, k=key, v=value: [{**r, k: v} for r in rows])
        with pytest.raises(NotComparableError, match=f"{key} differs"):
            compare_evaluations(base, load_evaluation(other))
    # rows that disagree with their own summary are malformed input, not a comparison
    torn = _copy(runs, tmp_path, "torn")
    _edit_summary(torn, eval_version="something-else")
    with pytest.raises(CompareError, match="differ from the summary"):
        load_evaluation(torn)


def test_cli_compare_prints_writes_and_refuses(runs, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert (
        main(
            [
                "arena",
                "compare",
                "--base",
                str(runs / "base"),
                "--candidate",
                str(runs / "sft"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "frozen-paired-arena-v1: 60 cases" in text and "primary" in text
    assert json.loads(out.read_text())["endpoints"]["primary"]["cases"] == 60
    assert main(["arena", "compare", "--base", str(runs / "base"), "--candidate", str(runs / "stride")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rftlab: refused: cannot compare: the case sets differ") and err.count("\n") == 1
    bad = _copy(runs, tmp_path, "bad")
    (bad / "rows.jsonl").write_text('{"seed": 1}\n{not json\n')
    assert main(["arena", "compare", "--base", str(runs / "base"), "--candidate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert main(["arena", "compare", "--base", str(tmp_path / "nowhere"), "--candidate", str(bad)]) == 2


def test_gates_cli_reads_g5_and_g7_from_the_comparison(runs, tmp_path, capsys):
    """The scripted policy with its inbox against itself without: promotion passes, and the communication
    claim fails on the within-case shuffled control (its G5 and G7 dropped/shuffled rest on one 10-7 split)."""
    out = tmp_path / "gates.json"
    args = [
        "arena",
        "gates",
        "--base",
        str(runs / "base"),
        "--candidate",
        str(runs / "sft"),
        "--output",
        str(out),
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert (
        "promotion (every gate except G7): PASS" in text and "communication claim (G7): not supported" in text
    )
    record = json.loads(out.read_text())
    comparison = record["comparison"]
    checks = {c["metric"]: c for c in record["checks"]}
    assert (
        checks["regret_difference_ci_high"]["observed"]
        == comparison["endpoints"]["primary"]["mean_difference_95"][1]
    )
    assert (
        checks["generated_minus_dropped_ci_low"]["observed"]
        == comparison["endpoints"]["generated_minus_dropped"]["mean_difference_95"][0]
    )
    assert checks["generated_minus_shuffled_within_ci_low"]["verdict"] == "FAIL"
    assert checks["act_schema_valid"]["n"] == 60 * 28 and checks["broadcast_schema_valid"]["n"] == 240
    assert main(["arena", "gates", "--base", str(runs / "sft"), "--candidate", str(runs / "base")]) == 1
    capsys.readouterr()
    # a strided candidate cannot be compared: G5/G7 are missing with the refusal, everything frozen is short
    assert (
        main(["arena", "gates", "--base", str(runs / "base"), "--candidate", str(runs / "stride"), "--json"])
        == 1
    )
    record = json.loads(capsys.readouterr().out)
    checks = {c["metric"]: c for c in record["checks"]}
    assert (
        checks["regret_difference_mean"]["verdict"] == "MISSING"
        and "case sets differ" in checks["regret_difference_mean"]["reason"]
    )
    assert checks["act_schema_valid"]["verdict"] == "INSUFFICIENT N"


def test_the_report_table_lists_every_endpoint_in_order_with_p_values_at_their_resolution(runs):
    comparison = compare_evaluations(
        load_evaluation(runs / "base"), load_evaluation(runs / "sft"), trials=TRIALS
    )
    names = [name for name, _ in named_endpoints(comparison)]
    assert names[:4] == list(comparison["endpoints"])
    assert set(names[4:]) <= set(comparison["rftlab_additions"]["endpoints"])
    assert "generated_minus_shuffled_within" in names
    table = compare_markdown(comparison).splitlines()
    assert len(table) == 2 + len(names)
    primary = comparison["endpoints"]["primary"]
    row = next(line for line in table if line.startswith("| primary"))
    assert f"{primary['mean_difference']:+.4f}" in row and "6 / 10 / 44" in row


def test_gates_refuse_overflowing_differences_and_an_output_over_the_spec(runs, tmp_path, capsys):
    """A difference beyond the float range is one error line in `arena gates` too, never a traceback."""
    huge = _copy(runs, tmp_path, "huge")

    def inflate(rows):
        for row in rows:
            for condition in row["conditions"]:
                condition["environment_reward"] = 1e308 if condition["condition"] == "generated" else -1e308
        return rows

    _edit_rows(huge, inflate)
    assert main(["arena", "gates", "--base", str(runs / "base"), "--candidate", str(huge)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "endpoint supporting" in err
    spec = tmp_path / "spec.json"
    from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC

    spec.write_bytes(DEFAULT_GATE_SPEC.read_bytes())
    args = ["arena", "gates", "--base", str(runs / "base"), "--candidate", str(runs / "sft")]
    assert main([*args, "--spec", str(spec), "--output", str(spec)]) == 2
    assert "is the input" in capsys.readouterr().err and spec.read_bytes() == DEFAULT_GATE_SPEC.read_bytes()
