"""What the local tinker backend's ``optim_step`` and saves refuse instead of corrupting a run (issue 29): a
non-finite accumulated gradient (weights and Adam state untouched, the gradient discarded), ``AdamParams``
out of range, and empty or path-like checkpoint names. Each arrives through the future, as the service's
refusals do. (Datum refusals: ``test_local_tinker_losses.py``.)"""

from __future__ import annotations

import json
import math

import pytest
import torch
from tinker import types
from tinker_helpers import sft_datum

from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient
from rftlab.training.local_tinker.errors import NonFiniteError, ParameterError

HP = types.AdamParams(learning_rate=0.01, beta1=0.9, beta2=0.95, eps=1e-8, grad_clip_norm=1.0)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    return LocalServiceClient(storage_dir=tmp_path_factory.mktemp("refusals"), dtype=torch.float64)


def _client(service, seed=0):
    return service.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=seed).result()


def _rl_datum(tok, text: str, adv: float) -> types.Datum:
    ids = tok.encode(text)
    n = len(ids) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={
            "target_tokens": torch.tensor(ids[1:]),
            "logprobs": torch.full((n,), -5.0),
            "advantages": torch.full((n,), adv),
        },
    )


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return set(a) == set(b) and all(torch.equal(a[n], b[n]) for n in a)


# ------------------------------------------------------------------------------ non-finite gradients


@pytest.mark.parametrize("bad_adv", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_gradient_is_refused_and_discarded_and_training_goes_on(service, bad_adv):
    tc = _client(service)
    tok = tc.get_tokenizer()
    good = [_rl_datum(tok, "Ann has 7 apples. \\boxed{7}", 1.0), _rl_datum(tok, "Bo has 2 pens.", -0.5)]
    tc.forward_backward(good, "importance_sampling").result()
    tc.optim_step(HP).result()  # Adam has state now, so "unchanged" covers the moments too
    weights = tc.lora_state()
    adam = {n: {k: v.clone() for k, v in s.items()} for n, s in tc._optimizer.state.items()}

    bad = [_rl_datum(tok, "Cy has 4 cups.", bad_adv)]
    out = tc.forward_backward(bad, "importance_sampling").result()  # reported, as the service does
    assert not math.isfinite(out.metrics["loss:sum"])
    with pytest.raises(NonFiniteError, match=r"grad_norm=(nan|inf)") as caught:
        tc.optim_step(HP).result()
    assert "not applied" in str(caught.value) and "discarded" in str(caught.value)
    assert _same(tc.lora_state(), weights)
    for n, s in tc._optimizer.state.items():
        assert all(torch.equal(v, adam[n][k]) for k, v in s.items())
    assert all(float(g.abs().max()) == 0.0 for g in tc.accumulated_gradients().values())
    assert tc.optim_steps == 1

    # the run goes on as if the bad batch had never been sent
    twin = _client(service)
    twin.forward_backward(good, "importance_sampling").result()
    twin.optim_step(HP).result()
    for client in (tc, twin):
        client.forward_backward(good[::-1], "importance_sampling").result()
        metrics = client.optim_step(HP).result().metrics
        assert all(math.isfinite(v) for v in metrics.values())
        json.dumps(metrics, allow_nan=False)
    got, want = tc.lora_state(), twin.lora_state()
    for n in want:
        assert torch.allclose(got[n], want[n], rtol=0, atol=1e-6), n
        assert torch.isfinite(got[n]).all()


def test_a_step_with_nothing_accumulated_reports_a_zero_norm(service):
    tc = _client(service)
    assert tc.optim_step(HP).result().metrics == {"grad_norm:mean": 0.0}


# ----------------------------------------------------------------------------------- Adam parameters


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("learning_rate", -1e-4),
        ("learning_rate", float("nan")),
        ("learning_rate", float("inf")),
        ("beta1", -0.1),
        ("beta1", 1.0),
        ("beta2", 1.0),
        ("beta2", float("nan")),
        ("eps", 0.0),
        ("eps", -1e-8),
        ("eps", float("inf")),
        ("weight_decay", -0.1),
        ("weight_decay", float("nan")),
        ("grad_clip_norm", -1.0),
        ("grad_clip_norm", float("inf")),
    ],
)
def test_adam_params_out_of_range_are_refused_naming_the_field(service, field, value):
    tc = _client(service)
    tc.forward_backward([sft_datum(tc.get_tokenizer(), "Di has 1 hat.")], "cross_entropy").result()
    weights, grads = tc.lora_state(), tc.accumulated_gradients()
    fut = tc.optim_step(HP.model_copy(update={field: value}))  # refused through the future
    with pytest.raises(ParameterError, match=f"AdamParams.{field} must be"):
        fut.result()
    assert _same(tc.lora_state(), weights) and _same(tc.accumulated_gradients(), grads)
    assert tc.optim_steps == 0
    tc.optim_step(HP).result()  # a valid call after a refused one works, on the kept gradient
    assert tc.optim_steps == 1 and not _same(tc.lora_state(), weights)


def test_the_edges_of_the_adam_ranges_are_accepted(service):
    tc = _client(service)
    edge = types.AdamParams(
        learning_rate=0.0, beta1=0.0, beta2=0.0, eps=1e-30, weight_decay=0.0, grad_clip_norm=0.0
    )
    tc.forward_backward([sft_datum(tc.get_tokenizer(), "Ed has 3 maps.")], "cross_entropy").result()
    assert math.isfinite(tc.optim_step(edge).result().metrics["grad_norm:mean"])


# ------------------------------------------------------------------------------------ checkpoint names


@pytest.mark.parametrize("name", ["", "a/b", ".."])
def test_bad_checkpoint_names_are_refused_naming_the_name(service, name):
    tc = _client(service)
    for call in (tc.save_state, tc.save_weights_for_sampler):
        fut = call(name)
        with pytest.raises(ParameterError, match=rf"{call.__name__}: the checkpoint name .*got {name!r}"):
            fut.result()
    assert tc.save_state("ok").result().path.endswith("/weights/ok")
