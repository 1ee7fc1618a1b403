"""The correctness preflight on fakes: a tiny float64 torch LM gives real losses and gradients."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_gs1_fakes import FakeServiceClient, TinyTorchServiceClient, fake_renderer, toy_task

from rftlab.launch.gs1.preflight import (
    check_treatment_disabled,
    cookbook_grpo_datums,
    fixed_batch,
    preflight_resolved,
    run_preflight,
    write_preflight,
)
from rftlab.training.gs1.rl_loop import GS1ArmConfig


def arms(**kw):
    common = dict(steps=2, max_tokens=64, n_train=40, n_eval=6, eval_max_tokens=64, renderer_name="x", **kw)
    return {
        "grpo_gs8": GS1ArmConfig(
            arm="grpo_gs8", estimator="group_mean", group_size=4, groups_per_batch=6, **common
        ),
        "gs1_kernel": GS1ArmConfig(
            arm="gs1_kernel", estimator="kernel_baseline", group_size=1, groups_per_batch=24, **common
        ),
    }


def test_preflight_passes_on_a_backend_with_gradients(shared_dir, tmp_path):
    from rftlab.studies.gs1 import load_spec

    spec = load_spec(shared_dir / "seeds" / "gs1_vs_grpo_spec.json")
    report = run_preflight(arms(), TinyTorchServiceClient(), fake_renderer(), toy_task(), "tiny", spec=spec)
    by_id = {c.id: c for c in report.checks}
    assert set(by_id) == {
        "estimators_offline",
        "treatment_disabled_datums",
        "loss_and_gradient",
        "one_step_grpo_gs8",
        "one_step_gs1_kernel",
        "restoration",
        "independent_group_samples",
    }
    assert report.status == "passed", [(c.id, c.detail) for c in report.checks if not c.passed]
    lg = by_id["loss_and_gradient"].values
    assert lg["gradient"]["cosine"] >= 0.99999 and lg["gradient"]["norm"] > 0
    assert abs(lg["loss_loop"] - lg["loss_cookbook"]) <= 1e-6 + 1e-5 * abs(lg["loss_cookbook"])
    assert by_id["restoration"].values["lora_state_max_abs_diff"] == 0.0
    path = write_preflight(report, tmp_path / "preflight.json")
    assert preflight_resolved(json.loads(path.read_text()))


def test_preflight_is_unresolved_without_gradient_access():
    report = run_preflight(arms(), FakeServiceClient(), fake_renderer(), toy_task(), "fake")
    by_id = {c.id: c for c in report.checks}
    assert by_id["loss_and_gradient"].status == "not_run"
    assert "does not expose gradients" in by_id["loss_and_gradient"].detail
    assert report.status == "unresolved" and not preflight_resolved(report.to_dict())


def test_gradient_check_catches_a_wrong_datum_layout(monkeypatch):
    # a loop that put the advantage one position early must fail (c)
    import rftlab.launch.gs1.preflight as pf

    real = pf.batch_datums

    def shifted(batch, advantages):
        from tinker import types

        datums, a, b = real(batch, advantages)
        out = []
        for d in datums:
            adv = d.loss_fn_inputs["advantages"].to_numpy()
            out.append(
                types.Datum(
                    model_input=d.model_input,
                    loss_fn_inputs={
                        **d.loss_fn_inputs,
                        "advantages": types.TensorData.from_numpy(np.roll(adv, -1)),
                    },
                )
            )
        return out, a, b

    monkeypatch.setattr(pf, "batch_datums", shifted)
    report = run_preflight(arms(), TinyTorchServiceClient(), fake_renderer(), toy_task(), "tiny")
    by_id = {c.id: c for c in report.checks}
    assert by_id["treatment_disabled_datums"].status == "failed"
    assert by_id["loss_and_gradient"].status == "failed"
    assert report.status == "failed"


def test_treatment_disabled_matches_cookbook_advantages_bit_for_bit():
    cfg = arms()["grpo_gs8"]
    batch = fixed_batch(cfg, FakeServiceClient(), fake_renderer(), toy_task())
    check = check_treatment_disabled(batch)
    assert check.status == "passed", check.detail
    datums, adv, rollout_of = cookbook_grpo_datums(batch)
    assert set(datums[0].loss_fn_inputs) == {"target_tokens", "logprobs", "advantages", "mask"}
    assert len(rollout_of) == len(datums)


def test_preflight_resolution_needs_every_check_passed():
    assert not preflight_resolved(None)
    assert not preflight_resolved({"status": "passed", "checks": [{"status": "not_run"}]})
    assert preflight_resolved({"status": "passed", "checks": [{"status": "passed"}]})


@pytest.mark.parametrize("bad", [{"status": "failed", "checks": []}, {}])
def test_failed_or_empty_preflight_is_unresolved(bad):
    assert not preflight_resolved(bad)


def _local_grpo_batch():
    from tinker_cookbook import renderers

    from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient, byte_tokenizer

    service = LocalServiceClient()
    renderer = renderers.get_renderer("qwen3_5_disable_thinking", byte_tokenizer())
    cfg = GS1ArmConfig(
        arm="grpo_gs8",
        estimator="group_mean",
        group_size=4,
        groups_per_batch=4,
        max_tokens=16,
        n_train=40,
        n_eval=4,
        eval_max_tokens=16,
        base_model=TINY_MODEL,
    )
    batch = fixed_batch(cfg, service, renderer, toy_task())
    for i, rec in enumerate(batch.records):  # the untrained tiny model never answers: give rewards variance
        rec["reward"] = float(i % 3 == 0)
    return service, cfg, batch


@pytest.mark.slow
@pytest.mark.parametrize("shift", [False, True])
def test_loss_and_gradient_on_the_local_backend_against_an_independent_autograd(shift):
    from tinker import types

    from rftlab.launch.gs1.preflight import DEFAULT_TOLERANCES, check_loss_and_gradient
    from rftlab.training.gs1.rl_loop import GroupMeanEstimator, SampledBatch, batch_datums, estimate, resolve

    service, cfg, batch = _local_grpo_batch()
    tmp = SampledBatch([dict(r) for r in batch.records], batch.seqs)
    ours, _, _ = batch_datums(tmp, estimate(tmp, GroupMeanEstimator()).advantages)
    if shift:  # advantages one position early: a layout bug the check must catch
        ours = [
            types.Datum(
                model_input=d.model_input,
                loss_fn_inputs={
                    **d.loss_fn_inputs,
                    "advantages": types.TensorData.from_numpy(
                        np.roll(d.loss_fn_inputs["advantages"].to_numpy(), -1)
                    ),
                },
            )
            for d in ours
        ]
    cook, _, _ = cookbook_grpo_datums(batch)

    def make():
        return resolve(service.create_lora_training_client(base_model=cfg.base_model, rank=32, seed=0))

    check = check_loss_and_gradient(make, ours, cook, DEFAULT_TOLERANCES)
    assert check.status == ("failed" if shift else "passed"), check.detail
    if not shift:
        assert check.values["reference_gradient"]["cosine"] >= 0.99999
        assert check.values["gradient"]["max_abs_diff"] == 0.0
