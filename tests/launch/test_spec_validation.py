"""Class 8 of issue 24: arm specs are validated where their fields are declared. Whatever a spec file holds,
loading it gives a spec whose numbers are finite and in range, whose integers are integers (not ``true``),
whose names follow the run store's rule and whose argv strings cannot be read as flags — or one
``ValueError`` line naming the file and the field. ``arm launch`` / ``fireworks launch`` / ``poker launch``
turn that into exit 2 and create no run folder."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.cli import main
from rftlab.launch.poker.spec import PokerArmSpec, load_poker_arm_spec
from rftlab.launch.specs import EVALUATOR_RESOURCE, FIREWORKS_ID, MODEL_RESOURCE, PLAIN_NAME
from rftlab.launch.spectrum.spec import SpectrumArmSpec, load_arm_spec
from rftlab.runs.store import NAME_PATTERN

SPECS = Path(__file__).resolve().parents[2] / "data" / "specs"
SPECTRUM = json.loads((SPECS / "spectrum_D.json").read_text())
POKER = json.loads((SPECS / "poker_seed.json").read_text())


def _write(tmp_path: Path, data: dict, name: str = "spec.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "change, field",
    [
        ({"notepad_write_cost": 1e308}, "notepad_write_cost"),
        ({"notepad_write_cost": 11.0}, "notepad_write_cost"),
        ({"notepad_write_cost": "0.5"}, "notepad_write_cost"),
        ({"arm": ".."}, "arm"),
        ({"arm": "-x"}, "arm"),
        ({"arm": "_a"}, "arm"),
        ({"arm": "a/b"}, "arm"),
        ({"experiment": "something_else"}, "experiment"),
        ({"rows": True}, "rows"),
        ({"rows": 48.0}, "rows"),
        ({"epoch_salt": 1}, "epoch_salt"),
        ({"learning_rate": True}, "learning_rate"),
        ({"seed": 2**40}, "seed"),
        ({"row_prefix": "-p"}, "row_prefix"),
        ({"fireworks": {**SPECTRUM["fireworks"], "dataset_id": "-x"}}, "fireworks.dataset_id"),
        ({"fireworks": {**SPECTRUM["fireworks"], "dataset_id": "a b"}}, "fireworks.dataset_id"),
        ({"fireworks": {**SPECTRUM["fireworks"], "base_model": "--api-key=x"}}, "fireworks.base_model"),
        (
            {"fireworks": {**SPECTRUM["fireworks"], "evaluator": "accounts/a/evaluators/$(id)"}},
            "fireworks.evaluator",
        ),
        ({"fireworks": {**SPECTRUM["fireworks"], "output_model": "-o"}}, "fireworks.output_model"),
        (
            {"fireworks": {**SPECTRUM["fireworks"], "wandb_project": "--wandb-api-key"}},
            "fireworks.wandb_project",
        ),
        ({"fireworks": {**SPECTRUM["fireworks"], "max_output_tokens": 10**9}}, "fireworks.max_output_tokens"),
        ({"fireworks": {**SPECTRUM["fireworks"], "lora_rank": True}}, "fireworks.lora_rank"),
    ],
)
def test_each_listed_bad_field_is_refused_by_name(tmp_path, change, field):
    path = _write(tmp_path, {**SPECTRUM, **change})
    with pytest.raises(ValueError) as caught:
        load_arm_spec(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: field {field}:") and "\n" not in message


@pytest.mark.parametrize(
    "text",
    ['{"rows": NaN}', '{"notepad_write_cost": Infinity}', '{"rows": ' + "9" * 5000 + "}", "[" * 10_000],
)
def test_non_json_numbers_and_absurd_files_are_one_line(tmp_path, text):
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        load_arm_spec(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
TEXTS = st.text(max_size=30) | st.sampled_from(["..", "-x", "_a", "a b", "ok-name", "A.1", "x" * 120, "é"])


def _invariants(spec) -> None:
    data = spec.model_dump()
    for name, value in data.items():
        if isinstance(value, float):
            assert math.isfinite(value), name
    assert re.fullmatch(NAME_PATTERN, spec.arm) and re.fullmatch(NAME_PATTERN, spec.experiment)
    for field in ("rows", "epochs", "response_candidates", "seed"):
        assert type(getattr(spec, field)) is int, field
    fw = spec.fireworks
    if fw is not None:
        assert re.fullmatch(MODEL_RESOURCE, fw.base_model)
        assert re.fullmatch(FIREWORKS_ID, fw.dataset_id) and re.fullmatch(FIREWORKS_ID, fw.output_model)
        assert re.fullmatch(EVALUATOR_RESOURCE, fw.evaluator)
        for value in (fw.wandb_project, fw.wandb_entity):
            assert value is None or re.fullmatch(PLAIN_NAME, value)
        for value in (fw.base_model, fw.dataset_id, fw.evaluator, fw.output_model):
            assert not value.startswith("-") and not any(c.isspace() for c in value)


@settings(max_examples=300, deadline=None)
@given(
    which=st.sampled_from(["spectrum", "poker"]),
    field=st.sampled_from(
        sorted(set(SpectrumArmSpec.model_fields) | set(PokerArmSpec.model_fields) | {"fireworks.*"})
    ),
    value=JSON | TEXTS,
    fw_field=st.sampled_from(sorted(SPECTRUM["fireworks"])),
)
def test_any_field_value_loads_valid_or_is_refused_in_one_line(
    tmp_path_factory, which, field, value, fw_field
):
    base = dict(SPECTRUM if which == "spectrum" else POKER)
    if field == "fireworks.*":
        base["fireworks"] = {**base["fireworks"], fw_field: value}
    else:
        base[field] = value
    try:
        text = json.dumps(base)
    except ValueError:
        return
    path = tmp_path_factory.mktemp("spec") / "spec.json"
    path.write_text(text)
    loader = load_arm_spec if which == "spectrum" else load_poker_arm_spec
    try:
        spec = loader(path)
    except ValueError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)
        return
    _invariants(spec)


@pytest.mark.parametrize(
    "argv_of",
    [
        lambda p, root: ["arm", "launch", str(p), "--backend", "local", "--root", str(root)],
        lambda p, root: ["fireworks", "launch", str(p), "--root", str(root)],
    ],
)
@pytest.mark.parametrize(
    "change", [{"arm": ".."}, {"notepad_write_cost": 1e308}, {"rows": True}, {"experiment": "x"}]
)
def test_launch_commands_refuse_bad_specs_before_any_run_exists(
    tmp_path, capsys, monkeypatch, argv_of, change
):
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-test-key-0123456789")
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", "acct")
    path = _write(tmp_path, {**SPECTRUM, **change})
    root = tmp_path / "runs"
    assert main(argv_of(path, root)) == 2
    err = capsys.readouterr().err
    assert err.startswith("rftlab: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not root.exists()


def test_poker_launch_refuses_a_flag_as_dataset_id(tmp_path, capsys):
    path = _write(tmp_path, {**POKER, "fireworks": {**POKER["fireworks"], "dataset_id": "-x"}})
    assert main(["poker", "launch", str(path), "--dry-run"]) == 2
    assert "field fireworks.dataset_id" in capsys.readouterr().err
