"""The ``ppo``, ``cispo`` and ``dro`` losses of the local tinker backend against numpy computations of the
formulas on the tinker docs' loss pages (docs/platforms.md §3.4), the ``loss_fn_config`` refusals, and the
datum refusals of issue 29 (too long for the context, token ids outside the vocabulary).

The numpy references are written from the docs' formulas, with ``r = exp(logp - sampler_logp)``:
ppo ``-min(r A, clip(r, low, high) A)``, cispo ``-sg(clip(r, low, high)) logp A``, dro
``-(logp A - beta / 2 (logp - sampler_logp)^2)``; each loss is the token sum."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tinker import types
from tinker_helpers import advantage_weighted

from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient
from rftlab.training.local_tinker.errors import ParameterError
from rftlab.training.local_tinker.losses import DatumError, check_loss_config, elementwise_loss


def np_ppo(logp, q, adv, low, high):
    r = np.exp(logp - q)
    return -np.minimum(r * adv, np.clip(r, low, high) * adv)


def np_cispo(logp, q, adv, low, high):
    return -(np.clip(np.exp(logp - q), low, high) * logp * adv)


def np_dro(logp, q, adv, beta):
    return -(logp * adv - 0.5 * beta * (logp - q) ** 2)


def np_reference(loss_fn, logp, q, adv, config):
    if loss_fn == "dro":
        return np_dro(logp, q, adv, config["beta"])
    fn = np_ppo if loss_fn == "ppo" else np_cispo
    return fn(logp, q, adv, config["clip_low_threshold"], config["clip_high_threshold"])


def np_reference_grad(loss_fn, logp, q, adv, config):
    """d loss / d logp of each documented formula (sg: the clipped ratio is a constant)."""
    r = np.exp(logp - q)
    if loss_fn == "dro":
        return -(adv - config["beta"] * (logp - q))
    low, high = config["clip_low_threshold"], config["clip_high_threshold"]
    if loss_fn == "cispo":
        return -np.clip(r, low, high) * adv
    unclipped_is_min = r * adv <= np.clip(r, low, high) * adv
    return np.where(unclipped_is_min, -r * adv, 0.0)  # the clipped branch is flat in logp


def _random_tokens(n, seed):
    rng = np.random.default_rng(seed)
    logp = rng.uniform(-6.0, -0.05, n)
    q = logp - rng.uniform(-2.0, 2.0, n)  # ratios from e^-2 to e^2: inside and outside every clip range
    adv = rng.choice([-1.0, 1.0], n) * rng.uniform(0.1, 2.0, n)
    return logp, q, adv


CONFIGS = [
    ("ppo", None),
    ("ppo", {"clip_low_threshold": 0.7, "clip_high_threshold": 1.4}),
    ("cispo", None),
    ("cispo", {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1}),
    ("dro", {"beta": 0.05}),
    ("dro", {"beta": 1.5}),
]


@pytest.mark.parametrize(("loss_fn", "given"), CONFIGS)
def test_elementwise_loss_and_its_gradient_match_the_documented_formula(loss_fn, given):
    logp, q, adv = _random_tokens(400, seed=sum(map(ord, loss_fn)))
    config = check_loss_config(loss_fn, given)
    if loss_fn != "dro":
        r = np.exp(logp - q)
        inside = (r > config["clip_low_threshold"]) & (r < config["clip_high_threshold"])
        for sign in (adv > 0, adv < 0):  # every case occurs: clipped and not, both advantage signs
            assert (inside & sign).any() and (~inside & sign).any()
    lp = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
    inputs = {"logprobs": torch.tensor(q), "advantages": torch.tensor(adv)}
    el = elementwise_loss(loss_fn, lp, inputs, config)
    np.testing.assert_allclose(el.detach().numpy(), np_reference(loss_fn, logp, q, adv, config), rtol=1e-12)
    el.sum().backward()
    np.testing.assert_allclose(lp.grad.numpy(), np_reference_grad(loss_fn, logp, q, adv, config), rtol=1e-12)


def test_the_documented_defaults_are_used_without_a_config():
    assert check_loss_config("ppo", None) == {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
    assert check_loss_config("cispo", {}) == {"clip_low_threshold": 0.0, "clip_high_threshold": 4.0}
    assert check_loss_config("ppo", {"clip_high_threshold": 1.3}) == {
        "clip_low_threshold": 0.8,
        "clip_high_threshold": 1.3,
    }
    assert check_loss_config("importance_sampling", None) == {}


@pytest.mark.parametrize(
    ("loss_fn", "config", "match"),
    [
        ("cross_entropy", {"beta": 0.1}, "'cross_entropy' takes no loss_fn_config"),
        ("importance_sampling", {"clip_low_threshold": 0.8}, "'importance_sampling' takes no loss_fn_config"),
        ("ppo", {"clip_low": 0.8}, r"unknown keys \['clip_low'\]"),
        ("cispo", {"beta": 0.1, "clip_high_threshold": 2.0}, r"unknown keys \['beta'\]"),
        ("dro", {"clip_low_threshold": 0.9, "beta": 0.1}, r"unknown keys \['clip_low_threshold'\]"),
        ("dro", None, r"needs loss_fn_config\['beta'\]"),
        ("dro", {"beta": -0.1}, r"'beta'.*must be >= 0"),
        ("dro", {"beta": float("nan")}, r"'beta'.*must be finite"),
        ("ppo", {"clip_low_threshold": -0.1}, r"'clip_low_threshold'.*\[0, 1\]"),
        ("ppo", {"clip_low_threshold": 1.1}, r"'clip_low_threshold'.*\[0, 1\]"),
        ("cispo", {"clip_high_threshold": 0.9}, r"'clip_high_threshold'.*at least 1"),
        ("ppo", {"clip_high_threshold": float("inf")}, r"'clip_high_threshold'.*must be finite"),
        ("ppo", {"clip_low_threshold": "0.8"}, r"'clip_low_threshold'.*must be a number"),
    ],
)
def test_bad_loss_fn_configs_are_refused_naming_the_key(loss_fn, config, match):
    with pytest.raises(ParameterError, match=match):
        check_loss_config(loss_fn, config)


# ------------------------------------------------------------------------------ end to end on the model


@pytest.fixture(scope="module")
def tc(tmp_path_factory):
    service = LocalServiceClient(storage_dir=tmp_path_factory.mktemp("losses"), dtype=torch.float64)
    return service.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result()


def _rl_data(tc, seed=0):
    """Two datums whose sampler logprobs are the model's own off by up to ±2 nats (so ratios fall inside
    and outside every clip range tested), with advantages of both signs."""
    rng = np.random.default_rng(seed)
    tok = tc.get_tokenizer()
    data = []
    for text in ("Ann has 7 apples. \\boxed{7}", "Bo adds 2 and 3. \\boxed{5}"):
        ids = tok.encode(text)
        n = len(ids) - 1
        probe = types.Datum(
            model_input=types.ModelInput.from_ints(ids[:-1]),
            loss_fn_inputs={"target_tokens": ids[1:], "weights": [0.0] * n},
        )
        own = np.array(tc.forward([probe], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist())
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(ids[:-1]),
                loss_fn_inputs={
                    "target_tokens": torch.tensor(ids[1:]),
                    "logprobs": torch.tensor(own - rng.uniform(-2.0, 2.0, n)),
                    "advantages": torch.tensor(rng.choice([-1.0, 1.0], n) * rng.uniform(0.1, 2.0, n)),
                },
            )
        )
    return data


@pytest.mark.parametrize(("loss_fn", "given"), CONFIGS)
def test_forward_backward_loss_is_minus_the_token_sum_of_the_formula(tc, loss_fn, given):
    data = _rl_data(tc)
    out = tc.forward_backward(data, loss_fn, given).result()
    config = check_loss_config(loss_fn, given)
    expected, ratios = 0.0, []
    for d, o in zip(data, out.loss_fn_outputs, strict=True):
        logp = np.array(o["logprobs"].tolist())
        q = d.loss_fn_inputs["logprobs"].to_numpy().astype(np.float64)
        adv = d.loss_fn_inputs["advantages"].to_numpy().astype(np.float64)
        ratios.extend(np.exp(logp - q))
        ref = np_reference(loss_fn, logp, q, adv, config)
        np.testing.assert_allclose(o["elementwise_loss"].tolist(), ref, rtol=1e-5, atol=1e-6)
        expected += ref.sum()
    assert out.metrics["loss:sum"] == pytest.approx(expected, rel=1e-6, abs=1e-6)
    if loss_fn != "dro":
        low, high = config["clip_low_threshold"], config["clip_high_threshold"]
        assert any(low < r < high for r in ratios) and any(r > high or r < low for r in ratios)
    tc.optim_step(types.AdamParams(learning_rate=0.0)).result()  # clear the accumulated gradient


def _gradient(tc, data, loss_fn, config=None):
    tc.forward_backward(data, loss_fn, config).result()
    grads = tc.last_gradients()
    tc.optim_step(types.AdamParams(learning_rate=0.0)).result()
    return grads


def test_unclipped_ppo_and_cispo_have_the_importance_sampling_gradient(tc):
    """With a clip range no ratio reaches, ppo's and cispo's gradients are importance sampling's
    (d r = r d logp); dro with beta 0 is cross-entropy weighted by the advantages."""
    data = _rl_data(tc, seed=1)
    wide = {"clip_low_threshold": 0.0, "clip_high_threshold": 100.0}
    ref = _gradient(tc, data, "importance_sampling")
    for loss_fn in ("ppo", "cispo"):
        got = _gradient(tc, data, loss_fn, wide)
        for n in ref:
            assert torch.allclose(got[n], ref[n], rtol=1e-9, atol=1e-12), (loss_fn, n)
    ce = advantage_weighted(data)
    ref = _gradient(tc, ce, "cross_entropy")
    got = _gradient(tc, data, "dro", {"beta": 0.0})
    for n in ref:
        assert torch.allclose(got[n], ref[n], rtol=1e-9, atol=1e-12), n


def test_a_refused_config_fails_the_future_and_accumulates_nothing(tc):
    data = _rl_data(tc, seed=2)
    before = tc.accumulated_gradients()
    fut = tc.forward_backward(data, "importance_sampling", {"clip_low_threshold": 0.8})
    with pytest.raises(ParameterError, match="'importance_sampling' takes no loss_fn_config"):
        fut.result()
    with pytest.raises(ParameterError, match=r"unknown keys \['eps'\]"):
        tc.forward(data, "ppo", {"eps": 0.2}).result()
    after = tc.accumulated_gradients()
    assert all(torch.equal(before[n], after[n]) for n in before)


# ------------------------------------------------------------------------------------------- datums


def test_a_datum_longer_than_the_context_is_refused_with_both_lengths(tc):
    context = tc._host.max_positions
    n = context + 1
    long = types.Datum(
        model_input=types.ModelInput.from_ints([65] * n),
        loss_fn_inputs={"target_tokens": [65] * n, "weights": [1.0] * n},
    )
    ok = types.Datum(
        model_input=types.ModelInput.from_ints([70, 71]),
        loss_fn_inputs={"target_tokens": [71, 72], "weights": [1.0, 1.0]},
    )
    with pytest.raises(
        DatumError, match=f"datum 1: model_input has {n} tokens, more than the model's context of {context}"
    ):
        tc.forward_backward([ok, long], "cross_entropy").result()
    fits = types.Datum(
        model_input=types.ModelInput.from_ints([65] * context),
        loss_fn_inputs={"target_tokens": [65] * context, "weights": [1.0] * context},
    )
    assert np.isfinite(tc.forward([fits], "cross_entropy").result().metrics["loss:sum"])


@pytest.mark.parametrize("loss_fn", ["cross_entropy", "importance_sampling", "ppo"])
@pytest.mark.parametrize("where", ["model_input", "target_tokens"])
@pytest.mark.parametrize("bad_id", [-1, "vocab"])
def test_token_ids_outside_the_vocabulary_are_refused_naming_field_and_position(tc, loss_fn, where, bad_id):
    vocab = tc._host.vocab
    bad = vocab if bad_id == "vocab" else bad_id
    tokens, targets = [65, 66, 67, 68], [66, 67, 68, 69]
    (tokens if where == "model_input" else targets)[2] = bad
    inputs = (
        {"target_tokens": targets, "weights": [1.0] * 4}
        if loss_fn == "cross_entropy"
        else {"target_tokens": torch.tensor(targets), "logprobs": torch.zeros(4), "advantages": torch.ones(4)}
    )
    datum = types.Datum(model_input=types.ModelInput.from_ints(tokens), loss_fn_inputs=inputs)
    field = "model_input" if where == "model_input" else r"loss_fn_inputs\['target_tokens'\]"
    before = tc.accumulated_gradients()
    with pytest.raises(
        DatumError, match=rf"datum 0: {field} has token id {bad} at position 2, outside .*\[0, {vocab}\)"
    ):
        tc.forward_backward([datum], loss_fn).result()
    after = tc.accumulated_gradients()
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_fractional_target_tokens_are_refused(tc):
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([65, 66, 67]),
        loss_fn_inputs={
            "target_tokens": types.TensorData(data=[66.0, 67.5, 68.0], dtype="float32", shape=[3]),
            "logprobs": torch.zeros(3),
            "advantages": torch.ones(3),
        },
    )
    with pytest.raises(DatumError, match=r"datum 0: .*'target_tokens'.* 67.5 at position 1"):
        tc.forward([datum], "importance_sampling").result()
