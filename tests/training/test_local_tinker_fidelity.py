"""The in-process local backend behaves like the tinker 0.38 SDK where issue 20 found it did not: errors
the SDK raises at call time, refusals the service sends through the future, the ``*_async`` surface the
cookbook's helpers call, checkpoints with TTL / overwrite / user metadata, ``name:reduction`` optimizer
metrics, and an emulated sampler/trainer mismatch (importance ratios different from 1)."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
import torch
from tinker import APIFuture, types
from tinker_helpers import sft_datum

from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient
from rftlab.training.local_tinker.checkpoints import CheckpointError, CheckpointStore


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    return LocalServiceClient(storage_dir=tmp_path_factory.mktemp("fidelity"))


@pytest.fixture(scope="module")
def client(service):
    return service.create_lora_training_client(TINY_MODEL, rank=4, seed=0).result()


def _is_datum(prompt: types.ModelInput, toks: list[int], lps: list[float], adv: float) -> types.Datum:
    ob = prompt.length - 1
    return types.Datum(
        model_input=prompt.append(types.EncodedTextChunk(tokens=toks[:-1])),
        loss_fn_inputs={
            "target_tokens": torch.tensor([0] * ob + toks),
            "logprobs": torch.tensor([0.0] * ob + lps),
            "advantages": torch.tensor([0.0] * ob + [adv] * len(toks)),
        },
    )


# ------------------------------------------------------------------ the service refuses: through the future


@pytest.mark.parametrize("rank", [0, -3, 4096])
def test_a_bad_rank_is_refused_through_the_future(service, rank):
    fut = service.create_lora_training_client(TINY_MODEL, rank=rank)
    with pytest.raises(ValueError, match="LoRA rank must be an integer from 1") as caught:
        fut.result()
    assert "create_full_training_client" in str(caught.value)


def test_the_full_weight_client_is_the_separately_named_extension(service):
    tc = service.create_full_training_client(TINY_MODEL, seed=0).result()
    assert tc.get_info().is_lora is False
    n_full = sum(t.numel() for t in tc.lora_state().values())
    n_lora = sum(
        t.numel() for t in service.create_lora_training_client(TINY_MODEL, 4).result().lora_state().values()
    )
    assert n_full > 10 * n_lora  # every weight trains, not an adapter


def test_unknown_losses_and_non_adam_optimizers_fail_through_the_future(client):
    datum = sft_datum(client.get_tokenizer(), "Tom has 5 hats. \\boxed{5}")
    with pytest.raises(ValueError, match="not supported locally"):
        client.forward_backward([datum], "gspo").result()
    with pytest.raises(ValueError, match="Adam only"):
        client.optim_step(types.DimuonParams(learning_rate=0.1)).result()


# --------------------------------------------------------------------------- the SDK refuses: at call time


def test_errors_the_sdk_raises_before_sending_are_raised_at_call_time(service, client):
    with pytest.raises(ValueError, match="No data provided"):
        client.forward_backward([], "cross_entropy")
    with pytest.raises(ValueError, match="No data provided"):
        client.forward([], "cross_entropy")
    with pytest.raises(TypeError, match="Expected AdamParams"):
        client.optim_step(None)
    with pytest.raises(TypeError, match="Expected AdamParams"):
        client.optim_step({"learning_rate": 1e-4})  # a dict, not AdamParams
    with pytest.raises(ValueError, match="not both"):
        client.optim_step(types.AdamParams(), adam_params=types.AdamParams())
    with pytest.raises(AssertionError, match="At least one"):
        service.create_lora_training_client(
            TINY_MODEL, train_mlp=False, train_attn=False, train_unembed=False
        )
    with pytest.raises(ValueError, match="Either model_path or base_model"):
        service.create_sampling_client()
    sampler = client.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(client.get_tokenizer().encode("Ann has 7 apples."))
    with pytest.raises(ValueError, match="1 or greater"):
        sampler.compute_logprobs(prompt, prompt_logprobs_last_n=0)
    with pytest.raises(ValueError, match="include_prompt_logprobs"):
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=2), prompt_logprobs_last_n=2)


# ------------------------------------------------------------------------------------ the async surface


def test_async_variants_return_what_the_sdks_return(service, tmp_path):
    async def main():
        tc = await service.create_lora_training_client_async(TINY_MODEL, rank=4, seed=1)
        datum = sft_datum(tc.get_tokenizer(), "Max has 2 dogs. \\boxed{2}")
        fb = await tc.forward_backward_async([datum], "cross_entropy")
        op = await tc.optim_step_async(types.AdamParams(learning_rate=0.01))
        assert isinstance(fb, APIFuture) and isinstance(op, APIFuture)  # awaiting the call gives a future
        assert (await fb).metrics["loss:sum"] > 0 and "grad_norm:mean" in (await op).metrics
        state = await tc.save_state_async("a", ttl_seconds=7200)
        assert (await state.result_async()).path.endswith("/weights/a")
        sampler = await tc.save_weights_and_get_sampling_client_async()  # the client itself
        prompt = types.ModelInput.from_ints(tc.get_tokenizer().encode("Max has"))
        res = await sampler.sample_async(prompt, 2, types.SamplingParams(max_tokens=3, seed=0))
        lps = await sampler.compute_logprobs_async(prompt)
        assert len(res.sequences) == 2 and lps[0] is None
        again = await service.create_training_client_from_state_with_optimizer_async((await state).path)
        return tc, again

    tc, again = asyncio.run(main())
    assert all(torch.equal(again.lora_state()[n], t) for n, t in tc.lora_state().items())


def test_the_cookbooks_save_checkpoint_runs_on_the_local_client(client, tmp_path):
    """``checkpoint_utils.save_checkpoint_async`` (what the cookbook's CheckpointManager calls) awaits
    ``save_state_async`` / ``save_weights_for_sampler_async`` and then ``result_async`` on the futures."""
    from tinker_cookbook import checkpoint_utils

    paths = asyncio.run(
        checkpoint_utils.save_checkpoint_async(
            training_client=client,
            name="cookbook-000001",
            log_path=str(tmp_path),
            loop_state={"batch": 1},
            kind="both",
            ttl_seconds=7 * 24 * 3600,
        )
    )
    assert paths["state_path"].endswith("/weights/cookbook-000001")
    assert paths["sampler_path"].endswith("/sampler_weights/cookbook-000001")
    record = json.loads((tmp_path / "checkpoints.jsonl").read_text().splitlines()[-1])
    assert record["state_path"] == paths["state_path"] and record["batch"] == 1


# ------------------------------------------------------------------------------------------ checkpoints


def test_save_state_keeps_ttl_metadata_and_refuses_to_overwrite(service, client):
    path = client.save_state("ttl", ttl_seconds=3600, user_metadata={"arm": "grpo"}).result().path
    meta = service.checkpoints.metadata(path)
    assert meta["ttl_seconds"] == 3600 and meta["user_metadata"] == {"arm": "grpo"}
    assert meta["expires_at"] == pytest.approx(meta["created_at"] + 3600)
    with pytest.raises(ValueError, match="already exists"):
        client.save_state("ttl").result()
    replaced = client.save_state("ttl", overwrite=True).result().path
    assert replaced == path and service.checkpoints.metadata(path)["ttl_seconds"] is None
    for bad in (10, 11 * 365 * 24 * 3600):
        with pytest.raises(ValueError, match="between 3600"):
            client.save_state(f"bad-{bad}", ttl_seconds=bad).result()
    sampler_path = (
        client.save_weights_for_sampler("s", ttl_seconds=7200, user_metadata={"k": "v"}).result().path
    )
    assert service.checkpoints.metadata(sampler_path)["user_metadata"] == {"k": "v"}


def test_an_expired_checkpoint_is_refused_and_swept(tmp_path):
    now = [1000.0]
    store = CheckpointStore(tmp_path, clock=lambda: now[0])
    path = store.save("m", "weights", "a", {"x": torch.ones(2)}, ttl_seconds=3600)
    keep = store.save("m", "weights", "b", {"x": torch.zeros(2)})
    assert torch.equal(store.load(path)["x"], torch.ones(2))
    now[0] += 3600
    with pytest.raises(CheckpointError, match="expired"):
        store.load(path)
    assert store.sweep() == [path]
    assert not store.exists(path) and store.exists(keep)
    with pytest.raises(CheckpointError, match="not found"):
        store.load(path)
    for bad in ("tinker://m/other/a", "tinker://m/weights", "file:///etc/passwd", "tinker://../weights/a"):
        with pytest.raises(CheckpointError, match="not a checkpoint path"):
            store.load(bad)


def test_a_new_process_reads_checkpoints_and_their_metadata(tmp_path):
    a = LocalServiceClient(storage_dir=tmp_path)
    tc = a.create_lora_training_client(TINY_MODEL, rank=4, seed=2).result()
    path = tc.save_state("s", ttl_seconds=86400, user_metadata={"step": "3"}).result().path
    b = LocalServiceClient(storage_dir=tmp_path)
    assert b.checkpoints.metadata(path)["user_metadata"] == {"step": "3"}
    again = b.create_training_client_from_state(path).result()
    assert all(torch.equal(again.lora_state()[n], t) for n, t in tc.lora_state().items())


# ------------------------------------------------------------------------------------- optimizer metrics


def test_optimizer_metrics_carry_the_reduction_suffix_and_the_pre_clip_norm(service):
    tc = service.create_lora_training_client(TINY_MODEL, rank=4, seed=5).result()
    datum = sft_datum(tc.get_tokenizer(), "Zoe has 8 pens. \\boxed{8}")
    tc.forward_backward([datum], "cross_entropy").result()
    grads = tc.accumulated_gradients()
    expected = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    out = tc.optim_step(types.AdamParams(learning_rate=1e-3, grad_clip_norm=1e-3)).result()
    assert set(out.metrics) == {"grad_norm:mean"}
    assert all(len(k.split(":")) == 2 for k in out.metrics)  # the SDK splits each key once on ':'
    assert out.metrics["grad_norm:mean"] == pytest.approx(expected, rel=1e-5)


# ------------------------------------------------------------------------- sampler / trainer mismatch


def _ratios(service: LocalServiceClient, seed: int = 0) -> tuple[list[float], float, float]:
    tc = service.create_lora_training_client(TINY_MODEL, rank=4, seed=seed).result()
    tok = tc.get_tokenizer()
    tc.forward_backward([sft_datum(tok, "Lee has 4 kites. \\boxed{4}")], "cross_entropy").result()
    tc.optim_step(types.AdamParams(learning_rate=0.05)).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(tok.encode("Lee has 4 kites."))
    res = sampler.sample(
        prompt, 4, types.SamplingParams(max_tokens=6, temperature=1.0, stop=[], seed=3)
    ).result()
    advs = [1.0, -0.5, 0.25, 2.0]
    data = [_is_datum(prompt, s.tokens, s.logprobs, a) for s, a in zip(res.sequences, advs, strict=True)]
    out = tc.forward(data, "importance_sampling").result()
    ratios, expected = [], 0.0
    for d, o in zip(data, out.loss_fn_outputs, strict=True):
        ob = prompt.length - 1
        logp = o["logprobs"].tolist()[ob:]
        slp = d.loss_fn_inputs["logprobs"].tolist()[ob:]
        adv = d.loss_fn_inputs["advantages"].tolist()[ob:]
        r = [math.exp(a - b) for a, b in zip(logp, slp, strict=True)]
        ratios += r
        expected -= sum(x * y for x, y in zip(r, adv, strict=True))
    return ratios, expected, out.metrics["loss:sum"]


def test_locally_the_importance_ratio_of_fresh_samples_is_one(tmp_path):
    ratios, expected, loss = _ratios(LocalServiceClient(storage_dir=tmp_path))
    assert max(abs(r - 1) for r in ratios) < 1e-4
    assert loss == pytest.approx(expected, rel=1e-5, abs=1e-5)


def test_a_bfloat16_sampler_emulates_the_services_mismatch(tmp_path):
    ratios, expected, loss = _ratios(LocalServiceClient(storage_dir=tmp_path, sampler_dtype=torch.bfloat16))
    assert max(abs(r - 1) for r in ratios) > 1e-3  # the importance-sampling path now sees ratios != 1
    assert loss == pytest.approx(expected, rel=1e-5, abs=1e-5)  # and the loss is still -sum(r * A)


# --------------------------------------------------------------------------------------- tokenizer id


def test_get_info_names_a_tokenizer_that_loads_offline(client):
    from tinker_cookbook.tokenizer_utils import get_tokenizer
    from transformers import AutoTokenizer

    tid = client.get_info().model_data.tokenizer_id
    for tok in (AutoTokenizer.from_pretrained(tid), get_tokenizer(tid), get_tokenizer(TINY_MODEL)):
        for text in ("Ann has 7 apples.", "<|im_start|>user\n12+30=?<|im_end|>", "é λ 1,234"):
            assert tok.encode(text, add_special_tokens=False) == client.get_tokenizer().encode(
                text, add_special_tokens=False
            )
