"""``tinker.TrainingClient`` on a local LoRA model (``LocalTrainingClient``): ``forward_backward`` and
``forward`` with the losses of ``losses``, Adam's ``optim_step``, checkpoints and samplers, and the
gradient views of the correctness preflights; with the SDK's and the service's checks of checkpoint
names (``check_checkpoint_name``) and ``AdamParams`` (``check_adam_params``).

The semantics and the fidelity to the SDK are the ``clients`` module docstring's.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from tinker import types
from tinker.types.optimizer import OptimParamsBase

from .errors import NonFiniteError, ParameterError
from .futures import LocalFuture, _client_future, _ClientFuture
from .host import LoraKey, _Host, _Snapshot
from .losses import DatumError, check_loss_config, elementwise_loss, parse_datum, target_logprobs
from .sampling_client import LocalSamplingClient

if TYPE_CHECKING:
    from .clients import LocalServiceClient

FB_MICROBATCH_TOKENS = 32768
"""Tokens per forward/backward micro-batch (bounds activation memory; gradients add up exactly)."""


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
            path = self._save_checkpoint(
                "save_weights_for_sampler", "sampler_weights", name, False, ttl_seconds, True, user_metadata
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
            path = self._save_checkpoint(
                "save_state", "weights", name, True, ttl_seconds, overwrite, user_metadata
            )
            return types.SaveWeightsResponse(path=path)

        return LocalFuture.run(_save)

    def _save_checkpoint(
        self,
        method: str,
        kind: str,
        name: str,
        with_optimizer: bool,
        ttl_seconds: int | None,
        overwrite: bool,
        user_metadata: dict[str, str] | None,
    ) -> str:
        """Check ``name`` for ``method``, then store this model's checkpoint of ``kind``; its path."""
        check_checkpoint_name(method, name)
        return self._service.checkpoints.save(
            self.model_id,
            kind,
            name,
            self._checkpoint(with_optimizer=with_optimizer),
            ttl_seconds=ttl_seconds,
            overwrite=overwrite,
            user_metadata=user_metadata,
        )

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
