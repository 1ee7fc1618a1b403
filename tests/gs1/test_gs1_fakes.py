"""Offline stand-ins for the hosted Tinker service, returning real ``tinker.types`` objects.

They enforce what the server enforces (the exact ``loss_fn_inputs`` keys, tensor lengths equal to the
model input, no empty chunks) and record every call in order, so the loop tests can assert the datum
layout, the losses requested, the optimizer parameters and the step order. The method signatures are
the tinker 0.38 SDK's (``save_state(name, ttl_seconds, overwrite, user_metadata)``,
``RestClient.delete_checkpoint_from_tinker_path``); ``forward_backward`` returns per-datum trainer
``logprobs`` like the service (equal to the sampler's, or shifted by ``trainer_logprob_shift`` to imitate
a sampler/trainer mismatch). Sampling imitates the service's seed behaviour: a request without a seed
draws fresh randomness; ``seed_duplicates=True`` imitates tinker-feedback #79 (a seed with
``num_samples > 1`` returns one sample repeated); ``collapse=True`` a service that returns the same
sample for every request of a prompt. Imported by the other ``test_gs1_*`` files; the few tests here
check the fakes and the network guard themselves.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import tinker
from tinker import types
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from rftlab.envs.gs1.task import MathTask, Problem

REQUIRED = {
    "importance_sampling": {"target_tokens", "logprobs", "advantages"},
    "cross_entropy": {"target_tokens", "weights"},
}
BASE_MODEL = "Qwen/Qwen3.5-2B"


class Done:
    """A resolved APIFuture stand-in."""

    def __init__(self, value):
        self._value = value

    def result(self, timeout=None):
        return self._value


def fake_qwen_tokenizer():
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
        + ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")


_TOKENIZER = None


def fake_renderer(name: str = "qwen3_5_disable_thinking"):
    global _TOKENIZER
    from tinker_cookbook import renderers

    if _TOKENIZER is None:
        _TOKENIZER = fake_qwen_tokenizer()
    return renderers.get_renderer(name, _TOKENIZER)


def toy_task(n_train: int = 40, n_test: int = 12) -> MathTask:
    """Questions whose answers are 0, 1 or 2; the fake sampler answers \\boxed{0..2} at random."""
    train = tuple(Problem(f"train-{i}", f"Item {i}: " + "x" * (i % 9), str(i % 3)) for i in range(n_train))
    test = tuple(Problem(f"test-{i}", f"Test {i}?", str(i % 3)) for i in range(n_test))
    return MathTask("toy", train, test, convo_prefix=None, question_suffix=" Answer in \\boxed{}.")


def _digest(*parts) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


class FakeSamplingClient:
    def __init__(self, trainer, version: int):
        self.trainer, self.version = trainer, version
        self.tok = _TOKENIZER or fake_qwen_tokenizer()

    def sample(self, prompt, num_samples, sampling_params, **kw):
        service = self.trainer.service
        self.trainer.calls.append(("sample", num_samples, sampling_params))
        seed = sampling_params.seed
        if service.collapse:
            seed = 0  # one sample per prompt, whatever the request says
        elif seed is None:  # the service draws fresh randomness for an unseeded request
            service.unseeded += 1
            seed = ("unseeded", service.unseeded)
        rng = np.random.default_rng(_digest(prompt.to_ints(), seed, sampling_params.temperature))
        repeat = service.collapse or (service.seed_duplicates and sampling_params.seed is not None)
        stop = sampling_params.stop or []
        seqs = []
        offset = int(rng.integers(0, 3))
        filler = "".join("abcdefgh"[int(x)] for x in rng.integers(0, 8, 6))  # many distinct responses
        for i in range(num_samples):  # answers cycle, so a group of 3 or more never has constant rewards
            answer = 0 if sampling_params.temperature == 0 else (offset + (0 if repeat else i)) % 3
            text = (
                f"So \\boxed{{{answer}}}"
                if sampling_params.temperature == 0
                else f"{filler} so \\boxed{{{answer}}}"
            )
            toks = self.tok.encode(text) + list(stop)
            toks = toks[: sampling_params.max_tokens]
            lps = -np.random.default_rng(_digest(toks)).uniform(
                0.05, 2.0, len(toks)
            )  # a function of the tokens
            seqs.append(
                types.SampledSequence(
                    stop_reason="stop" if len(toks) < sampling_params.max_tokens else "length",
                    sequence_id=f"s{i}",
                    tokens_np=np.array(toks, np.int32),
                    logprobs_np=lps.astype(np.float32),
                )
            )
        prompt_lps = None
        if kw.get("include_prompt_logprobs"):
            self.trainer.calls.append(("prompt_logprobs", prompt.length))
            prompt_lps = self._prompt_logprobs(prompt)
        lps_np = None if prompt_lps is None else np.array([np.nan if v is None else v for v in prompt_lps])
        return Done(types.SampleResponse(sequences=seqs, prompt_logprobs_np=lps_np))

    @staticmethod
    def _prompt_logprobs(prompt):
        toks = prompt.to_ints()
        return [None] + [-0.1 - (t % 11) / 5.0 for t in toks[1:]]

    def compute_logprobs(self, prompt):
        """As the SDK's: the prompt logprobs a sample request with ``include_prompt_logprobs`` returns."""
        self.trainer.calls.append(("compute_logprobs", prompt.length))
        return Done(self._prompt_logprobs(prompt))


class FakeTrainingClient:
    def __init__(self, service, base_model, rank, seed, step0: int = 0):
        self.service, self.base_model, self.rank, self.seed = service, base_model, rank, seed
        self.calls = service.calls
        self.version = step0

    def forward_backward(self, data, loss_fn, loss_fn_config=None):
        for d in data:
            assert isinstance(d, types.Datum)
            assert set(d.loss_fn_inputs) == REQUIRED[loss_fn]
            assert all(v.shape == [d.model_input.length] for v in d.loss_fn_inputs.values())
            assert all(len(c.tokens) > 0 for c in d.model_input.chunks)
        self.calls.append(("forward_backward", loss_fn, list(data)))
        loss = -sum(float(d.loss_fn_inputs["advantages"].to_numpy().sum()) for d in data)
        return Done(
            types.ForwardBackwardOutput(
                loss_fn_output_type=loss_fn,
                loss_fn_outputs=self._trainer_logprobs(data),
                metrics={"loss:sum": loss},
            )
        )

    def _trainer_logprobs(self, data):
        """Per datum, the trainer's logprobs of the targets: the sampler's (a faithful service), shifted
        by ``trainer_logprob_shift`` over the response positions (advantage != 0)."""
        outs = []
        for d in data:
            lp = d.loss_fn_inputs["logprobs"].to_numpy().astype(np.float32)
            adv = d.loss_fn_inputs["advantages"].to_numpy()
            lp = np.where(adv != 0, lp - self.service.trainer_logprob_shift, lp).astype(np.float32)
            outs.append({"logprobs": types.TensorData.from_numpy(lp)})
        return outs

    def forward(self, data, loss_fn):
        self.calls.append(("forward", loss_fn, list(data)))
        outs = [{"logprobs": d.loss_fn_inputs["logprobs"]} for d in data]  # trainer == sampler: ratio 1
        loss = -sum(float(d.loss_fn_inputs["advantages"].to_numpy().sum()) for d in data)
        return Done(
            types.ForwardBackwardOutput(
                loss_fn_output_type=loss_fn, loss_fn_outputs=outs, metrics={"loss:sum": loss}
            )
        )

    def optim_step(self, adam_params):
        self.calls.append(("optim_step", adam_params))
        self.version += 1
        return Done(types.OptimStepResponse(metrics={}))

    def save_weights_and_get_sampling_client(self, name=None):
        self.calls.append(("save_weights_and_get_sampling_client", self.version))
        return Done(FakeSamplingClient(self, self.version))

    def save_state(self, name, ttl_seconds=None, overwrite=False, user_metadata=None):
        self.calls.append(("save_state", name, ttl_seconds))
        path = f"fake://state/{name}"
        self.service.states[path] = self.version
        return Done(types.SaveWeightsResponse(path=path))

    def save_weights_for_sampler(self, name):
        self.calls.append(("save_weights_for_sampler", name))
        return Done(types.SaveWeightsForSamplerResponse(path=f"fake://sampler/{name}"))


class FakeRestClient:
    """``tinker.RestClient``'s checkpoint deletion."""

    def __init__(self, service):
        self.service = service

    def delete_checkpoint_from_tinker_path(self, tinker_path):
        self.service.calls.append(("delete_checkpoint", tinker_path))
        if tinker_path not in self.service.states:
            raise RuntimeError(f"checkpoint {tinker_path} not found")
        del self.service.states[tinker_path]
        return Done(None)


class FakeServiceClient:
    def __init__(
        self,
        models=((BASE_MODEL, True, True),),
        seed_duplicates: bool = False,
        collapse: bool = False,
        trainer_logprob_shift: float = 0.0,
    ):
        self.calls: list[tuple] = []
        self.states: dict[str, int] = {}
        self.models = models
        self.seed_duplicates, self.collapse = seed_duplicates, collapse
        self.trainer_logprob_shift = trainer_logprob_shift
        self.unseeded = 0

    def create_rest_client(self):
        return FakeRestClient(self)

    def get_server_capabilities(self):
        return types.GetServerCapabilitiesResponse(
            supported_models=[
                types.SupportedModel(model_name=m, trainable=t, sampleable=s) for m, t, s in self.models
            ]
        )

    def create_lora_training_client(self, base_model, rank=32, seed=None):
        self.calls.append(("create_lora_training_client", base_model, rank, seed))
        return Done(FakeTrainingClient(self, base_model, rank, seed))

    def create_training_client_from_state_with_optimizer(self, path):
        self.calls.append(("create_training_client_from_state_with_optimizer", path))
        return Done(FakeTrainingClient(self, BASE_MODEL, 32, 0, step0=self.states[path]))


def test_real_tinker_clients_cannot_be_constructed_in_tests():
    with pytest.raises(RuntimeError, match="offline test"):
        tinker.ServiceClient()
    with pytest.raises(RuntimeError, match="offline test"):
        tinker.RestClient()


def test_fake_training_client_rejects_extra_keys():
    trainer = FakeServiceClient().create_lora_training_client(BASE_MODEL).result()
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.array([0, 0, 5])),
            "weights": types.TensorData.from_numpy(np.array([0, 0, 1.0], np.float32)),
        },
    )
    with pytest.raises(AssertionError):
        trainer.forward_backward([datum], loss_fn="importance_sampling")


class TinyTorchTrainingClient(FakeTrainingClient):
    """A fake training client with a real tiny causal LM in float64 (embedding -> tanh(cumsum) ->
    linear): ``forward``/``forward_backward`` compute the SDK's ``importance_sampling`` loss for real and
    expose the gradient of the last ``forward_backward`` (``last_gradients``) and the weights
    (``lora_state``). Sampling stays scripted (``FakeSamplingClient``)."""

    VOCAB, DIM = 300, 8

    def __init__(self, service, base_model, rank, seed, step0: int = 0):
        import torch

        super().__init__(service, base_model, rank, seed, step0)
        gen = torch.Generator().manual_seed(int(seed or 0))
        self.params = {
            "emb": torch.randn(self.VOCAB, self.DIM, generator=gen, dtype=torch.float64).requires_grad_(),
            "out": (
                0.3 * torch.randn(self.DIM, self.VOCAB, generator=gen, dtype=torch.float64)
            ).requires_grad_(),
        }
        self.last_grads = None

    def _logprobs(self, datum):
        import torch

        toks = torch.tensor(datum.model_input.to_ints())
        h = torch.cumsum(self.params["emb"][toks], dim=0)
        h = torch.tanh(h / torch.arange(1, len(toks) + 1, dtype=torch.float64)[:, None])
        logp = torch.log_softmax(h @ self.params["out"], dim=-1)
        target = torch.as_tensor(datum.loss_fn_inputs["target_tokens"].to_numpy())
        return logp.gather(1, target[:, None]).squeeze(1)

    def _loss(self, data):
        import torch

        total, outs = torch.zeros((), dtype=torch.float64), []
        for d in data:
            lp = self._logprobs(d)
            slp = torch.as_tensor(d.loss_fn_inputs["logprobs"].to_numpy(), dtype=torch.float64)
            adv = torch.as_tensor(d.loss_fn_inputs["advantages"].to_numpy(), dtype=torch.float64)
            total = total - (torch.exp(lp - slp) * adv).sum()
            outs.append({"logprobs": types.TensorData.from_numpy(lp.detach().numpy().astype(np.float32))})
        return total, outs

    def forward(self, data, loss_fn):
        import torch

        with torch.no_grad():
            loss, outs = self._loss(data)
        return Done(
            types.ForwardBackwardOutput(
                loss_fn_output_type=loss_fn, loss_fn_outputs=outs, metrics={"loss:sum": float(loss)}
            )
        )

    def forward_backward(self, data, loss_fn, loss_fn_config=None):
        super().forward_backward(data, loss_fn)  # the server-side validation and the call log
        for p in self.params.values():
            p.grad = None
        loss, outs = self._loss(data)
        loss.backward()
        self.last_grads = {k: p.grad.detach().clone() for k, p in self.params.items()}
        return Done(
            types.ForwardBackwardOutput(
                loss_fn_output_type=loss_fn, loss_fn_outputs=outs, metrics={"loss:sum": float(loss.detach())}
            )
        )

    def last_gradients(self):
        return self.last_grads

    def lora_state(self):
        return {k: p.detach().clone() for k, p in self.params.items()}


class TinyTorchServiceClient(FakeServiceClient):
    def create_lora_training_client(self, base_model, rank=32, seed=None):
        self.calls.append(("create_lora_training_client", base_model, rank, seed))
        return Done(TinyTorchTrainingClient(self, base_model, rank, seed))
