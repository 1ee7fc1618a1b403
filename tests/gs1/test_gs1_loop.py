"""The GS1/GRPO client loop on fake clients that return real tinker.types (no network)."""

from __future__ import annotations

import numpy as np
import pytest
from test_gs1_fakes import BASE_MODEL, FakeServiceClient, fake_renderer, toy_task
from tinker import types

from rftlab.runs.store import RunStore
from rftlab.training.gs1.advantages import group_mean, kernel_baseline
from rftlab.training.gs1.rl_loop import (
    GS1ArmConfig,
    ModelNotServedError,
    ResumeError,
    check_model_served,
    make_datum,
    prompt_order,
    run_arm,
    step_prompt_indices,
)


def small(arm: str, **kw) -> GS1ArmConfig:
    base = {
        "grpo": dict(arm="grpo_gs8", estimator="group_mean", group_size=4, groups_per_batch=3),
        "gs1": dict(arm="gs1_kernel", estimator="kernel_baseline", group_size=1, groups_per_batch=12),
    }[arm]
    defaults = dict(steps=3, max_tokens=64, n_train=40, n_eval=12, eval_max_tokens=64, renderer_name="x")
    return GS1ArmConfig(**{**base, **defaults, **kw})


@pytest.fixture
def renderer():
    return fake_renderer()


def test_arm_configs_use_the_spec_values(shared_dir):
    from rftlab.studies.gs1 import load_spec

    spec = load_spec(shared_dir / "seeds" / "gs1_vs_grpo_spec.json")
    arms = spec.arm_configs()
    g, k = arms["grpo_gs8"], arms["gs1_kernel"]
    assert (g.group_size, g.groups_per_batch, g.estimator) == (8, 8, "group_mean")
    assert (k.group_size, k.groups_per_batch, k.estimator) == (1, 64, "kernel_baseline")
    for a in (g, k):
        assert a.rollouts_per_step == 64 and a.steps == 40 and a.max_tokens == 512 and a.temperature == 1.0
        assert a.lora_rank == 32 and a.seed == 0 and a.n_eval == 1319 and a.bandwidth == 0.5
        assert a.adam_params() == types.AdamParams(learning_rate=4e-5, beta1=0.9, beta2=0.95, eps=1e-8)
    assert spec.arm_configs(steps=3)["gs1_kernel"].steps == 3


def test_prompt_order_is_the_seed_0_permutation_and_steps_take_consecutive_slices():
    cfg = small("gs1")
    order = np.random.default_rng(0).permutation(40)
    assert prompt_order(40, 0).tolist() == order.tolist()
    assert step_prompt_indices(cfg, 0, 40) == order[:12].tolist()
    assert step_prompt_indices(cfg, 1, 40) == order[12:24].tolist()
    assert step_prompt_indices(cfg, 3, 40) == [int(order[(36 + k) % 40]) for k in range(12)]  # wraps
    # the first n_train prompts of the shuffled full split, which is datasets' shuffle(seed=0) order
    import datasets

    ds = datasets.Dataset.from_dict({"i": list(range(100))}).shuffle(seed=0)
    assert step_prompt_indices(cfg, 0, 100) == ds["i"][:12]
    assert set(step_prompt_indices(cfg, 3, 100)) <= set(ds["i"][:40])


def test_datum_layout_matches_the_cookbook_rl_loop():
    prompt = types.ModelInput.from_ints([5, 6, 7, 8])
    d = make_datum(prompt, [11, 12, 13], [-0.5, -0.25, -1.0], 0.75)
    assert d.model_input.to_ints() == [5, 6, 7, 8, 11, 12]
    assert d.loss_fn_inputs["target_tokens"].tolist() == [0, 0, 0, 11, 12, 13]
    assert d.loss_fn_inputs["logprobs"].tolist() == [0.0, 0.0, 0.0, -0.5, -0.25, -1.0]
    assert d.loss_fn_inputs["advantages"].tolist() == [0.0, 0.0, 0.0, 0.75, 0.75, 0.75]
    one = make_datum(prompt, [11], [-0.5], -1.0)  # no empty chunk for a one-token response
    assert one.model_input.to_ints() == [5, 6, 7, 8]
    assert one.loss_fn_inputs["target_tokens"].tolist() == [0, 0, 0, 11]
    with pytest.raises(ValueError):
        make_datum(prompt, [], [], 1.0)


def _calls(service, name):
    return [c for c in service.calls if c[0] == name]


@pytest.mark.parametrize("arm", ["grpo", "gs1"])
def test_loop_step_order_losses_optimizer_and_logs(arm, renderer, tmp_path):
    cfg = small(arm)
    service = FakeServiceClient()
    store = RunStore(tmp_path / "runs")
    res = run_arm(cfg, service, renderer, toy_task(), store, backend="local")
    assert res.run.finished and res.steps_run == 3

    assert service.calls[0] == ("create_lora_training_client", BASE_MODEL, 32, 0)
    order = [c[0] for c in service.calls if c[0] not in ("sample", "compute_logprobs", "prompt_logprobs")]
    per_step = [
        "save_weights_and_get_sampling_client",
        "forward_backward",
        "optim_step",
        "save_state",
    ]
    assert order == [
        "create_lora_training_client",
        *per_step,
        *(per_step + ["delete_checkpoint"]) * 2,  # the previous step's state, once the new one is logged
        "save_weights_for_sampler",
        "save_weights_and_get_sampling_client",
        "delete_checkpoint",  # the last state, once the run is finished
    ]
    saved = [c for c in service.calls if c[0] == "save_state"]
    assert all(ttl == 7 * 24 * 3600 for _, _, ttl in saved)  # the cookbook's 7-day TTL
    deleted = [c[1] for c in _calls(service, "delete_checkpoint")]
    assert deleted == [f"fake://state/{cfg.arm}-step-{k:04d}" for k in range(3)] and service.states == {}
    for _, loss_fn, _ in _calls(service, "forward_backward"):
        assert loss_fn == "importance_sampling"
    for _, adam in _calls(service, "optim_step"):
        assert adam == types.AdamParams(learning_rate=4e-5, beta1=0.9, beta2=0.95, eps=1e-8)
    samples = _calls(service, "sample")
    train_samples = [s for s in samples if s[2].temperature == 1.0]
    # one request per sample, each with its own seed, so group members never share a request or a seed
    assert len(train_samples) == 3 * cfg.rollouts_per_step
    assert all(n == 1 and p.max_tokens == 64 for _, n, p in train_samples)
    assert len({p.seed for _, _, p in train_samples}) == len(train_samples)
    evals = [s for s in samples if s[2].temperature == 0.0]
    assert len(evals) == 12 and all(n == 1 for _, n, _ in evals)
    # φ comes from each group's first sample request (include_prompt_logprobs): no separate request
    assert len(_calls(service, "prompt_logprobs")) == 3 * cfg.groups_per_batch
    assert _calls(service, "compute_logprobs") == []

    metrics = res.run.metrics()
    assert [m["step"] for m in metrics] == [0, 1, 2]
    for m in metrics:
        assert m["executed_group_size"] == cfg.group_size
        assert m["n_rollouts"] == cfg.rollouts_per_step
        assert m["state_path"].startswith("fake://state/")
        for key in ("reward_mean", "frac_nonzero_advantage", "loss_sum", "time_sample_s", "baseline_mean"):
            assert m[key] is not None
        assert m["kl_sample_train_v1"] == 0.0 and m["n_kl_tokens"] > 0  # a faithful trainer: no drift
        if cfg.group_size > 1:
            assert m["distinct_samples_per_group_min"] >= 1 and m["groups_implausible_duplicates"] == 0
        else:  # groups of one cannot collapse
            assert m["distinct_samples_per_group_mean"] is None
    eval_rows = res.run.eval_items()
    assert [r["item_id"] for r in eval_rows] == [f"test-{i}" for i in range(12)]
    # greedy fake answers 0: correct exactly on the items whose answer is 0
    assert [r["correct"] for r in eval_rows] == [int(i % 3 == 0) for i in range(12)]


def test_datums_carry_the_estimators_advantages_and_sampler_logprobs(renderer, tmp_path):
    constant_groups = 0
    for arm in ("grpo", "gs1"):
        cfg = small(arm, steps=2, groups_per_batch=6, group_size=2) if arm == "grpo" else small(arm, steps=2)
        service = FakeServiceClient()
        res = run_arm(cfg, service, renderer, toy_task(), RunStore(tmp_path / arm), backend="local")
        fbs = _calls(service, "forward_backward")
        history = None
        for step, (_, _, datums) in enumerate(fbs):
            rows = res.run.rollouts(step)
            r = np.array([x["reward"] for x in rows])
            ids = [x["prompt_id"] for x in rows]
            phi = np.array([x["phi"] for x in rows])
            if arm == "grpo":
                expected = group_mean(r, ids)
            else:
                from rftlab.training.gs1.advantages import WindowRollouts

                history = history or WindowRollouts.empty()
                expected = kernel_baseline(r, phi, ids, history, 0.5).advantages
                history = history.extend(r, phi, ids)
            np.testing.assert_allclose([x["advantage"] for x in rows], expected, rtol=0, atol=1e-12)
            kept = [x for x in rows if x.get("in_batch")]
            assert len(datums) == len(kept)
            for d, x in zip(datums, kept, strict=True):
                adv = d.loss_fn_inputs["advantages"].to_numpy()
                n_resp = x["response_tokens"]
                assert np.all(adv[:-n_resp] == 0)
                np.testing.assert_allclose(adv[-n_resp:], np.float32(x["advantage"]))
                assert d.loss_fn_inputs["logprobs"].to_numpy()[-n_resp:].min() < 0  # sampler logprobs
            if arm == "grpo":  # a constant-reward group is skipped, like the cookbook
                for pid in dict.fromkeys(ids):
                    group = [x for x in rows if x["prompt_id"] == pid]
                    constant = len({x["reward"] for x in group}) == 1
                    constant_groups += constant
                    assert all(bool(x.get("in_batch")) != constant for x in group)
            else:  # GS1 keeps every rollout with a non-zero advantage, constant groups included
                assert all(bool(x.get("in_batch")) == (x["advantage"] != 0.0) for x in rows)
                assert res.run.metrics()[step]["n_datums"] == sum(x["advantage"] != 0.0 for x in rows) > 0
    assert constant_groups > 0  # the GRPO skip rule was exercised


def _versions(service):
    """The optimizer-step count of the weights behind every sampler the loop asked for."""
    return [c[1] for c in service.calls if c[0] == "save_weights_and_get_sampling_client"]


def _same_rollouts(run_a, run_b, steps):
    for step in range(steps):
        a = [(x["prompt_id"], x["reward"], x["advantage"]) for x in run_a.rollouts(step)]
        b = [(x["prompt_id"], x["reward"], x["advantage"]) for x in run_b.rollouts(step)]
        assert a == b  # the GS1 window is rebuilt from the logged rollouts


@pytest.mark.parametrize("arm", ["grpo", "gs1"])
def test_normal_resume_continues_from_the_restored_client(arm, renderer, tmp_path):
    """Stopped between steps (nothing half-written): the resumed run restores the last saved state and
    trains on from it; it never creates a fresh LoRA (the bug: the restored client was replaced)."""
    cfg = small(arm, steps=4)
    whole_service = FakeServiceClient()
    whole = run_arm(cfg, whole_service, renderer, toy_task(), RunStore(tmp_path / "a"), backend="local")
    store = RunStore(tmp_path / "b")
    service = FakeServiceClient()
    first = run_arm(cfg, service, renderer, toy_task(), store, backend="local", stop_after=2)
    assert not first.run.finished and first.steps_run == 2
    assert list(service.states) == [f"fake://state/{cfg.arm}-step-0001"]  # only what resume needs
    service2 = FakeServiceClient()
    service2.states = service.states  # the saved states live on the service
    second = run_arm(cfg, service2, renderer, toy_task(), store, backend="local")
    assert second.origin == "resumed" and second.run.path == first.run.path and second.steps_run == 2
    assert service2.calls[0] == (
        "create_training_client_from_state_with_optimizer",
        f"fake://state/{cfg.arm}-step-0001",
    )
    assert not _calls(service2, "create_lora_training_client")
    # the samplers of steps 2 and 3 sit on weights after 2 and 3 optimizer steps, as in the whole run
    assert _versions(service2)[:2] == _versions(whole_service)[2:4] == [2, 3]
    assert [m["step"] for m in second.run.metrics()] == [0, 1, 2, 3]
    _same_rollouts(whole.run, second.run, 4)
    assert whole.run.eval_items() == second.run.eval_items()
    third = run_arm(cfg, FakeServiceClient(), renderer, toy_task(), store, backend="local")
    assert third.origin == "reused" and third.steps_run == 0


@pytest.mark.parametrize("arm", ["grpo", "gs1"])
def test_resume_with_leftover_rollouts_redoes_the_step_from_the_restored_client(arm, renderer, tmp_path):
    """Killed after writing step 2's rollouts but before its metrics: the step is redone from the state of
    step 1, and the half-written file is kept aside, not read."""
    cfg = small(arm, steps=4)
    whole = run_arm(cfg, FakeServiceClient(), renderer, toy_task(), RunStore(tmp_path / "a"), backend="local")
    store = RunStore(tmp_path / "b")
    service = FakeServiceClient()
    first = run_arm(cfg, service, renderer, toy_task(), store, backend="local", stop_after=2)
    service2 = FakeServiceClient()
    service2.states = service.states
    (first.run.path / "rollouts" / "epoch-2.jsonl").write_text('{"half": "written"}\n')  # killed mid-step
    second = run_arm(cfg, service2, renderer, toy_task(), store, backend="local")
    assert second.origin == "resumed" and second.steps_run == 2
    assert service2.calls[0][0] == "create_training_client_from_state_with_optimizer"
    assert not _calls(service2, "create_lora_training_client")
    assert _versions(service2)[:2] == [2, 3]
    kept = first.run.path / "rollouts" / "interrupted" / "epoch-2-0.jsonl"
    assert kept.read_text() == '{"half": "written"}\n'  # no data lost
    _same_rollouts(whole.run, second.run, 4)
    assert whole.run.eval_items() == second.run.eval_items()


@pytest.mark.parametrize("arm", ["grpo", "gs1"])
def test_interruption_after_rollouts_at_step_0_starts_a_fresh_lora(arm, renderer, tmp_path):
    """Killed during step 0 after its rollouts were written: no state exists yet, so the run starts a fresh
    seed-0 LoRA and redoes step 0 (it used to raise UnboundLocalError)."""
    cfg = small(arm, steps=3)
    whole = run_arm(cfg, FakeServiceClient(), renderer, toy_task(), RunStore(tmp_path / "a"), backend="local")
    store = RunStore(tmp_path / "b")
    run, origin = store.start_or_reuse(cfg.experiment, cfg.arm, cfg.to_dict(), backend="local", resume=True)
    assert origin == "new"
    run.write_rollouts(0, [{"prompt_id": "train-0", "reward": 1.0}])  # the killed process's only output
    service = FakeServiceClient()
    res = run_arm(cfg, service, renderer, toy_task(), store, backend="local")
    assert res.origin == "resumed" and res.run.path == run.path and res.steps_run == 3 and res.run.finished
    assert service.calls[0] == ("create_lora_training_client", BASE_MODEL, 32, 0)
    assert not _calls(service, "create_training_client_from_state_with_optimizer")
    assert (run.path / "rollouts" / "interrupted" / "epoch-0-0.jsonl").exists()
    _same_rollouts(whole.run, res.run, 3)
    assert whole.run.eval_items() == res.run.eval_items()


def test_a_logged_step_without_a_state_cannot_be_resumed(renderer, tmp_path):
    cfg = small("gs1")
    store = RunStore(tmp_path)
    run, _ = store.start_or_reuse(cfg.experiment, cfg.arm, cfg.to_dict(), backend="local", resume=True)
    run.append_metrics({"step": 0, "reward_mean": 0.5})
    with pytest.raises(ResumeError, match="no saved state"):
        run_arm(cfg, FakeServiceClient(), renderer, toy_task(), store, backend="local")


def test_a_failed_state_deletion_never_stops_the_run(renderer, tmp_path):
    """Housekeeping only: the TTL expires what the loop could not delete."""
    service = FakeServiceClient()

    class BrokenRest:
        def delete_checkpoint_from_tinker_path(self, path):
            raise RuntimeError("service unavailable")

    service.create_rest_client = BrokenRest
    res = run_arm(small("grpo"), service, renderer, toy_task(), RunStore(tmp_path), backend="local")
    assert res.run.finished and len(service.states) == 3
    kept = res.run.record.provider["states_not_deleted"]
    assert kept["count"] == 2 and "service unavailable" in kept["last"]  # the last state goes after finish


def test_resumed_local_run_has_the_weights_of_an_uninterrupted_one(tmp_path, monkeypatch):
    """On the real local backend (tiny Qwen3, LoRA, importance_sampling, Adam, checkpoints on disk): a run
    stopped after step 0 and resumed in a new service client ends with exactly the LoRA weights, rollouts
    and evaluation of the same run trained without interruption. The reward is a stand-in (the parity of
    the response length) so the untrained model gets non-constant rewards and really trains."""
    import torch
    from tinker_cookbook import renderers
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    from rftlab.envs.gs1.task import local_task
    from rftlab.training.gs1 import sampling
    from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient

    monkeypatch.setattr(sampling, "grade", lambda text, answer: float(len(text) % 2))
    cfg = GS1ArmConfig(
        arm="grpo_gs8", estimator="group_mean", group_size=4, groups_per_batch=2, steps=3,
        max_tokens=6, eval_max_tokens=6, n_train=8, n_eval=4, base_model=TINY_MODEL,
        renderer_name="qwen3_5_disable_thinking", learning_rate=1e-2,
    )  # fmt: skip
    task = local_task(8)

    def service(folder):
        client = LocalServiceClient(storage_dir=tmp_path / folder)
        return client, renderers.get_renderer(cfg.renderer_name, get_tokenizer(TINY_MODEL))

    svc, renderer = service("a")
    whole = run_arm(cfg, svc, renderer, task, RunStore(tmp_path / "runs_a"), backend="local")
    svc_b, renderer = service("b")
    store = RunStore(tmp_path / "runs_b")
    first = run_arm(cfg, svc_b, renderer, task, store, backend="local", stop_after=1)
    assert first.steps_run == 1 and not first.run.finished
    svc_c, renderer = service("b")  # a new process: the state comes from disk
    second = run_arm(cfg, svc_c, renderer, task, store, backend="local")
    assert second.origin == "resumed" and second.steps_run == 2
    assert any(m["n_datums"] > 0 for m in whole.run.metrics())  # it trained
    _same_rollouts(whole.run, second.run, 3)
    assert whole.run.eval_items() == second.run.eval_items()
    a, b = svc.checkpoints.load(whole.final_path)["lora"], svc_c.checkpoints.load(second.final_path)["lora"]
    assert a.keys() == b.keys()
    init = LocalServiceClient(storage_dir=tmp_path / "init")
    fresh = init.create_lora_training_client(TINY_MODEL, rank=cfg.lora_rank, seed=0).result().lora_state()
    assert any(not torch.equal(a[k], fresh[k]) for k in a)  # the weights moved away from the init
    for k in a:
        assert torch.equal(a[k], b[k]), k  # bit for bit


def test_model_not_served_is_a_clear_error(renderer, tmp_path):
    service = FakeServiceClient(models=(("Qwen/Qwen3.5-4B", True, True),))
    with pytest.raises(ModelNotServedError, match=r"Qwen/Qwen3.5-2B is not served.*Qwen/Qwen3.5-4B"):
        run_arm(small("gs1"), service, renderer, toy_task(), RunStore(tmp_path), backend="local")
    assert not [c for c in service.calls if c[0] == "create_lora_training_client"]
    caps = FakeServiceClient(models=((BASE_MODEL, False, True),)).get_server_capabilities()
    with pytest.raises(ModelNotServedError, match="not trainable"):
        check_model_served(caps, BASE_MODEL)
