"""The SDK launcher's mapping of the launcher's firectl create flags onto the ``fireworks-ai`` SDK's
``reinforcement_fine_tuning_jobs.create`` arguments (docs/platforms.md §1.3), checked against the SDK's
own parameter types; its plan. The launch itself runs in ``test_local_fireworks_flow.py``."""

from __future__ import annotations

import typing

import pytest

from rftlab.launch.firectl import FirectlError, job_create_flags
from rftlab.launch.fireworks_sdk import sdk_job_arguments, sdk_launcher
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs.paths import SPECS_DIR

fireworks = pytest.importorskip("fireworks")


def _spec(**fw_changes):
    spec = load_arm_spec(SPECS_DIR / "spectrum_A.json")
    return spec.model_copy(update={"fireworks": spec.fireworks.model_copy(update=fw_changes)})


def test_every_create_flag_maps_onto_a_field_the_sdk_takes():
    from fireworks.types import reinforcement_fine_tuning_job_create_params as params
    from fireworks.types.shared_params import training_config

    spec = _spec(lora_rank=16, wandb_project="proj", wandb_entity="team")
    flags = job_create_flags(spec, account_id="acct", wandb_api_key="wandb-key-value", dataset_id="ds-1")
    args = sdk_job_arguments(flags, "acct")
    assert args["dataset"] == "accounts/acct/datasets/ds-1"
    assert args["evaluator"] == "accounts/acct/evaluators/test-spectrum-turn-test-spectrum-turn"
    tc, ip = args["training_config"], args["inference_parameters"]
    assert (tc["epochs"], tc["learning_rate"], tc["lora_rank"]) == (spec.epochs, spec.learning_rate, 16)
    assert (ip["response_candidates_count"], ip["temperature"]) == (
        spec.response_candidates,
        spec.temperature,
    )
    assert args["wandb_config"] == {
        "enabled": True,
        "project": "proj",
        "entity": "team",
        "api_key": "wandb-key-value",
    }
    top = typing.get_type_hints(params.ReinforcementFineTuningJobCreateParams)
    assert set(args) <= set(top)
    assert set(tc) <= set(typing.get_type_hints(training_config.TrainingConfig))
    assert set(ip) <= set(typing.get_type_hints(params.InferenceParameters))


def test_a_flag_without_a_mapping_is_refused_not_dropped():
    with pytest.raises(FirectlError, match="no mapping for '--mcp-server'"):
        sdk_job_arguments(["--epochs", "1", "--mcp-server", "x"], "acct")
    with pytest.raises(FirectlError, match="not a valid value"):
        sdk_job_arguments(["--epochs", "two"], "acct")


def test_the_plan_names_sdk_calls_and_carries_no_key(monkeypatch):
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-plan-key-not-real-123")
    plan = sdk_launcher(account_id="acct", base_url="http://127.0.0.1:9").plan(_spec())
    assert [c[:3] for c in plan.commands][0] == ["fireworks-sdk", "dataset", "create"]
    assert plan.commands[-1][:3] == ["fireworks-sdk", "rftj", "create"]
    assert "fw-plan-key-not-real-123" not in str(plan.to_dict())


def test_every_flag_of_a_shipped_arm_s_plan_maps_onto_the_sdk(monkeypatch):
    from rftlab.launch.fireworks import FireworksLauncher
    from rftlab.launch.spectrum.spec import load_arm_spec
    from rftlab.runs.paths import SPECS_DIR

    spec = load_arm_spec(SPECS_DIR / "spectrum_C.json")
    create = FireworksLauncher(account_id="acct").plan(spec).commands[-1]
    flags = create[create.index("--job-id") + 2 :]  # job_create takes the id apart
    flags = [f for f in flags if f not in ("-a", "acct", "-o", "json")]
    args = sdk_job_arguments(flags, "acct")
    assert args["training_config"]["max_context_length"] == 32768


def test_cli_dry_run_via_sdk_names_sdk_calls(capsys, monkeypatch):
    from rftlab.cli import main
    from rftlab.runs.paths import SPECS_DIR

    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", "acct")
    assert (
        main(["fireworks", "launch", str(SPECS_DIR / "spectrum_probe.json"), "--dry-run", "--via", "sdk"])
        == 0
    )
    out = capsys.readouterr().out
    assert "fireworks-sdk rftj create --job-id" in out and "HTTPS header" in out and "auth file" not in out
