"""In-process clients with the tinker SDK's interface and semantics (the subset the RL/SFT loops use).

    sc = LocalServiceClient()
    tc = sc.create_lora_training_client(base_model="rftlab/tiny-qwen3", rank=32, seed=0).result()
    fb = tc.forward_backward(datums, loss_fn="importance_sampling")       # APIFuture, like the SDK
    op = tc.optim_step(types.AdamParams(learning_rate=4e-5, beta1=0.9, beta2=0.95, eps=1e-8))
    fb.result().metrics["loss:sum"]; op.result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    res = sampler.sample(prompt, num_samples=8, sampling_params=types.SamplingParams(...)).result()
    lps = sampler.compute_logprobs(prompt).result()                       # [None, ...]

Arguments and results are the real ``tinker.types`` objects. Training calls run when submitted (so
requests run in submission order); sampling and ``compute_logprobs`` requests are queued and run
batched at the first ``.result()``. A sampling client is a snapshot: later training does not change
what it samples. Beyond the SDK, the training client exposes ``last_gradients()`` (the LoRA
gradient of the last ``forward_backward``), ``accumulated_gradients()`` and ``lora_state()`` for
correctness preflights.

Checkpoint paths look like ``tinker://<model_id>/sampler_weights/<name>`` (``save_weights_for_sampler``)
and ``tinker://<model_id>/weights/<name>`` (``save_state``); they are stored as ``.pt`` files under the
service client's ``storage_dir`` (with their ``ttl_seconds`` and ``user_metadata``, see ``checkpoints``)
so a new process with the same ``storage_dir`` can resume from them.

Fidelity to the SDK (tinker 0.38): what the SDK checks before sending a request raises at call time
(``forward_backward([])`` → ``ValueError("No data provided")``, ``optim_step`` without ``AdamParams`` →
``TypeError``, a LoRA client training nothing → ``AssertionError``, a sampling client with neither path nor
base model → ``ValueError``); what the service refuses arrives through the future (``rank < 1``, unknown
loss functions, a bad ``loss_fn_config``, bad datums, ``AdamParams`` out of range, a non-finite accumulated
gradient at ``optim_step``, empty checkpoint names, bad or expired checkpoint paths), as the ``ValueError``
subclasses of ``errors`` and ``losses.DatumError``. The ``*_async`` methods return what the
SDK's do (``await tc.save_state_async(...)`` gives a future; ``await sc.create_lora_training_client_async``
gives the client). Optimizer metrics carry the SDK's ``name:reduction`` form (``grad_norm:mean``).

Sampler and trainer logprobs are computed by the same model in the same dtype here, so the importance
ratio ``exp(logp - sampler_logp)`` of freshly sampled tokens is 1 up to float rounding; the hosted
service's sampler and trainer differ numerically. ``LocalServiceClient(sampler_dtype=torch.bfloat16)``
emulates that mismatch: samplers then run a copy of the model in that dtype (they sample from it and
report its logprobs), so importance-sampling code sees ratios different from 1 (docs/platforms.md §4.4).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import math
import os
import secrets
import tempfile
import threading
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tinker import types
from tinker.types.optimizer import OptimParamsBase

from .checkpoints import CheckpointStore
from .engine import (
    SAMPLED_LOGPROBS,
    LogprobRequest,
    SampleRequest,
    check_prompt_tokens,
    check_sampling_params,
    mix_seed,
    resolve_stop,
    run_generation,
    run_logprobs,
)
from .errors import NonFiniteError, ParameterError
from .futures import LocalFuture
from .losses import (
    DatumError,
    check_loss_config,
    elementwise_loss,
    model_input_tokens,
    parse_datum,
    target_logprobs,
)
from .model import (
    BUILTIN_MODELS,
    attach_lora,
    load_base_model,
    lora_parameters,
    register_builtin_tokenizers,
    tokenizer_dir,
)

FB_MICROBATCH_TOKENS = 32768
"""Tokens per forward/backward micro-batch (bounds activation memory; gradients add up exactly)."""


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` intra-op threads (restored afterwards). Tiny models are dominated by per-op
    overhead: on a shared 2-core machine one thread was 20x faster than two (measured)."""
    if not n:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def _busy(host: _Host) -> Iterator[None]:
    with host.lock, torch_threads(host.threads):
        yield


@dataclass(frozen=True)
class LoraKey:
    base_model: str
    rank: int
    train_mlp: bool = True
    train_attn: bool = True
    train_unembed: bool = True


class _Host:
    """One base model with LoRA adapters, its tokenizer and its queue of sampling requests."""

    def __init__(
        self,
        key: LoraKey,
        seed: int,
        dtype: torch.dtype,
        threads: int | None = 1,
        device: str = "cpu",
        sampled_logprobs: str = "model",
    ) -> None:
        self.threads = threads
        self.sampled_logprobs = sampled_logprobs
        base, tokenizer = load_base_model(key.base_model, dtype)
        base = base.to(device)
        self.key = key
        self.dtype = dtype
        self.tokenizer = tokenizer
        if key.rank == 0:  # full-parameter training (local-only extension, see create_full_training_client)
            self.model = base
            for p in base.parameters():
                p.requires_grad_(True)
        else:
            self.model = attach_lora(base, key.rank, seed, key.train_mlp, key.train_attn, key.train_unembed)
        self.params = lora_parameters(self.model)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        self.vocab = int(self.model.get_output_embeddings().weight.shape[0])
        self.max_positions = int(getattr(self.model.config, "max_position_embeddings", 2048))
        self.pending: list[tuple[_Snapshot, SampleRequest | LogprobRequest]] = []
        self.lock = threading.RLock()  # one computation at a time on this model (callers may use threads)

    def busy(self) -> AbstractContextManager[None]:
        """Hold the model (lock and torch thread count) for one computation."""
        return _busy(self)

    def state(self) -> dict[str, torch.Tensor]:
        with self.lock:  # never mid-flush, when a sampler's weights are swapped in
            return {n: p.detach().clone() for n, p in self.params.items()}  # on the model's device

    def load(self, state: Mapping[str, torch.Tensor]) -> None:
        if set(state) != set(self.params):
            raise ValueError(
                "checkpoint LoRA tensors do not match this model's adapters (different base or rank)"
            )
        with torch.no_grad():
            for n, p in self.params.items():
                p.copy_(state[n].to(p.dtype))

    def flush(self) -> None:
        """Run every queued sampling/logprob request, each on its snapshot's weights."""
        if not self.pending:
            return
        with self.busy():
            self._flush()

    def _flush(self) -> None:
        pending, self.pending = self.pending, []
        live = self.state()
        try:
            groups: dict[int, tuple[_Snapshot, list[Any]]] = {}
            for snap, req in pending:
                groups.setdefault(id(snap), (snap, []))[1].append(req)
            for snap, reqs in groups.values():
                self.load(snap.tensors)
                samples = [r for r in reqs if isinstance(r, SampleRequest)]
                logprob_reqs = [r for r in reqs if isinstance(r, LogprobRequest)]
                try:
                    if samples:
                        run_generation(self.model, samples, self.pad_id, self.vocab, self.tokenizer)
                    if logprob_reqs:
                        run_logprobs(self.model, logprob_reqs, self.pad_id)
                except Exception as exc:
                    for r in reqs:
                        if not r.future.done_now():
                            r.future.set_exception(exc)
        finally:
            self.load(live)


@dataclass
class _Snapshot:
    tensors: dict[str, torch.Tensor]
    name: str


class _ClientFuture(LocalFuture[Any]):
    """A future of a client that may also be used, deprecated, as the client (SDK back-compat)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        warnings.warn(
            "Using the future as the client is deprecated; call .result() on it first",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(self.result(), name)


def _client_future(fn: Any) -> _ClientFuture:
    fut = _ClientFuture()
    try:
        fut.set_result(fn())
    except Exception as exc:
        fut.set_exception(exc)
    return fut


class LocalSamplingClient:
    """``tinker.SamplingClient`` on a weights snapshot of a local model."""

    def __init__(self, host: _Host, snapshot: _Snapshot, seed: int, base_model: str) -> None:
        self._host = host
        self._snapshot = snapshot
        self._base_model = base_model
        self._seed = int(seed)
        self._counter = itertools.count()

    @property
    def name(self) -> str:
        """The snapshot's name (a sampler's weights: ``<model_id>-s<n>``, or the checkpoint path)."""
        return self._snapshot.name

    def default_seed(self, index: int) -> int:
        """The generator seed of the ``index``-th request that gives no ``SamplingParams.seed``:
        ``mix_seed(sampler seed, index)``, O(1) for any index (the HTTP service passes the SDK's
        ``seq_id``, about 1e9 for a sampler made by ``create_sampling_client``), so results do not depend
        on arrival order."""
        return mix_seed(self._seed, index)

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        prompt_logprobs_last_n: int | None = None,
    ) -> LocalFuture[types.SampleResponse]:
        # the SDK's own call-time checks
        if prompt_alt_tokens_k < 0:
            raise ValueError(f"prompt_alt_tokens_k must be 0 or greater, got {prompt_alt_tokens_k}")
        check_prompt_logprobs_last_n(prompt_logprobs_last_n, include_prompt_logprobs)
        fut, _ = self.submit(
            prompt,
            num_samples,
            sampling_params,
            include_prompt_logprobs,
            prompt_logprobs_last_n=prompt_logprobs_last_n,
            topk_prompt_logprobs=topk_prompt_logprobs,
            topk_sample_logprobs=topk_sample_logprobs,
            target_prompt_logprobs=target_prompt_logprobs,
            prompt_alt_tokens_k=prompt_alt_tokens_k,
        )
        return fut

    def submit(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        *,
        prompt_logprobs_last_n: int | None = None,
        index: int | None = None,
        first_row: int = 0,
        **unsupported: Any,
    ) -> tuple[LocalFuture[types.SampleResponse], list[str]]:
        """Queue one sampling request; returns its future and the ``sequence_id`` of each sample.
        ``index`` numbers the request within this sampler (default: submission order); the HTTP service
        passes the SDK's ``seq_id`` so a request's default seed does not depend on arrival order.
        ``first_row`` numbers the request's samples from ``first_row`` (their noise streams and their
        ``sequence_id``s ``<prefix>-<first_row + i>``): pieces of one request submitted with the same
        ``index`` and seed, with ``first_row`` 0, n1, n1 + n2, ..., give the unsplit request's samples."""
        n = next(self._counter) if index is None else int(index)
        fut: LocalFuture[types.SampleResponse] = LocalFuture(flush=self._host.flush)
        ids: list[str] = []
        try:
            if any(v not in (None, 0, False) for v in unsupported.values()):
                raise ValueError(
                    "top-k logprobs, target prompt logprobs and prompt alternative tokens are not "
                    "supported by the local backend"
                )
            if isinstance(first_row, bool) or not isinstance(first_row, int) or first_row < 0:
                raise ParameterError(f"first_row must be an integer >= 0, got {first_row!r}")
            req = self._make_request(
                prompt, num_samples, sampling_params, include_prompt_logprobs, fut, n, prompt_logprobs_last_n
            )
            req.first_row = first_row
            ids = [f"{req.id_prefix}-{first_row + i}" for i in range(req.num_samples)]
        except Exception as exc:
            return LocalFuture.failed(exc), ids
        with self._host.lock:
            self._host.pending.append((self._snapshot, req))
        return fut, ids

    def _make_request(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        params: types.SamplingParams,
        include_prompt_logprobs: bool,
        fut: LocalFuture[types.SampleResponse],
        n: int,
        prompt_logprobs_last_n: int | None = None,
    ) -> SampleRequest:
        tokens = model_input_tokens(prompt, "prompt")
        if not tokens:
            raise ValueError("prompt is empty")
        if num_samples < 1:
            raise ParameterError(f"num_samples must be >= 1, got {num_samples}")
        check_sampling_params(params)
        check_prompt_tokens(tokens, self._host.vocab)
        if prompt_logprobs_last_n is not None and not 1 <= prompt_logprobs_last_n <= len(tokens) - 1:
            raise ValueError(f"prompt_logprobs_last_n must be in [1, {len(tokens) - 1}] for this prompt")
        room = self._host.max_positions - len(tokens)
        if room <= 0:
            raise ValueError(
                f"prompt of {len(tokens)} tokens leaves no room in the context of {self._host.max_positions}"
            )
        max_tokens = room if params.max_tokens is None else min(int(params.max_tokens), room)
        stop_tokens, stop_strings = resolve_stop(params.stop, self._host.tokenizer)
        seed = self.default_seed(n) if params.seed is None else int(params.seed)
        return SampleRequest(
            prompt=tokens,
            num_samples=int(num_samples),
            max_tokens=max_tokens,
            temperature=float(params.temperature),
            top_k=int(params.top_k),
            top_p=float(params.top_p),
            stop_tokens=stop_tokens,
            stop_strings=stop_strings,
            generator_seed=seed,
            include_prompt_logprobs=include_prompt_logprobs,
            future=fut,
            id_prefix=f"{self._snapshot.name}-{n}",
            prompt_logprobs_last_n=prompt_logprobs_last_n,
            sampled_logprobs=self._host.sampled_logprobs,
        )

    def compute_logprobs(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> LocalFuture[list[float | None]]:
        check_prompt_logprobs_last_n(prompt_logprobs_last_n, True)
        fut: LocalFuture[list[float | None]] = LocalFuture(flush=self._host.flush)
        try:
            tokens = model_input_tokens(prompt, "prompt")
            if not tokens:
                raise ValueError("prompt is empty")
            check_prompt_tokens(tokens, self._host.vocab)
        except Exception as exc:
            return LocalFuture.failed(exc)
        with self._host.lock:
            self._host.pending.append((self._snapshot, LogprobRequest(prompt=tokens, future=fut)))
        if prompt_logprobs_last_n is None:
            return fut
        n = int(prompt_logprobs_last_n)
        if not 1 <= n <= len(tokens) - 1:
            return LocalFuture.failed(ValueError(f"prompt_logprobs_last_n must be in [1, {len(tokens) - 1}]"))
        return _TrimmedFuture(fut, n)

    # the SDK's (deprecated) async variants: they return what the SDK's do
    async def sample_async(self, *args: Any, **kwargs: Any) -> types.SampleResponse:
        """Queue the request, then yield to the event loop once before running the queue: the requests
        other coroutines of the loop make meanwhile (a group's candidates, a batch's groups) join the
        same flush and are sampled as one batch, as the HTTP service batches concurrent requests."""
        future = self.sample(*args, **kwargs)
        await asyncio.sleep(0)
        return future.result()

    async def compute_logprobs_async(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> list[float | None]:
        return await self.compute_logprobs(prompt, prompt_logprobs_last_n)

    def get_tokenizer(self) -> Any:
        return self._host.tokenizer

    def get_base_model(self) -> str:
        return self._base_model

    async def get_base_model_async(self) -> str:
        return self._base_model


def check_prompt_logprobs_last_n(last_n: int | None, include_prompt_logprobs: bool) -> None:
    """The SDK's call-time check of ``prompt_logprobs_last_n`` (the prompt-length bound is the server's)."""
    if last_n is None:
        return
    if last_n < 1:
        raise ValueError(f"prompt_logprobs_last_n must be 1 or greater, got {last_n}")
    if not include_prompt_logprobs:
        raise ValueError("prompt_logprobs_last_n applies to prompt logprobs; set include_prompt_logprobs")


class _TrimmedFuture(LocalFuture[list[float | None]]):
    """``compute_logprobs(..., prompt_logprobs_last_n=n)``: entries before the last ``n`` are None."""

    def __init__(self, inner: LocalFuture[list[float | None]], last_n: int) -> None:
        super().__init__()
        self._inner, self._last_n = inner, last_n

    def _ensure(self) -> None:
        if not self._future.done():
            try:
                full = self._inner.result()
                self.set_result([None] * (len(full) - self._last_n) + list(full[-self._last_n :]))
            except Exception as exc:
                self.set_exception(exc)


def check_checkpoint_name(call: str, name: Any) -> None:
    """``ParameterError`` naming ``name`` unless it is a non-empty string usable as one path segment of
    ``tinker://<model_id>/<kind>/<name>`` (no ``/``, not ``.`` or ``..``)."""
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ParameterError(
            f"{call}: the checkpoint name must be a non-empty string without '/' (not '.' or '..'), "
            f"got {name!r}"
        )


def check_adam_params(params: types.AdamParams) -> None:
    """``ParameterError`` naming the first ``AdamParams`` field out of its range: ``learning_rate``,
    ``weight_decay`` and ``grad_clip_norm`` finite and ``>= 0`` (``grad_clip_norm=0`` means no clipping),
    ``beta1`` and ``beta2`` in ``[0, 1)``, ``eps`` finite and ``> 0``."""
    for field, ok, rule in (
        ("learning_rate", lambda x: x >= 0, "finite and >= 0"),
        ("beta1", lambda x: 0 <= x < 1, "in [0, 1)"),
        ("beta2", lambda x: 0 <= x < 1, "in [0, 1)"),
        ("eps", lambda x: x > 0, "finite and > 0"),
        ("weight_decay", lambda x: x >= 0, "finite and >= 0"),
        ("grad_clip_norm", lambda x: x >= 0, "finite and >= 0 (0 means no clipping)"),
    ):
        value = getattr(params, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParameterError(f"AdamParams.{field} must be a number, got {value!r}")
        if not (math.isfinite(value) and ok(value)):
            raise ParameterError(f"AdamParams.{field} must be {rule}, got {value!r}")


class LocalTrainingClient:
    """``tinker.TrainingClient`` on a local LoRA model (see the module docstring)."""

    def __init__(self, service: LocalServiceClient, host: _Host, model_id: str, seed: int) -> None:
        self._service = service
        self._host = host
        self.model_id = model_id
        self._seed = int(seed)
        self._optimizer = torch.optim.AdamW(list(host.params.values()), lr=1e-4, weight_decay=0.0)
        self._last_grads: dict[str, torch.Tensor] | None = None
        self._samplers = itertools.count()
        self.optim_steps = 0

    # ----------------------------------------------------------------------- forward / backward

    def forward_backward(
        self, data: Sequence[types.Datum], loss_fn: str, loss_fn_config: Mapping[str, Any] | None = None
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """The loss of ``data`` (see ``losses`` for the losses and their ``loss_fn_config``) and its gradient,
        added to the gradients accumulated since the last ``optim_step``. What the service refuses (bad
        datums, an unknown loss, a bad ``loss_fn_config``) fails the future and accumulates nothing.

        A loss that is not finite (a NaN or huge advantage, say) is not refused here: like the hosted
        service, ``forward_backward`` reports the loss as computed (``loss:sum`` and the per-token
        ``elementwise_loss`` may hold NaN or infinities) and accumulates its gradient; the next
        ``optim_step`` then refuses the non-finite gradient and discards it (see ``optim_step``)."""
        if not data:  # the SDK raises this before sending anything
            raise ValueError("No data provided")
        with self._host.busy():
            return LocalFuture.run(lambda: self._run(data, loss_fn, loss_fn_config, backward=True))

    def forward(
        self, data: Sequence[types.Datum], loss_fn: str, loss_fn_config: Mapping[str, Any] | None = None
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """``forward_backward`` without the gradient: the same checks and outputs; a non-finite loss is
        reported as computed."""
        if not data:
            raise ValueError("No data provided")
        with self._host.busy():
            return LocalFuture.run(lambda: self._run(data, loss_fn, loss_fn_config, backward=False))

    async def forward_backward_async(
        self, data: Sequence[types.Datum], loss_fn: str, loss_fn_config: Mapping[str, Any] | None = None
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        return self.forward_backward(data, loss_fn, loss_fn_config)

    async def forward_async(
        self, data: Sequence[types.Datum], loss_fn: str, loss_fn_config: Mapping[str, Any] | None = None
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        return self.forward(data, loss_fn, loss_fn_config)

    def _run(
        self,
        data: Sequence[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, Any] | None,
        backward: bool,
    ) -> types.ForwardBackwardOutput:
        config = check_loss_config(loss_fn, loss_fn_config)
        if not data:
            raise DatumError("forward_backward needs at least one datum")
        host = self._host
        vocab = host.vocab
        embeddings = getattr(host.model, "get_input_embeddings", lambda: None)()
        if isinstance(embeddings, torch.nn.Embedding):
            vocab = min(vocab, int(embeddings.num_embeddings))
        parsed = [
            parse_datum(d, loss_fn, i, vocab=vocab, max_positions=host.max_positions)
            for i, d in enumerate(data)
        ]
        saved: dict[str, torch.Tensor | None] = {}
        if backward:
            for n, p in host.params.items():
                saved[n] = p.grad
                p.grad = None
        total = 0.0
        outputs: list[dict[str, types.TensorData]] = [{} for _ in parsed]
        order = sorted(range(len(parsed)), key=lambda i: len(parsed[i].tokens))
        batches: list[list[int]] = [[]]
        for i in order:  # sorted by length, so the last datum of a batch is its widest
            if batches[-1] and len(parsed[i].tokens) * (len(batches[-1]) + 1) > FB_MICROBATCH_TOKENS:
                batches.append([])
            batches[-1].append(i)
        try:
            with torch.set_grad_enabled(backward):
                for batch in batches:
                    logps = target_logprobs(
                        host.model,
                        [parsed[i].tokens for i in batch],
                        [parsed[i].inputs["target_tokens"] for i in batch],
                        host.pad_id,
                    )
                    losses = [
                        elementwise_loss(loss_fn, lp, parsed[i].inputs, config)
                        for i, lp in zip(batch, logps, strict=True)
                    ]
                    loss = torch.stack([el.sum() for el in losses]).sum()
                    if backward:
                        loss.backward()
                    total += float(loss.detach())
                    for i, lp, el in zip(batch, logps, losses, strict=True):
                        outputs[i] = {
                            "logprobs": types.TensorData.from_torch(lp.detach().float()),
                            "elementwise_loss": types.TensorData.from_torch(el.detach().float()),
                        }
        except BaseException:
            if backward:  # leave the gradients accumulated so far as they were
                for n, p in host.params.items():
                    p.grad = saved[n]
            raise
        if backward:
            self._last_grads = {
                n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
                for n, p in host.params.items()
            }
            for n, p in host.params.items():
                prev = saved[n]
                if prev is not None:
                    p.grad = prev + p.grad if p.grad is not None else prev
        return types.ForwardBackwardOutput(
            loss_fn_output_type="ArrayRecord", loss_fn_outputs=outputs, metrics={"loss:sum": total}
        )

    # ---------------------------------------------------------------------------------- optimizer

    def optim_step(
        self, optim_params: types.AdamParams | None = None, *, adam_params: types.AdamParams | None = None
    ) -> LocalFuture[types.OptimStepResponse]:
        """One AdamW step on the gradients accumulated since the last step (docs/platforms.md §3.3).

        Refused through the future, as the service refuses:

        - ``AdamParams`` out of range (``check_adam_params``): ``ParameterError`` naming the field; nothing
          changes, and the accumulated gradients stay for a corrected call.
        - an accumulated gradient that is not finite (its global norm is NaN or infinite, e.g. after a
          datum with NaN advantages): ``NonFiniteError`` naming ``grad_norm``. The weights and the Adam
          state are left as they were, and the accumulated gradients are discarded, so the client can go
          on with a fresh batch as if the bad one had never been sent.

        The metrics (``grad_norm:mean``, the global norm before clipping) are always finite."""
        # the SDK's call-time checks
        if optim_params is not None and adam_params is not None:
            raise ValueError("Specify optim_params or legacy adam_params, not both")
        params = optim_params if optim_params is not None else adam_params
        if not isinstance(params, (types.AdamParams, OptimParamsBase)):
            raise TypeError("Expected AdamParams or OptimParamsBase")
        with self._host.busy():
            return LocalFuture.run(lambda: self._optim_step(params))

    async def optim_step_async(
        self, optim_params: types.AdamParams | None = None, *, adam_params: types.AdamParams | None = None
    ) -> LocalFuture[types.OptimStepResponse]:
        return self.optim_step(optim_params, adam_params=adam_params)

    def _optim_step(self, params: Any) -> types.OptimStepResponse:
        if not isinstance(params, types.AdamParams):
            raise ValueError(f"the local backend implements Adam only, got {type(params).__name__}")
        check_adam_params(params)
        trainable = list(self._host.params.values())
        grads = [p.grad for p in trainable if p.grad is not None]
        grad_norm = (
            float(
                torch.linalg.vector_norm(
                    torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64) for g in grads])
                )
            )
            if grads
            else 0.0
        )
        if not math.isfinite(grad_norm):
            for p in trainable:
                p.grad = None
            raise NonFiniteError(
                f"optim_step: the accumulated gradient is not finite (grad_norm={grad_norm}); the step was "
                "not applied and the accumulated gradients were discarded"
            )
        if params.grad_clip_norm > 0 and grads:
            torch.nn.utils.clip_grad_norm_(trainable, params.grad_clip_norm)
        for group in self._optimizer.param_groups:
            group["lr"] = params.learning_rate
            group["betas"] = (params.beta1, params.beta2)
            group["eps"] = params.eps
            group["weight_decay"] = params.weight_decay
        self._optimizer.step()
        self._optimizer.zero_grad(set_to_none=True)
        self.optim_steps += 1
        # the SDK's metric names carry their reduction (``name:reduction``); the norm is before clipping
        return types.OptimStepResponse(metrics={"grad_norm:mean": grad_norm})

    # ----------------------------------------------------------------------- weights and samplers

    def save_weights_for_sampler(
        self, name: str, ttl_seconds: int | None = None, user_metadata: dict[str, str] | None = None
    ) -> LocalFuture[types.SaveWeightsForSamplerResponse]:
        def _save() -> types.SaveWeightsForSamplerResponse:
            check_checkpoint_name("save_weights_for_sampler", name)
            path = self._service.checkpoints.save(
                self.model_id,
                "sampler_weights",
                name,
                self._checkpoint(with_optimizer=False),
                ttl_seconds=ttl_seconds,
                user_metadata=user_metadata,
            )
            return types.SaveWeightsForSamplerResponse(path=path)

        return LocalFuture.run(_save)

    async def save_weights_for_sampler_async(
        self, name: str, ttl_seconds: int | None = None, user_metadata: dict[str, str] | None = None
    ) -> LocalFuture[types.SaveWeightsForSamplerResponse]:
        return self.save_weights_for_sampler(name, ttl_seconds=ttl_seconds, user_metadata=user_metadata)

    def save_state(
        self,
        name: str,
        ttl_seconds: int | None = None,
        overwrite: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> LocalFuture[types.SaveWeightsResponse]:
        """Weights and optimizer state at ``tinker://<model_id>/weights/<name>``; ``ttl_seconds`` between
        1 hour and 10 years (``None``: never expires); an existing name is refused unless ``overwrite``; an
        empty name, or one with ``/`` or that is ``.``/``..``, is refused (``ParameterError``)."""

        def _save() -> types.SaveWeightsResponse:
            check_checkpoint_name("save_state", name)
            path = self._service.checkpoints.save(
                self.model_id,
                "weights",
                name,
                self._checkpoint(with_optimizer=True),
                ttl_seconds=ttl_seconds,
                overwrite=overwrite,
                user_metadata=user_metadata,
            )
            return types.SaveWeightsResponse(path=path)

        return LocalFuture.run(_save)

    async def save_state_async(
        self,
        name: str,
        ttl_seconds: int | None = None,
        overwrite: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> LocalFuture[types.SaveWeightsResponse]:
        return self.save_state(
            name, ttl_seconds=ttl_seconds, overwrite=overwrite, user_metadata=user_metadata
        )

    def load_state(self, path: str) -> LocalFuture[types.LoadWeightsResponse]:
        return LocalFuture.run(lambda: self._load(path, with_optimizer=False))

    def load_state_with_optimizer(self, path: str) -> LocalFuture[types.LoadWeightsResponse]:
        return LocalFuture.run(lambda: self._load(path, with_optimizer=True))

    async def load_state_async(self, path: str) -> LocalFuture[types.LoadWeightsResponse]:
        return self.load_state(path)

    async def load_state_with_optimizer_async(self, path: str) -> LocalFuture[types.LoadWeightsResponse]:
        return self.load_state_with_optimizer(path)

    def _load(self, path: str, with_optimizer: bool) -> types.LoadWeightsResponse:
        ckpt = self._service.checkpoints.load(path)
        if LoraKey(**ckpt["key"]) != self._host.key:
            raise ValueError(f"checkpoint {path} is for {ckpt['key']}, not this model ({self._host.key})")
        self._host.load(ckpt["lora"])
        if with_optimizer:
            if "optimizer" not in ckpt:
                raise ValueError(f"checkpoint {path} has no optimizer state (saved for sampling)")
            # a copy: the checkpoint (possibly the store's in-memory one) must not share tensors with
            # the optimizer that goes on training
            self._optimizer.load_state_dict(copy.deepcopy(ckpt["optimizer"]))
            self.optim_steps = int(ckpt.get("optim_steps", 0))
        else:
            self._optimizer = torch.optim.AdamW(list(self._host.params.values()), lr=1e-4, weight_decay=0.0)
        for p in self._host.params.values():
            p.grad = None
        return types.LoadWeightsResponse(path=path, model_id=self.model_id)

    def _checkpoint(self, with_optimizer: bool) -> dict[str, Any]:
        ckpt: dict[str, Any] = {
            "key": vars(self._host.key).copy(),
            "lora": self._host.state(),
            "seed": self._seed,
        }
        if with_optimizer:
            # state_dict() holds the live Adam moments, which the next optim_step updates in place: copy
            # them, or the saved state (kept in the store's memory cache) would follow the training on
            ckpt["optimizer"] = copy.deepcopy(self._optimizer.state_dict())
            ckpt["optim_steps"] = self.optim_steps
        return ckpt

    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
        kind: str = "snapshot",
    ) -> _ClientFuture:
        def _create() -> LocalSamplingClient:
            if kind != "snapshot":
                raise ValueError(f"sampling client kind {kind!r} is not supported locally (only 'snapshot')")
            if record_stability_info:
                raise ValueError("record_stability_info (StableReinforce) is not supported locally")
            return self._sampling_client_now()

        return _client_future(_create)

    async def save_weights_and_get_sampling_client_async(
        self,
        name: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
        kind: str = "snapshot",
    ) -> LocalSamplingClient:
        return await self.save_weights_and_get_sampling_client(
            name, retry_config, record_stability_info=record_stability_info, kind=kind
        )

    def _sampling_client_now(self) -> LocalSamplingClient:
        n = next(self._samplers)
        snap = _Snapshot(tensors=self._host.state(), name=f"{self.model_id}-s{n}")
        seed = self._seed * 1_000_003 + n
        host = self._service._sampler_host(self._host)
        return LocalSamplingClient(host, snap, seed, self._host.key.base_model)

    def create_sampling_client(
        self, model_path: str, retry_config: Any = None, record_stability_info: bool = False
    ) -> _ClientFuture:
        return self._service.create_sampling_client(model_path=model_path)

    async def create_sampling_client_async(
        self, model_path: str, retry_config: Any = None, record_stability_info: bool = False
    ) -> LocalSamplingClient:
        return await self.create_sampling_client(model_path)

    def get_tokenizer(self) -> Any:
        return self._host.tokenizer

    def get_info(self) -> types.GetInfoResponse:
        base = self._host.key.base_model
        return types.GetInfoResponse(
            model_data=types.ModelData(
                arch="qwen3", model_name=base, tokenizer_id=self._service.tokenizer_id(base)
            ),
            model_id=self.model_id,
            is_lora=self._host.key.rank > 0,
            lora_rank=self._host.key.rank or None,
            model_name=base,
        )

    async def get_info_async(self) -> types.GetInfoResponse:
        return self.get_info()

    # ----------------------------------------------------------------- beyond the SDK: preflights

    def last_gradients(self) -> dict[str, torch.Tensor]:
        """The LoRA gradient of the last ``forward_backward`` alone (name → tensor), in float64."""
        if self._last_grads is None:
            raise RuntimeError("no forward_backward has run yet")
        return {n: g.double().cpu().clone() for n, g in self._last_grads.items()}

    def accumulated_gradients(self) -> dict[str, torch.Tensor]:
        """The LoRA gradient accumulated since the last ``optim_step`` (zeros where none)."""
        return {
            n: (
                p.grad.detach().double().cpu().clone()
                if p.grad is not None
                else torch.zeros(p.shape, dtype=torch.float64)
            )
            for n, p in self._host.params.items()
        }

    def lora_state(self) -> dict[str, torch.Tensor]:
        """The current LoRA weights (name → tensor copy, on the CPU)."""
        return {n: t.cpu() for n, t in self._host.state().items()}

    @property
    def model(self) -> Any:
        """The underlying peft model (for reference computations in tests and preflights)."""
        return self._host.model


class LocalRestClient:
    def __init__(self, service: LocalServiceClient) -> None:
        self._service = service

    def get_server_capabilities(self) -> LocalFuture[types.GetServerCapabilitiesResponse]:
        return LocalFuture.done(self._service._capabilities())


def random_seed() -> int:
    """A fresh LoRA seed for ``seed=None`` (the SDK: "None means random seed"): 31 random bits from the OS."""
    return secrets.randbits(31)


MAX_LORA_RANK = 1024
"""Largest LoRA rank a training client accepts (far above any tiny model's width)."""


class LocalServiceClient:
    """``tinker.ServiceClient`` backed by in-process models (built-in tiny Qwen3 or local HF dirs).

    ``storage_dir`` holds checkpoints (a temporary directory by default); ``model_dirs`` are local
    model directories to list as supported models; ``dtype`` is the model's float type (float64
    for tight reference comparisons); ``num_threads`` is torch's intra-op thread count while the
    backend computes (``None`` leaves torch's setting alone); ``device`` is where models run (``"cuda"``
    for a real model directory on a GPU machine; only ``"cpu"`` is exercised by the tests here);
    ``sampler_dtype`` (default: ``dtype``) is the dtype samplers run in: a different one emulates the
    hosted service's sampler/trainer mismatch (see the module docstring); ``sampled_logprobs`` is what the
    logprobs of sampled tokens are computed under: ``"model"`` (default; the model's distribution, what
    ``compute_logprobs`` gives) or ``"sampling"`` (the tempered, top-k/top-p filtered distribution actually
    sampled from; see the ``engine`` docstring and docs/platforms.md §3.12 for what the hosted service does)."""

    def __init__(
        self,
        storage_dir: str | os.PathLike[str] | None = None,
        model_dirs: Sequence[str | os.PathLike[str]] = (),
        dtype: torch.dtype = torch.float32,
        num_threads: int | None = 1,
        device: str = "cpu",
        sampler_dtype: torch.dtype | None = None,
        sampled_logprobs: str = "model",
    ) -> None:
        if sampled_logprobs not in SAMPLED_LOGPROBS:
            raise ValueError(f"sampled_logprobs must be one of {SAMPLED_LOGPROBS}, got {sampled_logprobs!r}")
        self.sampled_logprobs = sampled_logprobs
        register_builtin_tokenizers()
        self.num_threads = num_threads
        self.device = device
        self._tmp = None
        if storage_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="rftlab-local-tinker-")
            storage_dir = self._tmp.name
        self.storage_dir = Path(storage_dir)
        self.checkpoints = CheckpointStore(self.storage_dir)
        self.dtype = dtype
        self.sampler_dtype = dtype if sampler_dtype is None else sampler_dtype
        self._model_dirs = [str(Path(d)) for d in model_dirs]
        self._sampling_hosts: dict[tuple[LoraKey, torch.dtype], _Host] = {}

    # ----------------------------------------------------------------------------- creation

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: dict[str, str] | None = None,
        optimizer: Any = None,
    ) -> _ClientFuture:
        """A future of a training client with a fresh LoRA of ``rank`` on ``base_model`` (a built-in
        name or a local HF directory). ``seed`` fixes the LoRA init and the samplers' default seed
        stream; as on the service, ``None`` means a fresh random seed (drawn from the OS, so two such
        clients start from different LoRA weights; pass a seed for a reproducible run). Like the service,
        only LoRA is trained: ``rank`` must be at least 1 (the full-weight client is the separately
        named local extension ``create_full_training_client``)."""
        assert any([train_mlp, train_attn, train_unembed]), (
            "At least one of train_mlp, train_attn, or train_unembed must be True"
        )
        return _client_future(
            lambda: self.new_lora_client(
                base_model, rank, seed, train_mlp, train_attn, train_unembed, optimizer=optimizer
            )
        )

    async def create_lora_training_client_async(self, *args: Any, **kwargs: Any) -> LocalTrainingClient:
        return await self.create_lora_training_client(*args, **kwargs)

    def new_lora_client(
        self,
        base_model: str,
        rank: int,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        *,
        optimizer: Any = None,
        model_id: str | None = None,
    ) -> LocalTrainingClient:
        """A training client with a fresh LoRA (what ``create_lora_training_client`` resolves to), under
        ``model_id`` (default: a new ``local-<hex>`` id); ``seed=None`` draws a random seed (``random_seed``).
        Raises ``ValueError`` for what the service refuses."""
        if optimizer is not None and getattr(optimizer, "type", "adamw") != "adamw":
            raise ValueError("the local backend implements Adam only")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_LORA_RANK:
            raise ValueError(
                f"LoRA rank must be an integer from 1 to {MAX_LORA_RANK}, got {rank!r} (the service trains "
                "LoRA adapters only; full-weight training is the local extension create_full_training_client)"
            )
        if not any([train_mlp, train_attn, train_unembed]):
            raise ValueError("at least one of train_mlp, train_attn, train_unembed must be true")
        key = LoraKey(str(base_model), int(rank), bool(train_mlp), bool(train_attn), bool(train_unembed))
        init_seed = random_seed() if seed is None else int(seed)
        host = _Host(key, init_seed, self.dtype, self.num_threads, self.device, self.sampled_logprobs)
        self._note_model(key.base_model)
        return LocalTrainingClient(self, host, model_id or f"local-{uuid.uuid4().hex[:12]}", init_seed)

    def create_full_training_client(self, base_model: str, seed: int = 0) -> _ClientFuture:
        """Local-only extension (the service trains LoRA only): a training client whose trainable
        parameters are *all* the model's weights, with the same ``forward_backward``/``optim_step``
        interface, losses and Adam. Used for the local task's supervised warm start, where LoRA on the
        randomly initialised tiny base learns too slowly (see ``warm_start``)."""

        def _create() -> LocalTrainingClient:
            key = LoraKey(str(base_model), 0)
            host = _Host(key, int(seed), self.dtype, self.num_threads, self.device, self.sampled_logprobs)
            self._note_model(key.base_model)
            return LocalTrainingClient(self, host, f"local-full-{uuid.uuid4().hex[:12]}", int(seed))

        return _client_future(_create)

    def create_training_client_from_state(
        self, path: str, base_model: str | None = None, user_metadata: dict[str, str] | None = None, **_: Any
    ) -> _ClientFuture:
        return _client_future(lambda: self.client_from_state(path, False, base_model=base_model))

    def create_training_client_from_state_with_optimizer(
        self, path: str, base_model: str | None = None, user_metadata: dict[str, str] | None = None, **_: Any
    ) -> _ClientFuture:
        return _client_future(lambda: self.client_from_state(path, True, base_model=base_model))

    async def create_training_client_from_state_async(self, path: str, **kwargs: Any) -> LocalTrainingClient:
        return await self.create_training_client_from_state(path, **kwargs)

    async def create_training_client_from_state_with_optimizer_async(
        self, path: str, **kwargs: Any
    ) -> LocalTrainingClient:
        return await self.create_training_client_from_state_with_optimizer(path, **kwargs)

    def client_from_state(
        self,
        path: str,
        with_optimizer: bool,
        *,
        base_model: str | None = None,
        model_id: str | None = None,
    ) -> LocalTrainingClient:
        """A training client loaded from the checkpoint ``path`` (its LoRA configuration and seed; the
        optimizer state too when ``with_optimizer``), under ``model_id`` (default: a new id)."""
        ckpt = self.checkpoints.load(path)
        key = LoraKey(**ckpt["key"])
        if base_model is not None and base_model != key.base_model:
            raise ValueError(f"checkpoint {path} is for base model {key.base_model!r}, not {base_model!r}")
        if key.rank == 0:
            client = self.create_full_training_client(key.base_model, ckpt.get("seed", 0)).result()
        else:
            client = self.new_lora_client(
                key.base_model,
                key.rank,
                ckpt.get("seed", 0),
                key.train_mlp,
                key.train_attn,
                key.train_unembed,
                model_id=model_id,
            )
        client._load(path, with_optimizer=with_optimizer)
        return client

    def create_sampling_client(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
    ) -> _ClientFuture:
        if model_path is None and base_model is None:  # the SDK raises this at once
            raise ValueError("Either model_path or base_model must be provided")
        return _client_future(lambda: self.new_sampling_client(model_path, base_model))

    async def create_sampling_client_async(self, *args: Any, **kwargs: Any) -> LocalSamplingClient:
        return await self.create_sampling_client(*args, **kwargs)

    def new_sampling_client(self, model_path: str | None, base_model: str | None) -> LocalSamplingClient:
        """A sampler on a ``sampler_weights``/``weights`` checkpoint or on a base model."""
        if model_path is not None:
            ckpt = self.checkpoints.load(model_path)
            key = LoraKey(**ckpt["key"])
            if base_model is not None and base_model != key.base_model:
                raise ValueError(f"{model_path} is for base model {key.base_model!r}, not {base_model!r}")
            host = self._sampling_host(key)
            tensors = {n: t.clone() for n, t in ckpt["lora"].items()}
            return LocalSamplingClient(host, _Snapshot(tensors, name=model_path), 0, key.base_model)
        key = LoraKey(str(base_model), 1)
        host = self._sampling_host(key)
        self._note_model(key.base_model)
        return LocalSamplingClient(
            host, _Snapshot(host.state(), name=f"base:{base_model}"), 0, key.base_model
        )

    def _sampling_host(self, key: LoraKey) -> _Host:
        k = (key, self.sampler_dtype)
        if k not in self._sampling_hosts:
            self._sampling_hosts[k] = _Host(
                key, 0, self.sampler_dtype, self.num_threads, self.device, self.sampled_logprobs
            )
        return self._sampling_hosts[k]

    def _sampler_host(self, trainer_host: _Host) -> _Host:
        """Where a training client's samplers run: its own host, or a ``sampler_dtype`` copy of it."""
        if self.sampler_dtype == trainer_host.dtype:
            return trainer_host
        return self._sampling_host(trainer_host.key)

    # --------------------------------------------------------------------------- capabilities

    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        return self._capabilities()

    async def get_server_capabilities_async(self) -> types.GetServerCapabilitiesResponse:
        return self._capabilities()

    def create_rest_client(self) -> LocalRestClient:
        return LocalRestClient(self)

    def _note_model(self, base_model: str) -> None:
        if base_model not in BUILTIN_MODELS and base_model not in self._model_dirs:
            self._model_dirs.append(base_model)

    def served_models(self) -> list[str]:
        """Built-in models and the local model directories (that exist) this backend offers."""
        return list(BUILTIN_MODELS) + [d for d in self._model_dirs if os.path.isdir(d)]

    def _capabilities(self) -> types.GetServerCapabilitiesResponse:
        return types.GetServerCapabilitiesResponse(
            supported_models=[
                types.SupportedModel(model_name=n, trainable=True, sampleable=True, max_context_length=None)
                for n in self.served_models()
            ]
        )

    def tokenizer_id(self, base_model: str) -> str:
        """A tokenizer id ``AutoTokenizer.from_pretrained`` (and so the SDK's ``get_tokenizer()`` and the
        cookbook's ``tokenizer_utils.get_tokenizer``) resolves offline on this machine: the model
        directory itself, or for a built-in model its tokenizer saved under ``storage_dir/tokenizers``."""
        return tokenizer_dir(base_model, self.storage_dir)
