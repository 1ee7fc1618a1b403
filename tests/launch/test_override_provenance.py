"""``override_provenance`` (``rftlab.launch.overrides``): what a run made with ``--set`` records."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rftlab.launch.overrides import Override, Provenance, override_provenance
from rftlab.launch.spectrum.spec import load_arm_spec

SPEC_C = Path(__file__).resolve().parents[2] / "data" / "specs" / "spectrum_C.json"


class Hashed:
    def sha256(self) -> str:
        return "f" * 64


def test_each_override_is_recorded_with_its_value_as_compact_json():
    given = ["rows= 3", "learning_rate=3e-4", "prompt=weak", "fireworks.lora_rank=8", 'x=[1, "a"]']
    got = override_provenance(Hashed(), given)
    assert got == Provenance(
        ("rows=3", "learning_rate=0.0003", 'prompt="weak"', "fireworks.lora_rank=8", 'x=[1,"a"]'), "f" * 64
    )
    assert got.provider_fields() == {"overrides": list(got.overrides), "base_spec_sha256": "f" * 64}


def test_parsed_overrides_from_a_sweep_are_taken_as_they_are():
    got = override_provenance(Hashed(), ["rows=3", Override(("seed",), 4), Override(("arm",), "C2")])
    assert got.overrides == ("rows=3", "seed=4", 'arm="C2"')


def test_no_overrides_records_nothing():
    assert override_provenance(Hashed(), []) == Provenance()
    assert Provenance().provider_fields() == {}


def test_the_base_hash_is_the_spec_files_own():
    spec = load_arm_spec(SPEC_C)
    canonical = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert spec.sha256() == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert override_provenance(spec, ["rows=3"]).base_spec_sha256 == spec.sha256()


def test_a_malformed_override_is_one_line():
    with pytest.raises(ValueError, match="give KEY=VALUE") as info:
        override_provenance(Hashed(), ["rows"])
    assert "\n" not in str(info.value)
