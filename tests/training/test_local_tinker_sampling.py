"""The local backend's sampler (engine.py): O(1) default seeds, per-step noise that reproduces the former
preallocated noise for row 0, requests split by ``first_row``, parameter and prompt refusals, non-finite
logits, sampled-logprob modes, stop strings matched on the decoded text, and random LoRA seeds."""

from __future__ import annotations

import math
import time

import pytest
import torch
from tinker import types

from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient, byte_tokenizer, engine
from rftlab.training.local_tinker.errors import NonFiniteError, ParameterError

BYTES_MODEL = "rftlab/tiny-qwen3-bytes"


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained(service64):
    """A float64 client whose LoRA B is non-zero (one SFT step), and a sampler on its weights."""
    tc = service64.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result()
    ids = tc.get_tokenizer().encode("Sam has 3 pens. \\boxed{3}")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )
    tc.forward_backward([datum], "cross_entropy").result()
    tc.optim_step(types.AdamParams(learning_rate=0.05)).result()
    return tc, tc.save_weights_and_get_sampling_client().result()


def _prompt(tc, text="Ann has 7 apples."):
    return types.ModelInput.from_ints(tc.get_tokenizer().encode(text))


def _old_noise(seed: int, n: int, steps: int, vocab: int) -> torch.Tensor:
    """The former scheme, written out: one (n, steps, vocab) block of uniforms drawn up front."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand((n, steps, vocab), generator=gen, dtype=torch.float32)
    return -torch.log(-torch.log(u.clamp(1e-20, 1.0 - 1e-7)))


# ------------------------------------------------------------------------------------------------ seeds


def test_default_seed_is_constant_time_deterministic_and_mixed(trained):
    tc, sampler = trained
    other = tc.save_weights_and_get_sampling_client().result()  # another sampler seed
    t0 = time.perf_counter()
    big = sampler.default_seed(10**12)
    assert time.perf_counter() - t0 < 0.05  # the former stream would have drawn 10**12 values
    assert big == sampler.default_seed(10**12) and 0 <= big < 2**63
    seeds = [sampler.default_seed(i) for i in range(1000)]
    assert len(set(seeds)) == 1000
    assert seeds[:5] == [engine.mix_seed(sampler._seed, i) for i in range(5)]
    assert all(other.default_seed(i) != sampler.default_seed(i) for i in range(100))
    assert engine.mix_seed(0, 0) != engine.mix_seed(1, 0) != engine.mix_seed(0, 1)
    assert engine.mix_seed(-1, 3) == engine.mix_seed(2**64 - 1, 3)  # taken modulo 2**64


# ------------------------------------------------------------------------------------------------ noise


@pytest.mark.parametrize("vocab", [265, 4099])
@pytest.mark.parametrize("seed", [0, 1, 7, 2**40 + 3, 2**64 - 1])
def test_row_zero_draws_the_former_preallocated_noise_bit_for_bit(seed, vocab):
    steps = 6
    old = _old_noise(seed, 1, steps, vocab)[0]
    row = engine._Row(request=None, index=0, seed=engine.row_seed(seed, 0))  # type: ignore[arg-type]
    new = torch.stack([engine._gumbel(row.draw(vocab, torch.device("cpu"))) for _ in range(steps)])
    assert torch.equal(old, new)
    # other rows: their own streams, not the old block's rows
    row1 = engine._Row(request=None, index=1, seed=engine.row_seed(seed, 1))  # type: ignore[arg-type]
    assert not torch.equal(engine._gumbel(row1.draw(vocab, torch.device("cpu"))), old[0])


def _reference_sample(model, prompt: list[int], noise: torch.Tensor, temperature: float, top_k: int):
    """Gumbel-max decoding without a KV cache: full forward at each step, noise row ``t`` at step ``t``."""
    toks: list[int] = []
    with torch.no_grad():
        for t in range(noise.shape[0]):
            logits = model(input_ids=torch.tensor([prompt + toks])).logits[0, -1]
            scaled = logits / temperature
            if top_k > 0:
                kth = torch.topk(scaled, top_k).values[-1]
                scaled = scaled.masked_fill(scaled < kth, float("-inf"))
            toks.append(int((scaled + noise[t].to(scaled.dtype)).argmax()))
    return toks


@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, -1), (0.6, -1), (1.8, -1), (1.0, 4)])
def test_one_sample_request_samples_what_the_former_noise_gave(trained, temperature, top_k):
    tc, sampler = trained
    prompt = _prompt(tc)
    steps = 12
    for seed in (0, 3, 123456789):
        params = types.SamplingParams(
            max_tokens=steps, temperature=temperature, top_k=top_k, stop=[], seed=seed
        )
        got = sampler.sample(prompt, 1, params).result().sequences[0].tokens
        noise = _old_noise(seed, 1, steps, tc._host.vocab)[0]
        assert got == _reference_sample(tc.model, prompt.to_ints(), noise, temperature, top_k)


def test_noise_is_drawn_per_step_not_for_the_whole_request(trained, monkeypatch):
    tc, sampler = trained
    sizes: list[int] = []
    real = torch.rand

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        sizes.append(out.numel())
        return out

    monkeypatch.setattr(torch, "rand", spy)
    params = types.SamplingParams(max_tokens=20, temperature=1.0, stop=[], seed=1)
    sampler.sample(_prompt(tc), 3, params).result()
    assert sizes and max(sizes) == tc._host.vocab  # one block of vocab uniforms per row and step


def test_a_row_leaves_the_decode_batch_when_it_stops_and_the_others_sample_as_alone(trained, monkeypatch):
    """Rows of one batch that stop early leave it (cache and sampling tensors included): the model is then
    called with fewer rows, and every row still samples exactly what it samples alone (the no-cache
    reference decoder, with the row's own noise) -- a short row's exit changes no other row's tokens."""
    tc, sampler = trained
    prompts = [_prompt(tc), _prompt(tc, "Bo has 12 marbles and loses 5."), _prompt(tc, "Cy reads.")]
    limits, seeds = [3, 12, 7], [11, 12, 13]
    widths: list[int] = []
    model = tc._host.model
    real = type(model).__call__

    def spy(self, *args, **kwargs):
        ids = kwargs.get("input_ids")
        if self is model and ids is not None:
            widths.append(int(ids.shape[0]))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(model), "__call__", spy)
    futures = [
        sampler.submit(p, 1, types.SamplingParams(max_tokens=n, temperature=1.0, stop=[], seed=seed))[0]
        for p, n, seed in zip(prompts, limits, seeds, strict=True)
    ]  # submitted together: one flush, one decode batch
    got = [f.result().sequences[0].tokens for f in futures]
    monkeypatch.undo()
    assert widths[0] == 3 and widths[-1] == 1  # the prompt pass, then fewer rows as rows stop
    assert widths.count(3) == 3 and widths.count(2) == 4 and widths.count(1) == 5
    for toks, p, n, seed in zip(got, prompts, limits, seeds, strict=True):
        noise = _old_noise(seed, 1, n, tc._host.vocab)[0]
        assert toks == _reference_sample(tc.model, p.to_ints(), noise, 1.0, -1)


def test_a_request_split_by_first_row_gives_the_unsplit_samples(trained):
    tc, sampler = trained
    prompt = _prompt(tc)
    for seed in (5, None):  # explicit, and the sampler's default seed for the request's index
        params = types.SamplingParams(max_tokens=10, temperature=1.0, stop=[], seed=seed)
        whole, whole_ids = sampler.submit(prompt, 10, params, index=77)
        a, a_ids = sampler.submit(prompt, 4, params, index=77, first_row=0)
        b, b_ids = sampler.submit(prompt, 6, params, index=77, first_row=4)
        whole_seqs = whole.result().sequences
        pieces = a.result().sequences + b.result().sequences
        assert [s.tokens for s in pieces] == [s.tokens for s in whole_seqs]
        assert [s.logprobs for s in pieces] == [s.logprobs for s in whole_seqs]
        assert a_ids + b_ids == whole_ids and whole_ids[4].endswith("-77-4")
        assert len({tuple(s.tokens) for s in whole_seqs}) > 1
    bad, _ = sampler.submit(prompt, 1, params, first_row=-1)
    with pytest.raises(ParameterError, match="first_row"):
        bad.result()


# ------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.5),
        ("temperature", math.nan),
        ("temperature", math.inf),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_p", math.nan),
        ("top_k", -2),
        ("max_tokens", 0),
        ("max_tokens", -3),
        ("seed", -1),
        ("seed", 2**64),
    ],
)
def test_sampling_parameters_outside_the_sdk_ranges_are_refused(trained, field, value):
    tc, sampler = trained
    params = types.SamplingParams(max_tokens=4, stop=[]).model_copy(update={field: value})
    with pytest.raises(ParameterError, match=f"SamplingParams.{field}"):
        sampler.sample(_prompt(tc), 1, params).result()


def test_edge_values_inside_the_ranges_are_accepted(trained):
    tc, sampler = trained
    for update in ({"top_k": -1}, {"top_k": 0}, {"top_p": 1.0}, {"temperature": 0.0}, {"seed": 2**64 - 1}):
        params = types.SamplingParams(max_tokens=2, stop=[]).model_copy(update=update)
        assert len(sampler.sample(_prompt(tc), 1, params).result().sequences[0].tokens) == 2


def test_prompt_tokens_outside_the_vocabulary_are_refused(trained):
    tc, sampler = trained
    vocab = tc._host.vocab
    bad = types.ModelInput.from_ints([1, 2, vocab, 3])
    msg = f"prompt token id {vocab} at position 2 is outside the vocabulary \\({vocab} tokens\\)"
    with pytest.raises(ParameterError, match=msg):
        sampler.sample(bad, 1, types.SamplingParams(max_tokens=2)).result()
    with pytest.raises(ParameterError, match=msg):
        sampler.compute_logprobs(bad).result()
    with pytest.raises(ParameterError, match="prompt token id -4 at position 0"):
        sampler.compute_logprobs(types.ModelInput.from_ints([-4, 1])).result()


def test_non_finite_logits_fail_the_request_instead_of_returning_a_token(trained):
    tc, _ = trained
    healthy = tc.save_weights_and_get_sampling_client().result()
    broken = tc.save_weights_and_get_sampling_client().result()
    name = next(n for n in broken._snapshot.tensors if "mlp.down_proj.lora_A" in n)
    broken._snapshot.tensors[name].fill_(math.nan)
    prompt = _prompt(tc)
    futures = [
        broken.sample(prompt, 2, types.SamplingParams(max_tokens=4, temperature=1.0, stop=[], seed=1)),
        broken.sample(prompt, 1, types.SamplingParams(max_tokens=4, temperature=0.0, stop=[])),
        broken.sample(prompt, 1, types.SamplingParams(max_tokens=1), include_prompt_logprobs=True),
        broken.compute_logprobs(prompt),
    ]
    fine = healthy.sample(prompt, 1, types.SamplingParams(max_tokens=4, stop=[], seed=1))
    for fut in futures:
        with pytest.raises(NonFiniteError, match="not finite"):
            fut.result()
    assert len(fine.result().sequences[0].tokens) == 4


# -------------------------------------------------------------------------------------- logprob modes


def test_sampling_mode_reports_logprobs_of_the_distribution_sampled_from(tmp_path):
    with pytest.raises(ValueError, match="sampled_logprobs"):
        LocalServiceClient(storage_dir=tmp_path / "x", sampled_logprobs="tempered")
    sc = LocalServiceClient(storage_dir=tmp_path, dtype=torch.float64, sampled_logprobs="sampling")
    tc = sc.create_lora_training_client(TINY_MODEL, rank=4, seed=0).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = _prompt(tc)
    temperature, top_k = 0.7, 5
    params = types.SamplingParams(max_tokens=6, temperature=temperature, top_k=top_k, stop=[], seed=2)
    seq = sampler.sample(prompt, 1, params).result().sequences[0]
    ctx = prompt.to_ints()
    model_lps, expected = [], []
    with torch.no_grad():
        for t, tok in enumerate(seq.tokens):
            logits = tc.model(input_ids=torch.tensor([ctx + seq.tokens[:t]])).logits[0, -1]
            top = torch.topk(logits / temperature, top_k)
            assert tok in top.indices.tolist()
            expected.append(float(torch.log_softmax(top.values, -1)[top.indices.tolist().index(tok)]))
            model_lps.append(float(torch.log_softmax(logits, -1)[tok]))
    assert seq.logprobs == pytest.approx(expected, abs=1e-5)
    assert seq.logprobs != pytest.approx(model_lps, abs=1e-3)
    greedy = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=3, temperature=0.0, stop=[]))
    assert greedy.result().sequences[0].logprobs == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------------------------------- stops


class _PiecesTokenizer:
    """A hand-built tokenizer: token ``i`` is the string ``pieces[i]``."""

    def __init__(self, pieces):
        self.pieces = pieces

    def decode(self, ids, **_):
        return "".join(self.pieces[i] for i in ids)


def _fires_at(stop_text, tokens):
    for m in range(1, len(tokens) + 1):
        if stop_text.push(tokens[:m]):
            return m
    return None


def test_stop_strings_match_the_decoded_text_across_and_inside_tokens():
    tok = _PiecesTokenizer(["He", "llo", " wor", "ld", "!", "o w"])
    assert _fires_at(engine._StopText(tok, ("o w",)), [0, 1, 2, 3]) == 3  # spans "llo" + " wor"
    assert _fires_at(engine._StopText(tok, ("wo",)), [0, 1, 2, 3]) == 3  # ends inside " wor"
    assert _fires_at(engine._StopText(tok, ("ld!",)), [0, 1, 2, 3, 4]) == 5
    assert _fires_at(engine._StopText(tok, ("xyz", "Hel")), [0, 1, 2]) == 2
    assert _fires_at(engine._StopText(tok, ("world",)), [0, 1, 2]) is None
    # byte-level: a two-byte character completes on its second byte
    bt = byte_tokenizer()
    ids = bt.encode("caf\u00e9!", add_special_tokens=False)
    assert len(ids) == 6
    assert _fires_at(engine._StopText(bt, ("\u00e9",)), ids) == 5


def test_resolve_stop_keeps_special_tokens_as_token_ids():
    bt = byte_tokenizer()
    assert engine.resolve_stop("<|im_end|>", bt) == (frozenset({258}), ())
    assert engine.resolve_stop(["<|im_end|>", "\n\n", ""], bt) == (frozenset({258}), ("\n\n",))
    assert engine.resolve_stop([7, 9], bt) == (frozenset({7, 9}), ())
    assert engine.resolve_stop(None, bt) == (frozenset({bt.eos_token_id}), ())
    assert engine.resolve_stop([], bt) == (frozenset(), ())


@pytest.mark.parametrize("base", [TINY_MODEL, BYTES_MODEL])
def test_a_stop_string_ends_generation_at_the_token_that_completes_it(tmp_path, base):
    sc = LocalServiceClient(storage_dir=tmp_path)
    tc = sc.create_lora_training_client(base, rank=2, seed=0).result()
    tok = tc.get_tokenizer()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = _prompt(tc)
    cases = 0
    for seed in range(30):
        free = types.SamplingParams(max_tokens=24, temperature=1.0, stop=[], seed=seed)
        g = sampler.sample(prompt, 1, free).result().sequences[0].tokens
        texts = [tok.decode(g[:m], skip_special_tokens=False) for m in range(len(g) + 1)]
        # a 3-character stop string that ends one character into token j: inside that token when it decodes
        # to several characters (BPE), across tokens otherwise (bytes)
        j = next(
            (
                j
                for j in range(2, len(g))
                if len(texts[j + 1]) - len(texts[j]) >= (2 if base == TINY_MODEL else 1)
                and len(texts[j]) >= 2
                and "\ufffd" not in texts[j + 1][-8:]
            ),
            None,
        )
        if j is None:
            continue
        cut = len(texts[j]) + 1
        stop = texts[j + 1][cut - 3 : cut]
        m = next(m for m in range(1, len(g) + 1) if stop in texts[m])  # an independent search of the text
        res = sampler.sample(prompt, 1, free.model_copy(update={"stop": [stop]})).result().sequences[0]
        assert res.stop_reason == "stop" and res.tokens == g[:m], (stop, g)
        ids = tuple(tok.encode(stop, add_special_tokens=False))
        if m < len(g) and (base != TINY_MODEL or ids != tuple(g[m - len(ids) : m])):
            cases += 1  # a real stop, and for BPE one that matching on the string's token ids would miss
        if cases == 3:
            break
    assert cases == 3


def test_the_special_token_stop_string_still_stops_on_its_token(tmp_path):
    sc = LocalServiceClient(storage_dir=tmp_path)
    tc = sc.create_lora_training_client(BYTES_MODEL, rank=2, seed=0).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = _prompt(tc)
    for seed in range(200):  # a hot sample that does generate <|im_end|> (id 258)
        free = types.SamplingParams(max_tokens=30, temperature=3.0, stop=[], seed=seed)
        g = sampler.sample(prompt, 1, free).result().sequences[0].tokens
        if 258 in g:
            break
    assert 258 in g
    as_string = sampler.sample(prompt, 1, free.model_copy(update={"stop": "<|im_end|>"})).result()
    as_id = sampler.sample(prompt, 1, free.model_copy(update={"stop": [258]})).result()
    assert as_string.sequences[0].tokens == as_id.sequences[0].tokens
    assert as_id.sequences[0].tokens == g[: g.index(258) + 1]
    assert as_id.sequences[0].stop_reason == "stop"


# ------------------------------------------------------------------------------------------ LoRA seed


def test_lora_seed_none_is_random_and_explicit_seeds_are_reproducible(tmp_path):
    sc = LocalServiceClient(storage_dir=tmp_path)
    states = [
        sc.create_lora_training_client(TINY_MODEL, rank=2, seed=s).result().lora_state()
        for s in (None, None, 0, 0)
    ]
    a = [n for n in states[0] if "lora_A" in n]
    assert a and not all(torch.equal(states[0][n], states[1][n]) for n in a)
    assert all(torch.equal(states[2][n], states[3][n]) for n in states[2])
    assert not all(torch.equal(states[0][n], states[2][n]) for n in a)


def test_concurrent_sample_async_requests_are_sampled_in_one_batch(tmp_path, monkeypatch):
    """Coroutines of one event loop that ask at the same time (a group's candidates) share one flush, as
    the HTTP service batches them, and get what submitting all and then reading gives."""
    import asyncio

    from tinker import types

    from rftlab.training.local_tinker import LocalServiceClient
    from rftlab.training.local_tinker import host as host_module

    svc = LocalServiceClient(storage_dir=tmp_path)
    tc = svc.create_lora_training_client(base_model="rftlab/tiny-qwen3", rank=4, seed=0).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints([5, 6, 7, 8])
    params = [types.SamplingParams(max_tokens=6, temperature=1.0, seed=s) for s in range(5)]
    calls = []
    real = host_module.run_generation
    monkeypatch.setattr(
        host_module,
        "run_generation",
        lambda model, reqs, *a: (calls.append(len(reqs)), real(model, reqs, *a)),
    )

    async def together():
        return await asyncio.gather(*[sampler.sample_async(prompt, 1, p) for p in params])

    concurrent = asyncio.run(together())
    assert calls == [5]
    futures = [sampler.sample(prompt, 1, p) for p in params]
    submitted = [f.result() for f in futures]
    assert calls == [5, 5]
    assert [r.sequences[0].tokens for r in concurrent] == [r.sequences[0].tokens for r in submitted]
