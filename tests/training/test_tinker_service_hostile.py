"""``rftlab serve tinker`` against a hostile (or merely careless) client, through the unmodified tinker 0.38
SDK: no call sequence may make a later call of the same client, or of another one, wait for more than its
own work (issue 29).

Each case is followed by an ordinary request that must complete within ``AFTER_S`` seconds (a few hundred
milliseconds of work on the tiny model; the bound only separates "runs" from "waits for ever": before the
fix, each of these waited past the SDK's retry window).
"""

from __future__ import annotations

import math
import pickle
import threading
import time

import numpy as np
import pytest
import tinker
from tinker import types
from tinker_helpers import sft_datum

from rftlab.training.local_tinker import TINY_MODEL

KEY = "tml-local-tests"  # the conftest server's key (tinker_helpers.KEY)
AFTER_S = 60.0
"""The ordinary request after a hostile one must finish within this (it takes well under a second)."""
HP = types.AdamParams(learning_rate=0.01)
REFUSED = (tinker.BadRequestError, tinker.NotFoundError, tinker.RequestFailedError, tinker.APIStatusError)


@pytest.fixture()
def tc(sc):
    return sc.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result(timeout=AFTER_S)


def _ordinary(tc) -> None:
    """A forward_backward, an optim_step and a sample: each must run now."""
    tok = tc.get_tokenizer()
    out = tc.forward_backward([sft_datum(tok)], "cross_entropy").result(timeout=AFTER_S)
    assert math.isfinite(out.metrics["loss:sum"])
    tc.optim_step(HP).result(timeout=AFTER_S)
    sampler = tc.save_weights_and_get_sampling_client().result(timeout=AFTER_S)
    prompt = types.ModelInput.from_ints(tok.encode("Kim has"))
    res = sampler.sample(prompt, 2, types.SamplingParams(max_tokens=4, seed=1)).result(timeout=AFTER_S)
    assert len(res.sequences) == 2 and all(np.isfinite(s.logprobs).all() for s in res.sequences)


# --------------------------------------------------------------------- refused at submission (4xx)


def _external(tc):
    return tc.save_weights_external("export").result(timeout=AFTER_S)


def _nan_learning_rate(tc):
    return tc.optim_step(types.AdamParams(learning_rate=float("nan"))).result(timeout=AFTER_S)


def _image_chunk(tc):
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    model_input = types.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=[1, 2]), types.ImageChunk(data=png, format="png")]
    )
    datum = types.Datum(
        model_input=model_input, loss_fn_inputs={"target_tokens": [2, 3, 4], "weights": [1.0, 1.0, 1.0]}
    )
    return tc.forward([datum], "cross_entropy").result(timeout=AFTER_S)


def _topk_distillation(tc):
    """An off-policy distillation datum: top-k targets and weights per position (2-D), which the SDK sends
    as sparse CSR tensors (``TensorData.from_torch_sparse``)."""
    import torch

    ids = tc.get_tokenizer().encode("Sam has 3 pens.")
    n, k = len(ids) - 1, 8
    targets = torch.zeros((n, k), dtype=torch.long)
    targets[:, 0] = torch.tensor(ids[1:])
    weights = torch.zeros((n, k))
    weights[:, 0] = 1.0
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_torch_sparse(targets),
            "weights": types.TensorData.from_torch_sparse(weights),
        },
    )
    assert datum.loss_fn_inputs["weights"].sparse_crow_indices is not None
    return tc.forward_backward([datum], "cross_entropy").result(timeout=AFTER_S)


@pytest.mark.parametrize(
    "hostile", [_external, _nan_learning_rate, _image_chunk, _topk_distillation], ids=lambda f: f.__name__[1:]
)
def test_a_refused_request_does_not_wedge_its_client(tc, hostile):
    t0 = time.monotonic()
    with pytest.raises(REFUSED):
        hostile(tc)
    assert time.monotonic() - t0 < AFTER_S
    _ordinary(tc)


def test_several_refusals_in_a_row_then_ordinary_work(tc):
    for hostile in (_image_chunk, _nan_learning_rate, _external, _image_chunk):
        with pytest.raises(REFUSED):
            hostile(tc)
    _ordinary(tc)


# ----------------------------------------------------------------------------- bad values, refused


@pytest.mark.parametrize(
    "params",
    [
        {"learning_rate": -1.0},
        {"beta1": 1.5},
        {"beta2": -0.1},
        {"eps": 0.0},
        {"weight_decay": -0.5},
        {"grad_clip_norm": -1.0},
    ],
    ids=lambda p: next(iter(p)),
)
def test_bad_adam_parameters_are_refused_naming_the_field(tc, params):
    tok = tc.get_tokenizer()
    tc.forward_backward([sft_datum(tok)], "cross_entropy").result(timeout=AFTER_S)
    with pytest.raises(REFUSED) as info:
        tc.optim_step(types.AdamParams(**params)).result(timeout=AFTER_S)
    assert next(iter(params)) in str(info.value)
    if isinstance(info.value, tinker.RequestFailedError):
        assert info.value.category == "user"
    _ordinary(tc)


@pytest.mark.parametrize(
    "params, field",
    [({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p")],
    ids=["temperature", "top_p"],
)
def test_bad_sampling_parameters_are_refused_naming_the_field(tc, params, field):
    tok = tc.get_tokenizer()
    sampler = tc.save_weights_and_get_sampling_client().result(timeout=AFTER_S)
    prompt = types.ModelInput.from_ints(tok.encode("Kim has"))
    with pytest.raises(REFUSED) as info:
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=4, **params)).result(timeout=AFTER_S)
    assert field in str(info.value)
    _ordinary(tc)


def test_empty_checkpoint_name_is_refused(tc):
    with pytest.raises(REFUSED) as info:
        tc.save_state("").result(timeout=AFTER_S)
    assert "empty" in str(info.value)
    _ordinary(tc)


def test_out_of_vocabulary_tokens_are_the_users_error(tc):
    vocab = tc.get_tokenizer().vocab_size if hasattr(tc.get_tokenizer(), "vocab_size") else 10**6
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, vocab + 1000]),
        loss_fn_inputs={"target_tokens": [2, 3, 4], "weights": [1.0, 1.0, 1.0]},
    )
    with pytest.raises(tinker.RequestFailedError) as info:
        tc.forward([datum], "cross_entropy").result(timeout=AFTER_S)
    assert info.value.category == "user"
    assert "vocabulary" in str(info.value)
    _ordinary(tc)


def test_a_sequence_longer_than_the_context_is_refused(tc):
    from rftlab.training.local_tinker.model import TinyModelSpec

    ids = [1] * (TinyModelSpec().max_position_embeddings + 10)
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )
    with pytest.raises(tinker.RequestFailedError) as err:
        tc.forward([datum], "cross_entropy").result(timeout=AFTER_S)
    assert err.value.category == "user" and "context" in str(err.value)
    _ordinary(tc)


# ------------------------------------------------------------------------------------ NaN gradients


def test_a_nan_gradient_is_refused_and_not_applied(tc):
    tok = tc.get_tokenizer()
    before = tc.save_weights_and_get_sampling_client().result(timeout=AFTER_S)
    ids = tok.encode("Sam has 3 pens.")
    n = len(ids) - 1
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={
            "target_tokens": ids[1:],
            "logprobs": [-1.0] * n,
            "advantages": [float("nan")] * n,
        },
    )
    tc.forward_backward([datum], "importance_sampling").result(timeout=AFTER_S)
    with pytest.raises(tinker.RequestFailedError) as err:
        tc.optim_step(HP).result(timeout=AFTER_S)
    assert err.value.category == "user" and "finite" in str(err.value)
    after = tc.save_weights_and_get_sampling_client().result(timeout=AFTER_S)
    prompt = types.ModelInput.from_ints(ids)
    lp_before = before.compute_logprobs(prompt).result(timeout=AFTER_S)
    lp_after = after.compute_logprobs(prompt).result(timeout=AFTER_S)
    assert all(math.isfinite(x) for x in lp_after[1:])
    assert lp_after[1:] == pytest.approx(lp_before[1:], abs=1e-6)  # the step was not applied
    _ordinary(tc)


# ------------------------------------------------------------------------ samplers shared or pickled


def test_a_pickled_sampler_with_no_seed_samples_and_leaves_the_server_serving(sc, tc, server):
    tok = tc.get_tokenizer()
    sampler = tc.save_weights_and_get_sampling_client().result(timeout=AFTER_S)
    prompt = types.ModelInput.from_ints(tok.encode("Kim has"))
    params = types.SamplingParams(max_tokens=4, temperature=1.0)  # seed=None: the sampler's own stream
    clone = pickle.loads(pickle.dumps(sampler))
    res = clone.sample(prompt, 3, params).result(timeout=AFTER_S)
    assert len(res.sequences) == 3
    rebuilt = tinker.SamplingClient.from_sampler_handle(sampler.get_sampler_handle(), api_key=KEY)
    assert len(rebuilt.sample(prompt, 2, params).result(timeout=AFTER_S).sequences) == 2
    other = tinker.ServiceClient(base_url=server.base_url, api_key=KEY)
    try:
        fresh = other.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=1).result(
            timeout=AFTER_S
        )
        _ordinary(fresh)
    finally:
        other.close("success").result()


# --------------------------------------------------------------------------------------- fairness


def test_a_long_request_does_not_hold_another_clients_short_one(server, sc, tc):
    """One session asks for 20,000 samples; another's forward (a few ms of work) runs beside it, after at
    most a batch of the long request, not after all of it."""
    tok = tc.get_tokenizer()
    sampler = tc.save_weights_and_get_sampling_client().result(timeout=AFTER_S)
    prompt = types.ModelInput.from_ints(tok.encode("Kim has"))
    other = tinker.ServiceClient(base_url=server.base_url, api_key=KEY)
    try:
        short = other.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=2).result(
            timeout=AFTER_S
        )
        datum = sft_datum(short.get_tokenizer())
        short.forward([datum], "cross_entropy").result(timeout=AFTER_S)  # warm
        done: dict[str, float] = {}

        def long_request() -> None:
            t0 = time.monotonic()
            res = sampler.sample(prompt, 20_000, types.SamplingParams(max_tokens=6, seed=3, stop=[]))
            assert len(res.result(timeout=600).sequences) == 20_000
            done["long"] = time.monotonic() - t0
            done["long_end"] = time.monotonic()

        thread = threading.Thread(target=long_request)
        thread.start()
        time.sleep(1.0)  # the long request is running
        latencies = []
        for _ in range(3):
            t0 = time.monotonic()
            short.forward([datum], "cross_entropy").result(timeout=AFTER_S)
            latencies.append(time.monotonic() - t0)
        short_end = time.monotonic()
        thread.join(600)
        assert "long" in done
        assert short_end < done["long_end"], "the short requests waited for the whole long one"
        assert max(latencies) < done["long"] / 4, (latencies, done["long"])
    finally:
        other.close("success").result()


def test_a_split_request_equals_the_unsplit_request(tc, tmp_path):
    """A request of more than one piece (``scheduler.PIECE_ROWS``) returns what the in-process client
    returns for the same request unsplit, on the same weights: same tokens, same logprobs."""
    from rftlab.training.local_tinker import LocalServiceClient
    from rftlab.training.local_tinker.scheduler import PIECE_ROWS

    tok = tc.get_tokenizer()
    sampler = tc.save_weights_and_get_sampling_client().result(timeout=AFTER_S)
    prompt = types.ModelInput.from_ints(tok.encode("Kim has"))
    params = types.SamplingParams(max_tokens=5, temperature=1.0, seed=11, stop=[])
    n = 2 * PIECE_ROWS + 7
    served = sampler.sample(prompt, n, params, include_prompt_logprobs=True).result(timeout=AFTER_S)
    local = LocalServiceClient(storage_dir=tmp_path)
    twin = local.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result()
    unsplit = twin.save_weights_and_get_sampling_client().sample(prompt, n, params, True).result()
    assert [s.tokens for s in served.sequences] == [s.tokens for s in unsplit.sequences]
    for a, b in zip(served.sequences, unsplit.sequences, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    assert served.prompt_logprobs[1:] == pytest.approx(unsplit.prompt_logprobs[1:], abs=1e-5)
    assert len({tuple(s.tokens) for s in served.sequences}) > n // 2  # each row its own draw


def test_an_unsupported_sampling_option_is_refused_through_its_future(tc):
    """Top-k prompt logprobs are not implemented locally: the request fails with the reason (category
    user) and the sampler and the client go on."""
    tok = tc.get_tokenizer()
    sampler = tc.save_weights_and_get_sampling_client().result(timeout=AFTER_S)
    prompt = types.ModelInput.from_ints(tok.encode("Kim has"))
    params = types.SamplingParams(max_tokens=2, seed=0)
    with pytest.raises(tinker.RequestFailedError) as err:
        sampler.sample(prompt, 1, params, include_prompt_logprobs=True, topk_prompt_logprobs=5).result(
            timeout=AFTER_S
        )
    assert err.value.category == "user" and "top-k" in str(err.value)
    assert len(sampler.sample(prompt, 1, params).result(timeout=AFTER_S).sequences) == 1
    _ordinary(tc)
