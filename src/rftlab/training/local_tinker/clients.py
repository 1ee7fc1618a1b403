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
service client's ``storage_dir`` so a new process with the same ``storage_dir`` can resume from them.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tinker import types

from .engine import LogprobRequest, SampleRequest, prompt_logprobs, resolve_stop, run_generation
from .futures import LocalFuture
from .losses import DatumError, elementwise_loss, model_input_tokens, parse_datum, target_logprobs
from .model import BUILTIN_MODELS, attach_lora, load_base_model, lora_parameters, register_builtin_tokenizers

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
        self, key: LoraKey, seed: int, dtype: torch.dtype, threads: int | None = 1, device: str = "cpu"
    ) -> None:
        self.threads = threads
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

    def busy(self) -> Iterator[None]:
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
                        run_generation(self.model, samples, self.pad_id, self.vocab)
                    if logprob_reqs:
                        lps = prompt_logprobs(self.model, [r.prompt for r in logprob_reqs], self.pad_id)
                        for r, lp in zip(logprob_reqs, lps, strict=True):
                            r.future.set_result(lp)
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
        self._seed_stream = torch.Generator().manual_seed(int(seed))
        self._counter = itertools.count()

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        **unsupported: Any,
    ) -> LocalFuture[types.SampleResponse]:
        fut: LocalFuture[types.SampleResponse] = LocalFuture(flush=self._host.flush)
        try:
            req = self._make_request(prompt, num_samples, sampling_params, include_prompt_logprobs, fut)
            if (
                topk_prompt_logprobs
                or topk_sample_logprobs
                or any(v not in (None, 0) for v in unsupported.values())
            ):
                raise ValueError(
                    "top-k logprobs, target/alt prompt tokens are not supported by the local backend"
                )
        except Exception as exc:
            return LocalFuture.failed(exc)
        with self._host.lock:
            self._host.pending.append((self._snapshot, req))
        return fut

    def _make_request(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        params: types.SamplingParams,
        include_prompt_logprobs: bool,
        fut: LocalFuture[types.SampleResponse],
    ) -> SampleRequest:
        tokens = model_input_tokens(prompt, "prompt")
        if not tokens:
            raise ValueError("prompt is empty")
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        room = self._host.max_positions - len(tokens)
        if room <= 0:
            raise ValueError(
                f"prompt of {len(tokens)} tokens leaves no room in the context of {self._host.max_positions}"
            )
        max_tokens = room if params.max_tokens is None else min(int(params.max_tokens), room)
        stop_tokens, stop_sequences = resolve_stop(params.stop, self._host.tokenizer)
        draw = int(torch.randint(0, 2**62, (1,), generator=self._seed_stream))
        seed = draw if params.seed is None else int(params.seed)
        n = next(self._counter)
        return SampleRequest(
            prompt=tokens,
            num_samples=int(num_samples),
            max_tokens=max_tokens,
            temperature=float(params.temperature),
            top_k=int(params.top_k),
            top_p=float(params.top_p),
            stop_tokens=stop_tokens,
            stop_sequences=stop_sequences,
            generator_seed=seed,
            include_prompt_logprobs=include_prompt_logprobs,
            future=fut,
            id_prefix=f"{self._snapshot.name}-{n}",
        )

    def compute_logprobs(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> LocalFuture[list[float | None]]:
        fut: LocalFuture[list[float | None]] = LocalFuture(flush=self._host.flush)
        try:
            tokens = model_input_tokens(prompt, "prompt")
            if not tokens:
                raise ValueError("prompt is empty")
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

    def get_tokenizer(self) -> Any:
        return self._host.tokenizer

    def get_base_model(self) -> str:
        return self._base_model


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
        with self._host.busy():
            return LocalFuture.run(lambda: self._run(data, loss_fn, loss_fn_config, backward=True))

    def forward(
        self, data: Sequence[types.Datum], loss_fn: str, loss_fn_config: Mapping[str, Any] | None = None
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        with self._host.busy():
            return LocalFuture.run(lambda: self._run(data, loss_fn, loss_fn_config, backward=False))

    def _run(
        self,
        data: Sequence[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, Any] | None,
        backward: bool,
    ) -> types.ForwardBackwardOutput:
        if loss_fn_config:
            raise DatumError(f"loss_fn_config is not supported for {loss_fn!r} (it takes no options)")
        if not data:
            raise DatumError("forward_backward needs at least one datum")
        parsed = [parse_datum(d, loss_fn, i) for i, d in enumerate(data)]
        host = self._host
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
                        elementwise_loss(loss_fn, lp, parsed[i].inputs)
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
        with self._host.busy():
            return LocalFuture.run(lambda: self._optim_step(optim_params, adam_params))

    def _optim_step(self, optim_params: Any, adam_params: Any) -> types.OptimStepResponse:
        if optim_params is not None and adam_params is not None:
            raise ValueError("pass optim_params or adam_params, not both")
        params = optim_params if optim_params is not None else adam_params
        if params is None:
            raise ValueError("optim_step needs AdamParams")
        if not isinstance(params, types.AdamParams):
            raise ValueError(f"the local backend implements Adam only, got {type(params).__name__}")
        grads = [p.grad for p in self._host.params.values() if p.grad is not None]
        grad_norm = (
            float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
            if grads
            else 0.0
        )
        if params.grad_clip_norm > 0 and grads:
            torch.nn.utils.clip_grad_norm_(list(self._host.params.values()), params.grad_clip_norm)
        for group in self._optimizer.param_groups:
            group["lr"] = params.learning_rate
            group["betas"] = (params.beta1, params.beta2)
            group["eps"] = params.eps
            group["weight_decay"] = params.weight_decay
        self._optimizer.step()
        self._optimizer.zero_grad(set_to_none=True)
        self.optim_steps += 1
        return types.OptimStepResponse(metrics={"grad_norm": grad_norm})

    # ----------------------------------------------------------------------- weights and samplers

    def save_weights_for_sampler(
        self, name: str, ttl_seconds: int | None = None, user_metadata: dict[str, str] | None = None
    ) -> LocalFuture[types.SaveWeightsForSamplerResponse]:
        def _save() -> types.SaveWeightsForSamplerResponse:
            path = self._service._store(
                self.model_id, "sampler_weights", name, self._checkpoint(with_optimizer=False)
            )
            return types.SaveWeightsForSamplerResponse(path=path)

        return LocalFuture.run(_save)

    def save_state(self, name: str, ttl_seconds: int | None = None) -> LocalFuture[types.SaveWeightsResponse]:
        def _save() -> types.SaveWeightsResponse:
            path = self._service._store(self.model_id, "weights", name, self._checkpoint(with_optimizer=True))
            return types.SaveWeightsResponse(path=path)

        return LocalFuture.run(_save)

    def load_state(self, path: str) -> LocalFuture[types.LoadWeightsResponse]:
        return LocalFuture.run(lambda: self._load(path, with_optimizer=False))

    def load_state_with_optimizer(self, path: str) -> LocalFuture[types.LoadWeightsResponse]:
        return LocalFuture.run(lambda: self._load(path, with_optimizer=True))

    def _load(self, path: str, with_optimizer: bool) -> types.LoadWeightsResponse:
        ckpt = self._service._fetch(path)
        if LoraKey(**ckpt["key"]) != self._host.key:
            raise ValueError(f"checkpoint {path} is for {ckpt['key']}, not this model ({self._host.key})")
        self._host.load(ckpt["lora"])
        if with_optimizer:
            if "optimizer" not in ckpt:
                raise ValueError(f"checkpoint {path} has no optimizer state (saved for sampling)")
            self._optimizer.load_state_dict(ckpt["optimizer"])
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
            ckpt["optimizer"] = self._optimizer.state_dict()
            ckpt["optim_steps"] = self.optim_steps
        return ckpt

    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
        kind: str = "snapshot",
    ) -> _ClientFuture:
        return _client_future(self._sampling_client_now)

    def _sampling_client_now(self) -> LocalSamplingClient:
        n = next(self._samplers)
        snap = _Snapshot(tensors=self._host.state(), name=f"{self.model_id}-s{n}")
        seed = self._seed * 1_000_003 + n
        return LocalSamplingClient(self._host, snap, seed, self._host.key.base_model)

    def create_sampling_client(self, model_path: str, retry_config: Any = None) -> _ClientFuture:
        return self._service.create_sampling_client(model_path=model_path)

    def get_tokenizer(self) -> Any:
        return self._host.tokenizer

    def get_info(self) -> types.GetInfoResponse:
        return types.GetInfoResponse(
            model_data=types.ModelData(arch="qwen3", model_name=self._host.key.base_model),
            model_id=self.model_id,
            is_lora=self._host.key.rank > 0,
            lora_rank=self._host.key.rank or None,
            model_name=self._host.key.base_model,
        )

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


class LocalServiceClient:
    """``tinker.ServiceClient`` backed by in-process models (built-in tiny Qwen3 or local HF dirs).

    ``storage_dir`` holds checkpoints (a temporary directory by default); ``model_dirs`` are local
    model directories to list as supported models; ``dtype`` is the model's float type (float64
    for tight reference comparisons); ``num_threads`` is torch's intra-op thread count while the
    backend computes (``None`` leaves torch's setting alone); ``device`` is where models run (``"cuda"``
    for a real model directory on a GPU machine; only ``"cpu"`` is exercised by the tests here)."""

    def __init__(
        self,
        storage_dir: str | os.PathLike[str] | None = None,
        model_dirs: Sequence[str | os.PathLike[str]] = (),
        dtype: torch.dtype = torch.float32,
        num_threads: int | None = 1,
        device: str = "cpu",
    ) -> None:
        register_builtin_tokenizers()
        self.num_threads = num_threads
        self.device = device
        self._tmp = None
        if storage_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="rftlab-local-tinker-")
            storage_dir = self._tmp.name
        self.storage_dir = Path(storage_dir)
        self.dtype = dtype
        self._model_dirs = [str(Path(d)) for d in model_dirs]
        self._memory: dict[str, dict[str, Any]] = {}
        self._sampling_hosts: dict[LoraKey, _Host] = {}

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
        stream; unlike the service, ``None`` means seed 0 (runs stay reproducible)."""

        def _create() -> LocalTrainingClient:
            if optimizer is not None and getattr(optimizer, "type", "adamw") != "adamw":
                raise ValueError("the local backend implements Adam only")
            key = LoraKey(str(base_model), int(rank), bool(train_mlp), bool(train_attn), bool(train_unembed))
            init_seed = 0 if seed is None else int(seed)
            host = _Host(key, init_seed, self.dtype, self.num_threads, self.device)
            self._note_model(key.base_model)
            return LocalTrainingClient(self, host, f"local-{uuid.uuid4().hex[:12]}", init_seed)

        return _client_future(_create)

    def create_full_training_client(self, base_model: str, seed: int = 0) -> _ClientFuture:
        """Local-only extension (the service trains LoRA only): a training client whose trainable
        parameters are *all* the model's weights, with the same ``forward_backward``/``optim_step``
        interface, losses and Adam. Used for the local task's supervised warm start, where LoRA on the
        randomly initialised tiny base learns too slowly (see ``warm_start``)."""

        def _create() -> LocalTrainingClient:
            key = LoraKey(str(base_model), 0)
            host = _Host(key, int(seed), self.dtype, self.num_threads, self.device)
            self._note_model(key.base_model)
            return LocalTrainingClient(self, host, f"local-full-{uuid.uuid4().hex[:12]}", int(seed))

        return _client_future(_create)

    def create_training_client_from_state(
        self, path: str, user_metadata: dict[str, str] | None = None
    ) -> _ClientFuture:
        return self._from_state(path, with_optimizer=False)

    def create_training_client_from_state_with_optimizer(
        self, path: str, user_metadata: dict[str, str] | None = None
    ) -> _ClientFuture:
        return self._from_state(path, with_optimizer=True)

    def _from_state(self, path: str, with_optimizer: bool) -> _ClientFuture:
        def _create() -> LocalTrainingClient:
            ckpt = self._fetch(path)
            key = LoraKey(**ckpt["key"])
            if key.rank == 0:
                client = self.create_full_training_client(key.base_model, ckpt.get("seed", 0)).result()
            else:
                client = self.create_lora_training_client(
                    key.base_model,
                    key.rank,
                    ckpt.get("seed", 0),
                    key.train_mlp,
                    key.train_attn,
                    key.train_unembed,
                ).result()
            client._load(path, with_optimizer=with_optimizer)
            return client

        return _client_future(_create)

    def create_sampling_client(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
    ) -> _ClientFuture:
        def _create() -> LocalSamplingClient:
            if model_path is None and base_model is None:
                raise ValueError("Either model_path or base_model must be provided")
            if model_path is not None:
                ckpt = self._fetch(model_path)
                key = LoraKey(**ckpt["key"])
                host = self._sampling_host(key)
                tensors = {n: t.clone() for n, t in ckpt["lora"].items()}
                return LocalSamplingClient(host, _Snapshot(tensors, name=model_path), 0, key.base_model)
            key = LoraKey(str(base_model), 1)
            host = self._sampling_host(key)
            self._note_model(key.base_model)
            return LocalSamplingClient(
                host, _Snapshot(host.state(), name=f"base:{base_model}"), 0, key.base_model
            )

        return _client_future(_create)

    def _sampling_host(self, key: LoraKey) -> _Host:
        if key not in self._sampling_hosts:
            self._sampling_hosts[key] = _Host(key, 0, self.dtype, self.num_threads, self.device)
        return self._sampling_hosts[key]

    # --------------------------------------------------------------------------- capabilities

    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        return self._capabilities()

    def create_rest_client(self) -> LocalRestClient:
        return LocalRestClient(self)

    def _note_model(self, base_model: str) -> None:
        if base_model not in BUILTIN_MODELS and base_model not in self._model_dirs:
            self._model_dirs.append(base_model)

    def _capabilities(self) -> types.GetServerCapabilitiesResponse:
        names = list(BUILTIN_MODELS) + [d for d in self._model_dirs if os.path.isdir(d)]
        return types.GetServerCapabilitiesResponse(
            supported_models=[
                types.SupportedModel(model_name=n, trainable=True, sampleable=True, max_context_length=None)
                for n in names
            ]
        )

    # ---------------------------------------------------------------------------- checkpoints

    def _file_for(self, path: str) -> Path:
        prefix = "tinker://"
        if not path.startswith(prefix):
            raise ValueError(f"not a checkpoint path: {path!r} (expected tinker://<model_id>/<kind>/<name>)")
        parts = path[len(prefix) :].split("/")
        if len(parts) != 3 or parts[1] not in ("weights", "sampler_weights") or not all(parts):
            raise ValueError(f"not a checkpoint path: {path!r} (expected tinker://<model_id>/<kind>/<name>)")
        model_id, kind, name = parts
        return self.storage_dir / model_id / kind / f"{name}.pt"

    def _store(self, model_id: str, kind: str, name: str, ckpt: dict[str, Any]) -> str:
        if not name or "/" in name:
            raise ValueError(f"checkpoint name must be non-empty without '/', got {name!r}")
        path = f"tinker://{model_id}/{kind}/{name}"
        file = self._file_for(path)
        from rftlab.runs.atomic import atomic_writer

        with atomic_writer(file) as handle:  # old checkpoint or new one, never a cut one
            torch.save(ckpt, handle)
        self._memory[path] = ckpt
        return path

    def _fetch(self, path: str) -> dict[str, Any]:
        if path in self._memory:
            return self._memory[path]
        file = self._file_for(path)
        if not file.is_file():
            raise ValueError(f"checkpoint {path} not found under {self.storage_dir}")
        ckpt = torch.load(file, map_location="cpu", weights_only=False)
        self._memory[path] = ckpt
        return ckpt
