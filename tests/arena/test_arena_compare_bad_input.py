"""`rftlab arena compare` refusing hostile inputs (docs/arena.md §10.6): an output over an input, the same
folder twice, impossible values, overflowing values, a FIFO, and the shared sign-flip draw that keeps large
runs fast."""

from __future__ import annotations

import json
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.analysis import paired
from rftlab.analysis.arena.compare import CompareError, compare_evaluations, load_evaluation
from rftlab.cli import main

VERSIONS = {"eval_version": "e", "arena_version": "a", "manifest_sha256": "m"}
CONDITIONS = ("generated", "dropped", "shuffled", "shuffled_within")


def _write(folder, n=8, seed=0, edit=None):
    """A small well-formed evaluation folder; ``edit(row_index, condition_row)`` may change a row."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    lines = []
    for i in range(n):
        conditions = []
        for name in CONDITIONS:
            row = {
                "condition": name,
                "permutation": 0,
                "regret": rng.random(),
                "environment_reward": rng.random(),
            }
            if edit:
                edit(i, row)
            conditions.append(row)
        lines.append(
            json.dumps(
                {"seed": i, "size": 12, "opponent_style": "balanced", "conditions": conditions, **VERSIONS}
            )
        )
    (folder / "rows.jsonl").write_text("\n".join(lines) + "\n")
    summary = {"model": "m", "message_strict_rate": 1.0, "action_order_consistency_rate": 1.0, **VERSIONS}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _compare(capsys, base, candidate, *extra):
    code = main(["arena", "compare", "--base", str(base), "--candidate", str(candidate), *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("target", ["base/summary.json", "base/rows.jsonl", "cand/summary.json"])
def test_an_output_naming_an_input_is_refused_before_anything_is_written(tmp_path, capsys, target):
    base, cand = _write(tmp_path / "base"), _write(tmp_path / "cand", seed=1)
    before = (tmp_path / target).read_bytes()
    # also through a relative spelling of the same file
    output = os.path.relpath(tmp_path / target)
    code, err = _compare(capsys, base, cand, "--output", output)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"rftlab: error: --output {output} is the input ")
    assert (tmp_path / target).read_bytes() == before


def test_the_same_folder_as_base_and_candidate_is_refused(tmp_path, capsys):
    base = _write(tmp_path / "base")
    code, err = _compare(capsys, base, base / "summary.json")
    assert code == 2 and "--base and --candidate are the same evaluation" in err


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("regret", -0.5, "regret -0.5, below 0"),
        ("strict_action_rate", 1.5, "strict_action_rate 1.5, outside [0, 1]"),
    ],
)
def test_impossible_values_name_the_file_and_the_row(tmp_path, capsys, field, value, message):
    def edit(i, row):
        if i == 3 and row["condition"] == "dropped":
            row[field] = value

    base, cand = _write(tmp_path / "base"), _write(tmp_path / "cand", seed=1, edit=edit)
    code, err = _compare(capsys, base, cand)
    assert code == 2 and f"{cand / 'rows.jsonl'} row 4: condition 'dropped' has {message}" in err


@given(regret=st.floats(max_value=-2e-9, allow_nan=False, allow_infinity=False))
@settings(max_examples=25, deadline=None)
def test_any_negative_regret_beyond_the_tolerance_is_refused(tmp_path_factory, regret):
    def edit(i, row):
        row["regret"] = regret if i == 0 else row["regret"]

    folder = _write(tmp_path_factory.mktemp("neg") / "run", edit=edit)
    with pytest.raises(CompareError, match="row 1: condition 'generated' has regret"):
        load_evaluation(folder)


@pytest.mark.parametrize(("base_regret", "cand_regret"), [(1e308, 0.0), (0.0, 1e308)])
def test_regrets_whose_mean_overflows_are_one_clear_line(tmp_path, capsys, base_regret, cand_regret):
    base = _write(tmp_path / "base", edit=lambda i, row: row.update(regret=base_regret))
    cand = _write(tmp_path / "cand", seed=1, edit=lambda i, row: row.update(regret=cand_regret))
    code, err = _compare(capsys, base, cand)
    assert code == 2 and err.count("\n") == 1 and "endpoint primary" in err and "regret" in err


def test_a_difference_that_overflows_names_the_case(tmp_path):
    base = _write(tmp_path / "base", edit=lambda i, row: row.update(environment_reward=-1e308))
    cand = _write(tmp_path / "cand", seed=1, edit=lambda i, row: row.update(environment_reward=1e308))
    with pytest.raises(
        CompareError, match=r"endpoint supporting: case \(0, 12, 'balanced'\) gives a difference"
    ):
        compare_evaluations(load_evaluation(base), load_evaluation(cand), trials=10)


@pytest.mark.parametrize("name", ["rows.jsonl", "summary.json"])
def test_a_fifo_is_refused_without_being_opened(tmp_path, capsys, name):
    base, cand = _write(tmp_path / "base"), _write(tmp_path / "cand", seed=1)
    (cand / name).unlink()
    os.mkfifo(cand / name)  # opening it for reading would block: the refusal must come from stat alone
    code, err = _compare(capsys, base, cand)
    assert code == 2 and f"{cand / name} is not a regular file" in err


def test_the_shared_draw_gives_each_series_its_own_p_value_whatever_the_block_size(monkeypatch):
    rng = random.Random(3)
    series = [[rng.choice([-1.0, 0.0, 0.5, 2.0]) for _ in range(37)] for _ in range(3)] + [[0.0] * 37]
    alone = [paired.sign_flip_p_value(s, trials=500) for s in series]
    assert paired.sign_flip_p_values(series, trials=500) == alone
    monkeypatch.setattr(paired, "_CHUNK_WORDS", 50)  # one trial per block: blocks split at word boundaries
    assert paired.sign_flip_p_values(series, trials=500) == alone
    assert alone[-1] == 1.0


def test_duplicate_cases_are_found_in_a_large_run(tmp_path):
    base = _write(tmp_path / "base", n=3000)
    dup = _write(tmp_path / "dup", n=3000, seed=1)
    lines = (dup / "rows.jsonl").read_text().splitlines()
    (dup / "rows.jsonl").write_text("\n".join(lines[:-1] + [lines[5]]) + "\n")
    with pytest.raises(CompareError, match=r"case\(s\) \[\(5, 12, 'balanced'\)\] more than once"):
        compare_evaluations(load_evaluation(base), load_evaluation(dup), trials=10)
