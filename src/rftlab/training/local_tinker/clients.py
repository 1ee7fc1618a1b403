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

Where each piece lives: the service client (``LocalServiceClient``) and ``LocalRestClient`` here, the
training client in ``training_client``, the sampling client in ``sampling_client``, the models they run
on in ``host``, as the SDK splits its own clients.

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

import os
import secrets
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tinker import types

from .checkpoints import CheckpointStore
from .engine import SAMPLED_LOGPROBS
from .futures import LocalFuture, _client_future, _ClientFuture
from .host import LoraKey, _Host, _Snapshot, torch_threads
from .model import BUILTIN_MODELS, register_builtin_tokenizers, tokenizer_dir
from .sampling_client import LocalSamplingClient
from .training_client import LocalTrainingClient, check_adam_params

__all__ = [
    "LocalRestClient",
    "LocalSamplingClient",
    "LocalServiceClient",
    "LocalTrainingClient",
    "check_adam_params",
    "torch_threads",
]


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
