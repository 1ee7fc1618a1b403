"""Where a local model lives: one base model with its LoRA adapters, its tokenizer and its queue of
sampling requests (``_Host``), the LoRA configuration that keys it (``LoraKey``) and the weights snapshot
a sampler reads (``_Snapshot``).

The clients of ``clients``, ``training_client`` and ``sampling_client`` share hosts: a training client
owns one, and its samplers queue their requests on it (or on a ``sampler_dtype`` copy). A host runs one
computation at a time, under its lock and with ``torch_threads``'s thread count.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import torch

from .engine import LogprobRequest, SampleRequest, run_generation, run_logprobs
from .model import attach_lora, load_base_model, lora_parameters


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
            groups: dict[int, tuple[_Snapshot, list[SampleRequest | LogprobRequest]]] = {}
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
