"""The GS1 spec model (``rftlab.launch.gs1.spec``, ``rftlab.analysis.gs1.spec``): every spec file parses
once into it, the hashes the run store keys on are the ones the dict-based code computed, and a
malformed file is one line naming the field."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.analysis.gs1 import GS1StudySpec
from rftlab.launch.gs1.backend import LOCAL_RENDERER, LOCAL_SIZES, quick_arms
from rftlab.launch.gs1.preflight import tolerances_from_spec
from rftlab.runs.hashing import file_sha256, spec_sha256
from rftlab.runs.paths import SPECS_DIR
from rftlab.studies.gs1 import load_spec
from rftlab.training.gs1.rl_loop import DEFAULT_RENDERER

# Computed by the code before the spec model existed (arms_from_spec on the raw dict, load_decision_rule,
# parse_checks, tolerances_from_spec), on the unmodified tree: the model must reproduce every one.
PINNED = {
    "gs1_vs_grpo.json": {
        "file_sha256": "cf12f20dd9782c1c43671e118ecdc913cf123df5768b062bc2f0736f5afa8cf0",
        "preflight_key_spec": "debc7a794527c5f3cfde86dcfe9c143c9f18e1133555fb479c7043154806631b",
        "preflight_key_tinker": "debc7a794527c5f3cfde86dcfe9c143c9f18e1133555fb479c7043154806631b",
        "preflight_key_local": "6ba1d602e5f2e96b6e8c5533ee1f2c9147c6e41172233518b1bd79175f7f31c7",
        "preflight_key_local_quick": "c1f3842fe7aefca7b255a7ccc781120b27c879e81f1e0fa2bee214000e8b75cf",
        "rule": "4063b699ccd75c53df01fc2122377a23e19f8da7b5ec43a7ca21ede01da1697d",
    },
    "gs1_vs_grpo_betting.json": {
        "file_sha256": "52cc10d610b5fa0bfedb3ba6ce8bfff3e536e4cfde4dc3985f68dea1b062ea82",
        "preflight_key_spec": "a3bb453bae7e1fff718a4a3379c2d83c9a0f656be3a56e445c7ba86a53c64c5a",
        "preflight_key_tinker": "a3bb453bae7e1fff718a4a3379c2d83c9a0f656be3a56e445c7ba86a53c64c5a",
        "preflight_key_local": "30de94f32e938615550dae43a20fe3ed3b14999748cd3aeba92109572b2f2c8a",
        "preflight_key_local_quick": "d425bdd557ff7b2c91ce6bbd48a52d68d5c0f97731deea7e1fe8da4d9f35097a",
        "rule": "2759744179176bfe1e6303fb62b14629653fd7dd063ae22394f5ae6cca5e29a4",
    },
}
ARMS_SPEC = {
    "grpo_gs8": "0c3d7b466e7670a150b7e74b00ec8c4875eec7f3c4eb81bcf3fed28864c095c1",
    "gs1_kernel": "036d58bdf752afc57e13d6edf4ad620da3e0da31c3dd528fb93d2f3d3954cef1",
}
ARMS_LOCAL_QUICK = {
    "grpo_gs8": "8e29e9ebaa5cc53bbbe261a6ced08f9ccbf5df8c08e3d2f43b90ca0b031c4ea1",
    "gs1_kernel": "aab0f82f0eb1178f60fe5deace469b851054b077f6db566139ea8cde6d57d109",
}
CHECKS = "7b14875494d316dc4044e7090401bd3d7df4e08d5a030648d899bbb5a1ae8a6f"
TOLERANCES = "075b3a2058043aa2d28c33deebbdc9c435030630fc1cf4483d5be5894528ad27"


def test_every_spec_file_is_pinned():
    # gs1_runlevel.json is the run-level plan (a RunLevelPlan, tests/gs1/test_gs1_seeds.py), not a study spec
    assert sorted(p.name for p in SPECS_DIR.glob("gs1_vs_grpo*.json")) == sorted(PINNED)
    assert {p.name for p in SPECS_DIR.glob("gs1*.json")} - set(PINNED) == {"gs1_runlevel.json"}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_model_gives_the_hashes_the_dict_code_gave(name):
    path = SPECS_DIR / name
    spec = load_spec(path)
    pinned = PINNED[name]
    assert spec.sha256 == file_sha256(path) == pinned["file_sha256"]
    local = {"base_model": "/x/warm", "renderer_name": LOCAL_RENDERER, "task": "local_math", **LOCAL_SIZES}
    variants = {
        "spec": spec.arm_configs(),
        "tinker": spec.arm_configs(renderer_name=DEFAULT_RENDERER),
        "local": spec.arm_configs(**local),
        "local_quick": quick_arms(spec.arm_configs(**local)),
    }
    for label, arms in variants.items():
        key = {
            "kind": "gs1_preflight",
            "spec_sha256": spec.sha256,
            "arms": {n: c.to_dict() for n, c in arms.items()},
        }
        assert spec_sha256(key) == pinned[f"preflight_key_{label}"], label
    assert {n: spec_sha256(c.to_dict()) for n, c in variants["spec"].items()} == ARMS_SPEC
    assert {n: spec_sha256(c.to_dict()) for n, c in variants["local_quick"].items()} == ARMS_LOCAL_QUICK
    assert spec_sha256(spec.decision_rule.model_dump(mode="json")) == pinned["rule"]
    assert spec_sha256([c.model_dump(mode="json") for c in spec.activation_gate.checks]) == CHECKS
    assert spec_sha256(tolerances_from_spec(spec)) == TOLERANCES


def test_registration_and_revision():
    original, revised = (
        load_spec(SPECS_DIR / "gs1_vs_grpo.json"),
        load_spec(SPECS_DIR / "gs1_vs_grpo_betting.json"),
    )
    assert (original.registration, revised.registration) == ("pre-registered", "revised")
    assert revised.revision_of.sha256 == original.sha256  # the revision names the file it revises
    assert original.activation_gate.minimum("kernel_effective_neighbors_p10") == 8.0
    assert original.activation_gate.minimum("executed_group_size_treatment") is None


SPEC = json.loads((SPECS_DIR / "gs1_vs_grpo.json").read_text(encoding="utf-8"))
json_leaves = st.none() | st.booleans() | st.floats() | st.integers(-(10**6), 10**6) | st.text(max_size=6)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _paths(value, prefix=()):
    """Every (path, value) inside the spec, so a mutation can land anywhere."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(SPEC) if p]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(PATHS), value=json_values, drop=st.booleans())
def test_a_malformed_spec_file_is_one_line_naming_the_file_or_a_valid_model(tmp_path, where, value, drop):
    spec = json.loads(json.dumps(SPEC))
    block = spec
    for key in where[:-1]:
        block = block[key]
    if drop and isinstance(block, dict):
        block.pop(where[-1])
    else:
        block[where[-1]] = value
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    try:
        loaded = load_spec(path)
    except ValueError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message and "errors.pydantic.dev" not in message
        assert ": " in message.split(str(path), 1)[1]  # "<path>: <field>: <message>"
    else:
        assert isinstance(loaded, GS1StudySpec) and loaded.sha256 == file_sha256(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "expected a JSON object"),
        ('{"title": "x"', "not valid JSON"),
        (json.dumps({**SPEC, "arms": []}), "arms: Tuple should have at least 1 item"),
        (json.dumps({**SPEC, "arms": [SPEC["arms"][0], SPEC["arms"][0]]}), "arm names must be distinct"),
        (json.dumps({**SPEC, "lora_rank": 32.0}), "lora_rank: Input should be a valid integer"),
        (json.dumps({**SPEC, "lora_rank": True}), "lora_rank: Input should be a valid integer"),
    ],
)
def test_named_refusals(tmp_path, text, message):
    path = tmp_path / "s.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_spec(path)
