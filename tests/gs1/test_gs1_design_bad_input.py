"""`rftlab gs1 design` / `decide` / `advantages` refusing hostile specs and paths (docs/gs1.md): one line
naming the file and the field or flag, valid JSON or nothing on stdout under `--json`, sizes bounded
before any draw."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from option_errors import refused_option

from rftlab.analysis import gs1 as ana
from rftlab.analysis.gs1 import parse_study_spec
from rftlab.analysis.io import MAX_INT_DIGITS, AnalysisInputError, read_json_file
from rftlab.cli import main
from rftlab.studies.gs1 import DEFAULT_SPEC

SPEC = json.loads(DEFAULT_SPEC.read_text(encoding="utf-8"))


def _spec(tmp_path, edit=None, text=None, name="spec.json"):
    spec = json.loads(json.dumps(SPEC))
    if edit:
        edit(spec)
    path = tmp_path / name
    path.write_text(text if text is not None else json.dumps(spec), encoding="utf-8")
    return path


def _refusal(capsys, argv):
    """Exit 2, one stderr line, no traceback; under --json nothing on stdout (refusals go to stderr)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert "errors.pydantic.dev" not in captured.err
    return captured.err


def _set(path, value):
    def edit(spec):
        block = spec
        for key in path[:-1]:
            block = block[key]
        block[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set(["eval", "n_examples"], {"n": 1}), "eval.n_examples: must be an integer from 2 to 200000"),
        (_set(["eval", "n_examples"], [1319]), "eval.n_examples: must be an integer from 2 to 200000"),
        (
            _set(["eval", "n_examples"], 10**7),
            "(the number of paired items), got 10000000",
        ),
        (_set(["decision_rule", "alpha"], 1), "decision_rule.alpha: Input should be less than 0.5"),
        (
            _set(["decision_rule", "criteria", 0, "margin"], 0.03),
            "decision_rule.criteria.0: criterion 'primary'",
        ),
        (lambda spec: spec.pop("decision_rule"), "decision_rule: Field required"),
        (_set(["arms", 1, "group_size"], 0), "arms.1.group_size: Input should be greater than or equal to 1"),
        (_set(["stpes"], 40), "stpes: Extra inputs are not permitted"),
    ],
)
def test_bad_specs_are_one_line_naming_the_field(tmp_path, capsys, edit, message):
    path = _spec(tmp_path, edit)
    for extra in ([], ["--json"]):
        err = _refusal(capsys, ["gs1", "design", str(path), *extra])
        assert err.startswith(f"rftlab: error: {path}: ") and message in err
        assert "prose" not in err and SPEC["hypothesis"][:40] not in err


def test_an_infinite_n_examples_and_a_nan_alpha_are_refused(tmp_path, capsys):
    text = json.dumps(SPEC).replace('"n_examples": 1319', '"n_examples": 1e400')
    err = _refusal(capsys, ["gs1", "design", str(_spec(tmp_path, text=text))])
    assert "eval.n_examples: must be an integer" in err and "got inf" in err
    text = json.dumps(SPEC).replace('"alpha": 0.05', '"alpha": NaN')
    assert "decision_rule.alpha: Input should be a finite number" in _refusal(
        capsys, ["gs1", "design", str(_spec(tmp_path, text=text, name="n.json"))]
    )


def test_a_huge_integer_and_non_utf8_bytes_name_the_file_and_the_field(tmp_path, capsys):
    text = json.dumps(SPEC).replace('"n_examples": 1319', '"n_examples": ' + "9" * 5001)
    path = _spec(tmp_path, text=text)
    err = _refusal(capsys, ["gs1", "design", str(path)])
    assert f"spec {path}: field eval.n_examples is an integer of 5001 digits" in err
    raw = json.dumps(SPEC).encode().replace(b'"GSM8K test', b'"\xff\xfeGSM8K test')
    bad = tmp_path / "latin.json"
    bad.write_bytes(raw)
    err = _refusal(capsys, ["gs1", "design", str(bad), "--json"])
    assert f"spec {bad} line 1, field eval.benchmark: byte 0xff is not UTF-8" in err


def test_sizes_are_bounded_before_any_draw(capsys):
    argv = ["gs1", "design", "--reps", "1000000000", "--candidates", "--json"]
    refused_option(argv, capsys, "--reps", "must be an integer from 100 to 1000000, got '1000000000'")
    err = _refusal(capsys, ["gs1", "design", "--reps", "1000000", "--candidates"])
    assert "--reps 1000000 x 1319 items is more than 134217728 simulated items; use --reps 101757" in err


def test_a_folder_where_a_file_is_expected_is_named_as_a_folder(tmp_path, capsys):
    folder = tmp_path / "dir"
    folder.mkdir()
    good = tmp_path / "eval.jsonl"
    good.write_text('{"item_id": 1, "correct": 1}\n{"item_id": 2, "correct": 0}\n')
    cases = [
        (["gs1", "design", str(folder)], f"spec {folder} is a folder, not a file"),
        (
            ["gs1", "decide", "--spec", str(folder), "--treatment", str(good), "--baseline", str(good)],
            "is a folder",
        ),
        (
            ["gs1", "decide", "--treatment", str(folder), "--baseline", str(good)],
            f"--treatment {folder} is a folder",
        ),
        (
            ["gs1", "decide", "--treatment", str(good), "--baseline", str(folder)],
            f"--baseline {folder} is a folder",
        ),
        (
            ["gs1", "advantages", "--input", str(folder), "--estimator", "group_mean"],
            f"batch {folder} is a folder",
        ),
    ]
    for argv, message in cases:
        assert message in _refusal(capsys, argv)


json_leaves = st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_n_examples_is_an_integer_in_range_or_a_refusal_naming_the_field(value):
    spec = json.loads(json.dumps(SPEC))
    spec["eval"]["n_examples"] = value
    try:
        n = parse_study_spec(json.dumps(spec).encode(), "s.json").eval.n_examples
    except ValueError as exc:
        assert str(exc).startswith("s.json: eval.n_examples: must be an integer from 2 to")
        assert "\n" not in str(exc)
    else:
        assert type(n) is int and 2 <= n <= ana.MAX_DESIGN_ITEMS and n == value


@settings(max_examples=50, deadline=None)
@given(
    keys=st.lists(st.text(alphabet="abcxyz_", min_size=1, max_size=4), min_size=1, max_size=4),
    digits=st.integers(MAX_INT_DIGITS + 1, MAX_INT_DIGITS + 50),
)
def test_a_huge_integer_anywhere_is_named_by_its_path(tmp_path_factory, keys, digits):
    text = "1" * digits
    for key in reversed(keys):
        text = f'{{"{key}": [0, {text}]}}'
    path = tmp_path_factory.mktemp("huge") / "s.json"
    path.write_text(text)
    dotted = ".".join(keys).replace(".", "[1].") + "[1]"
    with pytest.raises(AnalysisInputError) as caught:
        read_json_file(path, "spec")
    assert f"field {dotted} is an integer of {digits} digits" in str(caught.value)
