"""The local tinker-compatible backend: losses against direct PyTorch computations, gradients against
finite differences, Adam against a hand-written update, sampling semantics and determinism."""

from __future__ import annotations

import math

import pytest
import torch
from tinker import APIFuture, types

from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient

STOP = 258  # <|im_end|> in the byte tokenizer


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the direct reference computations run outside the backend's own setting
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained64(service64):
    """A float64 client whose LoRA B matrices are non-zero (one SFT step), so every gradient is live."""
    tc = service64.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result()
    tok = tc.get_tokenizer()
    ids = tok.encode("Sam has 3 pens. \\boxed{3}")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )
    tc.forward_backward([datum], "cross_entropy").result()
    tc.optim_step(types.AdamParams(learning_rate=0.05)).result()
    return tc


def _prompt(tc, text="Ann has 7 apples."):
    return types.ModelInput.from_ints(tc.get_tokenizer().encode(text))


def _rl_datum(prompt: types.ModelInput, toks: list[int], lps: list[float], adv: float) -> types.Datum:
    ob = prompt.length - 1
    return types.Datum(
        model_input=prompt.append(types.EncodedTextChunk(tokens=toks[:-1])),
        loss_fn_inputs={
            "target_tokens": torch.tensor([0] * ob + toks),
            "logprobs": torch.tensor([0.0] * ob + lps),
            "advantages": torch.tensor([0.0] * ob + [adv] * len(toks)),
        },
    )


def _direct_logprobs(model, tokens: list[int], targets: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([tokens])).logits[0]
    return torch.stack([torch.log_softmax(logits[t], -1)[targets[t]] for t in range(len(tokens))])


def _rl_batch(tc, n=3, seed=5):
    prompt = _prompt(tc)
    sampler = tc.save_weights_and_get_sampling_client().result()
    res = sampler.sample(
        prompt, n, types.SamplingParams(max_tokens=6, temperature=1.0, stop=[], seed=seed)
    ).result()
    advs = [1.0, -0.5, 0.25, 2.0][:n]
    # behaviour logprobs deliberately off by a known amount so the IS ratio is not 1
    return (
        prompt,
        res,
        [
            _rl_datum(prompt, s.tokens, [lp - 0.1 * (i + 1) for lp in s.logprobs], a)
            for i, (s, a) in enumerate(zip(res.sequences, advs, strict=True))
        ],
    )


def test_returns_real_tinker_types_and_futures(trained64):
    sampler = trained64.save_weights_and_get_sampling_client().result()
    fut = sampler.sample(_prompt(trained64), 2, types.SamplingParams(max_tokens=4, seed=1))
    assert isinstance(fut, APIFuture)
    res = fut.result()
    assert isinstance(res, types.SampleResponse)
    assert all(isinstance(s, types.SampledSequence) for s in res.sequences)
    _, _, data = _rl_batch(trained64)
    out = trained64.forward(data, "importance_sampling").result()
    assert isinstance(out, types.ForwardBackwardOutput)
    assert isinstance(out.loss_fn_outputs[0]["logprobs"], types.TensorData)


def test_importance_sampling_loss_matches_direct_pytorch(trained64):
    _, _, data = _rl_batch(trained64)
    out = trained64.forward(data, "importance_sampling").result()
    expected = 0.0
    for d, o in zip(data, out.loss_fn_outputs, strict=True):
        toks = d.model_input.to_ints()
        tgt = d.loss_fn_inputs["target_tokens"].tolist()
        logp = _direct_logprobs(trained64.model, toks, tgt)
        old = d.loss_fn_inputs["logprobs"].tolist()
        adv = d.loss_fn_inputs["advantages"].tolist()
        expected += -sum(math.exp(float(logp[t]) - old[t]) * adv[t] for t in range(len(toks)))
        assert o["logprobs"].tolist() == pytest.approx(logp.tolist(), abs=1e-6)
    assert out.metrics["loss:sum"] == pytest.approx(expected, rel=1e-10, abs=1e-10)


def test_cross_entropy_loss_matches_direct_pytorch(trained64):
    tok = trained64.get_tokenizer()
    texts = ["Ben has 12 cards. \\boxed{12}", "Add 4 and 5. \\boxed{9}<|im_end|>"]
    data, expected = [], 0.0
    for k, text in enumerate(texts):
        ids = tok.encode(text)
        weights = [0.0] * 5 + [1.0 + k] * (len(ids) - 6)
        d = types.Datum(
            model_input=types.ModelInput.from_ints(ids[:-1]),
            loss_fn_inputs={"target_tokens": ids[1:], "weights": weights},
        )
        data.append(d)
        logp = _direct_logprobs(trained64.model, ids[:-1], ids[1:])
        expected += -sum(float(lp) * w for lp, w in zip(logp, weights, strict=True))
    out = trained64.forward(data, "cross_entropy").result()
    assert out.metrics["loss:sum"] == pytest.approx(expected, rel=1e-10)


def _direct_is_loss(model, data) -> torch.Tensor:
    """The importance-sampling loss written out per datum, no batching, from the raw lists."""
    total = torch.zeros((), dtype=torch.float64)
    for d in data:
        toks = d.model_input.to_ints()
        logits = model(input_ids=torch.tensor([toks])).logits[0]
        tgt = d.loss_fn_inputs["target_tokens"].tolist()
        old = d.loss_fn_inputs["logprobs"].tolist()
        adv = d.loss_fn_inputs["advantages"].tolist()
        for t in range(len(toks)):
            total = total - torch.exp(torch.log_softmax(logits[t], -1)[tgt[t]] - old[t]) * adv[t]
    return total


def test_gradient_matches_autograd_reference_and_finite_differences(trained64):
    _, _, data = _rl_batch(trained64, n=2)
    trained64.forward_backward(data, "importance_sampling").result()
    grads = trained64.last_gradients()
    params = {
        n.removeprefix("base_model.model."): p
        for n, p in trained64.model.named_parameters()
        if p.requires_grad
    }
    for p in params.values():
        p.grad = None
    _direct_is_loss(trained64.model, data).backward()
    for name, p in params.items():
        assert torch.allclose(grads[name], p.grad.double(), rtol=1e-9, atol=1e-12), name
    for p in params.values():
        p.grad = None
    # central differences (RMSNorm and RoPE compute in float32 inside the float64 model: eps 1e-3)
    for name in (
        "model.layers.0.self_attn.q_proj.lora_A.default.weight",
        "model.layers.1.mlp.down_proj.lora_B.default.weight",
        "lm_head.lora_B.default.weight",
    ):
        p, g = params[name], grads[name]
        idx = tuple(int(i) for i in torch.nonzero(g.abs() == g.abs().max())[0])
        eps = 1e-3
        with torch.no_grad():
            orig = p[idx].item()
            p[idx] = orig + eps
            up = trained64.forward(data, "importance_sampling").result().metrics["loss:sum"]
            p[idx] = orig - eps
            down = trained64.forward(data, "importance_sampling").result().metrics["loss:sum"]
            p[idx] = orig
        assert g[idx].item() == pytest.approx((up - down) / (2 * eps), rel=2e-3), name
    # gradients accumulate over forward_backward calls until optim_step, like the service
    trained64.forward_backward(data, "importance_sampling").result()
    trained64.forward_backward(data, "importance_sampling").result()
    acc = trained64.accumulated_gradients()
    assert torch.allclose(acc[name], 2 * grads[name], rtol=1e-9, atol=1e-12)
    assert torch.allclose(trained64.last_gradients()[name], grads[name], rtol=1e-9, atol=1e-12)
    for p in params.values():
        p.grad = None


def test_adam_matches_hand_written_adamw_with_clipping(service64):
    tc = service64.create_lora_training_client(base_model=TINY_MODEL, rank=2, seed=3).result()
    tok = tc.get_tokenizer()
    ids = tok.encode("Mia has 9 cups. \\boxed{9}")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )
    hp = types.AdamParams(
        learning_rate=0.01, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip_norm=0.5
    )
    ref = {n: t.clone() for n, t in tc.lora_state().items()}
    m = {n: torch.zeros_like(t) for n, t in ref.items()}
    v = {n: torch.zeros_like(t) for n, t in ref.items()}
    for step in (1, 2, 3):
        tc.forward_backward([datum], "cross_entropy").result()
        g = tc.last_gradients()
        norm = math.sqrt(sum(float((x * x).sum()) for x in g.values()))
        scale = min(1.0, hp.grad_clip_norm / (norm + 1e-6))
        for n in ref:
            gn = g[n] * scale
            ref[n] = ref[n] * (1 - hp.learning_rate * hp.weight_decay)
            m[n] = hp.beta1 * m[n] + (1 - hp.beta1) * gn
            v[n] = hp.beta2 * v[n] + (1 - hp.beta2) * gn * gn
            mhat = m[n] / (1 - hp.beta1**step)
            vhat = v[n] / (1 - hp.beta2**step)
            ref[n] = ref[n] - hp.learning_rate * mhat / (vhat.sqrt() + hp.eps)
        tc.optim_step(hp).result()
    got = tc.lora_state()
    for n in ref:
        assert torch.allclose(got[n], ref[n], atol=1e-10), n


def test_sampling_logprobs_equal_compute_logprobs(service64):
    tc = service64.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=1).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = _prompt(tc)
    res = sampler.sample(
        prompt, 4, types.SamplingParams(max_tokens=8, temperature=1.0, stop=[], seed=0)
    ).result()
    for seq in res.sequences:
        full = sampler.compute_logprobs(prompt.append(types.EncodedTextChunk(tokens=seq.tokens))).result()
        assert full[0] is None
        assert full[-len(seq.tokens) :] == pytest.approx(seq.logprobs, abs=1e-6)  # float32 on the wire


def test_seeds_and_snapshots_are_deterministic(tmp_path):
    a = (
        LocalServiceClient(storage_dir=tmp_path / "a")
        .create_lora_training_client(TINY_MODEL, rank=8, seed=0)
        .result()
    )
    b = (
        LocalServiceClient(storage_dir=tmp_path / "b")
        .create_lora_training_client(TINY_MODEL, rank=8, seed=0)
        .result()
    )
    c = (
        LocalServiceClient(storage_dir=tmp_path / "c")
        .create_lora_training_client(TINY_MODEL, rank=8, seed=1)
        .result()
    )
    sa, sb, sc = (x.lora_state() for x in (a, b, c))
    assert all(torch.equal(sa[n], sb[n]) for n in sa)
    assert not all(torch.equal(sa[n], sc[n]) for n in sa)
    prompt = _prompt(a)
    params = types.SamplingParams(max_tokens=8, temperature=1.0, stop=[], seed=42)
    alone = a.save_weights_and_get_sampling_client().result().sample(prompt, 3, params).result()
    sampler_b = b.save_weights_and_get_sampling_client().result()
    other = sampler_b.sample(
        _prompt(b, "A longer unrelated prompt in the same batch."), 5, params.model_copy(update={"seed": 7})
    )
    batched = sampler_b.sample(prompt, 3, params)
    other.result()
    toks = [s.tokens for s in alone.sequences]
    assert toks == [s.tokens for s in batched.result().sequences]
    assert len({tuple(t) for t in toks}) == 3  # samples within a request differ
    different = sampler_b.sample(prompt, 3, params.model_copy(update={"seed": 43})).result()
    assert toks != [s.tokens for s in different.sequences]


def test_stop_tokens_max_tokens_and_greedy(service64):
    tc = service64.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=2).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = _prompt(tc)
    greedy = sampler.sample(prompt, 2, types.SamplingParams(max_tokens=10, temperature=0.0, stop=[])).result()
    g = greedy.sequences[0].tokens
    assert g == greedy.sequences[1].tokens and len(g) == 10 and greedy.sequences[0].stop_reason == "length"
    ctx = prompt.to_ints()
    for t, tok in enumerate(g):  # each greedy token is the argmax of the model's next-token distribution
        with torch.no_grad():
            logits = tc.model(input_ids=torch.tensor([ctx + g[:t]])).logits[0, -1]
        assert int(logits.argmax()) == tok
    stop_tok = g[3]
    first = g.index(stop_tok)
    stopped = sampler.sample(
        prompt, 1, types.SamplingParams(max_tokens=10, temperature=0.0, stop=[stop_tok])
    ).result()
    seq = stopped.sequences[0]
    assert seq.stop_reason == "stop" and seq.tokens == g[: first + 1]
    short = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=3, temperature=0.0, stop=[])).result()
    assert short.sequences[0].tokens == g[:3] and short.sequences[0].stop_reason == "length"


def test_snapshot_checkpoint_and_resume(tmp_path):
    sc = LocalServiceClient(storage_dir=tmp_path)
    tc = sc.create_lora_training_client(TINY_MODEL, rank=4, seed=0).result()
    prompt = _prompt(tc)
    greedy = types.SamplingParams(max_tokens=6, temperature=0.0, stop=[])
    before = tc.save_weights_and_get_sampling_client().result()
    _, _, data = _rl_batch(tc)
    tc.forward_backward(data, "importance_sampling").result()
    tc.optim_step(types.AdamParams(learning_rate=0.05)).result()
    path = tc.save_weights_for_sampler("step1").result().path
    state = tc.save_state("step1").result().path
    assert path.startswith("tinker://") and "sampler_weights" in path
    old = before.sample(prompt, 1, greedy).result().sequences[0].tokens
    new = (
        tc.save_weights_and_get_sampling_client()
        .result()
        .sample(prompt, 1, greedy)
        .result()
        .sequences[0]
        .tokens
    )
    # a fresh process (new service client on the same storage) reads the checkpoints back
    sc2 = LocalServiceClient(storage_dir=tmp_path)
    again = sc2.create_sampling_client(model_path=path).result().sample(prompt, 1, greedy).result()
    assert again.sequences[0].tokens == new
    assert old != new or not torch.equal(
        before._snapshot.tensors["lm_head.lora_B.default.weight"],
        tc.lora_state()["lm_head.lora_B.default.weight"],
    )
    resumed = sc2.create_training_client_from_state_with_optimizer(state).result()
    assert all(torch.equal(resumed.lora_state()[n], t) for n, t in tc.lora_state().items())
    assert resumed.optim_steps == 1


def test_a_saved_state_is_a_snapshot_that_later_steps_do_not_change(tmp_path):
    """``save_state`` then more training on the same service: loading the state (from the store's memory
    cache, as a long-running ``rftlab serve tinker`` does) gives the Adam moments of the save, so the
    resumed client repeats the original's later losses exactly; and training the resumed client does not
    change the saved state either. (Both failed while the checkpoint shared the live optimizer tensors.)"""
    sc = LocalServiceClient(storage_dir=tmp_path)
    tc = sc.create_lora_training_client(TINY_MODEL, rank=4, seed=0).result()
    _, _, data = _rl_batch(tc)
    adam = types.AdamParams(learning_rate=0.05)

    def step(client) -> float:
        out = client.forward_backward(data, "importance_sampling").result()
        client.optim_step(adam).result()
        return float(out.metrics["loss:sum"])

    step(tc)
    state = tc.save_state("after-1").result().path
    original = [step(tc) for _ in range(3)]
    resumed = sc.create_training_client_from_state_with_optimizer(state).result()
    assert [step(resumed) for _ in range(3)] == original
    again = sc.create_training_client_from_state_with_optimizer(state).result()
    assert [step(again) for _ in range(3)] == original


def test_bad_datums_fail_at_result_with_a_clear_error(trained64):
    tok = trained64.get_tokenizer()
    ids = tok.encode("abc")
    bad = types.Datum(
        model_input=types.ModelInput.from_ints(ids),
        loss_fn_inputs={"target_tokens": ids, "weights": [1.0] * 3, "advantages": [0.0] * 3},
    )
    with pytest.raises(ValueError, match="extra \\['advantages'\\]"):
        trained64.forward_backward([bad], "cross_entropy").result()
    short = types.Datum(
        model_input=types.ModelInput.from_ints(ids),
        loss_fn_inputs={"target_tokens": ids[:2], "weights": [1.0] * 2},
    )
    with pytest.raises(ValueError, match="shape"):
        trained64.forward([short], "cross_entropy").result()
    with pytest.raises(ValueError, match="not supported"):
        trained64.forward([short], "gspo").result()
    with pytest.raises(ValueError, match="checkpoint path"):
        LocalServiceClient().create_sampling_client(model_path="nowhere").result()


def test_capabilities_list_the_builtin_model():
    sc = LocalServiceClient()
    names = {
        m.model_name for m in sc.create_rest_client().get_server_capabilities().result().supported_models
    }
    assert TINY_MODEL in names


def test_top_k_prompt_logprobs_string_stops_and_future_as_client(service64):
    fut = service64.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=4)
    with pytest.warns(FutureWarning):
        fut.get_tokenizer()  # deprecated SDK usage: the future used as the client still works
    tc = fut.result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = _prompt(tc)
    greedy = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=8, temperature=0.0, stop=[])).result()
    top1 = sampler.sample(
        prompt, 2, types.SamplingParams(max_tokens=8, temperature=1.5, top_k=1, stop=[], seed=3)
    )
    assert all(s.tokens == greedy.sequences[0].tokens for s in top1.result().sequences)
    tiny_p = sampler.sample(
        prompt, 2, types.SamplingParams(max_tokens=8, temperature=1.0, top_p=1e-6, stop=[], seed=3)
    )
    assert all(s.tokens == greedy.sequences[0].tokens for s in tiny_p.result().sequences)
    full = sampler.compute_logprobs(prompt).result()
    with_prompt = sampler.sample(
        prompt, 1, types.SamplingParams(max_tokens=2, stop=[]), include_prompt_logprobs=True
    )
    got = with_prompt.result().prompt_logprobs
    assert got[0] is None and got[1:] == pytest.approx(full[1:], abs=1e-6)
    last = sampler.compute_logprobs(prompt, prompt_logprobs_last_n=3).result()
    assert last[:-3] == [None] * (len(full) - 3) and last[-3:] == pytest.approx(full[-3:])
    # a multi-token stop string ends generation once its tokens appear, and is kept in the output
    g = greedy.sequences[0].tokens
    text = tc.get_tokenizer().decode(g[2:4])
    if tc.get_tokenizer().encode(text, add_special_tokens=False) == g[2:4]:
        stopped = sampler.sample(
            prompt, 1, types.SamplingParams(max_tokens=8, temperature=0.0, stop=[text])
        ).result()
        assert stopped.sequences[0].stop_reason == "stop" and stopped.sequences[0].tokens[-2:] == g[2:4]


def test_concurrent_callers_get_the_same_results_as_sequential_ones():
    from concurrent.futures import ThreadPoolExecutor

    sc = LocalServiceClient()
    tc = sc.create_lora_training_client(TINY_MODEL, rank=4, seed=0).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompts = [_prompt(tc, f"Kim has {i} cups.") for i in range(8)]
    params = types.SamplingParams(max_tokens=6, temperature=1.0, stop=[], seed=11)
    sequential = [sampler.sample(p, 2, params).result().sequences[0].tokens for p in prompts]

    def one(p):
        return sampler.sample(p, 2, params).result().sequences[0].tokens

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one, prompts)) == sequential
