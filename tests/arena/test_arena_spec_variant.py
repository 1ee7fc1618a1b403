"""Smoke-size copies of a Stage-1 spec: only declared fields change, the original file is untouched."""

import json

import pytest

from rftlab.runs.paths import spec_path
from rftlab.studies.arena import write_spec_variant


def test_a_variant_changes_only_the_named_fields(tmp_path):
    source = spec_path("arena_sft_simulated.json")
    before = source.read_bytes()
    out = write_spec_variant(
        source, tmp_path / "v.json", {"train": {"max_steps": 7}, "overfit": {"steps": 3}}
    )
    original, variant = json.loads(before), json.loads((tmp_path / "v.json").read_text())
    assert variant["train"]["max_steps"] == 7 and variant["overfit"]["steps"] == 3
    variant["train"]["max_steps"], variant["overfit"]["steps"] = (
        original["train"]["max_steps"],
        original["overfit"]["steps"],
    )
    assert variant == original and source.read_bytes() == before and out == str(tmp_path / "v.json")


@pytest.mark.parametrize("changes", [{"nope": {"x": 1}}, {"train": {"no_such_field": 1}}])
def test_an_undeclared_section_or_field_is_refused(tmp_path, changes):
    with pytest.raises(ValueError, match="no (section|field)"):
        write_spec_variant(spec_path("arena_sft_simulated.json"), tmp_path / "v.json", changes)
    assert not (tmp_path / "v.json").exists()


def test_a_variant_sets_a_declared_top_level_scalar(tmp_path):
    source = spec_path("arena_sft_simulated.json")
    write_spec_variant(source, tmp_path / "v.json", {"seed": 2, "name": "arena-sft-stage1-simulated-seed2"})
    original, variant = json.loads(source.read_text()), json.loads((tmp_path / "v.json").read_text())
    assert variant["seed"] == 2 and variant["name"].endswith("seed2")
    assert {k: v for k, v in variant.items() if k not in ("seed", "name")} == {
        k: v for k, v in original.items() if k not in ("seed", "name")
    }
    with pytest.raises(ValueError, match="no section"):
        write_spec_variant(source, tmp_path / "w.json", {"no_such_scalar": 1})
