"""The local launcher, the `rftlab arm` CLI and the spectrum preflight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rftlab.cli import main
from rftlab.launch.spectrum.local import LocalLauncher, trainer_config
from rftlab.launch.spectrum.preflight import spectrum_preflight
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.training.spectrum.rollout import band_per_rollout
from rftlab.types import Launcher

SPECS = Path(__file__).resolve().parents[2] / "data" / "specs"


def _tiny(arm="C", **kw):
    spec = load_arm_spec(SPECS / f"spectrum_{arm}.json")
    return spec.model_copy(update={"rows": 3, "epochs": 2, "response_candidates": 3, **kw})


def test_trainer_config_maps_the_spec():
    spec = load_arm_spec(SPECS / "spectrum_C.json")
    cfg = trainer_config(spec)
    assert (cfg.prompt, cfg.memory, cfg.rows, cfg.candidates, cfg.epochs) == ("weak", "echo", 48, 12, 12)
    assert cfg.learning_rate == pytest.approx(1e-2) and cfg.temperature == 1.2
    assert cfg.row_prefix == "sc2" and cfg.seed == 0
    assert trainer_config(load_arm_spec(SPECS / "spectrum_C_prime.json")).seed == 1
    assert trainer_config(load_arm_spec(SPECS / "spectrum_B.json")).row_prefix == "sc1"
    assert trainer_config(load_arm_spec(SPECS / "spectrum_probe.json")).learning_rate < 1e-6


def test_launch_reuses_a_finished_run(tmp_path):
    launcher = LocalLauncher(progress=False)
    assert isinstance(launcher, Launcher)
    spec = _tiny()
    ref = launcher.launch(spec, root=tmp_path)
    status = launcher.poll(ref)
    assert (status.state, status.progress, status.total) == ("completed", 2, 2)
    again = launcher.launch(spec, root=tmp_path)
    assert again.path == ref.path
    run_json = json.loads((ref.path / "run.json").read_text())
    assert run_json["provider"]["simulation"] is True and run_json["spec_sha256"] == spec.sha256()


def test_cli_arm_launch(tmp_path, capsys):
    spec_file = tmp_path / "tiny_D.json"
    spec_file.write_text(json.dumps(_tiny("D", notepad_write_cost=0.01).to_dict()))
    root = tmp_path / "runs"
    assert main(["arm", "launch", str(spec_file), "--backend", "local", "--root", str(root)]) == 0
    first = capsys.readouterr().out
    assert "D: completed (2/2 epochs, simulated policy)" in first
    assert main(["arm", "launch", str(spec_file), "--root", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "completed"
    assert main(["arm", "launch", str(spec_file), "--root", str(root)]) == 0
    assert "reused" in capsys.readouterr().out
    assert main(["arm", "status", str(spec_file), "--root", str(root)]) == 0
    # the Fireworks launcher refuses before anything is created when no key is exported
    assert main(["arm", "launch", str(spec_file), "--backend", "fireworks", "--root", str(root)]) == 2
    assert "FIREWORKS_API_KEY is not set" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["arm", "launch", str(bad), "--root", str(root)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize("arm", ["probe", "A", "B", "B_prime", "C", "C_prime", "D", "D_cost"])
def test_preflight_passes_the_study_arms(arm):
    report = spectrum_preflight(load_arm_spec(SPECS / f"spectrum_{arm}.json"), rows=2, bands=12)
    assert report.passed, report.render()
    names = [c["name"] for c in report.to_dict()["checks"]]
    assert names == [
        "candidates_share_band",
        "deterministic_policy_zero_group_variance",
        "reward_separates_memory",
        "stochastic_policy_group_variance",
        "epoch_salt_changes_bands",
    ]


def test_preflight_flags_a_band_per_rollout():
    report = spectrum_preflight(
        load_arm_spec(SPECS / "spectrum_C.json"), band_assignment=band_per_rollout, rows=2
    )
    assert not report.passed
    failed = {c["name"]: c for c in report.checks if not c["passed"]}
    assert set(failed) == {"candidates_share_band", "deterministic_policy_zero_group_variance"}
    assert "band luck" in failed["candidates_share_band"]["detail"]
    assert "froze six runs" in failed["candidates_share_band"]["detail"]
    assert failed["deterministic_policy_zero_group_variance"]["max_within_group_range"] > 0


def test_require_preflight_raises_with_every_failed_check():
    from rftlab.launch.spectrum.preflight import PreflightFailed, require_preflight

    spec = load_arm_spec(SPECS / "spectrum_C.json")
    assert require_preflight(spec, rows=1, bands=8).passed
    with pytest.raises(PreflightFailed) as info:
        require_preflight(spec, band_assignment=band_per_rollout, rows=1, bands=8)
    assert "candidates_share_band" in str(info.value) and "band luck" in str(info.value)
    assert not info.value.report.passed


def test_preflight_flags_unsalted_epochs():
    spec = load_arm_spec(SPECS / "spectrum_A.json").model_copy(update={"epoch_salt": False})
    report = spectrum_preflight(spec, rows=1, bands=8)
    assert [c["name"] for c in report.checks if not c["passed"]] == ["epoch_salt_changes_bands"]


def test_cli_preflight(tmp_path, capsys):
    assert main(["spectrum", "preflight", str(SPECS / "spectrum_B.json")]) == 0
    assert "preflight B: PASSED" in capsys.readouterr().out
    assert main(["spectrum", "preflight", str(SPECS / "spectrum_B.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    unsalted = tmp_path / "unsalted.json"
    unsalted.write_text(
        json.dumps({**json.loads((SPECS / "spectrum_B.json").read_text()), "epoch_salt": False})
    )
    assert main(["spectrum", "preflight", str(unsalted)]) == 1
    assert main(["spectrum", "preflight", str(tmp_path / "missing.json")]) == 2


def test_launcher_resumes_an_interrupted_run(tmp_path):
    from rftlab.runs import RunStore
    from rftlab.training.spectrum.grpo import SIMULATOR_VERSION, train_spectrum_grpo

    spec = _tiny(epochs=3)
    config = trainer_config(spec)
    store = RunStore(tmp_path / "cut")
    run, origin = store.start_or_reuse(spec.experiment, spec.arm, spec.to_dict(), backend="local")
    run.set_provider(trainer=config.to_dict(), simulator=SIMULATOR_VERSION, simulation=True)

    def interrupt(epoch, _row):
        raise KeyboardInterrupt  # Ctrl-C after the first epoch is on disk

    with pytest.raises(KeyboardInterrupt):
        train_spectrum_grpo(config, run, progress=False, on_epoch_end=interrupt)
    resumed = LocalLauncher(progress=False).launch(spec, root=tmp_path / "cut")
    assert resumed.path == run.path
    fresh = LocalLauncher(progress=False).launch(spec, root=tmp_path / "fresh")
    from rftlab.runs import load_run

    assert load_run(resumed.path).metrics() == load_run(fresh.path).metrics()
    assert LocalLauncher().poll(resumed).state == "completed"
